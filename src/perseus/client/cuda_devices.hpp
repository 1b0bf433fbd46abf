// CUDA device indices as NVML numbers them: CUDA_VISIBLE_DEVICES read the way CUDA reads it, so
// a client opened for "CUDA device 0" controls the GPU that the training framework computes on,
// and never one that CUDA hides from it (another job's GPU).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace perseus::client {

// The NVML index of CUDA device `cuda_index`, mapped the way CUDA maps it. `cuda_visible_devices`
// is the value of CUDA_VISIBLE_DEVICES; nullptr (unset) makes every device visible, and the NVML
// index is `cuda_index`. Otherwise its comma-separated entries name the visible devices in CUDA's
// order, by the rules the CUDA driver follows (those PyTorch's torch.cuda.device_count reproduces
// without CUDA, pytorch/pytorch#84879):
//   - a list that starts with a GPU- entry names devices by UUID or a unique prefix of one;
//     otherwise each entry is read as strtoul reads it ("1gpu" is 1) as an NVML index (NVML
//     numbers devices in PCI bus order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID and, on
//     machines with identical GPUs, its default);
//   - the first entry that names no device (not a number or negative, past the last device, not
//     a UUID in a UUID list, a prefix of no UUID or of several) ends the list: what follows it
//     is not visible;
//   - a device named twice hides every device, and so does an empty value.
// `nvml_uuids` returns the UUIDs of all NVML devices in index order (how many there are, too; ""
// for a device NVML could not query, which no entry names).
// Throws a perseus::Error naming CUDA_VISIBLE_DEVICES when the list makes no device `cuda_index`
// visible (saying where and why it ended) or names MIG instances (Perseus controls whole GPUs).
int cuda_to_nvml_index(int cuda_index, const char* cuda_visible_devices,
                       const std::function<std::vector<std::string>()>& nvml_uuids);

// Whether `cuda_visible_devices` names devices by UUID (a list whose first entry is a GPU- one):
// such names mean the same GPUs to CUDA and NVML, whatever order either numbers them in.
bool names_devices_by_uuid(const char* cuda_visible_devices);

// Throws a perseus::Error when CUDA and NVML may number this machine's GPUs differently: GPUs of
// more than one model (`nvml_names`, the names of NVML's devices; "" for one NVML could not
// query, which counts as none) and CUDA_DEVICE_ORDER
// (`cuda_device_order`, nullptr when unset) other than PCI_BUS_ID. CUDA then numbers GPUs fastest
// first, NVML by PCI bus, so a device index (CUDA's, or one in CUDA_VISIBLE_DEVICES) may name
// another GPU in NVML. GPUs of one model are numbered alike either way (equally fast, by bus).
void check_cuda_device_order(const char* cuda_device_order,
                             const std::vector<std::string>& nvml_names);

// The NVML index of the device whose UUID CUDA itself reports for CUDA device `cuda_index` (e.g.
// PyTorch's get_device_properties(i).uuid, with or without "GPU-", any case): exact wherever CUDA
// and NVML number devices differently (CUDA_DEVICE_ORDER's default, fastest first, on a machine
// of mixed GPUs; MPS, which renumbers the devices it serves). `nvml_uuids` as above. Throws a
// perseus::Error when no NVML device has that UUID (a MIG instance, or a GPU NVML does not list).
int uuid_to_nvml_index(int cuda_index, const std::string& cuda_uuid,
                       const std::function<std::vector<std::string>()>& nvml_uuids);

}  // namespace perseus::client
