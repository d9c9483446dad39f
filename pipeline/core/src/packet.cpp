// address_text(): a decoded packet's addresses as text, for every packet output.
#include "gpufilter/core/packet.hpp"

#include <arpa/inet.h>

namespace gpufilter {

std::string address_text(const PacketInfo& info, bool source) {
  const std::array<std::uint8_t, 16>& address = source ? info.src : info.dst;
  char text[INET6_ADDRSTRLEN] = {};
  if (info.ip_version == 4) return ::inet_ntop(AF_INET, address.data(), text, sizeof text) ? text : "";
  if (info.ip_version == 6) return ::inet_ntop(AF_INET6, address.data(), text, sizeof text) ? text : "";
  return {};
}

}  // namespace gpufilter
