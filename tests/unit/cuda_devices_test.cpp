// CUDA device indices mapped to NVML's through CUDA_VISIBLE_DEVICES (integers and GPU- UUIDs),
// as CUDA reads it, and the NVML backend opening the device it names (through the fake NVML).
#include "perseus/client/cuda_devices.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_nvml_fixture.hpp"
#include "perseus/client/nvml_gpu.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::cuda_to_nvml_index;
using perseus::client::NvmlGpu;
using perseus::test::CallLog;
using perseus::test::error_of;
using perseus::test::Nvml;

const std::vector<std::string> kUuids = {"GPU-5e3b1a8c-1f2d-4c4e-9a0b-3d2e1f4a5b6c",
                                         "GPU-5e3b9f00-0000-4000-8000-000000000001",
                                         "GPU-a1b2c3d4-0000-4000-8000-000000000002"};

// Maps CUDA device `index` under `visible` on a machine with kUuids' three GPUs.
int nvml_index(int index, const char* visible) {
  return cuda_to_nvml_index(index, visible, [] { return kUuids; });
}

// Why CUDA device `index` is not visible under `visible`.
std::string invisible(int index, const char* visible) {
  return error_of([&] { nvml_index(index, visible); });
}

// CUDA_VISIBLE_DEVICES as CUDA reads it: integer entries are NVML indices (read as strtoul reads
// them), GPU- entries UUIDs or unique prefixes of one; unset, every device is visible and the
// UUIDs are not asked for.
TEST(CudaToNvmlIndex, MapsIndicesAndUuidsTheWayCudaDoes) {
  int asked = 0;
  auto list = [&] {
    ++asked;
    return kUuids;
  };
  EXPECT_EQ(cuda_to_nvml_index(1, nullptr, list), 1);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(nvml_index(0, "2,0"), 2);
  EXPECT_EQ(nvml_index(1, "2, 0"), 0);
  EXPECT_EQ(nvml_index(1, "2,1gpu"), 1);
  EXPECT_EQ(nvml_index(0, "+1"), 1);
  EXPECT_EQ(nvml_index(0, kUuids[1].c_str()), 1);
  EXPECT_EQ(nvml_index(1, "GPU-5e3b1,GPU-a1"), 2);
  EXPECT_EQ(nvml_index(0, "GPU-5e3b9"), 1);
}

// The first entry that names no device ends the list, and what follows it is not visible, even
// where it would name a device: a client must never control a GPU CUDA hides from its training
// (another job's). Each error says how many devices the list makes visible and why no more.
TEST(CudaToNvmlIndex, SeesNothingPastTheFirstEntryThatNamesNoDevice) {
  EXPECT_CONTAINS(
      invisible(2, "0,1"),
      "CUDA device 2 is not visible: CUDA_VISIBLE_DEVICES=0,1 makes 2 device(s) visible");
  EXPECT_CONTAINS(invisible(2, "0,-1,1"),
                  "CUDA_VISIBLE_DEVICES=0,-1,1 makes 1 device(s) visible (entry '-1' is not a "
                  "device index, which ends the list)");
  EXPECT_CONTAINS(invisible(0, "gpu0"),
                  "(entry 'gpu0' is not a device index, which ends the list)");
  EXPECT_CONTAINS(invisible(2, "0,7,1"),
                  "makes 1 device(s) visible (entry '7' is past NVML's 3 device(s), which ends the "
                  "list)");
  EXPECT_CONTAINS(invisible(1, "0,GPU-a1"),
                  "(entry 'GPU-a1' is not a device index, which ends the list)");
  EXPECT_CONTAINS(invisible(1, "GPU-a1,2"),
                  "makes 1 device(s) visible (entry '2' is not a GPU- UUID in a list of them, "
                  "which ends the list)");
  EXPECT_CONTAINS(invisible(0, "GPU-5e3b"),
                  "makes 0 device(s) visible (entry 'GPU-5e3b' is a prefix of 2 NVML devices' "
                  "UUIDs, which ends the list)");
  EXPECT_CONTAINS(invisible(1, "GPU-a1,GPU-ffff,GPU-5e3b1"),
                  "makes 1 device(s) visible (entry 'GPU-ffff' matches none of NVML's 3 devices, "
                  "which ends the list)");
}

TEST(CudaToNvmlIndex, SeesNoDeviceWhenOneIsNamedTwiceOrTheValueIsEmpty) {
  EXPECT_CONTAINS(invisible(0, "1,0,1"),
                  "CUDA device 0 is not visible: CUDA_VISIBLE_DEVICES=1,0,1 makes 0 device(s) "
                  "visible (device 1 is named twice, which hides every device)");
  EXPECT_CONTAINS(invisible(0, "GPU-a1,GPU-a1"), "('GPU-a1' is named twice, which hides every");
  EXPECT_CONTAINS(invisible(0, "GPU-a1,GPU-a1b2"),
                  "('GPU-a1b2' names NVML device 2 again, which hides every device)");
  EXPECT_CONTAINS(invisible(0, ""),
                  "CUDA_VISIBLE_DEVICES= makes 0 device(s) visible (an empty value hides every "
                  "device)");
  EXPECT_CONTAINS(invisible(0, " "), "(an empty value hides every device)");
}

