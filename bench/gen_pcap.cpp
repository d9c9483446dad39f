// gpufilter-gen-pcap: a large capture for throughput runs, made of the packets of the
// sample captures (all Ethernet, classic pcap), repeated with increasing timestamps until
// the file reaches --size. Every copy keeps its frame bytes, so payload matches scale
// with the copies.
//   gpufilter-gen-pcap --out big.pcap --size 2G SAMPLE.pcap...
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

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  std::uint64_t size = 256ull << 20;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--size" && i + 1 < argc) size = parse_size(argv[++i]);
    else inputs.push_back(a);
  }
  if (out.empty() || inputs.empty()) {
    std::fprintf(stderr, "usage: gpufilter-gen-pcap --out FILE [--size 2G] SAMPLE.pcap...\n");
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
  while (written < size) {
    for (const Packet& packet : packets) {
      header.caplen = packet.caplen;
      header.len = packet.len;
      header.ts.tv_usec += 10;
      if (header.ts.tv_usec >= 1000000) {
        header.ts.tv_usec -= 1000000;
        ++header.ts.tv_sec;
      }
      pcap_dump(reinterpret_cast<unsigned char*>(dumper), &header, packet.data.data());
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
