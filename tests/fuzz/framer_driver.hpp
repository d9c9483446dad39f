// The reader's side of a framer (LineFramer, SyslogFramer), shared by line_framer_fuzz
// and syslog_framer_fuzz: bytes go in as pieces of chosen sizes (prepare, copy, commit),
// whole lines come out (ready, consumed), all of them or only some, as a full
// RecordChannel takes them; then end_of_stream and the rest. What came out is recorded
// line by line, so that two runs over one input, split and taken differently, can be
// compared, and every line is checked against the framer's promises as it comes out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"

namespace gpufilter::fuzz {

// A small deterministic generator (xorshift32), seeded from the input.
class Rng {
 public:
  explicit Rng(std::uint32_t seed) : state_(seed * 2654435761u + 0x9E3779B9u) {
    if (state_ == 0) state_ = 1;
  }
  std::uint32_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    return state_;
  }
  // 1..limit
  std::size_t size(std::size_t limit) { return 1 + next() % limit; }

 private:
  std::uint32_t state_;
};

struct Record {
  std::string line;       // with its '\n'
  std::uint64_t offset;   // stream offset of its first byte
  std::uint64_t skipped;  // over-long lines dropped just before it
  bool operator==(const Record&) const = default;
};

struct Outcome {
  std::vector<Record> records;
  std::uint64_t offset = 0;  // the framer's offset() at the end
  std::uint64_t too_long = 0;
  std::string error;  // SyslogFramer::error(), "" for LineFramer
  bool operator==(const Outcome&) const = default;
};

inline void print(const char* title, const Outcome& o) {
  std::fprintf(stderr, "--- %s: %zu records, offset %llu, too long %llu, error '%s'\n", title, o.records.size(),
               static_cast<unsigned long long>(o.offset), static_cast<unsigned long long>(o.too_long),
               o.error.c_str());
  for (const Record& r : o.records)
    std::fprintf(stderr, "  @%llu skipped %llu [%s]\n", static_cast<unsigned long long>(r.offset),
                 static_cast<unsigned long long>(r.skipped), printable(r.line).c_str());
}

[[noreturn]] inline void fail(const char* what, const Outcome& a, const Outcome* b = nullptr) {
  std::fprintf(stderr, "framer fuzz: %s\n", what);
  print("first run", a);
  if (b != nullptr) print("second run", *b);
  __builtin_trap();
}

template <typename Framer>
std::string error_of(const Framer& f) {
  if constexpr (requires { f.error(); }) return f.error();
  else return {};
}

template <typename Framer>
bool failed(const Framer& f) {
  if constexpr (requires { f.failed(); }) return f.failed();
  else return false;
}

template <typename Framer>
void release(Framer& f) {
  if constexpr (requires { f.release(); }) f.release();
}

// Takes whole lines from f.ready(): all of them, or (with `rng`) a random whole number of
// them, at least one when there is one. Checks each line as it comes out.
template <typename Framer>
void take(Framer& f, Outcome& out, Rng* rng) {
  for (;;) {
    const auto ready = f.ready();
    if (ready.lines.empty()) return;
    if (ready.lines.back() != '\n') fail("ready() ends inside a line", out);
    std::vector<std::size_t> ends;  // one past each line's '\n'
    for (std::size_t at = 0; at < ready.lines.size();) {
      const std::size_t nl = ready.lines.find('\n', at);
      ends.push_back(nl + 1);
      at = nl + 1;
    }
    const std::size_t lines = rng != nullptr ? std::min(ends.size(), rng->size(ends.size() + 1)) : ends.size();
    std::size_t begin = 0;
    for (std::size_t i = 0; i < lines; ++i) {
      const std::string_view line = ready.lines.substr(begin, ends[i] - begin);
      if (line.size() - 1 > f.max_line_bytes()) fail("a line longer than max_line_bytes came out", out);
      out.records.push_back({std::string(line), ready.offset + begin, i == 0 ? ready.skipped : 0});
      begin = ends[i];
    }
    f.consumed(begin);
    if (rng != nullptr && rng->next() % 2 == 0) {
      // The channel is full for now; an idle reader gives back its slack memory.
      if (rng->next() % 4 == 0) release(f);
      return;
    }
  }
}

// Feeds `input` to `f` in pieces of 1..piece_limit bytes (0: whole), taking lines after
// each piece (some of them when `partial`), as a reader does; stops reading once the
// framer has failed. At the end of the stream everything is taken.
template <typename Framer>
Outcome run(Framer& f, std::string_view input, std::size_t piece_limit, Rng& rng, bool partial) {
  Outcome out;
  std::size_t at = 0;
  while (at < input.size() && !failed(f)) {
    if (partial && rng.next() % 16 == 0) {
      // A read that got nothing (before any storage exists, at first).
      (void)f.prepare(0);
      f.commit(0);
    }
    const std::size_t n = std::min(input.size() - at, piece_limit == 0 ? input.size() : rng.size(piece_limit));
    const auto room = f.prepare(n);
    if (room.size() < n) fail("prepare() gave less room than asked", out);
    std::copy_n(input.data() + at, n, room.data());
    f.commit(n);
    at += n;
    if (partial && rng.next() % 8 == 0) release(f);
    take(f, out, partial ? &rng : nullptr);
    if (!partial && !failed(f) && f.buffered() > f.max_line_bytes() + 16) {
      // Every whole line was taken: what is left is at most one partial line (or a
      // framing header), whose bound is max_line_bytes.
      fail("the framer holds more than a line after every line was taken", out);
    }
  }
  f.end_of_stream();
  take(f, out, nullptr);
  if (!failed(f) && f.buffered() != 0) fail("bytes are left after the end of the stream", out);
  out.offset = f.offset();
  out.too_long = f.lines_too_long();
  out.error = error_of(f);
  return out;
}

}  // namespace gpufilter::fuzz
