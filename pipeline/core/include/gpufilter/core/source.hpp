// The seam between inputs and the pipeline: a Source is a byte reader with a name.
// It knows nothing of lines, patterns or devices (implementations live in sources/).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <optional>
#include <string>

namespace gpufilter {

// The unread rest of a regular file mapped in place (Source::map_unread), so that the
// host engine scans the page cache itself instead of a copy of it. Copy-on-write: a write
// through data() never reaches the file. If the file is truncated while mapped, the
// vanished bytes read as zeros instead of killing the process (SIGBUS).
class MappedBytes {
 public:
  virtual ~MappedBytes() = default;
  char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // How many of the first size() bytes the file holds now (fewer once it was truncated).
  virtual std::size_t still_backed() const = 0;
  // The first `bytes` are no longer needed and are never touched again: their pages may
  // leave this process's address space, so that memory stays bounded.
  virtual void drop_before(std::size_t bytes) noexcept = 0;

 protected:
  char* data_ = nullptr;
  std::size_t size_ = 0;
};

class Source {
 public:
  virtual ~Source() = default;

  // Reads up to dst.size() bytes; returns 0 only at the end of the input.
  // Blocks until some data is there. Throws SourceError on failure.
  virtual std::size_t read(std::span<char> dst) = 0;

  // read(), and where the first `byte` lies in what it read (its index in dst, or
  // kNotFound in `first`). By default searched after the read; a source that copies in
  // pieces searches each while it is in cache (FileSource: its threads' pieces).
  static constexpr std::size_t kNotFound = static_cast<std::size_t>(-1);
  virtual std::size_t read_finding(std::span<char> dst, char byte, std::size_t& first) {
    const std::size_t got = read(dst);
    first = index_of(dst.data(), got, byte);
    return got;
  }
  // The first `byte` among `size` bytes: its index, or kNotFound.
  static std::size_t index_of(const char* data, std::size_t size, char byte) noexcept {
    const void* at = std::memchr(data, byte, size);
    return at == nullptr ? kNotFound : static_cast<std::size_t>(static_cast<const char*>(at) - data);
  }

  // Waits at most `timeout` for data; true when read() would not block.
  // Sources whose reads never wait (regular files) return true at once.
  virtual bool wait_readable(std::chrono::milliseconds timeout) {
    (void)timeout;
    return true;
  }

  // True for inputs whose reads never wait and whose data is all there (regular files).
  virtual bool is_regular_file() const { return false; }

  // A regular file's bytes from the next read to its present end; none for other inputs.
  virtual std::optional<std::uint64_t> unread_size() const { return std::nullopt; }
  // A regular file's whole size (grep's st_size: the width of -T's numbers); none for
  // other inputs.
  virtual std::optional<std::uint64_t> file_size() const { return std::nullopt; }

  // A regular file's unread bytes, mapped, when there are at least `min_bytes` of them;
  // read() goes on after them (a file that grew). The mapping begins `read_back` bytes
  // before them (bytes read already that the caller has not used: at most what was read).
  // Null where the input is not mapped (too small, not a regular file, the mapping failed,
  // or `if_faster` and reading this file measured faster: mapping_beats_reading()): the
  // caller reads instead.
  virtual std::unique_ptr<MappedBytes> map_unread(std::size_t min_bytes, bool if_faster = false,
                                                  std::size_t read_back = 0) {
    (void)min_bytes;
    (void)if_faster;
    (void)read_back;
    return nullptr;
  }

  // The name grep would print for this input ("(standard input)" or a path).
  virtual const std::string& name() const = 0;
};

}  // namespace gpufilter
