#include "perseus/client/cuda_devices.hpp"

#include <string_view>

#include "perseus/util/error.hpp"

namespace perseus::client {

namespace {

// The comma-separated entries of a CUDA_VISIBLE_DEVICES value, surrounding blanks removed.
std::vector<std::string> visible_entries(std::string_view list) {
  std::vector<std::string> entries;
  while (true) {
    std::size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    std::size_t first = entry.find_first_not_of(" \t");
    std::size_t last = entry.find_last_not_of(" \t");
    entries.emplace_back(first == std::string_view::npos ? std::string_view{}
                                                         : entry.substr(first, last - first + 1));
    if (comma == std::string_view::npos) return entries;
    list.remove_prefix(comma + 1);
  }
}

// The device index an all-digits entry names, or -1 when the entry is not one.
int index_entry(const std::string& entry) {
  if (entry.empty() || entry.size() > 6 ||
      entry.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoi(entry);
}

// The index of the only UUID starting with `prefix`; `what` names the entry in errors.
int match_uuid(const std::string& prefix, const std::vector<std::string>& uuids,
               const std::string& what) {
  int match = -1, matches = 0;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (uuids[i].starts_with(prefix)) {
      match = static_cast<int>(i);
      ++matches;
    }
  }
  if (matches == 0) {
    throw Error(what + " matches none of the " + std::to_string(uuids.size()) + " NVML devices");
  }
  if (matches > 1) {
    throw Error(what + " is ambiguous: it is a prefix of " + std::to_string(matches) +
                " NVML devices' UUIDs");
  }
  return match;
}

}  // namespace

int cuda_to_nvml_index(int cuda_index, const char* cuda_visible_devices,
                       const std::function<std::vector<std::string>()>& nvml_uuids) {
  if (cuda_index < 0) {
    throw Error("CUDA device index must be >= 0, got " + std::to_string(cuda_index));
  }
  if (cuda_visible_devices == nullptr || *cuda_visible_devices == '\0') return cuda_index;
  const std::string list = cuda_visible_devices;
  const std::vector<std::string> entries = visible_entries(list);
  if (static_cast<std::size_t>(cuda_index) >= entries.size()) {
    throw Error("CUDA device " + std::to_string(cuda_index) +
                " is not visible: CUDA_VISIBLE_DEVICES=" + list + " lists " +
                std::to_string(entries.size()) + " device(s)");
  }
  const std::string& entry = entries[static_cast<std::size_t>(cuda_index)];
  const std::string what =
      "CUDA_VISIBLE_DEVICES entry '" + entry + "' (CUDA device " + std::to_string(cuda_index) + ")";
  if (int index = index_entry(entry); index >= 0) return index;
  if (entry.starts_with("MIG-")) {
    throw Error(what + " is a MIG instance; Perseus controls whole GPUs only");
  }
  if (!entry.starts_with("GPU-")) {
    throw Error(what + " is neither a device index nor a GPU- UUID");
  }
  return match_uuid(entry, nvml_uuids(), what);
}

}  // namespace perseus::client
