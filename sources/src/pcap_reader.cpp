// PcapReader over libpcap. Files are opened by us and handed to libpcap as
// a FILE (standard input through a counting stdio cookie), so that a failure can be placed
// at a byte offset: the reader notes where each record starts before asking libpcap for
// it, and a truncated or corrupt record is reported at that start. BPF filters on files
// are run by us (pcap_offline_filter) rather than installed with pcap_setfilter, so every
// record passes through next() and packet indexes stay equal to tshark's frame numbers.
#include "gpufilter/sources/pcap_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gpufilter/core/libpcap.hpp"

namespace gpufilter {

namespace {

// What a reader keeps beside its pcap_t (PcapReader::State is this).
struct ReaderState {
  std::unique_ptr<BpfFilter> filter;  // a file with --bpf: next() runs it
  bool nanosecond = false;  // the source's own precision (timestamps are always scaled to ns)
  bool pcapng = false;
};

// Standard input as a stdio stream that counts the bytes it hands to stdio, so ftell()
// works on a pipe (glibc asks the cookie's seek for the position and subtracts what is
// still buffered). The first bytes may have been read already to see the file's magic.
struct InputCookie {
  int fd = STDIN_FILENO;
  std::uint64_t consumed = 0;
  unsigned char prefix[4] = {};
  std::size_t prefix_size = 0;
  std::size_t prefix_at = 0;
};

ssize_t cookie_read(void* cookie, char* buffer, std::size_t size) {
  auto* in = static_cast<InputCookie*>(cookie);
  if (in->prefix_at < in->prefix_size) {
    const std::size_t n = std::min(size, in->prefix_size - in->prefix_at);
    std::memcpy(buffer, in->prefix + in->prefix_at, n);
    in->prefix_at += n;
    in->consumed += n;
    return static_cast<ssize_t>(n);
  }
  for (;;) {
    const ssize_t n = ::read(in->fd, buffer, size);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) in->consumed += static_cast<std::uint64_t>(n);
    return n;
  }
}

int cookie_seek(void* cookie, off64_t* offset, int whence) {
  if (whence == SEEK_CUR && *offset == 0) {
    *offset = static_cast<off64_t>(static_cast<InputCookie*>(cookie)->consumed);
    return 0;
  }
  errno = ESPIPE;
  return -1;
}

int cookie_close(void* cookie) {
  delete static_cast<InputCookie*>(cookie);  // standard input itself stays open
  return 0;
}

// Reads up to 4 bytes of standard input (fewer at its end) into the cookie's prefix.
void peek_input(InputCookie& in) {
  while (in.prefix_size < sizeof in.prefix) {
    const ssize_t n = ::read(in.fd, in.prefix + in.prefix_size, sizeof in.prefix - in.prefix_size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a read error shows again when libpcap reads
    in.prefix_size += static_cast<std::size_t>(n);
  }
}

// The precision a file was written with, from its magic number: classic pcap says micro-
// or nanoseconds; pcapng may carry anything, so its timestamps are kept in nanoseconds.
void note_magic(const unsigned char* magic, std::size_t size, ReaderState& state) {
  if (size < 4) return;
  const auto is = [&](std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    return magic[0] == a && magic[1] == b && magic[2] == c && magic[3] == d;
  };
  state.pcapng = is(0x0a, 0x0d, 0x0d, 0x0a);
  state.nanosecond = state.pcapng || is(0xa1, 0xb2, 0x3c, 0x4d) || is(0x4d, 0x3c, 0xb2, 0xa1);
}

std::uint32_t load32(const unsigned char* p, bool big_endian) {
  return big_endian ? static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
                          static_cast<std::uint32_t>(p[2]) << 8 | p[3]
                    : static_cast<std::uint32_t>(p[3]) << 24 | static_cast<std::uint32_t>(p[2]) << 16 |
                          static_cast<std::uint32_t>(p[1]) << 8 | p[0];
}

// A place in a pcapng file: a block's start, and whether the block runs past the file's end.
struct BlockProblem {
  std::uint64_t offset = 0;
  bool past_end = false;
};

// In a pcapng file one pcap_next_ex() may read several blocks (name resolution,
// statistics...) before a packet, so where it started is not always where it failed.
// Walks the blocks from `start` and returns the first one that does not fit in the file,
// has an impossible length, or contains `failed` (where libpcap's reading stopped).
BlockProblem pcapng_problem_block(int fd, std::uint64_t start, std::uint64_t failed, bool big_endian) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return {start, false};
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  std::uint64_t at = start;
  for (;;) {
    // Every block has a type, a length and a trailing length: 12 bytes at least, and the
    // section header's byte-order magic lies at +8.
    unsigned char head[12];
    if (at + sizeof head > file_size) return {at, true};
    if (::pread(fd, head, sizeof head, static_cast<off_t>(at)) != static_cast<ssize_t>(sizeof head)) return {at, false};
    if (load32(head, false) == 0x0a0d0d0a) {  // a section header: its own byte order
      const std::uint32_t order = load32(head + 8, false);
      if (order == 0x1a2b3c4d) {
        big_endian = false;
      } else if (order == 0x4d3c2b1a) {
        big_endian = true;
      } else {
        return {at, false};
      }
    }
    const std::uint32_t length = load32(head + 4, big_endian);
    if (at + length > file_size) return {at, true};
    if (length < 12 || length % 4 != 0 || at + length >= failed) return {at, false};
    at += length;
  }
}

// Where a read that began at `start` and failed is to be reported: the start of the
// record or block that could not be read.
BlockProblem problem_offset(FILE* file, std::uint64_t start, bool pcapng, bool swapped) {
  const off_t failed = file != nullptr ? ::ftello(file) : -1;
  if (!pcapng || failed < 0) return {start, false};
  const bool big_endian = swapped != (std::endian::native == std::endian::big);
  return pcapng_problem_block(::fileno(file), start, static_cast<std::uint64_t>(failed), big_endian);
}

std::string geterr(pcap_t* p) {
  const char* text = libpcap().pcap_geterr(p);
  return text != nullptr ? text : "";
}

// Compiles `bpf` for `p`; a rejected expression is the user's setting. An expression
// that can match no packet ("tcp and udp") is valid, as for tcpdump and ngrep: libpcap's
// optimizer refuses it ("expression rejects all packets"), so it is compiled unoptimized,
// and it selects nothing.
void compile(pcap_t* p, const std::string& bpf, bpf_program& program) {
  if (libpcap().pcap_compile(p, &program, bpf.c_str(), 1, PCAP_NETMASK_UNKNOWN) == 0) return;
  const std::string error = geterr(p);
  if (libpcap().pcap_compile(p, &program, bpf.c_str(), 0, PCAP_NETMASK_UNKNOWN) != 0)
    throw ConfigError("--bpf " + bpf + ": " + error);
}

}  // namespace

