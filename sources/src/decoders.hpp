// One Decoder per compressed format, each over the Debian library that reads it: zlib
// (gzip), libzstd, liblzma (xz), libbz2 and liblz4 (frames). A Decoder turns one stream
// (a gzip member, a zstd or lz4 frame, an xz or bzip2 stream) into bytes; the caller
// (DecompressingSource) restarts it for each stream that follows, so concatenated files
// read as `gzip -dc` reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "gpufilter/sources/decompressing_source.hpp"

namespace gpufilter::detail {

// The compressed data is not what the format says: the library's own reason.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Decodes from the front of `in` into the front of `out` and moves both past what was
  // consumed and produced. True once the stream ended (its trailer read and checked).
  // Throws DecodeError on corrupt data.
  virtual bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) = 0;
  // Gets ready for a new stream (the first one too).
  virtual void restart() = 0;
  // Bytes between streams that the format allows and skips (xz's stream padding).
  virtual std::size_t padding(std::span<const unsigned char> in) const {
    (void)in;
    return 0;
  }
  // After a whole stream: whether `in` (what follows, at least a byte) may begin another.
  // False: what follows is trailing garbage, which the format's own tool drops after a
  // warning (gzip -d, bzip2 -d), as rg -z does; the input ends there. (zgrep, through
  // gzip -cdfq, passes it on as text.)
  virtual bool another_stream(std::span<const unsigned char> in) const {
    (void)in;
    return true;
  }
};

// A Decoder for `format` (not kNone). Loads the format's library the first time; throws
// SourceError, naming `input`, where it cannot be loaded.
std::unique_ptr<Decoder> make_decoder(Compression format, const std::string& input);

}  // namespace gpufilter::detail
