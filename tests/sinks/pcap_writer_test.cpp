// PcapWriter to a temporary file, read back with libpcap itself: the link type, snaplen
// and timestamp precision given, each record's times, lengths and bytes, a frame longer
// than the snaplen clipped to it; an unwritable path is a SourceError naming it.
#include <pcap/pcap.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpufilter/sinks/pcap_writer.hpp"

namespace gpufilter {
namespace {

// A file name in the temporary directory, removed at the end of the test.
struct TempFile {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("sinks_pcap_writer_test_" + std::to_string(::getpid()) + ".pcap");
  ~TempFile() { std::filesystem::remove(path); }
};

RawPacket packet(std::uint64_t index, std::int64_t seconds, std::uint32_t nanoseconds,
                 const std::vector<std::uint8_t>& bytes) {
  RawPacket raw;
  raw.index = index;
  raw.seconds = seconds;
  raw.nanoseconds = nanoseconds;
  raw.caplen = static_cast<std::uint32_t>(bytes.size());
  raw.len = raw.caplen + 10;  // as if the capture had cut it
  raw.data = bytes;
  return raw;
}

TEST(PcapWriter, WritesWhatLibpcapReadsBack) {
  TempFile file;
  const std::vector<std::uint8_t> first = {1, 2, 3, 4, 5};
  const std::vector<std::uint8_t> second(40, 0xab);  // longer than the snaplen (32)
  {
    PcapWriter writer(file.path.string(), DLT_EN10MB, 32, true);
    writer.write(packet(1, 1084443428, 222534123, first));
    writer.write(packet(2, 1084443429, 7, second));
    writer.flush();
  }
  char errbuf[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline_with_tstamp_precision(file.path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  ASSERT_NE(p, nullptr) << errbuf;
  EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
  EXPECT_EQ(pcap_snapshot(p), 32);
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  ASSERT_EQ(pcap_next_ex(p, &header, &data), 1);
  EXPECT_EQ(header->ts.tv_sec, 1084443428);
  EXPECT_EQ(header->ts.tv_usec, 222534123);  // nanoseconds kept
  EXPECT_EQ(header->caplen, 5u);
  EXPECT_EQ(header->len, 15u);
  EXPECT_EQ(std::vector<std::uint8_t>(data, data + header->caplen), first);
  ASSERT_EQ(pcap_next_ex(p, &header, &data), 1);
  EXPECT_EQ(header->ts.tv_usec, 7);
  EXPECT_EQ(header->caplen, 32u);  // clipped to the snaplen
  EXPECT_EQ(header->len, 50u);
  EXPECT_EQ(pcap_next_ex(p, &header, &data), PCAP_ERROR_BREAK);  // the end
  pcap_close(p);
}

TEST(PcapWriter, MicrosecondFilesKeepMicroseconds) {
  TempFile file;
  const std::vector<std::uint8_t> bytes = {9};
  {
    PcapWriter writer(file.path.string(), DLT_EN10MB, 65535, false);
    writer.write(packet(1, 5, 222534999, bytes));
  }
  char errbuf[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(file.path.c_str(), errbuf);
  ASSERT_NE(p, nullptr) << errbuf;
  EXPECT_EQ(pcap_get_tstamp_precision(p), PCAP_TSTAMP_PRECISION_MICRO);
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  ASSERT_EQ(pcap_next_ex(p, &header, &data), 1);
  EXPECT_EQ(header->ts.tv_usec, 222534);
  pcap_close(p);
}

TEST(PcapWriter, UnwritablePathIsASourceErrorNamingIt) {
  try {
    PcapWriter writer("/nonexistent-dir/x.pcap", DLT_EN10MB, 65535, false);
    ADD_FAILURE() << "opened";
  } catch (const SourceError& e) {
    EXPECT_EQ(e.name(), "/nonexistent-dir/x.pcap");
    EXPECT_EQ(e.error_number(), ENOENT);
  }
}

}  // namespace
}  // namespace gpufilter
