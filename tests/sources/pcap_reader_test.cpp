// PcapReader and PcapWriter on the corpus captures, with tshark as the oracle: packet
// counts, lengths and timestamps (nanoseconds of the pcapng sample included); standard
// input through a pipe; BPF filters against tshark's display filters; bad filters; files
// cut at many byte positions (header, record header, record data, pcapng blocks) and with
// corrupt record lengths, where the error names the file and the exact offset of the
// record that could not be read, after every complete packet before it; the writer's
// round trip (tshark and the reader read back what was written); a live capture on the
// loopback interface (a UDP datagram sent by the test), its privilege error and a
// missing interface.
#include "gpufilter/sinks/pcap_writer.hpp"
#include "gpufilter/sources/pcap_reader.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/sources/packet.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter {
namespace {

using test::TempDir;

using gpufilter::test::command_output;
using gpufilter::test::shell_quote;

using Bytes = std::vector<std::uint8_t>;

const std::vector<std::string> kCaptures = {"chrome-34-google.trace", "dns.cap",         "http.cap",
                                            "http_redirects.pcapng",  "smtp.pcap",       "syslog-single-udp.trace",
                                            "syslog_udp.pcap",        "telnet-raw.pcap", "v6-http.cap"};

std::string sample(const std::string& name) { return test::corpus_path("pcap/" + name); }


std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// tshark's view of each frame: "number<TAB>cap_len<TAB>len<TAB>epoch", optionally filtered.
std::vector<std::string> tshark_frames(const std::string& path, const std::string& display_filter = {}) {
  std::string command = "tshark -r " + shell_quote(path);
  if (!display_filter.empty()) command += " -Y " + shell_quote(display_filter);
  command += " -T fields -e frame.number -e frame.cap_len -e frame.len -e frame.time_epoch";
  return lines_of(command_output(command));
}

std::string epoch_text(std::int64_t seconds, std::uint32_t nanoseconds) {
  char fraction[16];
  std::snprintf(fraction, sizeof fraction, "%09u", nanoseconds);
  return std::to_string(seconds) + "." + fraction;
}

struct Packet {
  std::uint64_t index;
  std::int64_t seconds;
  std::uint32_t nanoseconds;
  std::uint32_t len;
  Bytes data;
  bool operator==(const Packet&) const = default;
};

std::string describe(const Packet& p) {
  return std::to_string(p.index) + "\t" + std::to_string(p.data.size()) + "\t" + std::to_string(p.len) + "\t" +
         epoch_text(p.seconds, p.nanoseconds);
}

// Every packet the reader hands out, until the end or an exception (rethrown after
// `before_error` got what came before it).
std::vector<Packet> read_all(PcapReader& reader, std::vector<Packet>* before_error = nullptr) {
  std::vector<Packet> packets;
  RawPacket raw;
  try {
    while (reader.next(raw)) {
      EXPECT_EQ(raw.caplen, raw.data.size());
      packets.push_back({raw.index, raw.seconds, raw.nanoseconds, raw.len, Bytes(raw.data.begin(), raw.data.end())});
    }
  } catch (...) {
    if (before_error != nullptr) *before_error = packets;
    throw;
  }
  return packets;
}

std::vector<Packet> read_path(const std::string& path, const std::string& bpf = {}) {
  auto reader = PcapReader::open_file(path, bpf);
  return read_all(*reader);
}


void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// ---------------------------------------------------------------------------------------
// The structure of a capture file, parsed here independently of libpcap.

struct Record {
  std::uint64_t start;  // where the record (or pcapng block) starts
  std::uint64_t end;
  bool packet;  // a packet record / packet block
  Bytes data;   // a classic record's packet bytes
};

std::uint32_t le32(const std::string& bytes, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at])) |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + 1])) << 8 |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + 2])) << 16 |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + 3])) << 24;
}

bool is_pcapng(const std::string& bytes) { return le32(bytes, 0) == 0x0a0d0d0a; }

