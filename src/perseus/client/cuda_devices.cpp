#include "perseus/client/cuda_devices.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::client {

namespace {

// The devices a CUDA_VISIBLE_DEVICES value makes visible (NVML indices, in CUDA's order) and,
// where the list ends before its last entry or hides every device, why.
struct Visible {
  std::vector<int> nvml;
  std::string why;
};

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

// Whether the entries name devices by UUID: CUDA reads a list by its first entry's kind.
bool lists_uuids(const std::vector<std::string>& entries) {
  return entries.front().starts_with("GPU-");
}

// The number an entry starts with, read as strtoul reads it (an optional sign, then digits:
// "1gpu" is 1), or -1 when it starts with none or with a negative one. Numbers of more than 9
// digits, past any machine's devices, read as 999999999.
int leading_number(const std::string& entry) {
  const bool sign = !entry.empty() && (entry[0] == '+' || entry[0] == '-');
  const std::size_t from = sign ? 1 : 0;
  const std::size_t to = std::min(entry.find_first_not_of("0123456789", from), entry.size());
  if (to == from) return -1;
  const int number = to - from > 9 ? 999999999 : std::stoi(entry.substr(from, to - from));
  return entry[0] == '-' && number != 0 ? -1 : number;
}

std::string quoted(const std::string& entry) {
  return "'" + entry + "'";
}

// Why `entry` ends the list.
std::string ends(const std::string& entry, const std::string& because) {
  return "entry " + quoted(entry) + " " + because + ", which ends the list";
}

// Visibility for a list of device indices, `devices` NVML devices in all.
Visible by_index(const std::vector<std::string>& entries, std::size_t devices) {
  std::vector<int> numbers;
  std::string ended;
  for (const std::string& entry : entries) {
    const int number = leading_number(entry);
    if (number < 0) {
      ended = ends(entry, "is not a device index");
      break;
    }
    if (std::ranges::find(numbers, number) != numbers.end()) {
      return {{}, "device " + std::to_string(number) + " is named twice, which hides every device"};
    }
    numbers.push_back(number);
  }
  Visible visible;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (static_cast<std::size_t>(numbers[i]) >= devices) {
      visible.why = ends(entries[i], "is past NVML's " + std::to_string(devices) + " device(s)");
      return visible;
    }
    visible.nvml.push_back(numbers[i]);
  }
  visible.why = ended;
  return visible;
}

// The index of the UUID `prefix` starts, or why it names no single device.
int uuid_match(const std::string& prefix, const std::vector<std::string>& uuids, std::string& why) {
  int match = -1, matches = 0;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (uuids[i].starts_with(prefix)) {
      match = static_cast<int>(i);
      ++matches;
    }
  }
  if (matches == 0) {
    why = ends(prefix, "matches none of NVML's " + std::to_string(uuids.size()) + " devices");
  } else if (matches > 1) {
    why = ends(prefix, "is a prefix of " + std::to_string(matches) + " NVML devices' UUIDs");
  }
  return matches == 1 ? match : -1;
}

// Visibility for a list of GPU- UUIDs (or unique prefixes), `uuids` those of NVML's devices.
Visible by_uuid(const std::vector<std::string>& entries, const std::vector<std::string>& uuids) {
  std::vector<std::string> named;
  std::string ended;
  for (const std::string& entry : entries) {
    if (!entry.starts_with("GPU-")) {
      ended = ends(entry, "is not a GPU- UUID in a list of them");
      break;
    }
    if (std::ranges::find(named, entry) != named.end()) {
      return {{}, quoted(entry) + " is named twice, which hides every device"};
    }
    named.push_back(entry);
  }
  Visible visible;
  for (const std::string& prefix : named) {
    const int index = uuid_match(prefix, uuids, visible.why);
    if (index < 0) return visible;
    if (std::ranges::find(visible.nvml, index) != visible.nvml.end()) {
      return {{},
              quoted(prefix) + " names NVML device " + std::to_string(index) +
                  " again, which hides every device"};
    }
    visible.nvml.push_back(index);
  }
  visible.why = ended;
  return visible;
}

