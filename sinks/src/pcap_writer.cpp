// PcapWriter over libpcap: a dead pcap_t carries the link type, snaplen and precision,
// and pcap_dump writes through a stdio stream whose errors are checked after every call.
#include "gpufilter/sinks/pcap_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "gpufilter/core/libpcap.hpp"

namespace gpufilter {

namespace {

std::string geterr(pcap_t* p) {
  const char* text = libpcap().pcap_geterr(p);
  return text != nullptr ? text : "";
}

}  // namespace

PcapWriter::PcapWriter(const std::string& path, int link_type, int snaplen, bool nanosecond)
    : path_(path == "-" ? "(standard output)" : path) {
  pcap_t* p = libpcap().pcap_open_dead_with_tstamp_precision(
      link_type, snaplen > 0 ? snaplen : 262144, nanosecond ? PCAP_TSTAMP_PRECISION_NANO : PCAP_TSTAMP_PRECISION_MICRO);
  if (p == nullptr) throw SourceError(path_, ENOMEM);
  FILE* file = nullptr;
  if (path == "-") {
    // pcap_dump_close() closes the stream: standard output is written through a copy of
    // its descriptor, after whatever stdio still holds for it.
    std::fflush(stdout);
    const int fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0) {
      file = ::fdopen(fd, "wb");
      if (file == nullptr) ::close(fd);
    }
  } else {
    file = std::fopen(path.c_str(), "wbe");
  }
  if (file == nullptr) {
    const int error = errno;
    libpcap().pcap_close(p);
    throw SourceError(path_, error);
  }
  pcap_dumper_t* dumper = libpcap().pcap_dump_fopen(p, file);
  if (dumper == nullptr) {
    // libpcap closes the stream itself when writing the header failed, not when it
    // refused the link type before.
    const std::string why = geterr(p);
    if (why.find("link-layer type") != std::string::npos) std::fclose(file);
    libpcap().pcap_close(p);
    throw SourceError(path_, EINVAL, path_ + ": " + why);
  }
  pcap_ = p;
  dumper_ = dumper;
}

PcapWriter::~PcapWriter() {
  if (dumper_ != nullptr) libpcap().pcap_dump_close(static_cast<pcap_dumper_t*>(dumper_));
  if (pcap_ != nullptr) libpcap().pcap_close(static_cast<pcap_t*>(pcap_));
}

void PcapWriter::write(const RawPacket& packet) {
  auto* p = static_cast<pcap_t*>(pcap_);
  const bool nano = libpcap().pcap_get_tstamp_precision(p) == PCAP_TSTAMP_PRECISION_NANO;
  pcap_pkthdr header{};
  header.ts.tv_sec = static_cast<time_t>(packet.seconds);
  header.ts.tv_usec = static_cast<suseconds_t>(nano ? packet.nanoseconds : packet.nanoseconds / 1000);
  // Never more than the file's snaplen: readers would cut the record there anyway.
  const std::size_t snap = static_cast<std::size_t>(libpcap().pcap_snapshot(p));
  header.caplen = static_cast<bpf_u_int32>(std::min(packet.data.size(), snap));
  header.len = std::max(packet.len, header.caplen);
  errno = 0;
  libpcap().pcap_dump(static_cast<u_char*>(dumper_), &header, packet.data.data());
  if (std::ferror(libpcap().pcap_dump_file(static_cast<pcap_dumper_t*>(dumper_))) != 0) {
    throw SourceError(path_, errno != 0 ? errno : EIO);
  }
}

void PcapWriter::flush() {
  errno = 0;
  auto* dumper = static_cast<pcap_dumper_t*>(dumper_);
  if (libpcap().pcap_dump_flush(dumper) != 0 || std::ferror(libpcap().pcap_dump_file(dumper)) != 0) {
    throw SourceError(path_, errno != 0 ? errno : EIO);
  }
}

}  // namespace gpufilter
