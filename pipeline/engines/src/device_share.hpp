// What one device took of a scan shared by several (--stats: device_shares).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter {

struct DeviceShare {
  std::string device;  // its name, as --list-devices prints it
  std::uint64_t chunks = 0;
  std::uint64_t bytes = 0;
};

// ",\"device_shares\":[{\"device\":...,\"chunks\":N,\"bytes\":N},...]" for --stats.
std::string device_shares_json(const std::vector<DeviceShare>& shares);

}  // namespace gpufilter
