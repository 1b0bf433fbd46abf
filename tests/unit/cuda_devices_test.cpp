// CUDA device indices mapped to NVML's through CUDA_VISIBLE_DEVICES (integers and GPU- UUIDs),
// as CUDA reads it, and the NVML backend opening the device it names (through the fake NVML).
#include "perseus/client/cuda_devices.hpp"

#include <gtest/gtest.h>

#include <string>

#include "fake_nvml_fixture.hpp"
#include "perseus/client/nvml_gpu.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::cuda_to_nvml_index;
using perseus::client::NvmlGpu;
using perseus::test::CallLog;
using perseus::test::error_of;
using perseus::test::Nvml;

// CUDA_VISIBLE_DEVICES as CUDA reads it: integer entries are NVML indices, GPU- entries UUIDs or
// unique prefixes of one; the UUID list is asked for only when an entry needs it.
TEST(CudaToNvmlIndex, MapsIndicesAndUuidsTheWayCudaDoes) {
  const std::vector<std::string> uuids = {"GPU-5e3b1a8c-1f2d-4c4e-9a0b-3d2e1f4a5b6c",
                                          "GPU-5e3b9f00-0000-4000-8000-000000000001",
                                          "GPU-a1b2c3d4-0000-4000-8000-000000000002"};
  int asked = 0;
  auto list = [&] {
    ++asked;
    return uuids;
  };
  EXPECT_EQ(cuda_to_nvml_index(1, nullptr, list), 1);
  EXPECT_EQ(cuda_to_nvml_index(1, "", list), 1);
  EXPECT_EQ(cuda_to_nvml_index(0, "2,0", list), 2);
  EXPECT_EQ(cuda_to_nvml_index(1, "2, 0", list), 0);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(cuda_to_nvml_index(0, uuids[1].c_str(), list), 1);
  EXPECT_EQ(cuda_to_nvml_index(1, "0,GPU-a1", list), 2);
  EXPECT_EQ(cuda_to_nvml_index(0, "GPU-5e3b1", list), 0);
  EXPECT_EQ(asked, 3);
}

TEST(CudaToNvmlIndex, RejectsWhatCudaWouldNotOpen) {
  auto list = [] {
    return std::vector<std::string>{"GPU-5e3b1a8c-1f2d-4c4e-9a0b-3d2e1f4a5b6c",
                                    "GPU-5e3b9f00-0000-4000-8000-000000000001"};
  };
  auto error = [&](int index, const char* visible) {
    return error_of([&] { cuda_to_nvml_index(index, visible, list); });
  };
  EXPECT_CONTAINS(error(2, "0,1"), "CUDA device 2 is not visible: CUDA_VISIBLE_DEVICES=0,1");
  EXPECT_CONTAINS(error(0, "GPU-5e3b"),
                  "CUDA_VISIBLE_DEVICES entry 'GPU-5e3b' (CUDA device 0) is ambiguous");
  EXPECT_CONTAINS(error(1, "0,GPU-ffff"),
                  "CUDA_VISIBLE_DEVICES entry 'GPU-ffff' (CUDA device 1) matches none");
  EXPECT_CONTAINS(error(0, "MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21"),
                  "CUDA_VISIBLE_DEVICES entry 'MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21' "
                  "(CUDA device 0) is a MIG instance");
  EXPECT_CONTAINS(error(0, "gpu0"),
                  "CUDA_VISIBLE_DEVICES entry 'gpu0' (CUDA device 0) is neither a device index");
  EXPECT_CONTAINS(error(-1, nullptr), "CUDA device index must be >= 0");
}

TEST_F(Nvml, OpensTheDeviceCudaVisibleDevicesNames) {
  env_.set("FAKE_NVML_DEVICES", "3");
  const std::string uuid2 = "GPU-00000002-fa4e-4000-8000-000000000002";
  env_.set("CUDA_VISIBLE_DEVICES", uuid2 + ",0,GPU-00000001");
  NvmlGpu first(0, FAKE_NVML_LIBRARY), second(1, FAKE_NVML_LIBRARY), third(2, FAKE_NVML_LIBRARY);
  EXPECT_EQ(first.nvml_index(), 2);
  EXPECT_EQ(first.uuid(), uuid2);
  EXPECT_EQ(second.nvml_index(), 0);
  EXPECT_EQ(second.uuid(), "GPU-00000000-fa4e-4000-8000-000000000000");
  EXPECT_EQ(third.nvml_index(), 1);
  env_.set("CUDA_VISIBLE_DEVICES", "2");
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY).nvml_index(), 2);
}

TEST_F(Nvml, FailsClearlyForADeviceCudaVisibleDevicesCannotName) {
  CallLog log;
  env_.set("FAKE_NVML_DEVICES", "2");
  env_.set("CUDA_VISIBLE_DEVICES", "GPU-0000000");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }),
                  "CUDA_VISIBLE_DEVICES entry 'GPU-0000000' (CUDA device 0) is ambiguous");
  env_.set("CUDA_VISIBLE_DEVICES", "5");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }),
                  "NVML device 5 (CUDA device 0 under CUDA_VISIBLE_DEVICES=5): no such device: "
                  "NVML lists 2 device(s) (0..1)");
  env_.set("CUDA_VISIBLE_DEVICES", std::nullopt);
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(2, FAKE_NVML_LIBRARY); }),
                  "NVML device 2: no such device: NVML lists 2 device(s) (0..1)");
  env_.set("CUDA_VISIBLE_DEVICES", "1");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(1, FAKE_NVML_LIBRARY); }),
                  "CUDA device 1 is not visible: CUDA_VISIBLE_DEVICES=1 lists 1 device(s)");
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
