// Chunker: line-aligned chunks, split over-long lines with overlap, binary-mode offsets
// and the idle/deadline behaviour on inputs that stall.
#include <gtest/gtest.h>

#include <thread>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/scan/chunker.hpp"
#include "gpufilter/core/source.hpp"
#include "testutil/testutil.hpp"

namespace {

// A batch timeout no test run reaches: chunk boundaries then depend on the reads alone.
constexpr std::chrono::milliseconds kNever = std::chrono::hours(1);

using gpufilter::Chunk;
using gpufilter::Chunker;
using gpufilter::ChunkerConfig;
using gpufilter::kNoBinary;
using gpufilter::Source;
using gpufilter::test::StringSource;

constexpr std::size_t kGuard = 64;           // bytes after capacity() that fill() must not touch
constexpr unsigned char kGuardByte = 0xA5;

struct Recorded {
  Chunk chunk;        // data points into the fill buffer; do not dereference later
  std::string bytes;  // copy of data[0, size)
};

struct DriveResult {
  std::vector<Recorded> chunks;
  std::string error;  // empty when fill() behaved (no idle, no overrun, terminated)
};

// Fills chunks until kEnd, each into a buffer of exactly capacity() bytes followed by a
// guard area, which is scribbled over before every call.
DriveResult drive(Chunker& chunker, std::size_t input_size) {
  DriveResult r;
  const std::size_t cap = chunker.capacity();
  std::vector<char> buffer(cap + kGuard);
  const std::size_t limit = 2 * input_size + 16;  // every chunk owns at least one byte
  for (;;) {
    std::memset(buffer.data(), static_cast<char>(kGuardByte), buffer.size());
    Chunk c;
    const Chunker::Status s = chunker.fill(buffer.data(), c, std::chrono::milliseconds(-1));
    for (std::size_t i = cap; i < buffer.size(); ++i) {
      if (static_cast<unsigned char>(buffer[i]) != kGuardByte) {
        r.error = "fill() wrote past capacity() at byte " + std::to_string(i);
        return r;
      }
    }
    if (s == Chunker::Status::kEnd) break;
    if (s == Chunker::Status::kIdle) {
      r.error = "kIdle from a source that never stalls";
      return r;
    }
    if (c.data != buffer.data()) {
      r.error = "chunk.data is not the buffer given to fill()";
      return r;
    }
    if (c.size > cap) {
      r.error = "chunk size " + std::to_string(c.size) + " exceeds capacity " + std::to_string(cap);
      return r;
    }
    r.chunks.push_back({c, std::string(buffer.data(), c.size)});
    if (r.chunks.size() > limit) {
      r.error = "no kEnd after " + std::to_string(limit) + " chunks";
      return r;
    }
  }
  // kEnd is sticky.
  Chunk c;
  std::vector<char> again(cap);
  if (chunker.fill(again.data(), c, std::chrono::milliseconds(-1)) != Chunker::Status::kEnd)
    r.error = "fill() after kEnd did not return kEnd";
  if (chunker.bytes_read() != input_size)
    r.error = "bytes_read() " + std::to_string(chunker.bytes_read()) + " != input size " + std::to_string(input_size);
  return r;
}

// The structural invariants every sequence of chunks must satisfy; returns the first
// violation, or "" when none. With `first_capacity` (ChunkerConfig's), the first chunks
// are smaller: each holds at most its own capacity, a split line fills exactly that, and
// each is flushed after.
std::string check_chunks(const std::string& input, const std::vector<Recorded>& chunks, std::size_t capacity,
                         std::size_t config_overlap, bool may_flush = false, std::size_t first_capacity = 0) {
  std::string owned;
  std::uint64_t consumed = 0;
  std::size_t ramp = first_capacity == 0 ? capacity : std::min(capacity, std::max(first_capacity, 4 * (config_overlap + 1)));
  for (std::size_t i = 0; i < chunks.size(); ++i, ramp = capacity / 4 < ramp ? capacity : 4 * ramp) {
    const Chunk& c = chunks[i].chunk;
    const std::string& b = chunks[i].bytes;
    const Chunk* prev = i > 0 ? &chunks[i - 1].chunk : nullptr;
    const std::string at = "chunk " + std::to_string(i) + ": ";
    if (c.seq != i) return at + "seq " + std::to_string(c.seq);
    const bool continues = prev != nullptr && prev->line_open;
    if (c.continues_line != continues) return at + "continues_line " + std::to_string(c.continues_line);
    const std::size_t want_overlap = continues ? std::min(config_overlap, chunks[i - 1].bytes.size()) : 0;
    if (c.overlap != want_overlap)
      return at + "overlap " + std::to_string(c.overlap) + ", expected " + std::to_string(want_overlap);
    if (c.size <= c.overlap) return at + "owns no bytes (size " + std::to_string(c.size) + ")";
    if (c.offset + c.overlap != consumed)
      return at + "offset " + std::to_string(c.offset) + " + overlap != bytes owned so far " + std::to_string(consumed);
    if (c.offset + c.size > input.size()) return at + "extends past the input";
    if (b != input.substr(static_cast<std::size_t>(c.offset), c.size))
      return at + "bytes differ from input at offset " + std::to_string(c.offset);
    if (continues) {
      const std::string& pb = chunks[i - 1].bytes;
      if (b.compare(0, c.overlap, pb, pb.size() - c.overlap, c.overlap) != 0)
        return at + "overlap bytes differ from the previous chunk's last bytes";
    } else if (c.offset != 0 && input[static_cast<std::size_t>(c.offset) - 1] != '\n') {
      return at + "does not continue a line but does not start at a line start";
    }
    if (c.size > ramp) return at + "holds " + std::to_string(c.size) + " bytes, more than its " + std::to_string(ramp);
    if (c.line_open) {
      if (c.last) return at + "both line_open and last";
      if (c.size != ramp) return at + "line_open but not full";
      if (b.find('\n', c.overlap) != std::string::npos) return at + "line_open but holds a '\\n' past its overlap";
    } else if (!c.last && b.back() != '\n') {
      return at + "neither line_open nor last, and does not end with '\\n'";
    }
    if (c.last && i + 1 != chunks.size()) return at + "last but more chunks follow";
    if (c.flush_after != (ramp < capacity) && !may_flush) {
      return at + (c.flush_after ? "flush_after on a source that never stalls" : "one of the first chunks, not flushed after");
    }
    owned.append(b, c.overlap, std::string::npos);
    consumed += c.size - c.overlap;
  }
  if (owned != input) return "owned bytes of all chunks do not reproduce the input";
  if (!chunks.empty()) {
    const Recorded& f = chunks.back();
    if (!f.chunk.last && !f.chunk.line_open && f.bytes.back() != '\n')
      return "the final chunk ends mid-line without last or line_open";
  }
  return {};
}

std::string random_text(std::uint32_t seed, std::size_t size, double newline_rate, double nul_rate = 0.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::string s(size, ' ');
  for (char& c : s) {
    const double x = u(rng);
    if (x < newline_rate) c = '\n';
    else if (x < newline_rate + nul_rate) c = '\0';
    else c = static_cast<char>(letter(rng));
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> sweep_inputs() {
  using namespace std::string_literals;
  std::vector<std::pair<std::string, std::string>> v = {
      {"empty", ""},
      {"newline", "\n"},
      {"a", "a"},
      {"a-newline", "a\n"},
      {"blank-lines", "\n\n\n"},
      {"no-final-newline", "one\ntwo\nthree"},
      {"crlf", "one\r\ntwo\r\n\r\nthree\r\n"},
      {"crlf-no-final", "alpha\r\nbeta\r\ngamma"},
      {"nul-bytes", "a\0b\n\0\n\0"s},
      {"long-lines", std::string(37, 'x') + "\n" + std::string(5000, 'y') + "\nz\n" + std::string(4100, 'w')},
      {"random", random_text(7, 3000, 0.10)},
      {"random-nul", random_text(8, 2000, 0.10, 0.02)},
      {"random-sparse-lines", random_text(9, 2500, 0.005)},
  };
  return v;
}

TEST(Chunker, CapacityIsRaisedAboveOverlap) {
  StringSource src("abc");
  Chunker a(src, ChunkerConfig{.capacity = 2, .overlap = 7});
  EXPECT_EQ(a.capacity(), 8u);
  Chunker b(src, ChunkerConfig{.capacity = 100, .overlap = 7});
  EXPECT_EQ(b.capacity(), 100u);
  Chunker c(src, ChunkerConfig{.capacity = 5, .overlap = 0});
  EXPECT_EQ(c.capacity(), 5u);
}

TEST(Chunker, InvariantsOverSweep) {
  std::vector<std::size_t> capacities;
#if defined(GPUFILTER_SANITIZED)
  // Every capacity a line straddles in one way or another, not each of 1-12: the release
  // build sweeps them all, the sanitizers (3-4 times slower) a sample.
  for (std::size_t c : {1u, 2u, 3u, 5u, 8u, 12u}) capacities.push_back(c);
#else
  for (std::size_t c = 1; c <= 12; ++c) capacities.push_back(c);
#endif
  for (std::size_t c : {16u, 31u, 64u, 4096u}) capacities.push_back(c);
  const std::size_t overlaps[] = {0, 1, 3, 7};
  const std::size_t read_sizes[] = {1, 2, 3, 7, 0};
  const auto inputs = sweep_inputs();
  std::size_t runs = 0, chunks_seen = 0, open_seen = 0;
  for (const auto& [name, input] : inputs) {
    for (std::size_t cap : capacities) {
      for (std::size_t ov : overlaps) {
        for (std::size_t rs : read_sizes) {
          for (bool regular : {true, false}) {
            for (bool detect : {true, false}) {
              for (std::size_t first : {std::size_t{0}, std::size_t{1}}) {
                if (first != 0 && cap < 16) continue;  // no room to grow
                StringSource src(input, rs, "(test)", regular);
                Chunker chunker(src, ChunkerConfig{.capacity = cap, .overlap = ov, .first_capacity = first,
                                                   .detect_binary = detect, .batch_timeout = kNever});
                const DriveResult r = drive(chunker, input.size());
                std::string error = r.error;
                if (error.empty()) error = check_chunks(input, r.chunks, chunker.capacity(), ov, false, first);
                if (error.empty() && !detect) {
                  for (const Recorded& c : r.chunks)
                    if (c.chunk.binary_offset != kNoBinary) error = "binary_offset set with detect_binary=false";
                }
                if (error.empty() && input.find('\0') == std::string::npos) {
                  for (const Recorded& c : r.chunks)
                    if (c.chunk.binary_offset != kNoBinary) error = "binary_offset set on input without NUL";
                }
                ASSERT_EQ(error, "") << "input=" << name << " capacity=" << cap << " overlap=" << ov
                                     << " read_size=" << rs << " regular=" << regular << " detect=" << detect
                                     << " first_capacity=" << first;
                ++runs;
                chunks_seen += r.chunks.size();
                for (const Recorded& c : r.chunks) open_seen += c.chunk.line_open ? 1 : 0;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 0u);
  EXPECT_GT(open_seen, 0u);  // the split-line path ran
  EXPECT_GT(chunks_seen, runs);
}

TEST(Chunker, EmptyInputGivesNoChunk) {
  StringSource src("");
  Chunker chunker(src, ChunkerConfig{.capacity = 16});
  std::vector<char> buffer(chunker.capacity());
  Chunk c;
  EXPECT_EQ(chunker.fill(buffer.data(), c, std::chrono::milliseconds(-1)), Chunker::Status::kEnd);
}

TEST(Chunker, InputWithoutFinalNewlineEndsWithLastChunk) {
  StringSource src("abc\ndef", 0, "(test)", false);
  Chunker chunker(src, ChunkerConfig{.capacity = 64});
  const DriveResult r = drive(chunker, 7);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(check_chunks("abc\ndef", r.chunks, chunker.capacity(), 0), "");
  ASSERT_FALSE(r.chunks.empty());
  EXPECT_TRUE(r.chunks.back().chunk.last);
  EXPECT_EQ(r.chunks.back().bytes.back(), 'f');
}

// --- Binary-file offsets -------------------------------------------------------------

struct BinaryCase {
  std::string name;
  std::string input;
  std::optional<std::size_t> first_nul;
};

std::vector<BinaryCase> binary_cases() {
  constexpr std::size_t kBlock = Chunker::kBinaryBlock;
  constexpr std::size_t kSize = 300 * 1000;
  const std::string base = random_text(42, kSize, 0.02);
  auto with_nuls = [&](std::string name, std::vector<std::size_t> at, std::string text) {
    for (std::size_t z : at) text[z] = '\0';
    std::optional<std::size_t> first;
    if (!at.empty()) first = *std::min_element(at.begin(), at.end());
    return BinaryCase{std::move(name), std::move(text), first};
  };
  std::string long_line = base;  // one line from 90,000 to 110,000 across the block start
  std::fill(long_line.begin() + 90000, long_line.begin() + 110000, 'q');
  long_line[89999] = '\n';
  std::vector<BinaryCase> v;
  v.push_back(with_nuls("none", {}, base));
  v.push_back(with_nuls("at-0", {0}, base));
  v.push_back(with_nuls("block-end", {kBlock - 1, 250000}, base));
  v.push_back(with_nuls("block-start", {kBlock}, base));
  v.push_back(with_nuls("after-block-start", {kBlock + 1, 2 * kBlock + 5}, base));
  v.push_back(with_nuls("several", {250000, 200000, 2 * kBlock + 17}, base));
  v.push_back(with_nuls("last-byte", {kSize - 1}, base));
  v.push_back(with_nuls("in-long-line", {100000}, long_line));
  return v;
}

TEST(Chunker, BinaryOffsetRule) {
  constexpr std::uint64_t kBlock = Chunker::kBinaryBlock;
  const std::size_t capacities[] = {64, 4096, 1000, 1 << 20};
  const std::size_t overlaps[] = {0, 5};
  const std::size_t read_sizes[] = {0, 4093, 7};
  std::size_t binary_chunks = 0;
  for (const BinaryCase& bc : binary_cases()) {
    for (std::size_t cap : capacities) {
      for (std::size_t ov : overlaps) {
        for (std::size_t rs : read_sizes) {
          if (rs == 7 && cap != 4096) continue;  // tiny reads are slow: one configuration suffices
          for (bool regular : {true, false}) {
            for (bool detect : {true, false}) {
              // The first chunks small (ChunkerConfig::first_capacity), where there is room.
              for (std::size_t first : {std::size_t{0}, cap / 64}) {
                StringSource src(bc.input, rs, "(test)", regular);
                Chunker chunker(src, ChunkerConfig{.capacity = cap, .overlap = ov, .first_capacity = first,
                                                   .detect_binary = detect, .batch_timeout = kNever});
                const DriveResult r = drive(chunker, bc.input.size());
                std::string error = r.error;
                if (error.empty()) error = check_chunks(bc.input, r.chunks, chunker.capacity(), ov, false, first);
                // grep's buffer that held the first NUL: for a regular file the 96 KiB block;
                // for a stream, the read that returned it (the chunker reads a stream a
                // block at a time, and StringSource hands out at most `rs` bytes a read).
                const std::uint64_t unit = regular || rs == 0 ? kBlock : std::min<std::uint64_t>(rs, kBlock);
                const std::uint64_t block = bc.first_nul ? *bc.first_nul / unit * unit : kNoBinary;
                bool seen = false;
                for (std::size_t i = 0; i < r.chunks.size() && error.empty(); ++i) {
                  const Chunk& c = r.chunks[i].chunk;
                  const std::string at = "chunk " + std::to_string(i) + " [" + std::to_string(c.offset) + ", " +
                                         std::to_string(c.offset + c.size) + "): binary_offset " +
                                         (c.binary_offset == kNoBinary ? std::string("none")
                                                                       : std::to_string(c.binary_offset));
                  if (!detect || !bc.first_nul) {
                    if (c.binary_offset != kNoBinary) error = at + ", expected none";
                    continue;
                  }
                  if (c.binary_offset != kNoBinary && c.binary_offset != block)
                    error = at + ", expected none or " + std::to_string(block);
                  if (seen && c.binary_offset == kNoBinary) error = at + ": unset again after being set";
                  seen = seen || c.binary_offset != kNoBinary;
                  // Set from the chunk that reaches that buffer's start on: a regular file is
                  // read ahead to the block's end, a stream's read is checked whole before any
                  // chunk is cut from it.
                  const std::uint64_t from = block;
                  if (c.offset + c.size > from && c.binary_offset != block)
                    error = at + ", expected " + std::to_string(block);
                  if (c.binary_offset != kNoBinary) ++binary_chunks;
                }
                ASSERT_EQ(error, "") << "case=" << bc.name << " capacity=" << cap << " overlap=" << ov
                                     << " read_size=" << rs << " regular=" << regular << " detect=" << detect
                                     << " first_capacity=" << first;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(binary_chunks, 0u);
}

// --- Stalling inputs: kIdle and the batch deadline --------------------------------------

// A non-regular Source that serves scripted pieces; a kStall step makes the next
// wait_readable() return false once (the input went quiet), as a pipe with no writer
// activity would. read() never crosses a stall.
class ScriptedSource final : public Source {
 public:
  static constexpr const char* kStall = "\x01STALL";
  explicit ScriptedSource(std::vector<std::string> steps) : steps_(std::move(steps)) {}

  bool wait_readable(std::chrono::milliseconds timeout) override {
    waits_.push_back(timeout);
    skip_empty();
    if (step_ < steps_.size() && steps_[step_] == kStall) {
      ++step_;
      readable_ = false;
      return false;
    }
    readable_ = true;
    return true;
  }

  std::size_t read(std::span<char> dst) override {
    if (!readable_) ++blocking_reads_;  // a real source would block here
    skip_empty();
    while (step_ < steps_.size() && steps_[step_] == kStall) ++step_;  // (only after a blocking read)
    skip_empty();
    if (step_ >= steps_.size()) return 0;
    const std::string& s = steps_[step_];
    const std::size_t n = std::min(dst.size(), s.size() - pos_);
    std::memcpy(dst.data(), s.data() + pos_, n);
    pos_ += n;
    return n;
  }

  bool is_regular_file() const override { return false; }
  const std::string& name() const override { return name_; }
  std::size_t blocking_reads() const { return blocking_reads_; }
  const std::vector<std::chrono::milliseconds>& waits() const { return waits_; }

 private:
  void skip_empty() {
    while (step_ < steps_.size() && steps_[step_] != kStall && pos_ == steps_[step_].size()) {
      ++step_;
      pos_ = 0;
    }
  }

  std::vector<std::string> steps_;
  std::size_t step_ = 0;
  std::size_t pos_ = 0;
  bool readable_ = false;
  std::size_t blocking_reads_ = 0;
  std::vector<std::chrono::milliseconds> waits_;
  std::string name_ = "(scripted)";
};

struct Event {
  Chunker::Status status;
  Recorded chunk;
};

std::vector<Event> drive_scripted(ScriptedSource& src, ChunkerConfig config, std::size_t max_calls = 64) {
  Chunker chunker(src, config);
  std::vector<char> buffer(chunker.capacity());
  std::vector<Event> events;
  for (std::size_t i = 0; i < max_calls; ++i) {
    Chunk c;
    const Chunker::Status s = chunker.fill(buffer.data(), c, std::chrono::milliseconds(0));
    events.push_back({s, {c, s == Chunker::Status::kChunk ? std::string(buffer.data(), c.size) : std::string()}});
    if (s == Chunker::Status::kEnd) break;
  }
  return events;
}

std::string describe(const std::vector<Event>& events) {
  std::string s;
  for (const Event& e : events) {
    switch (e.status) {
      case Chunker::Status::kIdle: s += "idle\n"; break;
      case Chunker::Status::kEnd: s += "end\n"; break;
      case Chunker::Status::kChunk:
        s += "chunk '" + e.chunk.bytes + "'" + (e.chunk.chunk.flush_after ? " flush" : "") +
             (e.chunk.chunk.last ? " last" : "") + (e.chunk.chunk.line_open ? " open" : "") + "\n";
        break;
    }
  }
  return s;
}

std::vector<Recorded> chunks_of(const std::vector<Event>& events) {
  std::vector<Recorded> v;
  for (const Event& e : events)
    if (e.status == Chunker::Status::kChunk) v.push_back(e.chunk);
  return v;
}

TEST(Chunker, PartialLineWaitsAsIdle) {
  const std::string S = ScriptedSource::kStall;
  ScriptedSource src({"abc", S, "def", S, "ghi\njk", S, "l\n"});
  const auto events = drive_scripted(src, ChunkerConfig{.capacity = 64});
  SCOPED_TRACE(describe(events));
  // No complete line until "ghi\n": two kIdle, then the cut after "ghi\n" when the input
  // stalls (flush), and the rest at the end.
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events[0].status, Chunker::Status::kIdle);
  EXPECT_EQ(events[1].status, Chunker::Status::kIdle);
  ASSERT_EQ(events[2].status, Chunker::Status::kChunk);
  EXPECT_EQ(events[2].chunk.bytes, "abcdefghi\n");
  EXPECT_TRUE(events[2].chunk.chunk.flush_after);
  EXPECT_FALSE(events[2].chunk.chunk.last);
  const std::string input = "abcdefghi\njkl\n";
  EXPECT_EQ(check_chunks(input, chunks_of(events), 64, 0, true), "");
  EXPECT_EQ(events.back().status, Chunker::Status::kEnd);
  EXPECT_EQ(src.blocking_reads(), 0u);
}

TEST(Chunker, CompleteLineBeforeStallIsCutWithFlush) {
  const std::string S = ScriptedSource::kStall;
  ScriptedSource src({"line1\n", S, "line2\npart", S, "ial\n"});
  const auto events = drive_scripted(src, ChunkerConfig{.capacity = 64, .batch_timeout = std::chrono::milliseconds(5)});
  SCOPED_TRACE(describe(events));
  const auto chunks = chunks_of(events);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].bytes, "line1\n");
  EXPECT_TRUE(chunks[0].chunk.flush_after);
  EXPECT_EQ(chunks[1].bytes, "line2\n");
  EXPECT_TRUE(chunks[1].chunk.flush_after);
  EXPECT_EQ(chunks[2].bytes, "partial\n");
  EXPECT_FALSE(chunks[2].chunk.flush_after);
  for (const Event& e : events) EXPECT_NE(e.status, Chunker::Status::kIdle);
  EXPECT_EQ(check_chunks("line1\nline2\npartial\n", chunks, 64, 0, true), "");
  EXPECT_EQ(src.blocking_reads(), 0u);
  // While a complete line waited, the wait never exceeded the batch timeout.
  for (auto w : src.waits()) EXPECT_LE(w.count(), 5);
}

TEST(Chunker, StallsAtEveryByteLoseNothing) {
  const std::string input = "ab\ncd\n\nlong line here\nx\r\nno newline";
  for (std::size_t cap : {1u, 2u, 3u, 5u, 8u, 64u}) {
    for (std::size_t ov : {0u, 2u}) {
      std::vector<std::string> steps;
      for (char ch : input) {
        steps.emplace_back(1, ch);
        steps.emplace_back(ScriptedSource::kStall);
      }
      ScriptedSource src(steps);
      const auto events = drive_scripted(src, ChunkerConfig{.capacity = cap, .overlap = ov}, 4 * input.size() + 16);
      ASSERT_FALSE(events.empty());
      ASSERT_EQ(events.back().status, Chunker::Status::kEnd) << "cap=" << cap << " overlap=" << ov;
      EXPECT_EQ(check_chunks(input, chunks_of(events), std::max(cap, ov + 1), ov, true), "")
          << "cap=" << cap << " overlap=" << ov << "\n" << describe(events);
      EXPECT_EQ(src.blocking_reads(), 0u);
    }
  }
}

}  // namespace

namespace {

// Always readable, a few bytes a read, a millisecond a read: a stream that never goes
// quiet but trickles, like a log written line by line.
class TrickleSource final : public gpufilter::Source {
 public:
  explicit TrickleSource(std::string data) : data_(std::move(data)) {}
  std::size_t read(std::span<char> dst) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::size_t n = std::min<std::size_t>({dst.size(), 4, data_.size() - pos_});
    std::memcpy(dst.data(), data_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  bool is_regular_file() const override { return false; }
  const std::string& name() const override { return name_; }

 private:
  std::string data_;
  std::size_t pos_ = 0;
  std::string name_ = "(trickle)";
};

// A line on a stream that never stalls still waits at most about the batch timeout: the
// chunk is cut then, and flushed, long before it is full.
TEST(Chunker, BusyTrickleIsCutAtTheBatchTimeout) {
  std::string input;
  for (int i = 0; i < 200; ++i) input += "line " + std::to_string(i) + "\n";
  TrickleSource src(input);
  Chunker chunker(src, ChunkerConfig{.capacity = 1 << 16, .batch_timeout = std::chrono::milliseconds(20)});
  std::vector<char> buffer(chunker.capacity());
  Chunk c;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(chunker.fill(buffer.data(), c, std::chrono::milliseconds(-1)), Chunker::Status::kChunk);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(c.flush_after);
  EXPECT_LT(c.size, input.size());
  EXPECT_EQ(std::string(buffer.data(), c.size), input.substr(0, c.size));
  EXPECT_EQ(buffer[c.size - 1], '\n');
  EXPECT_LT(took, std::chrono::milliseconds(2000));
}

}  // namespace

namespace {

// Hands out `data` in reads of at most `step` bytes, then fails (a corrupt compressed
// stream, an I/O error) instead of ending.
class FailingSource final : public Source {
 public:
  FailingSource(std::string data, std::size_t step, bool regular) : data_(std::move(data)), step_(step), regular_(regular) {}
  std::size_t read(std::span<char> dst) override {
    if (pos_ == data_.size()) throw gpufilter::SourceError(name_, EIO, name_ + ": corrupt test data at byte 7");
    const std::size_t n = std::min({dst.size(), step_, data_.size() - pos_});
    std::memcpy(dst.data(), data_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  bool is_regular_file() const override { return regular_; }
  const std::string& name() const override { return name_; }

 private:
  std::string data_;
  std::size_t step_;
  bool regular_;
  std::size_t pos_ = 0;
  std::string name_ = "failing";
};

TEST(ChunkerReadError, BytesBeforeAFailedReadAreHandedOutThenTheErrorThrown) {
  const std::string text = "one\ntwo\nthree\nfour\nan unfinished";
  for (const bool regular : {true, false}) {
    for (const std::size_t step : {std::size_t{3}, std::size_t{1000}}) {
      FailingSource source(text, step, regular);
      ChunkerConfig config;
      config.capacity = 16;
      Chunker chunker(source, config);
      std::string got;
      std::vector<char> buffer(chunker.capacity());
      bool last = false;
      try {
        for (;;) {
          Chunk c;
          ASSERT_EQ(chunker.fill(buffer.data(), c, kNever), Chunker::Status::kChunk);
          got.append(c.data + c.overlap, c.size - c.overlap);
          last = c.last;
        }
      } catch (const gpufilter::SourceError& e) {
        EXPECT_STREQ(e.what(), "failing: corrupt test data at byte 7");
      }
      EXPECT_EQ(got, text) << "regular " << regular << " step " << step;
      EXPECT_TRUE(last) << "the chunk before the error ends the input";
    }
  }
}

}  // namespace