struct PcapReader::State : ReaderState {};

PcapError::PcapError(std::string name, std::uint64_t offset, const std::string& why)
    : Error(name + (why.find("truncated") != std::string::npos ? ": truncated" : ": bad") + " capture at byte " +
            std::to_string(offset) + ": " + why),
      name_(std::move(name)),
      offset_(offset) {}

std::unique_ptr<PcapReader> PcapReader::open_file(const std::string& path, const std::string& bpf,
                                                  const std::string& stdin_name) {
  auto state = std::make_unique<PcapReader::State>();
  const bool standard_input = path == "-";
  const std::string name = standard_input ? stdin_name : path;
  FILE* file = nullptr;
  if (standard_input) {
    auto* cookie = new InputCookie;
    peek_input(*cookie);
    note_magic(cookie->prefix, cookie->prefix_size, *state);
    file = ::fopencookie(cookie, "r", cookie_io_functions_t{cookie_read, nullptr, cookie_seek, cookie_close});
    if (file == nullptr) {
      const int error = errno;
      delete cookie;
      throw SourceError(name, error);
    }
  } else {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) throw SourceError(name, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
      const int error = S_ISDIR(st.st_mode) ? EISDIR : errno;
      ::close(fd);
      throw SourceError(name, error);
    }
    unsigned char magic[4] = {};
    const ssize_t got = ::pread(fd, magic, sizeof magic, 0);
    note_magic(magic, got > 0 ? static_cast<std::size_t>(got) : 0, *state);
    file = ::fdopen(fd, "rb");
    if (file == nullptr) {
      const int error = errno;
      ::close(fd);
      throw SourceError(name, error);
    }
  }

  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = libpcap().pcap_fopen_offline_with_tstamp_precision(file, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (p == nullptr) {
    // libpcap leaves the stream to us when it fails. A header cut short is a truncated
    // capture; anything else (a text file, an unknown version) is not a capture at all.
    const std::string why = errbuf;
    const bool read_error = std::ferror(file) != 0;
    const int error = errno;
    const BlockProblem problem = problem_offset(file, 0, state->pcapng, false);
    std::fclose(file);
    if (why.find("truncated") != std::string::npos) throw PcapError(name, problem.offset, why);
    // libpcap calls a pcapng file cut inside its section header's first 12 bytes an
    // unknown format; the magic number said pcapng, and the block runs past the end.
    if (state->pcapng && problem.past_end) {
      throw PcapError(name, problem.offset, "truncated pcapng section header (libpcap: " + why + ")");
    }
    throw SourceError(name, read_error && error != 0 ? error : EINVAL, name + ": " + why);
  }
  std::unique_ptr<PcapReader> reader(new PcapReader());
  reader->pcap_ = p;
  reader->name_ = name;
  if (!bpf.empty()) state->filter = std::make_unique<BpfFilter>(libpcap().pcap_datalink(p), libpcap().pcap_snapshot(p), bpf);
  reader->state_ = std::move(state);
  return reader;
}

