// CUDA device indices as NVML numbers them: CUDA_VISIBLE_DEVICES read the way CUDA reads it
// (integer indices, GPU- UUIDs and unique prefixes of them), so a client opened for "CUDA
// device 0" controls the GPU that the training framework computes on.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace perseus::client {

// The NVML index of CUDA device `cuda_index`, mapped the way CUDA maps it. `cuda_visible_devices`
// is the value of CUDA_VISIBLE_DEVICES (nullptr or empty: unset, the NVML index is `cuda_index`);
// otherwise entry `cuda_index` of its comma-separated list names the device: an integer NVML
// index (NVML numbers devices in PCI bus order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID
// and, on machines with identical GPUs, its default) or a GPU- UUID or a unique prefix of one.
// `nvml_uuids` returns the UUIDs of all NVML devices in index order; it is called only for a UUID
// entry. Throws a perseus::Error naming CUDA_VISIBLE_DEVICES and the entry when the list has no
// entry `cuda_index`, the entry is a MIG- instance or malformed, or a UUID matches no device or
// several.
int cuda_to_nvml_index(int cuda_index, const char* cuda_visible_devices,
                       const std::function<std::vector<std::string>()>& nvml_uuids);

}  // namespace perseus::client
