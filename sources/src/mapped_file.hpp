// MappedFile: a piece of a regular file mapped copy-on-write (MappedBytes), guarded
// against the file shrinking under it. Touching a mapped page past a file's end raises
// SIGBUS; a process-wide handler, installed with the first mapping, puts a page of zeros
// there instead when the address lies in a live MappedFile, and leaves every other SIGBUS
// to the disposition that was there before (ripgrep, which maps too, simply dies).
#pragma once

#include <cstdint>
#include <memory>

#include "gpufilter/core/source.hpp"

namespace gpufilter {

class MappedFile final : public MappedBytes {
 public:
  // Maps [offset, offset + size) of the open file `fd` (which it duplicates). Null when
  // the mapping fails or too many are live: the caller reads instead.
  static std::unique_ptr<MappedFile> map(int fd, std::uint64_t offset, std::size_t size);
  ~MappedFile() override;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::size_t still_backed() const override;
  void drop_before(std::size_t bytes) noexcept override;

  // Pages replaced by zeros since the process started (tests).
  static std::uint64_t zero_filled_pages() noexcept;

 private:
  MappedFile() = default;

  int fd_ = -1;
  int guard_ = -1;            // this mapping's entry in the SIGBUS handler's table
  void* base_ = nullptr;      // page-aligned start of the mapping
  std::size_t length_ = 0;    // of the whole mapping
  std::uint64_t offset_ = 0;  // file offset of data()[0]
  std::size_t dropped_ = 0;   // bytes from base_ given back so far
};

}  // namespace gpufilter