std::unique_ptr<PcapReader> PcapReader::open_live(const std::string& interface, const std::string& bpf, int snaplen) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = libpcap().pcap_create(interface.c_str(), errbuf);
  if (p == nullptr) throw SourceError(interface, ENODEV, interface + ": " + errbuf);
  std::unique_ptr<PcapReader> reader(new PcapReader());
  reader->pcap_ = p;
  reader->name_ = interface;
  reader->live_ = true;
  libpcap().pcap_set_snaplen(p, snaplen > 0 ? snaplen : 262144);
  libpcap().pcap_set_promisc(p, 0);
  // Immediate mode hands each packet on as it comes; the timeout only bounds how long a
  // read waits, so that break_loop() is seen even when nothing arrives.
  libpcap().pcap_set_immediate_mode(p, 1);
  libpcap().pcap_set_timeout(p, 100);
  libpcap().pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO);  // where the platform can; else micro
  const int status = libpcap().pcap_activate(p);
  if (status < 0) {
    std::string why = geterr(p);
    if (why.empty()) why = libpcap().pcap_statustostr(status);
    switch (status) {
      case PCAP_ERROR_PERM_DENIED:
      case PCAP_ERROR_PROMISC_PERM_DENIED:
        throw SourceError(interface, EPERM,
                              interface + ": cannot capture (" + why + "): you need CAP_NET_RAW, or root");
      case PCAP_ERROR_NO_SUCH_DEVICE:
        throw SourceError(interface, ENODEV, interface + ": no such interface (" + why + ")");
      case PCAP_ERROR_IFACE_NOT_UP:
        throw SourceError(interface, ENETDOWN, interface + ": " + why);
      default:
        throw SourceError(interface, EIO, interface + ": " + why);
    }
  }
  auto state = std::make_unique<PcapReader::State>();
  state->nanosecond = libpcap().pcap_get_tstamp_precision(p) == PCAP_TSTAMP_PRECISION_NANO;
  if (!bpf.empty()) {
    // Live: the kernel runs the filter, so unwanted packets are never copied to us.
    bpf_program program{};
    compile(p, bpf, program);
    const int set = libpcap().pcap_setfilter(p, &program);
    libpcap().pcap_freecode(&program);
    if (set != 0) throw ConfigError("--bpf " + bpf + ": " + geterr(p));
  }
  reader->state_ = std::move(state);
  return reader;
}

PcapReader::PcapReader() = default;

PcapReader::~PcapReader() {
  state_.reset();
  if (pcap_ != nullptr) libpcap().pcap_close(static_cast<pcap_t*>(pcap_));
}

int PcapReader::link_type() const noexcept { return libpcap().pcap_datalink(static_cast<pcap_t*>(pcap_)); }

int PcapReader::snaplen() const noexcept { return libpcap().pcap_snapshot(static_cast<pcap_t*>(pcap_)); }

bool PcapReader::nanosecond() const noexcept {
  const ReaderState* state = state_.get();
  return state != nullptr && state->nanosecond;
}

bool PcapReader::next(RawPacket& packet) {
  for (;;) {
    const Read r = read(packet);
    if (r != Read::kIdle) return r == Read::kPacket;
  }
}

