#include "gpufilter/sources/decompressing_source.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <vector>

#include "decoders.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/file_source.hpp"

namespace gpufilter {
namespace {

struct Magic {
  Compression format;
  std::string_view bytes;  // '#' stands for a digit 1 to 9 (bzip2's block size)
};
// The tools' own magic numbers: gzip's ID and deflate method (RFC 1952), zstd and lz4
// frames (little-endian 0xFD2FB528, 0x184D2204), xz's stream header, and bzip2's "BZh",
// block size and first block (or end-of-stream) marker: long enough that a text file
// that happens to begin with "BZh" is not taken for bzip2.
constexpr std::array<Magic, 6> kMagics = {{
    {Compression::kGzip, std::string_view("\x1f\x8b\x08", 3)},
    {Compression::kZstd, std::string_view("\x28\xb5\x2f\xfd", 4)},
    {Compression::kXz, std::string_view("\xfd" "7zXZ\0", 6)},
    {Compression::kBzip2, std::string_view("BZh#1AY&SY", 10)},
    {Compression::kBzip2, std::string_view("BZh#\x17\x72\x45\x38\x50\x90", 10)},
    {Compression::kLz4, std::string_view("\x04\x22\x4d\x18", 4)},
}};
constexpr std::size_t kLongestMagic = 10;

// Whether `head` (at most m.bytes.size() bytes) agrees with the magic so far.
bool agrees(const Magic& m, std::string_view head) {
  if (head.size() > m.bytes.size()) head = head.substr(0, m.bytes.size());
  for (std::size_t i = 0; i < head.size(); ++i) {
    const char want = m.bytes[i];
    if (want == '#' ? head[i] < '1' || head[i] > '9' : head[i] != want) return false;
  }
  return true;
}

// Whether more bytes after `head` could still make it some format's magic.
bool could_become_magic(std::string_view head) {
  return std::any_of(kMagics.begin(), kMagics.end(),
                     [&](const Magic& m) { return head.size() < m.bytes.size() && agrees(m, head); });
}

constexpr std::size_t kBlockBytes = 1u << 20;  // decoded blocks of 1 MiB, ahead_bytes / 1 MiB of them
constexpr std::size_t kInputBytes = 256u << 10;

// An input that is not compressed after all: the bytes read to tell so come out first,
// then the error that ended that reading, if one did (a directory's EISDIR), so that it
// is reported where a read of the input would have met it.
class ReplayingSource final : public Source {
 public:
  ReplayingSource(std::unique_ptr<Source> source, std::string head, std::exception_ptr error)
      : source_(std::move(source)), head_(std::move(head)), error_(std::move(error)) {}
  std::size_t read(std::span<char> dst) override {
    if (taken_ == head_.size()) {
      if (error_) std::rethrow_exception(error_);
      return source_->read(dst);
    }
    const std::size_t n = std::min(dst.size(), head_.size() - taken_);
    std::memcpy(dst.data(), head_.data() + taken_, n);
    taken_ += n;
    return n;
  }
  bool wait_readable(std::chrono::milliseconds timeout) override {
    return taken_ < head_.size() || source_->wait_readable(timeout);
  }
  const std::string& name() const override { return source_->name(); }

 private:
  std::unique_ptr<Source> source_;
  std::string head_;
  std::exception_ptr error_;
  std::size_t taken_ = 0;
};

}  // namespace

Compression compression_of(std::string_view head) {
  for (const Magic& m : kMagics)
    if (head.size() >= m.bytes.size() && agrees(m, head)) return m.format;
  return Compression::kNone;
}

const char* compression_name(Compression format) {
  switch (format) {
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
    case Compression::kXz: return "xz";
    case Compression::kBzip2: return "bzip2";
    case Compression::kLz4: return "lz4";
    case Compression::kNone: break;
  }
  return "none";
}

// What the decoder thread and the reader share, under `mutex`.
struct DecompressingSource::Shared {
  std::unique_ptr<Source> input;  // read on the decoder thread only
  Compression format;
  std::string name;
  std::string head;
  const StopSignal* stop;

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Block> filled;  // decoded, in order, for the reader
  std::vector<Block> spare;  // given back by the reader
  std::size_t blocks = 0;    // allocated so far, at most max_blocks
  std::size_t max_blocks = 4;
  bool done = false;         // the decoder has ended; `error` says why when not at the end
  bool cancelled = false;    // the reader is gone
  std::string error;
  int error_number = 0;
};

namespace {

// The decoder thread: compressed bytes in from the input, decoded blocks out to the reader.
// Nothing is thrown across threads: a failure becomes Shared::error, which the reader
// throws once it has read every byte decoded before it.
template <typename Shared, typename Block>
class DecodeLoop {
 public:
  DecodeLoop(Shared& s, std::unique_ptr<detail::Decoder> decoder) : s_(s), decoder_(std::move(decoder)), in_(kInputBytes) {
    end_ = std::min(s.head.size(), in_.size());
    std::memcpy(in_.data(), s.head.data(), end_);
  }

