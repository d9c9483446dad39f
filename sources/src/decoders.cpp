#include "decoders.hpp"

#include <bzlib.h>
#include <lz4frame.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <string>
#include <utility>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/shared_library.hpp"

namespace gpufilter::detail {
namespace {

// The five libraries are loaded (dlopen) the first time their format is met, not linked:
// loading them cost every start of gpufilter about 0.3 ms (of 5 on the 2-core machine;
// an empty program linked with them starts that much later), and most runs read no
// compressed input. Each library's functions, with their own signatures:
#define GPUFILTER_ZLIB(X) X(inflateInit2_) X(inflate) X(inflateEnd) X(inflateReset) X(zError)
#define GPUFILTER_ZSTD(X)                                                                        \
  X(ZSTD_createDCtx) X(ZSTD_freeDCtx) X(ZSTD_DCtx_reset) X(ZSTD_decompressStream) X(ZSTD_isError) \
  X(ZSTD_getErrorName)
#define GPUFILTER_LZMA(X) X(lzma_stream_decoder) X(lzma_code) X(lzma_end)
#define GPUFILTER_BZ2(X) X(BZ2_bzDecompressInit) X(BZ2_bzDecompress) X(BZ2_bzDecompressEnd)
#define GPUFILTER_LZ4(X)                                                                           \
  X(LZ4F_createDecompressionContext) X(LZ4F_freeDecompressionContext) X(LZ4F_resetDecompressionContext) \
  X(LZ4F_decompress) X(LZ4F_isError) X(LZ4F_getErrorName)

#define GPUFILTER_MEMBER(name) decltype(&::name) name = nullptr;
struct Zlib {
  GPUFILTER_ZLIB(GPUFILTER_MEMBER)
};
struct Zstd {
  GPUFILTER_ZSTD(GPUFILTER_MEMBER)
};
struct Lzma {
  GPUFILTER_LZMA(GPUFILTER_MEMBER)
};
struct Bz2 {
  GPUFILTER_BZ2(GPUFILTER_MEMBER)
};
struct Lz4 {
  GPUFILTER_LZ4(GPUFILTER_MEMBER)
};
#undef GPUFILTER_MEMBER

template <typename Functions>
struct Library {
  const char* soname;
  const char* package;  // Debian's
  Functions functions;
  std::string failure;  // why it could not be loaded ("" when it was)
};

// Opens `soname` and fills `functions` through `look_up(library, functions)`.
template <typename Functions, typename LookUp>
Library<Functions> open_library(const char* soname, const char* package, LookUp look_up) {
  Library<Functions> l{soname, package, {}, {}};
  SharedLibrary library = open_shared_library(soname);
  if (library.handle != nullptr) look_up(library, l.functions);
  l.failure = std::move(library.failure);
  return l;
}

#define GPUFILTER_LOOK_UP(name) f.name = shared_function<decltype(f.name)>(library, #name);
#define GPUFILTER_LIBRARY(function, Type, soname, package, FUNCTIONS)                                  \
  const Library<Type>& function() {                                                                   \
    static const Library<Type> l =                                                                    \
        open_library<Type>(soname, package, [](SharedLibrary& library, Type& f) {                    \
          FUNCTIONS(GPUFILTER_LOOK_UP)                                                                \
        });                                                                                           \
    return l;                                                                                         \
  }
GPUFILTER_LIBRARY(zlib, Zlib, "libz.so.1", "zlib1g", GPUFILTER_ZLIB)
GPUFILTER_LIBRARY(zstd, Zstd, "libzstd.so.1", "libzstd1", GPUFILTER_ZSTD)
GPUFILTER_LIBRARY(lzma, Lzma, "liblzma.so.5", "liblzma5", GPUFILTER_LZMA)
GPUFILTER_LIBRARY(bz2, Bz2, "libbz2.so.1.0", "libbz2-1.0", GPUFILTER_BZ2)
GPUFILTER_LIBRARY(lz4, Lz4, "liblz4.so.1", "liblz4-1", GPUFILTER_LZ4)
#undef GPUFILTER_LIBRARY
#undef GPUFILTER_LOOK_UP

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
  const Zlib& lib_;  // first: members below are made with it

 public:
  explicit GzipDecoder(const Zlib& lib) : lib_(lib) {}
  ~GzipDecoder() override {
    if (started_) lib_.inflateEnd(&z_);
  }
  void restart() override {
    // 16 + 15: a gzip header and trailer (CRC-32, length) around a 32 KiB window.
    const int rc = started_ ? lib_.inflateReset(&z_) : lib_.inflateInit2_(&z_, 16 + MAX_WBITS, ZLIB_VERSION, static_cast<int>(sizeof(z_stream)));
    if (rc != Z_OK) throw DecodeError(std::string("zlib: ") + lib_.zError(rc));
    started_ = true;
  }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    z_.next_in = const_cast<unsigned char*>(in.data());  // zlib's API is not const
    z_.avail_in = u32(in.size());
    z_.next_out = out.data();
    z_.avail_out = u32(out.size());
    const int rc = lib_.inflate(&z_, Z_NO_FLUSH);
    advance(in, out, in.size() - (u32(in.size()) - z_.avail_in), out.size() - (u32(out.size()) - z_.avail_out));
    if (rc == Z_STREAM_END) return true;
    if (rc == Z_OK || rc == Z_BUF_ERROR) return false;  // Z_BUF_ERROR: it needs more input
    throw DecodeError(z_.msg != nullptr ? z_.msg : lib_.zError(rc));
  }
  bool another_stream(std::span<const unsigned char> in) const override {
    return in[0] == 0x1f && (in.size() < 2 || in[1] == 0x8b);
  }

