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
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// Reads a whole file; throws Error naming the file when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace perseus