// Records after the 24-byte header of a little-endian classic pcap, or every block of a
// little-endian pcapng file (the samples are both).
std::vector<Record> structure(const std::string& bytes) {
  std::vector<Record> records;
  if (is_pcapng(bytes)) {
    for (std::size_t at = 0; at + 12 <= bytes.size();) {
      const std::uint32_t type = le32(bytes, at), length = le32(bytes, at + 4);
      records.push_back({at, at + length, type == 6 || type == 3 || type == 2, {}});
      at += length;
    }
  } else {
    EXPECT_EQ(le32(bytes, 0), 0xa1b2c3d4u);
    for (std::size_t at = 24; at + 16 <= bytes.size();) {
      const std::uint32_t caplen = le32(bytes, at + 8);
      records.push_back({at, at + 16 + caplen, true,
                         Bytes(bytes.begin() + static_cast<std::ptrdiff_t>(at + 16),
                               bytes.begin() + static_cast<std::ptrdiff_t>(at + 16 + caplen))});
      at += 16 + caplen;
    }
  }
  return records;
}

// ---------------------------------------------------------------------------------------
// Reading the samples

TEST(PcapReaderFiles, EverySampleAgreesWithTshark) {
  GPUFILTER_REQUIRE_TSHARK();
  for (const std::string& name : kCaptures) {
    SCOPED_TRACE(name);
    const std::string path = sample(name);
    auto reader = PcapReader::open_file(path);
    EXPECT_EQ(reader->name(), path);
    EXPECT_FALSE(reader->live());
    EXPECT_EQ(reader->link_type(), 1);  // all Ethernet
    EXPECT_EQ(reader->nanosecond(), name == "http_redirects.pcapng");
    const std::vector<Packet> packets = read_all(*reader);
    const std::vector<std::string> expected = tshark_frames(path);
    ASSERT_EQ(packets.size(), expected.size());
    for (std::size_t i = 0; i < packets.size(); ++i) {
      EXPECT_EQ(packets[i].index, i + 1);
      EXPECT_EQ(describe(packets[i]), expected[i]);
    }
    // Past the end it stays at the end.
    RawPacket raw;
    EXPECT_FALSE(reader->next(raw));
    std::printf("%-24s %4zu packets, lengths and timestamps equal tshark's\n", name.c_str(), packets.size());
  }
}

TEST(PcapReaderFiles, ClassicRecordsMatchTheFileBytes) {
  for (const std::string& name : kCaptures) {
    const std::string bytes = test::read_file(sample(name));
    if (is_pcapng(bytes)) continue;
    SCOPED_TRACE(name);
    const std::vector<Record> records = structure(bytes);
    const std::vector<Packet> packets = read_path(sample(name));
    ASSERT_EQ(packets.size(), records.size());
    for (std::size_t i = 0; i < packets.size(); ++i) {
      EXPECT_EQ(packets[i].data, records[i].data);
      EXPECT_EQ(packets[i].seconds, le32(bytes, records[i].start));
      EXPECT_EQ(packets[i].nanoseconds, le32(bytes, records[i].start + 4) * 1000);  // microsecond files
    }
    EXPECT_EQ(PcapReader::open_file(sample(name))->snaplen(), static_cast<int>(le32(bytes, 16)));
  }
}

TEST(PcapReaderFiles, PcapngKeepsNanoseconds) {
  GPUFILTER_REQUIRE_TSHARK();
  const std::string path = sample("http_redirects.pcapng");
  const std::vector<Packet> packets = read_path(path);
  ASSERT_EQ(packets.size(), 271u);
  // tshark: 1522204661.967378239 for the first frame; sub-microsecond digits are there.
  const std::vector<std::string> expected = tshark_frames(path);
  EXPECT_EQ(expected[0].substr(expected[0].rfind('\t') + 1), "1522204661.967378239");
  EXPECT_EQ(packets[0].seconds, 1522204661);
  EXPECT_EQ(packets[0].nanoseconds, 967378239u);
  std::size_t sub_microsecond = 0;
  for (const Packet& p : packets) sub_microsecond += p.nanoseconds % 1000 != 0;
  EXPECT_GT(sub_microsecond, 200u);
}

// Standard input as a pipe (not seekable), fed by a thread; fd 0 is restored after.
class StdinPipe {
 public:
  explicit StdinPipe(std::string bytes) {
    ::signal(SIGPIPE, SIG_IGN);  // the writer may outlive a reader that stopped early
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    saved_ = ::dup(STDIN_FILENO);
    ::dup2(fds[0], STDIN_FILENO);
    ::close(fds[0]);
    writer_ = std::thread([fd = fds[1], bytes = std::move(bytes)] {
      std::size_t at = 0;
      while (at < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + at, std::min<std::size_t>(bytes.size() - at, 4096));
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::close(fd);
    });
  }
  ~StdinPipe() {
    // Unblock the writer if the reader stopped early, then put standard input back.
    ::dup2(saved_, STDIN_FILENO);
    writer_.join();
    ::close(saved_);
  }

