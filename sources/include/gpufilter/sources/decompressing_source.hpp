// --decompress: a Source that reads a gzip, zstd, xz, bzip2 or lz4 input as the bytes it
// holds. The format is told by the input's first (magic) bytes, never by its name, so a
// rotated "app.log.2" without an extension reads as well. A thread of its own decodes
// ahead into a few bounded buffers while the pipeline scans what came before, so memory
// stays bounded whatever the input expands to (a "zip bomb" only blocks the decoder).
// Corrupt or truncated data ends the input: the bytes decoded before it are read first,
// then read() throws SourceError naming the input and the compressed byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "gpufilter/core/source.hpp"
#include "gpufilter/core/stop_signal.hpp"

namespace gpufilter {

class FileSource;

enum class Compression { kNone, kGzip, kZstd, kXz, kBzip2, kLz4 };

// The format whose magic bytes begin `head`; kNone when none does (or `head` is too short).
Compression compression_of(std::string_view head);
// "gzip", "zstd", "xz", "bzip2", "lz4" (the command-line tools' names), or "none".
const char* compression_name(Compression format);

// Decorates `source`: its compressed bytes come out decoded. `source` is read on the
// decoder's thread only; after stop->request(), reads end the input.
class DecompressingSource final : public Source {
 public:
  // `head` holds the first bytes already read from `source` (an input that cannot be
  // peeked at); they are decoded before what `source` reads next.
  // At most `ahead_bytes` (rounded down to whole MiB, at least one) are decoded ahead of
  // the reader.
  DecompressingSource(std::unique_ptr<Source> source, Compression format, std::string head = {},
                      const StopSignal* stop = nullptr, std::size_t ahead_bytes = kDefaultAhead);
  static constexpr std::size_t kDefaultAhead = 4u << 20;
  ~DecompressingSource() override;
  DecompressingSource(const DecompressingSource&) = delete;
  DecompressingSource& operator=(const DecompressingSource&) = delete;

  std::size_t read(std::span<char> dst) override;
  // Reads wait for the decoder, which never waits on anything but its input: true at once.
  bool wait_readable(std::chrono::milliseconds timeout) override;
  const std::string& name() const override { return name_; }
  Compression format() const noexcept { return format_; }

 private:
  struct Shared;  // the buffers and state both threads see (decompressing_source.cpp)
  struct Block {
    std::unique_ptr<char[]> bytes;
    std::size_t size = 0;
  };
  std::shared_ptr<Shared> shared_;  // the decoder thread holds it too
  std::string name_;
  Compression format_;
  const StopSignal* stop_;
  bool join_on_close_;  // else detached: a pipe's read may block for ever
  Block current_;       // the decoded block being read, taken from the decoder
  std::size_t taken_ = 0;
  std::thread thread_;
};

// --decompress for one opened input: `file` wrapped in a DecompressingSource when its
// first bytes are a known format's magic, else `file` itself, unchanged (a regular file
// keeps its mapped path). A regular file is peeked at without consuming anything; the
// first bytes of another input (a pipe) are read, and handed out again when it is not
// compressed (with the error, if reading them failed, thrown by the read after them).
// Throws SourceError when a regular file cannot be peeked at.
std::unique_ptr<Source> open_decompressing(std::unique_ptr<FileSource> file, const StopSignal* stop = nullptr,
                                           std::size_t ahead_bytes = DecompressingSource::kDefaultAhead);

}  // namespace gpufilter
