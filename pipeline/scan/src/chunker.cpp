#include "gpufilter/scan/chunker.hpp"

#include <algorithm>
#include <cstring>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/workers.hpp"

namespace gpufilter {

using Clock = std::chrono::steady_clock;

Chunker::Chunker(Source& source, ChunkerConfig config)
    : source_(source),
      config_(config),
      capacity_(std::max(config.capacity, config.overlap + 1)),
      // A chunk carries the overlap again: four times it at least, so that each moves on.
      ramp_(config.first_capacity == 0 ? capacity_
                                        : std::min(capacity_, std::max(config.first_capacity, 4 * (config.overlap + 1)))) {
  map_later_ = config_.mapping != FileMapping::kNever && source_.is_regular_file();
  if (!growing()) map_rest();
}

void Chunker::map_rest() {
  if (!map_later_ || growing()) return;
  map_later_ = false;
  // The pending bytes (a line's start, the read to a block's end) are mapped again.
  mapped_ = source_.map_unread(capacity_ + 1, config_.mapping == FileMapping::kIfFaster, pending_.size());
  if (mapped_ == nullptr) return;
  mapping_ = true;
  map_base_ = pending_offset_;
  pending_.clear();
}

std::size_t Chunker::next_capacity() noexcept {
  const std::size_t capacity = ramp_;
  ramp_ = capacity_ / 4 < ramp_ ? capacity_ : 4 * ramp_;
  return capacity;
}

void Chunker::done_with(const Chunk& chunk) noexcept {
  // The next chunk repeats the last `overlap` bytes of this one.
  const std::uint64_t offset = chunk.offset + chunk.size - std::min<std::uint64_t>(chunk.size, config_.overlap);
  // In steps of four chunks (4 MiB at least), or of what may be in flight up to 64 MiB:
  // each munmap() stops every core running one of our threads to flush its TLB. On 16
  // cores, steps of four 4 MiB chunks cost the host engine's pipeline thread 0.20-0.47 s of
  // an 8 GiB file and made the whole run 1.4x as long as with 64 MiB steps (100 and 1,000
  // literals; docs/PERFORMANCE.md). The resident set stays under twice what is in flight
  // (tests/cli/streaming_test.cpp bounds it).
  const std::uint64_t in_flight = std::min<std::uint64_t>(config_.in_flight, 64u << 20);
  const std::uint64_t step = std::max<std::uint64_t>({4u << 20, 4 * std::uint64_t{capacity_}, in_flight});
  if (!mapped_ || offset < map_base_ + dropped_ + step) return;
  dropped_ = std::min<std::uint64_t>(offset - map_base_, mapped_->size());
  mapped_->drop_before(static_cast<std::size_t>(dropped_));
}

void Chunker::note_mapped(std::size_t upto) {
  if (upto <= noted_) return;
  note_bytes(mapped_->data() + noted_, upto - noted_, map_base_ + noted_);
  noted_ = upto;
}

void Chunker::settle_binary(Chunk& chunk, std::size_t first_nul) noexcept {
  if (chunk.nul_search > 0 && first_nul < chunk.nul_search && mapped_binary_ == kNoBinary)
    mapped_binary_ = (chunk.offset + first_nul) / kBinaryBlock * kBinaryBlock;
  chunk.binary_offset = std::min(chunk.binary_offset, mapped_binary_);
}

// A chunk of the mapping, cut as fill() cuts one (after its last '\n', or an over-long
// line split with the overlap), without a copy. The NUL search, left to the engine's
// worker, covers what a read would have: the chunk's capacity and the rest of the 96 KiB
// block it ends in (Chunk::nul_search).
Chunker::Status Chunker::fill_mapped(char* dst, Chunk& out, std::chrono::milliseconds idle_timeout, bool eager) {
  const std::uint64_t offset = pending_offset_;
  const std::size_t overlap = pending_overlap_;
  const auto begin = static_cast<std::size_t>(offset - map_base_);
  const std::size_t backed = mapped_->still_backed();  // less than mapped once truncated
  char* const base = mapped_->data();
  if (begin + ramp_ >= backed) {
    // The mapping's last bytes go through fill()'s reads, with whatever the file gained.
    mapping_ = false;
    noted_ = begin;  // the chunks before searched up to here and beyond (Chunk::nul_search)
    note_mapped(backed);
    if (backed > begin) pending_.assign(base + begin, backed - begin);
    read_offset_ = map_base_ + backed;
    return fill(dst, out, idle_timeout, eager);
  }
  const std::size_t capacity = next_capacity();
  const std::size_t end = begin + capacity;
  // (Blocks lie at multiples of kBinaryBlock of the input, not of the mapping.)
  const std::size_t block_end =
      static_cast<std::size_t>((map_base_ + end + kBinaryBlock - 1) / kBinaryBlock * kBinaryBlock - map_base_);
  const std::size_t searched = std::min(backed, block_end);  // what a read would have brought
  read_offset_ = std::max<std::uint64_t>(read_offset_, map_base_ + searched);
  const char* last_nl = static_cast<const char*>(memrchr(base + begin + overlap, config_.eol, capacity - overlap));
  std::size_t cut = end;
  std::size_t next = end - config_.overlap;
  std::size_t next_overlap = config_.overlap;
  const bool line_open = last_nl == nullptr;
  if (!line_open) {
    cut = next = static_cast<std::size_t>(last_nl - base) + 1;
    next_overlap = 0;
  }
  out = Chunk{};
  out.seq = seq_++;
  out.offset = offset;
  out.data = base + begin;
  out.size = cut - begin;
  out.overlap = overlap;
  out.continues_line = continues_line_;
  out.line_open = line_open;
  out.binary_offset = binary_offset_;
  // The engine's worker searches for NUL (Chunk::nul_search); a NUL found before it was
  // (noted_) is already in binary_offset_.
  if (config_.detect_binary && binary_offset_ == kNoBinary) out.nul_search = searched - begin;
  out.flush_after = capacity < capacity_;  // one of the first, small chunks
  continues_line_ = line_open;
  pending_offset_ = map_base_ + next;
  pending_overlap_ = next_overlap;
  return Status::kChunk;
}

// Binary detection happens here, in one place, on bytes as they are read.
void Chunker::note_bytes(const char* data, std::size_t size, std::uint64_t offset) {
  if (!config_.detect_binary || binary_offset_ != kNoBinary) return;
  const char* nul = find_byte(config_.workers, data, size, '\0');
  if (nul != nullptr) note_nul(offset + static_cast<std::uint64_t>(nul - data), offset);
}

// A NUL at `at`, in the read that began at `read_at`.
void Chunker::note_nul(std::uint64_t at, std::uint64_t read_at) noexcept {
  // A regular file's buffers start at multiples of the block; a stream's where its read did.
  binary_offset_ = source_.is_regular_file() ? at / kBinaryBlock * kBinaryBlock : read_at;
}

// A read, its bytes noted for binary mode as note_bytes() would, searched by the source
// as it copies them (Source::read_finding). A failed read is the input's end for now, so
// that the bytes before it are searched (lines before a corrupt compressed block are
// printed, as `gzip -dc | grep` prints them).
std::size_t Chunker::read_source(std::span<char> dst) {
  try {
    if (!config_.detect_binary || binary_offset_ != kNoBinary) return source_.read(dst);
    std::size_t first = Source::kNotFound;
    const std::size_t got = source_.read_finding(dst, '\0', first);
    if (first != Source::kNotFound) note_nul(read_offset_ + first, read_offset_);
    return got;
  } catch (const SourceError&) {
    read_error_ = std::current_exception();
    eof_ = true;
    return 0;
  }
}

// Before a chunk of a regular file is handed out, the rest of the 96 KiB block its last
// byte lies in is read too: a NUL there puts binary mode's start inside this chunk.
void Chunker::read_ahead_to_block_end() {
  if (!config_.detect_binary || binary_offset_ != kNoBinary || eof_ || !source_.is_regular_file()) return;
  while (read_offset_ % kBinaryBlock != 0) {
    const std::size_t want = static_cast<std::size_t>(kBinaryBlock - read_offset_ % kBinaryBlock);
    const std::size_t old = pending_.size();
    pending_.resize(old + want);
    const std::size_t got = read_source(std::span<char>(pending_.data() + old, want));
    pending_.resize(old + got);
    if (got == 0) {
      eof_ = true;
      return;
    }
    read_offset_ += got;
  }
}

// One read into `dst` (`room` bytes free), its bytes noted for binary mode: what it put
// there, 0 at the end. A regular file fills the room; a stream is read a whole block at a
// time, as grep reads it, so that binary mode sees what grep's read would: straight into
// dst where the block fits, else into pending_, where what does not fit stays.
std::size_t Chunker::read_into(char* dst, std::size_t room) {
  const bool regular = source_.is_regular_file();
  if (regular || room >= kBinaryBlock) {
    return read_source(std::span<char>(dst, regular ? room : kBinaryBlock));
  }
  pending_.resize(kBinaryBlock);
  const std::size_t n = read_source(std::span<char>(pending_.data(), pending_.size()));
  pending_.resize(n);
  if (n == 0) return 0;
  const std::size_t got = std::min(n, room);
  std::memcpy(dst, pending_.data(), got);
  pending_.erase(0, got);
  read_offset_ += n - got;  // the caller counts the part in dst
  return got;
}

Chunker::Status Chunker::fill(char* dst, Chunk& out, std::chrono::milliseconds idle_timeout, bool eager) {
  map_rest();
  if (mapping_) return fill_mapped(dst, out, idle_timeout, eager);
  // 1. What is pending first: the rolled tail and any read-ahead.
  const std::uint64_t offset = pending_offset_;
  const std::size_t overlap = pending_overlap_;
  const std::size_t capacity = next_capacity();
  std::size_t filled = std::min(pending_.size(), capacity);
  std::memcpy(dst, pending_.data(), filled);
  pending_.erase(0, filled);

  // 2. Fresh reads straight into dst while there is room.
  const char* newline = static_cast<const char*>(std::memchr(dst + overlap, config_.eol, filled - std::min(filled, overlap)));
  Clock::time_point deadline{};
  if (newline != nullptr) deadline = Clock::now() + config_.batch_timeout;
  bool stalled = false;
  bool overdue = false;  // a complete line has waited the batch timeout on a busy stream
  while (filled < capacity && pending_.empty() && !eof_) {
    if (!source_.is_regular_file()) {
      if (newline != nullptr && Clock::now() >= deadline) {
        overdue = true;
        break;
      }
      std::chrono::milliseconds wait = idle_timeout;
      if (newline != nullptr) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        wait = eager ? std::chrono::milliseconds(0) : std::max(left, std::chrono::milliseconds(0));
      }
      if (!source_.wait_readable(wait)) {
        if (newline != nullptr) {
          stalled = true;
          break;
        }
        // Nothing complete to hand out: keep what we have and let the caller flush.
        pending_.insert(0, dst, filled);
        return Status::kIdle;
      }
    }
    const std::size_t got = read_into(dst + filled, capacity - filled);
    if (got == 0) {
      eof_ = true;
      break;
    }
    read_offset_ += got;
    if (newline == nullptr) {
      newline = static_cast<const char*>(std::memchr(dst + filled, config_.eol, got));
      if (newline != nullptr) deadline = Clock::now() + config_.batch_timeout;
    }
    filled += got;
  }