 private:
  int saved_ = -1;
  std::thread writer_;
};

TEST(PcapReaderStdin, PipeReadsLikeTheFile) {
  for (const std::string& name : kCaptures) {
    SCOPED_TRACE(name);
    const std::vector<Packet> from_file = read_path(sample(name));
    StdinPipe pipe(test::read_file(sample(name)));
    auto reader = PcapReader::open_file("-");
    EXPECT_EQ(reader->name(), "(standard input)");
    EXPECT_EQ(reader->nanosecond(), name == "http_redirects.pcapng");
    EXPECT_EQ(read_all(*reader), from_file);
  }
}

TEST(PcapReaderStdin, TruncatedPipeReportsTheRecordStart) {
  // ftell() does not work on a pipe: the reader counts the bytes itself.
  for (const std::string& name : {std::string("smtp.pcap"), std::string("http_redirects.pcapng")}) {
    SCOPED_TRACE(name);
    const std::string bytes = test::read_file(sample(name));
    const std::vector<Record> records = structure(bytes);
    const Record& cut_record = records[records.size() / 2];
    const std::uint64_t cut = cut_record.start + (cut_record.end - cut_record.start) / 2;
    StdinPipe pipe(bytes.substr(0, cut));
    auto reader = PcapReader::open_file("-");
    std::vector<Packet> before;
    try {
      read_all(*reader, &before);
      ADD_FAILURE() << "no error";
    } catch (const PcapError& e) {
      EXPECT_EQ(e.offset(), cut_record.start) << e.what();
      EXPECT_EQ(e.name(), "(standard input)");
    }
    std::size_t complete = 0;
    for (const Record& r : records) complete += r.packet && r.end <= cut;
    EXPECT_EQ(before.size(), complete);
  }
}

// ---------------------------------------------------------------------------------------
// BPF

TEST(PcapReaderBpf, CountsAndFrameNumbersEqualTsharkDisplayFilters) {
  GPUFILTER_REQUIRE_TSHARK();
  // BPF is libpcap's own language; tshark's display filters say the same thing in other
  // words (ICMP errors quoting a TCP header match tcp.port in tshark, not in BPF).
  const std::vector<std::pair<std::string, std::string>> filters = {
      {"tcp port 25", "tcp.port == 25 && !icmp"},
      {"udp", "udp && !icmp && !icmpv6"},
      {"ip6", "ipv6"},
      {"ip and tcp[tcpflags] & tcp-syn != 0", "ip && tcp.flags.syn == 1 && !icmp"},
      {"tcp and greater 1000", "tcp && frame.len >= 1000"},
  };
  std::size_t total = 0;
  for (const std::string& name : kCaptures) {
    for (const auto& [bpf, display] : filters) {
      SCOPED_TRACE(name + ": " + bpf);
      const std::vector<Packet> packets = read_path(sample(name), bpf);
      const std::vector<std::string> expected = tshark_frames(sample(name), display);
      ASSERT_EQ(packets.size(), expected.size());
      for (std::size_t i = 0; i < packets.size(); ++i) EXPECT_EQ(describe(packets[i]), expected[i]);
      total += packets.size();
    }
  }
  EXPECT_EQ(read_path(sample("smtp.pcap"), "tcp port 25").size(), 53u);
  EXPECT_GT(total, 100u);
}

