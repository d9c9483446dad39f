// A Chunk is what one scan slot carries to the device: line-aligned bytes of one input,
// plus where they sit in that input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace gpufilter {

inline constexpr std::uint64_t kNoBinary = std::numeric_limits<std::uint64_t>::max();

struct Chunk {
  std::uint64_t seq = 0;     // 0, 1, 2 ... per input, in input order
  std::uint64_t offset = 0;  // absolute offset of data[0] in the input (never an index)
  char* data = nullptr;      // the slot's pinned staging memory
  std::size_t size = 0;
  // Leading bytes repeated from the previous chunk. Only a line longer than a chunk is
  // split; its pieces overlap by (longest pattern - 1) bytes, and an occurrence belongs to
  // the chunk in which it ends past the overlap, so each is reported exactly once.
  std::size_t overlap = 0;
  bool continues_line = false;  // data[overlap] continues the previous chunk's last line
  bool line_open = false;       // the last line goes on in the next chunk
  bool last = false;            // nothing follows in this input
  // The input went quiet, or the chunk is one of its first, small ones
  // (ChunkerConfig::first_capacity): deliver and flush after this chunk.
  bool flush_after = false;
  // Where GNU grep's binary-file mode begins (the start of its read buffer that held the
  // first NUL byte), once a NUL has been seen; kNoBinary otherwise.
  std::uint64_t binary_offset = kNoBinary;
  // A chunk of a mapped file (ChunkerConfig::mapping): the NUL search of data[0,
  // nul_search) (the chunk, and what a read would have brought with it) is left to the
  // engine's worker, which has the bytes at hand (ScanSlot::first_nul), and binary_offset
  // is settled at delivery (Chunker::settle_binary). 0: the chunker searched.
  std::size_t nul_search = 0;
};

// One pattern occurrence reported by the device: a start position relative to the
// chunk's data and a unique-pattern id (PatternTable). Exact: no host confirmation of the
// literal is needed; -w and -x are line-level checks made by the Searcher.
struct Occurrence {
  std::uint32_t position;
  std::uint32_t pattern;
};

}  // namespace gpufilter