  if (filled <= overlap && eof_ && pending_.empty()) {
    if (read_error_) std::rethrow_exception(read_error_);
    return Status::kEnd;
  }

  // 3. Cut: after the last '\n'; everything at the end; or split an over-long line.
  const bool at_end = eof_ && pending_.empty();
  std::size_t cut;
  std::size_t keep_from;  // first byte that rolls into the next chunk
  bool line_open = false;
  const char* last_nl = static_cast<const char*>(memrchr(dst + overlap, config_.eol, filled - overlap));
  if (at_end) {
    cut = keep_from = filled;
  } else if (last_nl != nullptr) {
    cut = keep_from = static_cast<std::size_t>(last_nl - dst) + 1;
  } else {
    // filled == capacity here: no '\n' in a full chunk.
    cut = filled;
    keep_from = filled - config_.overlap;
    line_open = true;
  }

  read_ahead_to_block_end();  // the block of the tail's bytes, before binary mode is judged

  pending_.insert(0, dst + keep_from, filled - keep_from);
  pending_offset_ = offset + keep_from;
  pending_overlap_ = line_open ? config_.overlap : 0;

  out = Chunk{};
  out.seq = seq_++;
  out.offset = offset;
  out.data = dst;
  out.size = cut;
  out.overlap = overlap;
  out.continues_line = continues_line_;
  out.line_open = line_open;
  out.last = at_end && cut == filled;
  // A quiet input, or a steady trickle whose lines have waited the batch timeout, is
  // delivered and flushed at once. A fast stream (a chunk of a megabyte or more in one
  // timeout) is not held up to flush: its lines wait for the chunks in flight, not for time.
  constexpr std::size_t kFlushBelow = 1u << 20;
  out.flush_after = capacity < capacity_ || stalled || (overdue && cut < kFlushBelow);
  out.binary_offset = binary_offset_;
  continues_line_ = line_open;
  return Status::kChunk;
}

}  // namespace gpufilter