TEST(PcapReaderBpf, FiltersStandardInputToo) {
  GPUFILTER_REQUIRE_TSHARK();
  StdinPipe pipe(test::read_file(sample("smtp.pcap")));
  auto reader = PcapReader::open_file("-", "udp");
  const std::vector<Packet> packets = read_all(*reader);
  ASSERT_EQ(packets.size(), 3u);
  const std::vector<std::string> expected = tshark_frames(sample("smtp.pcap"), "udp && !icmp");
  ASSERT_EQ(expected.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(describe(packets[i]), expected[i]);
}

TEST(PcapReaderBpf, BadExpressionIsAConfigError) {
  for (const std::string bpf : {"tcp port banana", "tcp and and udp", "ether proto \\nonsense", "port 99999"}) {
    try {
      PcapReader::open_file(sample("smtp.pcap"), bpf);
      ADD_FAILURE() << "accepted: " << bpf;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--bpf " + bpf + ": ", 0), 0u) << what;
      EXPECT_GT(what.size(), bpf.size() + 8) << "libpcap's message is missing: " << what;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Errors opening

TEST(PcapReaderErrors, CannotOpen) {
  TempDir dir;
  try {
    PcapReader::open_file(dir.file("missing.pcap"));
    ADD_FAILURE();
  } catch (const SourceError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_EQ(e.name(), dir.file("missing.pcap"));
  }
  try {
    PcapReader::open_file(dir.file(""));
    ADD_FAILURE();
  } catch (const SourceError& e) {
    EXPECT_EQ(e.error_number(), EISDIR);
  }
  // Not a capture: a log file. libpcap's reason is in the message.
  try {
    PcapReader::open_file(test::corpus_path("loghub/OpenSSH_2k.log"));
    ADD_FAILURE();
  } catch (const SourceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("OpenSSH_2k.log: "), std::string::npos) << what;
    EXPECT_NE(what.find("unknown file format"), std::string::npos) << what;
  }
}

TEST(PcapReaderErrors, EmptyFileIsTruncatedAtZero) {
  TempDir dir;
  write_bytes(dir.file("empty.pcap"), "");
  try {
    PcapReader::open_file(dir.file("empty.pcap"));
    ADD_FAILURE();
  } catch (const PcapError& e) {
    EXPECT_EQ(e.offset(), 0u);
    EXPECT_EQ(std::string(e.what()).rfind(dir.file("empty.pcap") + ": truncated capture at byte 0: ", 0), 0u)
        << e.what();
  }
}

// ---------------------------------------------------------------------------------------
// Truncated and corrupt files

// Reads `path`, which must fail: the offset reported and the packets handed out before.
struct Failure {
  bool at_open = false;
  std::uint64_t offset = 0;
  std::string what;
  std::size_t packets = 0;
};

Failure expect_failure(const std::string& path) {
  Failure failure;
  std::unique_ptr<PcapReader> reader;
  try {
    reader = PcapReader::open_file(path);
  } catch (const PcapError& e) {
    failure.at_open = true;
    failure.offset = e.offset();
    failure.what = e.what();
    EXPECT_EQ(e.name(), path);
    return failure;
  }
  std::vector<Packet> before;
  try {
    read_all(*reader, &before);
    ADD_FAILURE() << path << ": no error";
  } catch (const PcapError& e) {
    failure.offset = e.offset();
    failure.what = e.what();
    EXPECT_EQ(e.name(), path);
  }
  failure.packets = before.size();
  return failure;
}

TEST(PcapReaderTruncated, EveryCutReportsTheIncompleteRecord) {
  TempDir dir;
  std::size_t cuts = 0;
  for (const std::string& name : kCaptures) {
    const std::string bytes = test::read_file(sample(name));
    const std::vector<Record> records = structure(bytes);
    const bool pcapng = is_pcapng(bytes);
    const std::string path = dir.file("cut-" + name);
    // Where each cut lands: in the file header (classic) or the first blocks (pcapng: the
    // section header and the interface description are read when the file is opened).
    std::vector<std::uint64_t> positions = {0, 1, 3, 4, 10, 23};
    // Inside records: in their header, at their data's first byte, in the middle, at the
    // last byte; a sample of records for the large files.
    const std::size_t step = records.size() > 60 ? records.size() / 40 : 1;
    for (std::size_t i = 0; i < records.size(); i += step) {
      const Record& r = records[i];
      for (std::uint64_t within : {std::uint64_t{1}, std::uint64_t{8}, std::uint64_t{15}, std::uint64_t{16},
                                   std::uint64_t{17}, (r.end - r.start) / 2, r.end - r.start - 1}) {
        if (within > 0 && within < r.end - r.start) positions.push_back(r.start + within);
      }
    }
    // The last record, and pcapng's trailing name-resolution and statistics blocks.
    for (std::size_t i = records.size() >= 3 ? records.size() - 3 : 0; i < records.size(); ++i) {
      positions.push_back(records[i].start + 1);
      positions.push_back(records[i].end - 1);
    }
    for (std::uint64_t cut : positions) {
      SCOPED_TRACE(name + " cut at " + std::to_string(cut));
      write_bytes(path, bytes.substr(0, cut));
      // The record (or block) the cut falls in, and the packets wholly before it.
      std::uint64_t expected_offset = 0;
      std::size_t expected_packets = 0;
      bool in_header = !pcapng && cut < 24;
      for (const Record& r : records) {
        if (r.end <= cut) {
          expected_packets += r.packet;
          continue;
        }
        expected_offset = r.start;
        break;
      }
      if (in_header) expected_offset = 0;
      // A pcapng file is opened by reading its section header and its first interface
      // description; a cut there fails the opening.
      const bool expect_at_open = in_header || (pcapng && expected_offset <= records[1].start);
      const Failure failure = expect_failure(path);
      EXPECT_EQ(failure.at_open, expect_at_open) << failure.what;
      EXPECT_EQ(failure.offset, expected_offset) << failure.what;
      EXPECT_EQ(failure.packets, expected_packets) << failure.what;
      EXPECT_EQ(failure.what.rfind(path + ": truncated capture at byte " + std::to_string(expected_offset) + ": ", 0),
                0u)
          << failure.what;
      ++cuts;
    }
    // A cut exactly between records is a shorter, valid capture.
    const Record& middle = records[records.size() / 2];
    write_bytes(path, bytes.substr(0, middle.start));
    std::size_t packets_before = 0;
    for (const Record& r : records) packets_before += r.packet && r.end <= middle.start;
    EXPECT_EQ(read_path(path).size(), packets_before) << name;
  }
  std::printf("%zu truncated files, each failing at the record the cut fell in\n", cuts);
  EXPECT_GT(cuts, 500u);
}

TEST(PcapReaderTruncated, MessageIsLibpcapsAfterTheOffset) {
  TempDir dir;
  const std::string bytes = test::read_file(sample("dns.cap"));
  const std::vector<Record> records = structure(bytes);
  // The 5th record's data is 20 bytes short.
  const std::string path = dir.file("short.cap");
  write_bytes(path, bytes.substr(0, records[4].end - 20));
  const Failure failure = expect_failure(path);
  EXPECT_EQ(failure.packets, 4u);
  EXPECT_EQ(failure.offset, records[4].start);
  const std::string caplen = std::to_string(records[4].end - records[4].start - 16);
  EXPECT_EQ(failure.what, path + ": truncated capture at byte " + std::to_string(records[4].start) +
                              ": truncated dump file; tried to read " + caplen + " captured bytes, only got " +
                              std::to_string(std::stoul(caplen) - 20));
}

TEST(PcapReaderCorrupt, HugeRecordLength) {
  TempDir dir;
  for (const std::string& name : {std::string("smtp.pcap"), std::string("telnet-raw.pcap")}) {
    std::string bytes = test::read_file(sample(name));
    const std::vector<Record> records = structure(bytes);
    const Record& bad = records[7];
    for (std::size_t field : {8u, 12u}) {  // caplen, and len with caplen (caplen > len is kept)
      std::string corrupt = bytes;
      for (std::size_t i = 0; i < 4; ++i) corrupt[bad.start + 8 + i] = static_cast<char>(0xf0);
      if (field == 12) {
        for (std::size_t i = 0; i < 4; ++i) corrupt[bad.start + 12 + i] = static_cast<char>(0xf0);
      }
      const std::string path = dir.file("corrupt-" + name);
      write_bytes(path, corrupt);
      const Failure failure = expect_failure(path);
      EXPECT_FALSE(failure.at_open);
      EXPECT_EQ(failure.offset, bad.start) << failure.what;
      EXPECT_EQ(failure.packets, 7u);
      EXPECT_NE(failure.what.find(path + ": "), std::string::npos) << failure.what;
      EXPECT_NE(failure.what.find("invalid packet capture length"), std::string::npos) << failure.what;
    }
  }
}

TEST(PcapReaderCorrupt, PcapngBlockLength) {
  TempDir dir;
  std::string bytes = test::read_file(sample("http_redirects.pcapng"));
  const std::vector<Record> records = structure(bytes);
  std::size_t bad = 0, packets_before = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].packet && packets_before == 100) {
      bad = i;
      break;
    }
    packets_before += records[i].packet;
  }
  // A block length beyond the file: libpcap cannot read it.
  for (std::size_t i = 0; i < 4; ++i) bytes[records[bad].start + 4 + i] = static_cast<char>(i == 3 ? 0x00 : 0x7c);
  const std::string path = dir.file("corrupt.pcapng");
  write_bytes(path, bytes);
  const Failure failure = expect_failure(path);
  EXPECT_EQ(failure.packets, 100u);
  EXPECT_EQ(failure.offset, records[bad].start) << failure.what;
}

