#include "decoders.hpp"

#include <bzlib.h>
#include <lz4frame.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <limits>
#include <string>

namespace gpufilter::detail {
namespace {

// Our buffers are far below the 32-bit counts that zlib, libbz2 and liblzma take.
unsigned int u32(std::size_t n) {
  return static_cast<unsigned int>(std::min<std::size_t>(n, std::numeric_limits<unsigned int>::max()));
}

// Moves `in` and `out` past what a library consumed and produced.
void advance(std::span<const unsigned char>& in, std::span<unsigned char>& out, std::size_t in_left,
             std::size_t out_left) {
  in = in.subspan(in.size() - in_left);
  out = out.subspan(out.size() - out_left);
}

class GzipDecoder final : public Decoder {
 public:
  ~GzipDecoder() override {
    if (started_) ::inflateEnd(&z_);
  }
  void restart() override {
    // 16 + 15: a gzip header and trailer (CRC-32, length) around a 32 KiB window.
    const int rc = started_ ? ::inflateReset(&z_) : ::inflateInit2(&z_, 16 + MAX_WBITS);
    if (rc != Z_OK) throw DecodeError(std::string("zlib: ") + ::zError(rc));
    started_ = true;
  }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    z_.next_in = const_cast<unsigned char*>(in.data());  // zlib's API is not const
    z_.avail_in = u32(in.size());
    z_.next_out = out.data();
    z_.avail_out = u32(out.size());
    const int rc = ::inflate(&z_, Z_NO_FLUSH);
    advance(in, out, in.size() - (u32(in.size()) - z_.avail_in), out.size() - (u32(out.size()) - z_.avail_out));
    if (rc == Z_STREAM_END) return true;
    if (rc == Z_OK || rc == Z_BUF_ERROR) return false;  // Z_BUF_ERROR: it needs more input
    throw DecodeError(z_.msg != nullptr ? z_.msg : ::zError(rc));
  }
  bool another_stream(std::span<const unsigned char> in) const override {
    return in[0] == 0x1f && (in.size() < 2 || in[1] == 0x8b);
  }

 private:
  z_stream z_{};
  bool started_ = false;
};

class ZstdDecoder final : public Decoder {
 public:
  ZstdDecoder() : ctx_(::ZSTD_createDCtx()) {
    if (ctx_ == nullptr) throw std::bad_alloc();
  }
  ~ZstdDecoder() override { ::ZSTD_freeDCtx(ctx_); }
  // The library's window limit stays (2^27, as the zstd tool's without --memory), so a
  // frame cannot ask for more memory than that.
  void restart() override { ::ZSTD_DCtx_reset(ctx_, ZSTD_reset_session_only); }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    ZSTD_inBuffer src{in.data(), in.size(), 0};
    ZSTD_outBuffer dst{out.data(), out.size(), 0};
    const std::size_t rc = ::ZSTD_decompressStream(ctx_, &dst, &src);
    advance(in, out, in.size() - src.pos, out.size() - dst.pos);
    if (::ZSTD_isError(rc)) throw DecodeError(::ZSTD_getErrorName(rc));
    return rc == 0;  // a frame ended and everything it held was written
  }

 private:
  ZSTD_DCtx* ctx_;
};

class XzDecoder final : public Decoder {
 public:
  ~XzDecoder() override { ::lzma_end(&s_); }
  void restart() override {
    // One stream at a time (the caller restarts for the next, skipping stream padding).
    // Memory for a stream's dictionary is capped at 1 GiB: xz -9 needs 65 MiB.
    const lzma_ret rc = ::lzma_stream_decoder(&s_, std::uint64_t{1} << 30, 0);
    if (rc != LZMA_OK) throw DecodeError(message(rc));
  }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    s_.next_in = in.data();
    s_.avail_in = in.size();
    s_.next_out = out.data();
    s_.avail_out = out.size();
    const lzma_ret rc = ::lzma_code(&s_, LZMA_RUN);
    advance(in, out, s_.avail_in, s_.avail_out);
    if (rc == LZMA_STREAM_END) return true;
    if (rc == LZMA_OK || rc == LZMA_BUF_ERROR) return false;
    throw DecodeError(message(rc));
  }
  // xz's stream padding: NUL bytes (whole 4-byte words) after a stream.
  std::size_t padding(std::span<const unsigned char> in) const override {
    std::size_t n = 0;
    while (n < in.size() && in[n] == 0) ++n;
    return n;
  }

 private:
  static std::string message(lzma_ret rc) {
    switch (rc) {
      case LZMA_MEM_ERROR: return "out of memory";
      case LZMA_MEMLIMIT_ERROR: return "the stream needs more than 1 GiB of memory";
      case LZMA_FORMAT_ERROR: return "file format not recognized";
      case LZMA_OPTIONS_ERROR: return "unsupported compression options";
      case LZMA_DATA_ERROR: return "compressed data is corrupt";
      default: return "liblzma error " + std::to_string(static_cast<int>(rc));
    }
  }
  lzma_stream s_ = LZMA_STREAM_INIT;
};

