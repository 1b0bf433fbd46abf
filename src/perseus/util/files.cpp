#include "perseus/util/files.hpp"

#include <unistd.h>

#include <cstdio>
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

namespace {

// Writes `content` to what `path` names (following a symlink), in place.
void write_through(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path.string() + ": cannot open for writing");
  out << content;
  out.flush();
  if (!out) throw Error(path.string() + ": write failed");
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& content) {
  if (path == "-") {
    if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() ||
        std::fflush(stdout) != 0) {
      throw Error("standard output: write failed");
    }
    return;
  }
  // A symlink, FIFO, device or socket is written through, never replaced by a regular file.
  std::error_code ec;
  auto status = fs::symlink_status(path, ec);
  if (!ec && fs::exists(status) && !fs::is_regular_file(status)) {
    if (fs::is_directory(status)) throw Error(path.string() + ": is a directory");
    return write_through(path, content);
  }
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
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    throw Error(path.string() + ": cannot move into place: " + ec.message());
  }
}

namespace {

void check_replaceable(const fs::path& target, const std::string& marker) {
  std::error_code ec;
  if (!fs::exists(target, ec)) return;
  if (!fs::is_directory(target, ec)) {
    throw Error(target.string() + ": output path exists and is not a directory");
  }
  if (!fs::is_empty(target, ec) && !fs::exists(target / marker, ec)) {
    throw Error(target.string() + ": output directory is not empty and holds no " + marker +
                " (refusing to replace it)");
  }
}

}  // namespace

StagingDir::StagingDir(fs::path target, std::string marker_file)
    : target_(std::move(target)), marker_(std::move(marker_file)) {
  if (target_.filename().empty()) target_ = target_.parent_path();
  check_replaceable(target_, marker_);
  fs::path parent = fs::absolute(target_).parent_path();
  ensure_writable_dir(parent);
  staging_ = parent / (target_.filename().string() + ".partial-" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove_all(staging_, ec);
  fs::create_directory(staging_, ec);
  if (ec) throw Error(target_.string() + ": cannot create output directory: " + ec.message());
}

StagingDir::~StagingDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

void StagingDir::commit() {
  check_replaceable(target_, marker_);
  std::error_code ec;
  fs::remove_all(target_, ec);
  fs::rename(staging_, target_, ec);
  if (ec) throw Error(target_.string() + ": cannot move output into place: " + ec.message());
  committed_ = true;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace perseus
