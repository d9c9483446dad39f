// Tests that need a GPU (ctest label `gpu`); they skip where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/opencl/scan_program.hpp"
#include "gpufilter/opencl/device_scanner.hpp"

namespace {

bool has_gpu() {
  try {
    const auto devices = gpufilter::list_devices();
    return std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.is_gpu; });
  } catch (const gpufilter::NoDeviceError&) {
    return false;
  }
}

// On a machine with a GPU, the default device is that GPU and a scan runs on it.
TEST(GpuDevice, DefaultDeviceIsTheGpuAndScans) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  gpufilter::DeviceContext device;
  ASSERT_TRUE(device.info().is_gpu);
  gpufilter::PatternSet patterns;
  patterns.add("needle");
  gpufilter::ScanProgram matcher(device, patterns, {});
  gpufilter::ScanConfig config;
  config.chunk_bytes = 1 << 20;
  gpufilter::DeviceScanner scanner(device, matcher, config);
  gpufilter::ScanSlot* slot = scanner.acquire();
  ASSERT_NE(slot, nullptr);
  std::string text(1 << 20, 'x');
  for (std::size_t at : {0u, 4095u, 500000u, (1u << 20) - 6u}) text.replace(at, 6, "needle");
  std::copy(text.begin(), text.end(), slot->staging());
  slot->chunk() = gpufilter::Chunk{};
  slot->chunk().data = slot->staging();
  slot->chunk().size = text.size();
  scanner.submit(*slot);
  gpufilter::ScanSlot& done = scanner.complete_oldest();
  ASSERT_EQ(done.occurrences().size(), 4u);
  EXPECT_EQ(done.occurrences()[0].position, 0u);
  EXPECT_EQ(done.occurrences()[1].position, 4095u);
  EXPECT_EQ(done.occurrences()[2].position, 500000u);
  EXPECT_EQ(done.occurrences()[3].position, (1u << 20) - 6u);
  scanner.release(done);
}

}  // namespace
