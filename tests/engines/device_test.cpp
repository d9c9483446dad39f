// Device selection and setup errors on the real OpenCL runtime (PoCL here, NVIDIA on the
// GPU machine). gpu_device_test.cpp holds the tests that need a GPU.
#include <gtest/gtest.h>

#include <optional>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"

namespace {

using gpufilter::DeviceContext;
using gpufilter::DeviceInfo;

std::optional<std::vector<DeviceInfo>> devices_or_skip() {
  try {
    return gpufilter::list_devices();
  } catch (const gpufilter::NoDeviceError&) {
    return std::nullopt;
  }
}

TEST(Device, ListsEveryDeviceWithItsIndices) {
  auto devices = devices_or_skip();
  if (!devices) GTEST_SKIP() << "no OpenCL platform";
  ASSERT_FALSE(devices->empty());
  for (const DeviceInfo& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.platform_name.empty());
    EXPECT_GT(d.global_memory, 0u);
    DeviceContext chosen(std::to_string(d.platform_index) + ":" + std::to_string(d.device_index));
    EXPECT_EQ(chosen.info().name, d.name);
  }
}

TEST(Device, DefaultPrefersAGpuThenACpu) {
  auto devices = devices_or_skip();
  if (!devices) GTEST_SKIP() << "no OpenCL platform";
  bool any_gpu = false;
  for (const auto& d : *devices) any_gpu = any_gpu || d.is_gpu;
  DeviceContext chosen;
  EXPECT_EQ(chosen.info().is_gpu, any_gpu);
}

TEST(Device, BadSpecsAreNamedInTheError) {
  auto devices = devices_or_skip();
  if (!devices) GTEST_SKIP() << "no OpenCL platform";
  for (const char* spec : {"bogus", "1", "0:x", "99:0", "0:99"}) {
    try {
      DeviceContext d(spec);
      FAIL() << "spec " << spec << " was accepted";
    } catch (const gpufilter::NoDeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(spec), std::string::npos) << e.what();
    }
  }
}

// --device lists: "all" is every GPU (every device where there is none), several specs are
// each device once in the order named, and an empty entry or a missing device is named.
TEST(Device, ListsOfDevices) {
  auto devices = devices_or_skip();
  if (!devices) GTEST_SKIP() << "no OpenCL platform";
  bool any_gpu = false;
  for (const auto& d : *devices) any_gpu = any_gpu || d.is_gpu;
  std::size_t expected_all = 0;
  for (const auto& d : *devices) expected_all += (d.is_gpu || !any_gpu) ? 1 : 0;
  const auto all = gpufilter::find_devices("all");
  EXPECT_EQ(all.size(), expected_all);
  for (const auto& d : all) EXPECT_EQ(gpufilter::find_devices(gpufilter::spec_of(d)).front().name, d.name);
  const std::string first = gpufilter::spec_of(devices->front());
  EXPECT_EQ(gpufilter::find_devices(first + "," + first).size(), 1u);
  EXPECT_EQ(gpufilter::find_devices("all," + first).size(), all.size() + (any_gpu && !devices->front().is_gpu ? 1 : 0));
  EXPECT_EQ(gpufilter::find_devices("").front().name, DeviceContext().info().name);
  for (const std::string& spec : std::vector<std::string>{first + ",,", "," + first, first + ",0:99", "all,bogus"}) {
    try {
      gpufilter::find_devices(spec);
      FAIL() << "spec " << spec << " was accepted";
    } catch (const gpufilter::NoDeviceError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find(spec) != std::string::npos || what.find("0:99") != std::string::npos ||
                  what.find("bogus") != std::string::npos)
          << what;
    }
  }
}

TEST(Device, KernelBuildErrorCarriesTheBuildLog) {
  auto devices = devices_or_skip();
  if (!devices) GTEST_SKIP() << "no OpenCL platform";
  DeviceContext device;
  try {
    device.build_program("broken.cl", "__kernel void k(__global int* x) { x[0] = undeclared_name; }", "");
    FAIL() << "a broken kernel built";
  } catch (const gpufilter::KernelBuildError& e) {
    ASSERT_EQ(e.logs().size(), 1u);
    EXPECT_EQ(e.logs()[0].first, device.info().name);
    EXPECT_NE(e.logs()[0].second.find("undeclared_name"), std::string::npos) << e.logs()[0].second;
    EXPECT_NE(std::string(e.what()).find("broken.cl"), std::string::npos);
  }
}

}  // namespace
