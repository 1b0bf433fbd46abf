// Output-directory helpers: write results into a staging directory and move them into place
// only when complete, so a failed run never leaves output that looks finished.
#pragma once

#include <filesystem>
#include <string>

namespace perseus {

// Creates `dir` (and parents) and checks that files can be written there; throws Error naming
// the directory otherwise.
void ensure_writable_dir(const std::filesystem::path& dir);

// Writes `content` to `path` atomically (temporary file in the same directory, then rename).
// "-" is standard output; an existing symlink, FIFO, device or socket is written through
// (opened and truncated), never replaced.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// A directory that is filled first and moved to its final place only when complete. The
// constructor creates `<target>.partial-<pid>` beside the target (so an unwritable destination
// fails before any work is done); commit() replaces the target; otherwise the destructor removes
// the staging directory. An existing target is replaced only if it contains `marker_file`
// (i.e. it is an earlier output of the same kind), never an unrelated directory.
class StagingDir {
 public:
  StagingDir(std::filesystem::path target, std::string marker_file);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return staging_; }
  void commit();

 private:
  std::filesystem::path target_, staging_;
  std::string marker_;
  bool committed_ = false;
};

// Reads a whole file; throws Error naming the file when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace perseus