 private:
  z_stream z_{};
  bool started_ = false;
};

class ZstdDecoder final : public Decoder {
  const Zstd& lib_;  // first: members below are made with it

 public:
  explicit ZstdDecoder(const Zstd& lib) : lib_(lib), ctx_(lib_.ZSTD_createDCtx()) {
    if (ctx_ == nullptr) throw std::bad_alloc();
  }
  ~ZstdDecoder() override { lib_.ZSTD_freeDCtx(ctx_); }
  // The library's window limit stays (2^27, as the zstd tool's without --memory), so a
  // frame cannot ask for more memory than that.
  void restart() override { lib_.ZSTD_DCtx_reset(ctx_, ZSTD_reset_session_only); }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    ZSTD_inBuffer src{in.data(), in.size(), 0};
    ZSTD_outBuffer dst{out.data(), out.size(), 0};
    const std::size_t rc = lib_.ZSTD_decompressStream(ctx_, &dst, &src);
    advance(in, out, in.size() - src.pos, out.size() - dst.pos);
    if (lib_.ZSTD_isError(rc)) throw DecodeError(lib_.ZSTD_getErrorName(rc));
    return rc == 0;  // a frame ended and everything it held was written
  }

 private:
  ZSTD_DCtx* ctx_;
};

class XzDecoder final : public Decoder {
  const Lzma& lib_;  // first: members below are made with it

 public:
  explicit XzDecoder(const Lzma& lib) : lib_(lib) {}
  ~XzDecoder() override { lib_.lzma_end(&s_); }
  void restart() override {
    // One stream at a time (the caller restarts for the next, skipping stream padding).
    // Memory for a stream's dictionary is capped at 1 GiB: xz -9 needs 65 MiB.
    const lzma_ret rc = lib_.lzma_stream_decoder(&s_, std::uint64_t{1} << 30, 0);
    if (rc != LZMA_OK) throw DecodeError(message(rc));
  }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    s_.next_in = in.data();
    s_.avail_in = in.size();
    s_.next_out = out.data();
    s_.avail_out = out.size();
    const lzma_ret rc = lib_.lzma_code(&s_, LZMA_RUN);
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
  const Bz2& lib_;  // first: members below are made with it

 public:
  explicit Bzip2Decoder(const Bz2& lib) : lib_(lib) {}
  ~Bzip2Decoder() override {
    if (started_) lib_.BZ2_bzDecompressEnd(&s_);
  }
  void restart() override {
    if (started_) lib_.BZ2_bzDecompressEnd(&s_);
    s_ = bz_stream{};
    started_ = lib_.BZ2_bzDecompressInit(&s_, 0, 0) == BZ_OK;
    if (!started_) throw DecodeError("libbz2: cannot start a decoder");
  }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    s_.next_in = const_cast<char*>(reinterpret_cast<const char*>(in.data()));  // libbz2 is not const
    s_.avail_in = u32(in.size());
    s_.next_out = reinterpret_cast<char*>(out.data());
    s_.avail_out = u32(out.size());
    const int rc = lib_.BZ2_bzDecompress(&s_);
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
  const Lz4& lib_;  // first: members below are made with it

 public:
  explicit Lz4Decoder(const Lz4& lib) : lib_(lib) {
    if (lib_.LZ4F_isError(lib_.LZ4F_createDecompressionContext(&ctx_, LZ4F_VERSION))) throw std::bad_alloc();
  }
  ~Lz4Decoder() override { lib_.LZ4F_freeDecompressionContext(ctx_); }
  void restart() override { lib_.LZ4F_resetDecompressionContext(ctx_); }
  bool decode(std::span<const unsigned char>& in, std::span<unsigned char>& out) override {
    std::size_t consumed = in.size();
    std::size_t produced = out.size();
    const std::size_t rc = lib_.LZ4F_decompress(ctx_, out.data(), &produced, in.data(), &consumed, nullptr);
    if (lib_.LZ4F_isError(rc)) throw DecodeError(lib_.LZ4F_getErrorName(rc));
    advance(in, out, in.size() - consumed, out.size() - produced);
    return rc == 0;  // the frame ended and was flushed
  }

 private:
  LZ4F_dctx* ctx_ = nullptr;
};

// A decoder over `library`, or the SourceError that names `input` where it cannot be loaded.
template <typename D, typename Functions>
std::unique_ptr<Decoder> over(const Library<Functions>& library, Compression format, const std::string& input) {
  if (!library.failure.empty())
    throw SourceError(input, ENOENT,
                      input + ": reading " + compression_name(format) + " data needs " + library.soname + " (Debian: " +
                          library.package + "), which could not be loaded: " + library.failure);
  return std::make_unique<D>(library.functions);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(Compression format, const std::string& input) {
  switch (format) {
    case Compression::kGzip: return over<GzipDecoder>(zlib(), format, input);
    case Compression::kZstd: return over<ZstdDecoder>(zstd(), format, input);
    case Compression::kXz: return over<XzDecoder>(lzma(), format, input);
    case Compression::kBzip2: return over<Bzip2Decoder>(bz2(), format, input);
    case Compression::kLz4: return over<Lz4Decoder>(lz4(), format, input);
    case Compression::kNone: break;
  }
  throw std::logic_error("make_decoder: no format");
}

}  // namespace gpufilter::detail