  void run() {
    Block block;
    try {
      for (;;) {
        if (!take_spare(block)) return;
        const bool more = fill(block);
        give(std::move(block), more ? nullptr : "");
        if (!more) return;
      }
    } catch (const SourceError& e) {
      fail(std::move(block), e.what(), e.error_number());
    } catch (const detail::DecodeError& e) {
      fail(std::move(block), s_.name + ": corrupt " + compression_name(s_.format) + " data at byte " +
                                 std::to_string(error_at_) + ": " + e.what(),
           EIO);
    } catch (const std::bad_alloc&) {
      fail(std::move(block), s_.name + ": memory exhausted", ENOMEM);
    } catch (const std::exception& e) {
      fail(std::move(block), s_.name + ": " + e.what(), EIO);
    }
  }

 private:
  // Waits for a block to decode into; false when the reader has gone.
  bool take_spare(Block& block) {
    std::unique_lock lock(s_.mutex);
    s_.changed.wait(lock, [&] { return s_.cancelled || !s_.spare.empty() || s_.blocks < s_.max_blocks; });
    if (s_.cancelled) return false;
    if (!s_.spare.empty()) {
      block = std::move(s_.spare.back());
      s_.spare.pop_back();
    } else {
      block.bytes = std::make_unique_for_overwrite<char[]>(kBlockBytes);
      ++s_.blocks;
    }
    block.size = 0;
    return true;
  }

  // Hands `block` (when it holds bytes) to the reader; with `error` non-null, the end.
  void give(Block block, const char* error, int error_number = 0) {
    std::lock_guard lock(s_.mutex);
    if (block.size > 0) s_.filled.push_back(std::move(block));
    if (error != nullptr) {
      s_.done = true;
      s_.error = error;
      s_.error_number = error_number;
    }
    s_.changed.notify_all();
  }
  void fail(Block block, const std::string& error, int error_number) { give(std::move(block), error.c_str(), error_number); }