PcapReader::Read PcapReader::read(RawPacket& packet) {
  auto* p = static_cast<pcap_t*>(pcap_);
  ReaderState* const state = state_.get();
  FILE* const file = live_ ? nullptr : libpcap().pcap_file(p);
  const bool nano = libpcap().pcap_get_tstamp_precision(p) == PCAP_TSTAMP_PRECISION_NANO;
  for (;;) {
    // Where the next record starts (reading a file, one record per pcap_next_ex call
    // since no filter is installed in libpcap): the offset a failure is reported at.
    const off_t start = file != nullptr ? ::ftello(file) : -1;
    note_record_end(start);
    pcap_pkthdr* header = nullptr;
    const u_char* data = nullptr;
    const int status = libpcap().pcap_next_ex(p, &header, &data);
    if (status == 1) {
      ++index_;
      packet.index = index_;
      // The file's field is 32 bits, which libpcap reads signed: read unsigned, as the
      // mapped reader does (PcapPieces), so both agree on a malformed one.
      packet.set_time(static_cast<std::int64_t>(header->ts.tv_sec), static_cast<std::uint32_t>(header->ts.tv_usec), nano);
      packet.caplen = header->caplen;
      packet.len = header->len;
      packet.data = std::span<const std::uint8_t>(data, header->caplen);
      // A classic record is its 16-byte header and its bytes: where the next one starts
      // says whether libpcap read more (a record over the snaplen, cut to it).
      if (start >= 0 && state != nullptr && !state->pcapng) record_end_ = start + 16 + static_cast<off_t>(header->caplen);
      if (state != nullptr && state->filter && !state->filter->passes(packet)) continue;
      return Read::kPacket;
    }
    if (status == 0) return Read::kIdle;  // a live read timed out
    if (status == PCAP_ERROR_BREAK) {
      // The end of a file, or break_loop() on a live capture; libpcap clears the break
      // request as it reports it, so it is made again to keep later calls returning false.
      if (live_) libpcap().pcap_breakloop(p);
      if (file != nullptr) note_record_end(::ftello(file));
      return Read::kEnd;
    }
    if (live_) throw SourceError(name_, EIO, name_ + ": " + geterr(p));
    // ftell works on files and (through the cookie) on standard input; -1 would mean a
    // stream that cannot say where it is, reported at 0 rather than at a made-up place.
    const auto at = static_cast<std::uint64_t>(std::max<off_t>(start, 0));
    throw PcapError(name_, problem_offset(file, at, state != nullptr && state->pcapng, libpcap().pcap_is_swapped(p) == 1).offset,
                    geterr(p));
  }
}

bool PcapReader::resume_at(std::uint64_t offset, std::uint64_t index) {
  FILE* const file = live_ ? nullptr : libpcap().pcap_file(static_cast<pcap_t*>(pcap_));
  if (file == nullptr || ::fseeko(file, static_cast<off_t>(offset), SEEK_SET) != 0) return false;
  index_ = index - 1;
  record_end_ = -1;
  return true;
}

void PcapReader::note_record_end(off_t next) noexcept {
  if (record_end_ >= 0 && next > record_end_) ++cut_to_snaplen_;
  record_end_ = -1;
}

const BpfFilter* PcapReader::filter() const noexcept { return state_ ? state_->filter.get() : nullptr; }

struct BpfFilter::Program {
  pcap_t* dead = nullptr;
  bpf_program code{};
  ~Program() {
    libpcap().pcap_freecode(&code);
    if (dead != nullptr) libpcap().pcap_close(dead);
  }
};

// Compiled for a handle of the capture's link type and snaplen, as for the capture's own.
BpfFilter::BpfFilter(int link_type, int snaplen, const std::string& expression)
    : program_(std::make_unique<Program>()) {
  program_->dead = libpcap().pcap_open_dead(link_type, snaplen);
  if (program_->dead == nullptr) throw ConfigError("--bpf " + expression + ": libpcap is out of memory");
  compile(program_->dead, expression, program_->code);
}

BpfFilter::~BpfFilter() = default;

bool BpfFilter::passes(const RawPacket& raw) const noexcept {
  pcap_pkthdr h{};
  h.caplen = raw.caplen;
  h.len = raw.len;
  return libpcap().pcap_offline_filter(&program_->code, &h, raw.data.data()) != 0;
}

void PcapReader::break_loop() noexcept {
  if (pcap_ != nullptr) libpcap().pcap_breakloop(static_cast<pcap_t*>(pcap_));
}

}  // namespace gpufilter