// ---------------------------------------------------------------------------------------
// The writer

TEST(PcapWriter, RoundTripThroughTsharkAndTheReader) {
  GPUFILTER_REQUIRE_TSHARK();
  TempDir dir;
  for (const std::string& name : kCaptures) {
    SCOPED_TRACE(name);
    auto reader = PcapReader::open_file(sample(name));
    const std::string out = dir.file("subset-" + name + ".pcap");
    std::vector<Packet> written;
    {
      PcapWriter writer(out, reader->link_type(), reader->snaplen(), reader->nanosecond());
      RawPacket raw;
      while (reader->next(raw)) {
        if (raw.index % 3 == 2) continue;  // a subset: two packets of three
        writer.write(raw);
        written.push_back({raw.index, raw.seconds, raw.nanoseconds, raw.len, Bytes(raw.data.begin(), raw.data.end())});
      }
      writer.flush();
    }
    ASSERT_FALSE(written.empty());
    // The file's precision is the source's: nanosecond magic for the pcapng sample.
    const std::string head = test::read_file(out).substr(0, 4);
    EXPECT_EQ(le32(head, 0), name == "http_redirects.pcapng" ? 0xa1b23c4du : 0xa1b2c3d4u);
    // tshark reads it: same count, lengths and times.
    const std::vector<std::string> tshark = tshark_frames(out);
    ASSERT_EQ(tshark.size(), written.size());
    for (std::size_t i = 0; i < written.size(); ++i) {
      Packet renumbered = written[i];
      renumbered.index = i + 1;
      EXPECT_EQ(tshark[i], describe(renumbered));
    }
    // And the reader: bytes and timestamps, nanoseconds kept.
    const std::vector<Packet> back = read_path(out);
    ASSERT_EQ(back.size(), written.size());
    for (std::size_t i = 0; i < back.size(); ++i) {
      EXPECT_EQ(back[i].data, written[i].data);
      EXPECT_EQ(back[i].seconds, written[i].seconds);
      EXPECT_EQ(back[i].nanoseconds, written[i].nanoseconds);
      EXPECT_EQ(back[i].len, written[i].len);
    }
  }
}