  // Reads more compressed bytes behind those left; false when none came (the input
  // ended, or the buffer is full).
  bool read_more() {
    if (begin_ > 0) {
      std::memmove(in_.data(), in_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (input_ended_ || end_ == in_.size()) return false;
    // A pipe is waited on beside the stop signal (FileSource::wait_readable), so that a
    // stop ends a decoder that waits for a slow writer.
    if (!s_.input->is_regular_file()) s_.input->wait_readable(std::chrono::milliseconds(-1));
    const std::size_t got = s_.input->read(std::span<char>(reinterpret_cast<char*>(in_.data()) + end_, in_.size() - end_));
    if (got == 0) input_ended_ = true;
    end_ += got;
    return got > 0;
  }

  [[noreturn]] void truncated() const {
    throw SourceError(s_.name, EIO, s_.name + ": truncated " + compression_name(s_.format) +
                                        " data: unexpected end of input at byte " +
                                        std::to_string(offset_ + (end_ - begin_)));
  }

  // Decodes into `block` until it is full (true) or the input ended after a whole stream
  // (false). Throws DecodeError for corrupt data and SourceError for a truncated stream
  // or a failed read; `block` then holds what was decoded before.
  bool fill(Block& block) {
    std::span<unsigned char> out(reinterpret_cast<unsigned char*>(block.bytes.get()), kBlockBytes);
    try {
      while (!out.empty()) {
        if (s_.stop != nullptr && s_.stop->requested()) break;
        if (begin_ == end_ && !read_more()) {
          if (in_stream_) truncated();
          block.size = kBlockBytes - out.size();
          return false;
        }
        if (!in_stream_) {  // a stream (or another after one) begins here
          const std::size_t pad = decoder_->padding(std::span<const unsigned char>(in_.data() + begin_, end_ - begin_));
          begin_ += pad;
          offset_ += pad;
          if (begin_ == end_) continue;
          if (streams_ > 0 && !decoder_->another_stream(std::span<const unsigned char>(in_.data() + begin_, end_ - begin_))) {
            begin_ = end_;  // trailing garbage, ignored: the input ends here
            input_ended_ = true;
            continue;
          }
          decoder_->restart();
          in_stream_ = true;
        }
        decode_some(out);
      }
    } catch (...) {
      block.size = kBlockBytes - out.size();
      throw;
    }
    block.size = kBlockBytes - out.size();
    return out.empty();  // else a stop ended it
  }

  // One call of the decoder on the compressed bytes at hand.
  void decode_some(std::span<unsigned char>& out) {
    std::span<const unsigned char> in(in_.data() + begin_, end_ - begin_);
    const std::size_t in_before = in.size(), out_before = out.size();
    bool ended = false;
    try {
      ended = decoder_->decode(in, out);
    } catch (const detail::DecodeError&) {
      error_at_ = offset_ + (in_before - in.size());
      throw;
    }
    begin_ += in_before - in.size();
    offset_ += in_before - in.size();
    if (ended) {
      in_stream_ = false;
      ++streams_;
    }
    // No progress with room on both sides: the decoder needs more input than is here.
    if (!ended && in.size() == in_before && out.size() == out_before && !read_more()) {
      if (input_ended_) truncated();
      throw detail::DecodeError("the decoder makes no progress");
    }
  }

  Shared& s_;
  std::unique_ptr<detail::Decoder> decoder_;
  std::vector<unsigned char> in_;
  std::size_t begin_ = 0, end_ = 0;  // the unread compressed bytes in in_
  std::uint64_t offset_ = 0;          // of in_[begin_] in the input
  std::uint64_t error_at_ = 0;
  bool input_ended_ = false;
  bool in_stream_ = false;
  std::uint64_t streams_ = 0;  // whole streams decoded
};

}  // namespace

DecompressingSource::DecompressingSource(std::unique_ptr<Source> source, Compression format, std::string head,
                                         const StopSignal* stop, std::size_t ahead_bytes)
    : shared_(std::make_shared<Shared>()),
      name_(source->name()),
      format_(format),
      stop_(stop),
      join_on_close_(source->is_regular_file()) {
  Shared& s = *shared_;
  s.input = std::move(source);
  s.format = format;
  s.name = name_;
  s.head = std::move(head);
  s.stop = stop;
  s.max_blocks = std::max<std::size_t>(1, ahead_bytes / kBlockBytes);
  // Made here, where a library that cannot be loaded is the caller's error to report.
  std::unique_ptr<detail::Decoder> decoder = detail::make_decoder(format, name_);
  thread_ = std::thread([shared = shared_, decoder = std::move(decoder)]() mutable {
    DecodeLoop<Shared, Block>(*shared, std::move(decoder)).run();
  });
}

DecompressingSource::~DecompressingSource() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->cancelled = true;
    shared_->changed.notify_all();
  }
  // A regular file's decoder stops at its next block. One blocked reading a pipe may
  // never return: it is left to end on its own (it holds what it uses).
  if (join_on_close_) thread_.join();
  else thread_.detach();
}

std::size_t DecompressingSource::read(std::span<char> dst) {
  if (stop_ != nullptr && stop_->requested()) return 0;
  if (taken_ == current_.size) {
    Shared& s = *shared_;
    std::unique_lock lock(s.mutex);
    if (current_.bytes) s.spare.push_back(std::move(current_));
    current_ = Block{};
    taken_ = 0;
    s.changed.notify_all();
    // Rechecked now and then: a stop must end a read that waits for a stalled decoder.
    while (!s.changed.wait_for(lock, std::chrono::milliseconds(50), [&] { return !s.filled.empty() || s.done; }))
      if (stop_ != nullptr && stop_->requested()) return 0;
    if (s.filled.empty()) {
      if (s.error.empty() || (stop_ != nullptr && stop_->requested())) return 0;
      throw SourceError(name_, s.error_number, s.error);
    }
    current_ = std::move(s.filled.front());
    s.filled.pop_front();
  }
  const std::size_t n = std::min(dst.size(), current_.size - taken_);
  std::memcpy(dst.data(), current_.bytes.get() + taken_, n);
  taken_ += n;
  return n;
}

bool DecompressingSource::wait_readable(std::chrono::milliseconds timeout) {
  (void)timeout;
  return true;
}

std::unique_ptr<Source> open_decompressing(std::unique_ptr<FileSource> file, const StopSignal* stop,
                                           std::size_t ahead_bytes) {
  std::string head(kLongestMagic, '\0');
  if (file->is_regular_file()) {
    head.resize(file->peek(std::span<char>(head.data(), head.size())));
    const Compression format = compression_of(head);
    if (format == Compression::kNone) return file;
    return std::make_unique<DecompressingSource>(std::move(file), format, std::string{}, stop, ahead_bytes);
  }
  // A pipe cannot be peeked at: read until the bytes are some magic or cannot become one
  // (one byte often tells), so that a plain input's first line is not held up.
  std::size_t got = 0;
  std::exception_ptr error;
  try {
    while (got < head.size() && could_become_magic(std::string_view(head.data(), got))) {
      const std::size_t n = file->read(std::span<char>(head.data() + got, head.size() - got));
      if (n == 0) break;
      got += n;
    }
  } catch (const SourceError&) {
    error = std::current_exception();
  }
  head.resize(got);
  const Compression format = compression_of(head);
  if (format == Compression::kNone || error)
    return std::make_unique<ReplayingSource>(std::move(file), std::move(head), std::move(error));
  return std::make_unique<DecompressingSource>(std::move(file), format, std::move(head), stop, ahead_bytes);
}

}  // namespace gpufilter