class Bzip2Decoder final : public Decoder {
 public:
  ~Bzip2Decoder() override {
    if (started_) ::BZ2_bzDecompressEnd(&s_);
  }
  void restart() override {
    if (started_) ::BZ2_bzDecompressEnd(&s_);
    s_ = bz_stream{};
    started_ = ::BZ2_bzDecompressInit(&s_, 0, 0) == BZ_OK;
    if (!started_) throw DecodeError("libbz2: cannot start a decoder");
  }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    s_.next_in = const_cast<char*>(reinterpret_cast<const char*>(in.data()));  // libbz2 is not const
    s_.avail_in = u32(in.size());
    s_.next_out = reinterpret_cast<char*>(out.data());
    s_.avail_out = u32(out.size());
    const int rc = ::BZ2_bzDecompress(&s_);
    advance(in, out, in.size() - (u32(in.size()) - s_.avail_in), out.size() - (u32(out.size()) - s_.avail_out));
    if (rc == BZ_STREAM_END) return true;
    if (rc == BZ_OK) return false;
    throw DecodeError(rc == BZ_DATA_ERROR_MAGIC ? "not bzip2 data"
                      : rc == BZ_MEM_ERROR  ? "out of memory"
                                            : "compressed data is corrupt");
  }
  bool another_stream(std::span<const unsigned char> in) const override {
    // "BZh" and a block size '1'-'9', as far as the bytes at hand go (bzip2 checks all four).
    constexpr unsigned char kMagic[] = {'B', 'Z', 'h'};
    if (!std::equal(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(in.size(), 3)), kMagic))
      return false;
    return in.size() < 4 || (in[3] >= '1' && in[3] <= '9');
  }

 private:
  bz_stream s_{};
  bool started_ = false;
};

class Lz4Decoder final : public Decoder {
 public:
  Lz4Decoder() {
    if (::LZ4F_isError(::LZ4F_createDecompressionContext(&ctx_, LZ4F_VERSION))) throw std::bad_alloc();
  }
  ~Lz4Decoder() override { ::LZ4F_freeDecompressionContext(ctx_); }
  void restart() override { ::LZ4F_resetDecompressionContext(ctx_); }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    std::size_t consumed = in.size();
    std::size_t produced = out.size();
    const std::size_t rc = ::LZ4F_decompress(ctx_, out.data(), &produced, in.data(), &consumed, nullptr);
    if (::LZ4F_isError(rc)) throw DecodeError(::LZ4F_getErrorName(rc));
    advance(in, out, in.size() - consumed, out.size() - produced);
    return rc == 0;  // the frame ended and was flushed
  }

 private:
  LZ4F_dctx* ctx_ = nullptr;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(Compression format) {
  switch (format) {
    case Compression::kGzip: return std::make_unique<GzipDecoder>();
    case Compression::kZstd: return std::make_unique<ZstdDecoder>();
    case Compression::kXz: return std::make_unique<XzDecoder>();
    case Compression::kBzip2: return std::make_unique<Bzip2Decoder>();
    case Compression::kLz4: return std::make_unique<Lz4Decoder>();
    case Compression::kNone: break;
  }
  throw std::logic_error("make_decoder: no format");
}

}  // namespace gpufilter::detail