TEST(CudaToNvmlIndex, RefusesMigInstancesAndNegativeIndices) {
  EXPECT_CONTAINS(invisible(0, "MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21"),
                  "CUDA_VISIBLE_DEVICES=MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21 names MIG "
                  "instances; Perseus controls whole GPUs only");
  EXPECT_CONTAINS(invisible(-1, nullptr), "CUDA device index must be >= 0");
}

// The UUID CUDA reports names the device exactly, whatever CUDA_VISIBLE_DEVICES says (CUDA and
// NVML may number devices differently: mixed GPUs in CUDA's fastest-first order, MPS).
TEST(UuidToNvmlIndex, FindsTheDeviceOfTheUuidCudaReports) {
  auto list = [] { return kUuids; };
  EXPECT_EQ(perseus::client::uuid_to_nvml_index(0, kUuids[2], list), 2);
  EXPECT_EQ(perseus::client::uuid_to_nvml_index(0, "5E3B9F00-0000-4000-8000-000000000001", list),
            1);
  auto error = [&](const std::string& uuid) {
    return error_of([&] { perseus::client::uuid_to_nvml_index(1, uuid, list); });
  };
  EXPECT_CONTAINS(error("GPU-5e3b9f00"),
                  "CUDA device 1 is GPU-5e3b9f00 as CUDA names it, and none of NVML's 3 devices "
                  "is (a MIG instance, or a GPU NVML does not list)");
  EXPECT_CONTAINS(error("MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21"),
                  "CUDA device 1 is a MIG instance (MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21); "
                  "Perseus controls whole GPUs only");
}

// GPUs of one model are numbered alike by CUDA (fastest first, ties by PCI bus) and NVML (by bus);
// on a machine of mixed GPUs only CUDA_DEVICE_ORDER=PCI_BUS_ID makes an index mean one GPU.
TEST(CheckCudaDeviceOrder, RefusesMixedModelsUnlessCudaNumbersThemByBus) {
  using perseus::client::check_cuda_device_order;
  const std::vector<std::string> alike = {"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"};
  const std::vector<std::string> mixed = {"NVIDIA A100-SXM4-80GB", "NVIDIA RTX A6000",
                                          "NVIDIA A100-SXM4-80GB"};
  EXPECT_NO_THROW(check_cuda_device_order(nullptr, alike));
  EXPECT_NO_THROW(check_cuda_device_order("PCI_BUS_ID", mixed));
  EXPECT_CONTAINS(error_of([&] { check_cuda_device_order(nullptr, mixed); }),
                  "CUDA and NVML may number this machine's GPUs differently: it has GPUs of 2 "
                  "models (NVIDIA A100-SXM4-80GB, NVIDIA RTX A6000) and CUDA_DEVICE_ORDER is unset "
                  "(CUDA's default, FASTEST_FIRST), so CUDA numbers them fastest first and NVML by "
                  "PCI bus; set CUDA_DEVICE_ORDER=PCI_BUS_ID, or name the GPUs by UUID in "
                  "CUDA_VISIBLE_DEVICES");
  EXPECT_CONTAINS(error_of([&] { check_cuda_device_order("FASTEST_FIRST", mixed); }),
                  "CUDA_DEVICE_ORDER is 'FASTEST_FIRST'");
}

TEST(NamesDevicesByUuid, IsAListWhoseFirstEntryIsAGpuUuid) {
  using perseus::client::names_devices_by_uuid;
  EXPECT_TRUE(names_devices_by_uuid("GPU-a1"));
  EXPECT_TRUE(names_devices_by_uuid(" GPU-a1,0"));
  EXPECT_FALSE(names_devices_by_uuid("0,GPU-a1"));
  EXPECT_FALSE(names_devices_by_uuid(""));
  EXPECT_FALSE(names_devices_by_uuid(nullptr));
}

TEST_F(Nvml, OpensAnIndexOnAMachineOfMixedGpusOnlyWhereCudaNumbersThemByBus) {
  env_.set("FAKE_NVML_DEVICES", "2");
  env_.set("FAKE_NVML_NAMES", "Fake NVIDIA A100-SXM4-80GB,Fake NVIDIA RTX A6000");
  env_.set("CUDA_DEVICE_ORDER", std::nullopt);
  env_.set("CUDA_VISIBLE_DEVICES", std::nullopt);
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(1, FAKE_NVML_LIBRARY); }),
                  "it has GPUs of 2 models (Fake NVIDIA A100-SXM4-80GB, Fake NVIDIA RTX A6000)");
  env_.set("CUDA_VISIBLE_DEVICES", "1");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }), "may number this machine");
  // Named by UUID, in CUDA_VISIBLE_DEVICES or as CUDA reports it, a GPU is the same to both.
  env_.set("CUDA_VISIBLE_DEVICES", "GPU-00000001");
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY).name(), "Fake NVIDIA RTX A6000");
  env_.set("CUDA_VISIBLE_DEVICES", std::nullopt);
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY, "GPU-00000001-fa4e-4000-8000-000000000001").nvml_index(),
            1);
  env_.set("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  EXPECT_EQ(NvmlGpu(1, FAKE_NVML_LIBRARY).name(), "Fake NVIDIA RTX A6000");
}

