// gpufilter-gen-pcap: a large capture for throughput runs, made of the packets of the
// sample captures (all Ethernet, classic pcap), repeated with increasing timestamps until
// the file reaches --size. Every copy keeps its payload bytes, so payload matches scale
// with the copies. Each copy is new connections, as repeated traffic is: in copy k the
// client's port of each TCP and UDP packet (the higher of its two ports, from 1024) is
// moved by k * 7919 within 1024-65535, so a 2 GB capture holds thousands of flows, not the
// samples' few 5-tuples reused (--same-ports: the ports kept, as before 2026-12-01).
// Checksums are not redone.
//   gpufilter-gen-pcap --out big.pcap --size 2G [--same-ports] SAMPLE.pcap...
#include <pcap/pcap.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Packet {
  std::uint32_t caplen, len;
  std::vector<unsigned char> data;
};

std::uint64_t parse_size(const std::string& text) {
  std::uint64_t scale = 1;
  std::string digits = text;
  switch (text.empty() ? '\0' : text.back()) {
    case 'K': case 'k': scale = 1ull << 10; digits.pop_back(); break;
    case 'M': case 'm': scale = 1ull << 20; digits.pop_back(); break;
    case 'G': case 'g': scale = 1ull << 30; digits.pop_back(); break;
    default: break;
  }
  return std::strtoull(digits.c_str(), nullptr, 10) * scale;
}

// The offset of a TCP or UDP packet's ports in an Ethernet frame (IPv4, or IPv6 without
// extension headers; one VLAN tag at most), or 0.
std::size_t ports_at(const std::vector<unsigned char>& f) {
  std::size_t at = 12;
  if (f.size() < at + 2) return 0;
  unsigned type = f[at] << 8 | f[at + 1];
  if (type == 0x8100) {
    at += 4;
    if (f.size() < at + 2) return 0;
    type = f[at] << 8 | f[at + 1];
  }
  at += 2;
  unsigned protocol = 0;
  if (type == 0x0800 && f.size() >= at + 20) {
    protocol = f[at + 9];
    at += (f[at] & 0x0f) * 4u;
  } else if (type == 0x86dd && f.size() >= at + 40) {
    protocol = f[at + 6];
    at += 40;
  } else {
    return 0;
  }
  return (protocol == 6 || protocol == 17) && f.size() >= at + 4 ? at : 0;
}

// Copy `copy` of the frame: its client port moved (see the top).
void move_client_port(std::vector<unsigned char>& frame, std::size_t at, std::uint64_t copy) {
  const unsigned a = frame[at] << 8 | frame[at + 1], b = frame[at + 2] << 8 | frame[at + 3];
  const std::size_t field = a >= b ? at : at + 2;
  const unsigned port = a >= b ? a : b;
  if (port < 1024) return;
  const auto moved = static_cast<unsigned>(1024 + (port - 1024 + copy * 7919) % 64512);
  frame[field] = static_cast<unsigned char>(moved >> 8);
  frame[field + 1] = static_cast<unsigned char>(moved & 0xff);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  std::uint64_t size = 256ull << 20;
  bool same_ports = false;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--size" && i + 1 < argc) size = parse_size(argv[++i]);
    else if (a == "--same-ports") same_ports = true;
    else inputs.push_back(a);
  }
  if (out.empty() || inputs.empty()) {
    std::fprintf(stderr, "usage: gpufilter-gen-pcap --out FILE [--size 2G] [--same-ports] SAMPLE.pcap...\n");
    return 2;
  }
  std::vector<Packet> packets;
  char error[PCAP_ERRBUF_SIZE];
  for (const std::string& input : inputs) {
    pcap_t* p = pcap_open_offline(input.c_str(), error);
    if (p == nullptr) {
      std::fprintf(stderr, "gpufilter-gen-pcap: %s\n", error);
      return 2;
    }
    if (pcap_datalink(p) != DLT_EN10MB) {  // one link type in the output
      pcap_close(p);
      continue;
    }
    pcap_pkthdr* header;
    const unsigned char* data;
    while (pcap_next_ex(p, &header, &data) == 1)
      packets.push_back(Packet{header->caplen, header->len, std::vector<unsigned char>(data, data + header->caplen)});
    pcap_close(p);
  }
  if (packets.empty()) {
    std::fprintf(stderr, "gpufilter-gen-pcap: no Ethernet packets in the inputs\n");
    return 2;
  }
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 262144);
  pcap_dumper_t* dumper = pcap_dump_open(dead, out.c_str());
  if (dumper == nullptr) {
    std::fprintf(stderr, "gpufilter-gen-pcap: %s\n", pcap_geterr(dead));
    return 2;
  }
  std::uint64_t written = 24, count = 0;
  pcap_pkthdr header{};
  header.ts.tv_sec = 1700000000;
  std::vector<std::size_t> ports(packets.size());
  for (std::size_t i = 0; i < packets.size(); ++i) ports[i] = same_ports ? 0 : ports_at(packets[i].data);
  std::vector<unsigned char> moved;
  for (std::uint64_t copy = 0; written < size; ++copy) {
    for (std::size_t i = 0; i < packets.size(); ++i) {
      const Packet& packet = packets[i];
      const unsigned char* data = packet.data.data();
      if (copy > 0 && ports[i] != 0) {
        moved = packet.data;
        move_client_port(moved, ports[i], copy);
        data = moved.data();
      }
      header.caplen = packet.caplen;
      header.len = packet.len;
      header.ts.tv_usec += 10;
      if (header.ts.tv_usec >= 1000000) {
        header.ts.tv_usec -= 1000000;
        ++header.ts.tv_sec;
      }
      pcap_dump(reinterpret_cast<unsigned char*>(dumper), &header, data);
      written += 16 + packet.caplen;
      ++count;
      if (written >= size) break;
    }
  }
  pcap_dump_close(dumper);
  pcap_close(dead);
  std::printf("{\"file\":\"%s\",\"bytes\":%llu,\"packets\":%llu}\n", out.c_str(),
              static_cast<unsigned long long>(written), static_cast<unsigned long long>(count));
  return 0;
}
