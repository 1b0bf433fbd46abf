#include "perseus/util/files.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "perseus/util/error.hpp"

namespace perseus {

namespace fs = std::filesystem;

void ensure_writable_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create output directory: " + ec.message());
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": output path is not a directory");
  if (access(dir.c_str(), W_OK) != 0) {
    throw Error(dir.string() + ": output directory is not writable");
  }
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  fs::path tmp = path;
  tmp += ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path.string() + ": cannot open for writing");
    out << content;
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp);
      throw Error(path.string() + ": write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    throw Error(path.string() + ": cannot move into place: " + ec.message());
  }
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace perseus