TEST(PcapWriter, ClipsToSnaplenAndWritesStandardOutput) {
  TempDir dir;
  const std::vector<Packet> packets = read_path(sample("http.cap"));
  const std::string captured = dir.file("stdout.pcap");
  {
    // Standard output redirected to a file for the writer's lifetime.
    std::fflush(stdout);
    const int saved = ::dup(STDOUT_FILENO);
    const int fd = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::close(fd);
    {
      PcapWriter writer("-", 1, 100, false);
      for (const Packet& p : packets) {
        RawPacket raw;
        raw.seconds = p.seconds;
        raw.nanoseconds = p.nanoseconds;
        raw.len = p.len;
        raw.caplen = static_cast<std::uint32_t>(p.data.size());
        raw.data = p.data;
        writer.write(raw);
      }
      writer.flush();
    }
    std::fflush(stdout);
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
  }
  const std::vector<Packet> back = read_path(captured);
  ASSERT_EQ(back.size(), packets.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    const std::size_t kept = std::min<std::size_t>(packets[i].data.size(), 100);
    EXPECT_EQ(back[i].data,
              Bytes(packets[i].data.begin(), packets[i].data.begin() + static_cast<std::ptrdiff_t>(kept)));
    EXPECT_EQ(back[i].len, packets[i].len);
  }
  EXPECT_EQ(PcapReader::open_file(captured)->snaplen(), 100);
  // The standard output is still usable after the writer closed its copy.
  EXPECT_NE(::fcntl(STDOUT_FILENO, F_GETFD), -1);
}

