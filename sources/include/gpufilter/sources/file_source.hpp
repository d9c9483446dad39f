// FileSource: a file or standard input read through its file descriptor. Pipes, FIFOs
// and terminals can stall; wait_readable() lets the chunker cut a batch meanwhile.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gpufilter/core/workers.hpp"
#include "gpufilter/core/source.hpp"
#include "gpufilter/core/stop_signal.hpp"

namespace gpufilter {

class FileSource final : public Source {
 public:
  // Opens `path` for reading; throws SourceError(path, errno).
  static std::unique_ptr<FileSource> open(const std::string& path);
  // A file already open on `fd` (at its start), named `path`; the source owns `fd`.
  // `known`: what fstat(2) said of `fd` just now (none: asked here).
  static std::unique_ptr<FileSource> adopt(int fd, const std::string& path, const struct stat* known = nullptr);
  // Standard input under the name grep prints for it ("(standard input)" or --label).
  static std::unique_ptr<FileSource> standard_input(std::string name);

  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  // After stop->request(), reads end the input (return 0) and waits return at once.
  void set_stop(const StopSignal* stop) noexcept { stop_ = stop; }
  // A large read of a regular file is split over these threads (null: this thread alone).
  void set_workers(WorkerPool* workers) noexcept { workers_ = workers; }

  std::size_t read(std::span<char> dst) override;
  std::size_t read_finding(std::span<char> dst, char byte, std::size_t& first) override;
  bool wait_readable(std::chrono::milliseconds timeout) override;
  // Leaves a seekable descriptor where grep leaves it once the input is searched: just
  // past the first `consumed` bytes of what this source read (-m), or at the end of the
  // file (reads ahead, -q and -l stop before it). 0, or the errno of a failed lseek.
  int leave_at(std::optional<std::uint64_t> consumed);
  bool is_regular_file() const override { return regular_; }
  // The size seen at open serves until the reads reach it; then the file is asked again.
  std::optional<std::uint64_t> unread_size() const override;
  std::optional<std::uint64_t> file_size() const override;
  // The file from the next read's offset to its present end (sources/src/mapped_file.hpp).
  std::unique_ptr<MappedBytes> map_unread(std::size_t min_bytes, bool if_faster = false,
                                          std::size_t read_back = 0) override;
  // Whether this is a regular file and `other` (an fstat of an open descriptor) is that
  // same file: grep's "input file is also the output", with `other` standard output's.
  bool is_same_file_as(const struct stat& other) const;
  // A regular file's next bytes (up to dst.size()) without consuming them, as the next
  // read would return them: --decompress tells a format by them. 0 for other inputs.
  std::size_t peek(std::span<char> dst) const;
  const std::string& name() const override { return name_; }

 private:
  FileSource(int fd, bool owned, std::string name, const struct stat* known = nullptr);
  // read() and read_finding(): with `byte`, `*first` is where it first lies in what was read.
  std::size_t read_searching(std::span<char> dst, const char* byte, std::size_t* first);

  int fd_;
  bool owned_;
  bool regular_ = false;
  dev_t device_ = 0;  // identity of a regular file, for is_same_file_as
  ino_t inode_ = 0;
  std::uint64_t start_ = 0;   // where a regular file was when this source took it
  std::uint64_t offset_ = 0;  // of the next read of a regular file
  mutable std::uint64_t size_ = 0;  // a regular file's size, seen at open and again at its end
  std::size_t read_limit_ = SIZE_MAX;  // a grown pipe: its size before, the most one read takes
  std::string name_;
  const StopSignal* stop_ = nullptr;
  WorkerPool* workers_ = nullptr;
};

}  // namespace gpufilter
