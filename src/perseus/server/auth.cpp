#include "perseus/server/auth.hpp"

#include <openssl/evp.h>
#include <sys/random.h>

#include <cctype>
#include <cstdio>

#include "perseus/util/error.hpp"

namespace perseus::server {

namespace {

std::string hex(const unsigned char* bytes, std::size_t n) {
  std::string out;
  char two[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(two, sizeof two, "%02x", bytes[i]);
    out += two;
  }
  return out;
}

}  // namespace

std::string new_secret() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) throw Error("cannot draw a job secret from the kernel's random source");
    got += static_cast<std::size_t>(n);
  }
  return hex(bytes, sizeof bytes);
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &n, EVP_sha256(), nullptr) != 1) {
    throw Error("SHA-256 failed");
  }
  return hex(digest, n);
}

bool same_secret(std::string_view a, std::string_view b) {
  unsigned char differ = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    differ |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return differ == 0;
}

std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::size_t start = kScheme.size();
  if (authorization[start] != ' ') return {};
  while (start < authorization.size() && authorization[start] == ' ') ++start;
  return authorization.substr(start);
}

}  // namespace perseus::server
