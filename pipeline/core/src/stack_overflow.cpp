#include "gpufilter/core/stack_overflow.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace gpufilter {
namespace {

const char* g_program = nullptr;

// A thread's alternate signal stack, and the low end of its own stack (which grows down).
struct ThreadStack {
  std::unique_ptr<char[]> alternate;
  std::uintptr_t low = 0, high = 0;
  ThreadStack() {
    constexpr std::size_t kSize = 64 * 1024;
    alternate = std::make_unique_for_overwrite<char[]>(kSize);  // untouched until a signal: no page faults now
    stack_t ss{};
    ss.ss_sp = alternate.get();
    ss.ss_size = kSize;
    if (::sigaltstack(&ss, nullptr) != 0) alternate.reset();
    if (main_thread_bounds()) return;
    pthread_attr_t attr;
    if (::pthread_getattr_np(::pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      std::size_t size = 0;
      if (::pthread_attr_getstack(&attr, &addr, &size) == 0) {
        low = reinterpret_cast<std::uintptr_t>(addr);
        high = low + size;
      }
      ::pthread_attr_destroy(&attr);
    }
  }
  // The main thread's stack from its limit: pthread_getattr_np() reads /proc/self/maps
  // for it (about 20 reads, a tenth of a short run's start-up). Its top lies above this
  // frame by the environment and the arguments, well inside the handler's slack.
  bool main_thread_bounds() {
    if (::getpid() != static_cast<pid_t>(::gettid())) return false;
    rlimit limit{};
    if (::getrlimit(RLIMIT_STACK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return false;
    const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    high = (here + page - 1) & ~(page - 1);
    low = high > limit.rlim_cur ? high - limit.rlim_cur : 0;
    return true;
  }
  ~ThreadStack() {
    if (!alternate) return;
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    ::sigaltstack(&ss, nullptr);
  }
};

thread_local std::uintptr_t t_low = 0, t_high = 0;  // read by the handler: plain words

void on_segv(int sig, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  // The guard below the stack, or its last page: the recursion ran out of stack.
  constexpr std::uintptr_t kSlack = 1 << 20;
  if (g_program != nullptr && t_low != 0 && at + kSlack >= t_low && at < t_low + kSlack && at < t_high) {
    const char* text = ": stack overflow\n";
    (void)!::write(STDERR_FILENO, g_program, std::strlen(g_program));
    (void)!::write(STDERR_FILENO, text, std::strlen(text));
    ::_exit(2);
  }
  ::signal(sig, SIG_DFL);  // any other fault: the crash it is, once the handler returns
}

}  // namespace

void report_stack_overflow(const char* program) noexcept {
#if !defined(__SANITIZE_ADDRESS__)
  g_program = program;
  prepare_thread_for_stack_overflow();
  struct sigaction sa{};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, nullptr);
#else
  (void)program;
#endif
}

void prepare_thread_for_stack_overflow() noexcept {
  try {
    thread_local ThreadStack stack;
    t_low = stack.low;
    t_high = stack.high;
  } catch (...) {  // no memory for it: a crash stays a crash
  }
}

}  // namespace gpufilter
