// LineSpool: holds the pieces of one line longer than a chunk until its end is seen.
// Up to a memory limit it is a string; past it the bytes move to an unlinked temporary
// file that is mapped for reading, so a line of gigabytes does not grow the heap.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpufilter {

class LineSpool {
 public:
  explicit LineSpool(std::size_t memory_limit = std::size_t{16} << 20) : memory_limit_(memory_limit) {}
  ~LineSpool();
  LineSpool(const LineSpool&) = delete;
  LineSpool& operator=(const LineSpool&) = delete;

  void clear();
  // Throws Error when the temporary file cannot be written.
  void append(const char* data, std::size_t size);
  // All bytes appended since clear(); valid until the next append() or clear().
  std::string_view view();
  std::size_t size() const noexcept { return fd_ < 0 ? memory_.size() : file_size_; }

 private:
  void unmap();

  std::size_t memory_limit_;
  std::string memory_;
  int fd_ = -1;
  std::size_t file_size_ = 0;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
};

}  // namespace gpufilter