// Opening asks NVML about every GPU of the machine (names, UUIDs): one that has fallen off the bus
// must not keep another from opening.
TEST_F(Nvml, OpensAGpuWhileAnotherOfTheMachineIsLost) {
  env_.set("FAKE_NVML_DEVICES", "3");
  env_.set("FAKE_NVML_LOST_DEVICE", "1");
  env_.set("CUDA_VISIBLE_DEVICES", std::nullopt);
  EXPECT_EQ(NvmlGpu(2, FAKE_NVML_LIBRARY).nvml_index(), 2);
  env_.set("CUDA_VISIBLE_DEVICES", "2,0");
  EXPECT_EQ(NvmlGpu(1, FAKE_NVML_LIBRARY).nvml_index(), 0);
  env_.set("CUDA_VISIBLE_DEVICES", "GPU-00000002");
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY).nvml_index(), 2);
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY, "GPU-00000000-fa4e-4000-8000-000000000000").nvml_index(),
            0);
  env_.set("CUDA_VISIBLE_DEVICES", "GPU-00000001");  // the lost one itself
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }),
                  "(entry 'GPU-00000001' matches none of NVML's 3 devices, which ends the list)");
}

TEST_F(Nvml, OpensTheDeviceOfTheUuidCudaReportsOverCudaVisibleDevices) {
  env_.set("FAKE_NVML_DEVICES", "3");
  env_.set("CUDA_VISIBLE_DEVICES", "0");
  const std::string uuid2 = "GPU-00000002-fa4e-4000-8000-000000000002";
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY, uuid2).nvml_index(), 2);
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY, "").nvml_index(), 0);
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY, "GPU-ffffffff"); }),
                  "CUDA device 0 is GPU-ffffffff as CUDA names it, and none of NVML's 3");
}

TEST_F(Nvml, OpensTheDeviceCudaVisibleDevicesNames) {
  env_.set("FAKE_NVML_DEVICES", "3");
  const std::string uuid2 = "GPU-00000002-fa4e-4000-8000-000000000002";
  env_.set("CUDA_VISIBLE_DEVICES", uuid2 + ",GPU-00000000,GPU-00000001");
  NvmlGpu first(0, FAKE_NVML_LIBRARY), second(1, FAKE_NVML_LIBRARY), third(2, FAKE_NVML_LIBRARY);
  EXPECT_EQ(first.nvml_index(), 2);
  EXPECT_EQ(first.uuid(), uuid2);
  EXPECT_EQ(second.nvml_index(), 0);
  EXPECT_EQ(second.uuid(), "GPU-00000000-fa4e-4000-8000-000000000000");
  EXPECT_EQ(third.nvml_index(), 1);
  env_.set("CUDA_VISIBLE_DEVICES", "2,0");
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY).nvml_index(), 2);
  EXPECT_EQ(NvmlGpu(1, FAKE_NVML_LIBRARY).uuid(), "GPU-00000000-fa4e-4000-8000-000000000000");
}

TEST_F(Nvml, FailsClearlyForADeviceCudaVisibleDevicesCannotName) {
  CallLog log;
  env_.set("FAKE_NVML_DEVICES", "2");
  env_.set("CUDA_VISIBLE_DEVICES", "GPU-0000000");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }),
                  "(entry 'GPU-0000000' is a prefix of 2 NVML devices' UUIDs");
  env_.set("CUDA_VISIBLE_DEVICES", "5");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }),
                  "CUDA device 0 is not visible: CUDA_VISIBLE_DEVICES=5 makes 0 device(s) visible "
                  "(entry '5' is past NVML's 2 device(s), which ends the list)");
  env_.set("CUDA_VISIBLE_DEVICES", std::nullopt);
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(2, FAKE_NVML_LIBRARY); }),
                  "NVML device 2: no such device: NVML lists 2 device(s) (0..1)");
  env_.set("CUDA_VISIBLE_DEVICES", "1");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(1, FAKE_NVML_LIBRARY); }),
                  "CUDA device 1 is not visible: CUDA_VISIBLE_DEVICES=1 makes 1 device(s) visible");
  // Every failed open shut NVML down again.
  const std::string text = log.text();
  auto count = [&](const std::string& line) {
    std::size_t n = 0;
    for (auto at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("nvmlInit_v2\n"), 4u);
  EXPECT_EQ(count("nvmlShutdown\n"), 4u);
}

}  // namespace
