// An LD_PRELOAD shim in front of the system resolver, for the client's name-resolution tests
// (issue 50.17): getaddrinfo for the host "slow.perseus.test" appends a line to
// $SLOW_RESOLVER_LOG, waits $SLOW_RESOLVER_SECONDS (a DNS server that answers late), then
// resolves 127.0.0.1; every other host goes to the real getaddrinfo.
#include <dlfcn.h>
#include <netdb.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** res) {
  using Real = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "getaddrinfo"));
  if (node == nullptr || std::strcmp(node, "slow.perseus.test") != 0) {
    return real(node, service, hints, res);
  }
  if (const char* log = std::getenv("SLOW_RESOLVER_LOG"))
    std::ofstream(log, std::ios::app) << node << "\n";
  const char* seconds = std::getenv("SLOW_RESOLVER_SECONDS");
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds ? std::atof(seconds) : 1.0));
  return real("127.0.0.1", service, hints, res);
}
