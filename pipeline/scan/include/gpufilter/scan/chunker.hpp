// Chunker: cuts a Source into line-aligned chunks, like ripgrep's line buffer.
//
// A chunk ends at its last '\n'; the unfinished tail line rolls into the next chunk.
// Only a line longer than a whole chunk is split: the next piece starts with the last
// `overlap` bytes of the previous one (see Chunk::overlap for the ownership rule).
// It also watches for NUL bytes the way GNU grep's buffers do (binary-file mode) and
// cuts a partial chunk when a slow input leaves complete lines waiting (the deadline).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>

#include "gpufilter/core/workers.hpp"
#include "gpufilter/core/chunk.hpp"
#include "gpufilter/core/source.hpp"

namespace gpufilter {

// Whether a regular file's chunks come out of a mapping: never, where touching the file's
// mapped pages measures faster than reading them (mapping_beats_reading(), on three pieces
// of each file), or always.
enum class FileMapping { kNever, kIfFaster, kAlways };

struct ChunkerConfig {
  std::size_t capacity = 1 << 20;  // bytes per chunk; raised to overlap + 1 if smaller
  std::size_t overlap = 0;         // longest pattern - 1
  // The first chunk holds at most this much (0: capacity), each next one four times the
  // last, up to capacity, and each is delivered and flushed before the next goes
  // (Chunk::flush_after): a search that stops early (-l, -q, -m) reads and scans little
  // more than grep's buffers before its answer, and a first line comes out sooner. These
  // chunks are read; the rest of the file is mapped after them, if at all (map_rest()),
  // so that such a search never pays for measuring the mapping's cost either.
  std::size_t first_capacity = 0;
  bool detect_binary = true;       // track NUL bytes (off for -a)
  char eol = '\n';                 // the byte that ends a line ('\0' for -z, --null-data)
  // A complete line waits at most this long for its chunk to fill on a slow input.
  std::chrono::milliseconds batch_timeout{2};
  // Splits the NUL search of large reads over its threads; null: this thread alone.
  WorkerPool* workers = nullptr;
  // A regular file of more than one chunk may be mapped (Source::map_unread), its chunks
  // then pointing into the mapping instead of being copied into dst: for engines that scan
  // chunks where they lie (Scanner::scans_in_place). The last chunk's bytes are still
  // copied, so that a file that grew meanwhile and the input's end are handled as for any
  // read.
  FileMapping mapping = FileMapping::kNever;
  // The bytes of chunks the engine may hold at once (its slots): a mapping's pages are given
  // back in steps of this much, up to 64 MiB (Chunker::done_with).
  std::size_t in_flight = 0;
};

class Chunker {
 public:
  // GNU grep 3.8 reads regular files in 96 KiB buffers; binary mode starts at the buffer
  // that holds the first NUL (docs/grep-compatibility.md).
  static constexpr std::uint64_t kBinaryBlock = 96 * 1024;

  enum class Status {
    kChunk,  // *out describes a chunk in dst
    kIdle,   // `idle_timeout` passed with no complete line: flush, then call again
    kEnd,    // the input is exhausted and every byte has been handed out
  };

  Chunker(Source& source, ChunkerConfig config);

  std::size_t capacity() const noexcept { return capacity_; }

  // Fills dst (capacity() bytes) with the next chunk. On a source that can stall it waits
  // at most idle_timeout (negative: forever) while no complete line is at hand. Once one
  // is, it waits for more at most the batch timeout; `eager`: not at all (the engine is
  // idle, so a smaller chunk now costs no throughput and saves the line the wait).
  // A read that fails (SourceError: an I/O error, corrupt compressed data) ends the input
  // there: the bytes read before it are still handed out, then fill() throws the error.
  Status fill(char* dst, Chunk& out, std::chrono::milliseconds idle_timeout, bool eager = false);

  std::uint64_t bytes_read() const noexcept { return read_offset_; }
  // Whether chunks come out of a mapping (ChunkerConfig::mapping took effect).
  bool in_place() const noexcept { return mapped_ != nullptr; }
  // Whether the next chunk is one of the first, small ones (ChunkerConfig::first_capacity).
  bool growing() const noexcept { return ramp_ < capacity_; }
  // Once no longer growing(): maps the rest of a regular file as ChunkerConfig::mapping
  // says, from the first byte not yet handed out. fill() calls it then; a caller that
  // hands fill() to another thread calls it first, on the thread that calls done_with().
  void map_rest();

  // At delivery, in input order, of every chunk: a mapped chunk's NUL search result
  // (ScanSlot::first_nul) decides where binary mode begins, as the chunker's own search
  // does for chunks it read; chunk.binary_offset is then what grep's would be there.
  // Called from one thread (not necessarily fill()'s).
  void settle_binary(Chunk& chunk, std::size_t first_nul) noexcept;

  // `chunk` (handed out by fill(), in order) is delivered: a mapped file's pages before
  // where the next chunk begins may be given back. Safe from another thread than fill()'s.
  void done_with(const Chunk& chunk) noexcept;

 private:
  Status fill_mapped(char* dst, Chunk& out, std::chrono::milliseconds idle_timeout, bool eager);
  void note_mapped(std::size_t upto);
  void note_bytes(const char* data, std::size_t size, std::uint64_t offset);
  void note_nul(std::uint64_t at, std::uint64_t read_at) noexcept;
  void read_ahead_to_block_end();
  std::size_t read_source(std::span<char> dst);
  std::size_t read_into(char* dst, std::size_t room);
  std::size_t next_capacity() noexcept;

  Source& source_;
  ChunkerConfig config_;
  std::size_t capacity_;
  std::size_t ramp_;  // the next chunk's capacity while it grows (ChunkerConfig::first_capacity)
  std::string pending_;              // bytes read but not yet handed out (tail + read-ahead)
  std::uint64_t pending_offset_ = 0; // absolute offset of pending_[0]
  std::uint64_t read_offset_ = 0;    // bytes read from the source so far
  std::size_t pending_overlap_ = 0;  // leading bytes of pending_ that repeat the last chunk
  bool continues_line_ = false;
  bool eof_ = false;
  std::exception_ptr read_error_;  // what ended the input, thrown once it is handed out
  std::uint64_t seq_ = 0;
  std::uint64_t binary_offset_ = kNoBinary;
  // Mapped mode: the file from map_base_ on; in use while `mapping_`, kept until the
  // chunker goes (chunks in flight point into it).
  std::unique_ptr<MappedBytes> mapped_;
  std::uint64_t map_base_ = 0;  // the input's offset of mapped_'s first byte
  bool map_later_ = false;      // map_rest() has yet to decide
  bool mapping_ = false;
  std::size_t noted_ = 0;  // where the chunker's own NUL search of the mapping starts
  std::uint64_t mapped_binary_ = kNoBinary;  // settle_binary's: from the engine's searches
  std::uint64_t dropped_ = 0;                // done_with's: pages given back up to here
};

}  // namespace gpufilter