TEST(PcapWriter, UnwritablePathIsASourceError) {
  TempDir dir;
  try {
    PcapWriter writer(dir.file("no/such/dir.pcap"), 1, 65535, false);
    ADD_FAILURE();
  } catch (const SourceError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
  }
}

// ---------------------------------------------------------------------------------------
// Live capture

TEST(PcapReaderLive, LoopbackCapturesAUdpDatagram) {
  const int port = 40000 + ::getpid() % 20000;
  std::unique_ptr<PcapReader> reader;
  try {
    reader = PcapReader::open_live("lo", "udp and dst port " + std::to_string(port));
  } catch (const SourceError& e) {
    if (e.error_number() == EPERM) GTEST_SKIP() << e.what();
    throw;
  }
  EXPECT_TRUE(reader->live());
  EXPECT_EQ(reader->name(), "lo");
  EXPECT_TRUE(link_type_supported(reader->link_type())) << link_type_name(reader->link_type());
  const std::string message = "gpufilter live capture test " + std::to_string(::getpid());
  // Sent until seen (the first may go out before the filter is fully in place).
  std::atomic<bool> seen{false};
  std::thread sender([&] {
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 100 && !seen; ++i) {
      ::sendto(fd, message.data(), message.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::close(fd);
  });
  RawPacket raw;
  ASSERT_TRUE(reader->next(raw));
  seen = true;
  sender.join();
  const PacketInfo info = decode_packet(reader->link_type(), raw.data);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kUdp);
  EXPECT_EQ(info.dport, port);
  EXPECT_EQ(address_text(info, false), "127.0.0.1");
  EXPECT_EQ(std::string(raw.data.begin() + static_cast<std::ptrdiff_t>(info.payload_offset),
                        raw.data.begin() + static_cast<std::ptrdiff_t>(info.payload_offset + info.payload_length)),
            message);
  EXPECT_EQ(raw.index, 1u);
  EXPECT_GT(raw.seconds, 1600000000);
  // break_loop from another thread ends a waiting next(), and later ones too.
  std::thread breaker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    reader->break_loop();
  });
  const auto start = std::chrono::steady_clock::now();
  bool more = true;
  while (more) more = reader->next(raw);  // datagrams still in flight are fine
  breaker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(reader->next(raw));
}

TEST(PcapReaderLive, WithoutPrivilegeTheMessageSaysWhatIsNeeded) {
  if (::geteuid() != 0) {
    try {
      PcapReader::open_live("lo");
      GTEST_SKIP() << "this user may capture: nothing to check";
    } catch (const SourceError& e) {
      EXPECT_EQ(e.error_number(), EPERM) << e.what();
      EXPECT_NE(std::string(e.what()).find("CAP_NET_RAW"), std::string::npos) << e.what();
    }
    return;
  }
  // As root: a child gives the privilege up (nobody, no capabilities) and tries.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::string report = "no error";
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      report = "setuid failed";
    } else {
      try {
        PcapReader::open_live("lo");
      } catch (const SourceError& e) {
        report = std::to_string(e.error_number()) + " " + e.what();
      } catch (const std::exception& e) {
        report = std::string("other: ") + e.what();
      }
    }
    [[maybe_unused]] const ssize_t n = ::write(fds[1], report.data(), report.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string report;
  char buffer[1024];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) report.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (report == "setuid failed") GTEST_SKIP() << report;
  EXPECT_EQ(report.rfind(std::to_string(EPERM) + " lo: ", 0), 0u) << report;
  EXPECT_NE(report.find("you need CAP_NET_RAW, or root"), std::string::npos) << report;
}

TEST(PcapReaderLive, MissingInterfaceIsASourceError) {
  try {
    PcapReader::open_live("gpfnosuch0");
    ADD_FAILURE();
  } catch (const SourceError& e) {
    EXPECT_EQ(e.name(), "gpfnosuch0");
    EXPECT_NE(std::string(e.what()).find("gpfnosuch0"), std::string::npos);
    // Without the privilege libpcap may say that first; either way no capture.
    EXPECT_TRUE(e.error_number() == ENODEV || e.error_number() == EPERM) << e.what();
  }
}

}  // namespace
}  // namespace gpufilter