// The devices `list` makes visible.
Visible visible_devices(const std::string& list,
                        const std::function<std::vector<std::string>()>& nvml_uuids) {
  const std::vector<std::string> entries = visible_entries(list);
  const std::string& first = entries.front();
  if (entries.size() == 1 && first.empty()) return {{}, "an empty value hides every device"};
  if (first.starts_with("MIG-")) {
    throw Error("CUDA_VISIBLE_DEVICES=" + list +
                " names MIG instances; Perseus controls whole GPUs only");
  }
  if (lists_uuids(entries)) return by_uuid(entries, nvml_uuids());
  return by_index(entries, nvml_uuids().size());
}

// A UUID as NVML writes it: "GPU-" first, lower-case hex digits.
std::string as_nvml_uuid(const std::string& uuid) {
  std::string out = uuid.starts_with("GPU-") || uuid.starts_with("gpu-") ? uuid.substr(4) : uuid;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "GPU-" + out;
}

}  // namespace

bool names_devices_by_uuid(const char* cuda_visible_devices) {
  return cuda_visible_devices != nullptr && lists_uuids(visible_entries(cuda_visible_devices));
}

void check_cuda_device_order(const char* cuda_device_order,
                             const std::vector<std::string>& nvml_names) {
  if (cuda_device_order != nullptr && std::string_view(cuda_device_order) == "PCI_BUS_ID") return;
  std::vector<std::string> models;
  for (const std::string& name : nvml_names) {
    if (!name.empty() && std::ranges::find(models, name) == models.end()) models.push_back(name);
  }
  if (models.size() < 2) return;
  const std::string order = cuda_device_order == nullptr
                                ? "unset (CUDA's default, FASTEST_FIRST)"
                                : std::string("'") + cuda_device_order + "'";
  throw Error("CUDA and NVML may number this machine's GPUs differently: it has GPUs of " +
              std::to_string(models.size()) + " models (" + join(models) +
              ") and CUDA_DEVICE_ORDER is " + order +
              ", so CUDA numbers them fastest first and NVML by PCI bus; set "
              "CUDA_DEVICE_ORDER=PCI_BUS_ID, or name the GPUs by UUID in CUDA_VISIBLE_DEVICES");
}

int uuid_to_nvml_index(int cuda_index, const std::string& cuda_uuid,
                       const std::function<std::vector<std::string>()>& nvml_uuids) {
  if (cuda_uuid.starts_with("MIG-")) {
    throw Error("CUDA device " + std::to_string(cuda_index) + " is a MIG instance (" + cuda_uuid +
                "); Perseus controls whole GPUs only");
  }
  const std::string wanted = as_nvml_uuid(cuda_uuid);
  const std::vector<std::string> uuids = nvml_uuids();
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (as_nvml_uuid(uuids[i]) == wanted) return static_cast<int>(i);
  }
  throw Error("CUDA device " + std::to_string(cuda_index) + " is " + wanted +
              " as CUDA names it, and none of NVML's " + std::to_string(uuids.size()) +
              " devices is (a MIG instance, or a GPU NVML does not list)");
}

int cuda_to_nvml_index(int cuda_index, const char* cuda_visible_devices,
                       const std::function<std::vector<std::string>()>& nvml_uuids) {
  if (cuda_index < 0) {
    throw Error("CUDA device index must be >= 0, got " + std::to_string(cuda_index));
  }
  if (cuda_visible_devices == nullptr) return cuda_index;
  const std::string list = cuda_visible_devices;
  const Visible visible = visible_devices(list, nvml_uuids);
  if (static_cast<std::size_t>(cuda_index) < visible.nvml.size()) {
    return visible.nvml[static_cast<std::size_t>(cuda_index)];
  }
  throw Error("CUDA device " + std::to_string(cuda_index) +
              " is not visible: CUDA_VISIBLE_DEVICES=" + list + " makes " +
              std::to_string(visible.nvml.size()) + " device(s) visible" +
              (visible.why.empty() ? "" : " (" + visible.why + ")"));
}

}  // namespace perseus::client
