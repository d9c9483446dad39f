#include "mapped_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

namespace gpufilter {
namespace {

// The live mappings, for the SIGBUS handler: [begin, end) pairs, 0 when free. Lock-free
// reads, so the handler may look at them at any moment.
constexpr std::size_t kGuards = 256;
std::array<std::atomic<std::uintptr_t>, kGuards> guard_begin{};
std::array<std::atomic<std::uintptr_t>, kGuards> guard_end{};
std::atomic<std::uint64_t> zero_pages{0};
struct sigaction previous_sigbus {};
std::once_flag install_once;

void on_sigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (std::size_t i = 0; i < kGuards; ++i) {
    const std::uintptr_t begin = guard_begin[i].load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= guard_end[i].load(std::memory_order_acquire)) continue;
    // A page of ours past the file's end: zeros in its place, and the access goes on.
    void* at = reinterpret_cast<void*>(address & ~(page - 1));
    if (::mmap(at, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      zero_pages.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    break;
  }
  // Not ours: what was there before.
  if ((previous_sigbus.sa_flags & SA_SIGINFO) != 0 && previous_sigbus.sa_sigaction != nullptr) {
    previous_sigbus.sa_sigaction(signal, info, context);
    return;
  }
  if (previous_sigbus.sa_handler != SIG_DFL && previous_sigbus.sa_handler != SIG_IGN &&
      previous_sigbus.sa_handler != nullptr) {
    previous_sigbus.sa_handler(signal);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);  // returning faults again, now fatally, at the same address
}

void install_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &previous_sigbus);
}

int claim_guard(std::uintptr_t begin, std::uintptr_t end) {
  for (std::size_t i = 0; i < kGuards; ++i) {
    std::uintptr_t expected = 0;
    if (guard_begin[i].load(std::memory_order_relaxed) != 0) continue;
    // The end first, so that a handler that sees the begin sees the right end.
    guard_end[i].store(end, std::memory_order_release);
    if (guard_begin[i].compare_exchange_strong(expected, begin, std::memory_order_acq_rel)) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::unique_ptr<MappedFile> MappedFile::map(int fd, std::uint64_t offset, std::size_t size) {
  if (size == 0) return nullptr;
  std::call_once(install_once, install_handler);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  const std::size_t length = static_cast<std::size_t>(offset - start) + size;
  std::unique_ptr<MappedFile> m(new MappedFile);
  m->fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (m->fd_ < 0) return nullptr;
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(start));
  if (base == MAP_FAILED) return nullptr;
  m->base_ = base;
  m->length_ = length;
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  m->guard_ = claim_guard(b, b + length);
  if (m->guard_ < 0) return nullptr;  // unguarded, a truncation could kill us: read instead
  // No MADV_SEQUENTIAL: it lets the kernel drop the file's cached pages behind the scan,
  // and the next search of the same file would read them from disk again.
  m->data_ = static_cast<char*>(base) + (offset - start);
  m->size_ = size;
  m->offset_ = offset;
  return m;
}

MappedFile::~MappedFile() {
  if (base_ != nullptr && dropped_ < length_) ::munmap(static_cast<char*>(base_) + dropped_, length_ - dropped_);
  // Unmapped before the guard goes: no SIGBUS can come from these pages any more.
  if (guard_ >= 0) guard_begin[static_cast<std::size_t>(guard_)].store(0, std::memory_order_release);
  if (fd_ >= 0) ::close(fd_);
}

std::size_t MappedFile::still_backed() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return size_;
  const auto end = static_cast<std::uint64_t>(st.st_size);
  return end <= offset_ ? 0 : static_cast<std::size_t>(std::min<std::uint64_t>(end - offset_, size_));
}

void MappedFile::drop_before(std::size_t bytes) noexcept {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t head = static_cast<std::size_t>(data_ - static_cast<char*>(base_));
  const std::size_t upto = (head + std::min(bytes, size_)) / page * page;
  if (upto <= dropped_) return;
  // Unmapped rather than madvise(MADV_DONTNEED)ed: the same pages leave the resident set,
  // and a sanitizer's shadow of them goes too (ThreadSanitizer's, for one, stays after an
  // madvise and grew to twice the file). The guard shrinks first: the address range freed
  // may be mapped again by anyone.
  if (guard_ >= 0)
    guard_begin[static_cast<std::size_t>(guard_)].store(reinterpret_cast<std::uintptr_t>(base_) + upto,
                                                         std::memory_order_release);
  ::munmap(static_cast<char*>(base_) + dropped_, upto - dropped_);
  dropped_ = upto;
}

std::uint64_t MappedFile::zero_filled_pages() noexcept { return zero_pages.load(std::memory_order_relaxed); }

}  // namespace gpufilter
