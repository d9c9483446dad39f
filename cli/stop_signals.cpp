#include "stop_signals.hpp"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <system_error>
#include <thread>

namespace gpufilter::cli {

namespace {

constexpr std::chrono::seconds kStopGrace{5};

std::atomic<bool> g_graceful{false};

// SIGINT and SIGTERM, but one the process was started ignoring stays ignored, as in grep:
// a non-interactive shell starts its background jobs so, and ^C must not stop them.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int number : {SIGINT, SIGTERM}) {
    struct sigaction inherited {};
    if (::sigaction(number, nullptr, &inherited) == 0 && inherited.sa_handler == SIG_IGN) continue;
    sigaddset(&set, number);
  }
  return set;
}

// Ends the process by `signal_number`, as its default action does.
[[noreturn]] void end_by_signal(int signal_number) {
  ::signal(signal_number, SIG_DFL);  // a library may have installed a handler meanwhile
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal_number);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(signal_number);
  std::_Exit(128 + signal_number);  // not reached: the signal ends the process
}

// The next stop signal; after `deadline` (when given) 0.
int next_signal(const sigset_t& set, const std::chrono::steady_clock::time_point* deadline) {
  for (;;) {
    if (deadline == nullptr) {
      int number = 0;
      if (::sigwait(&set, &number) == 0) return number;
      continue;
    }
    const auto left = *deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return 0;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec wait{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    const int number = ::sigtimedwait(&set, nullptr, &wait);
    if (number > 0) return number;
    if (errno == EAGAIN) return 0;
  }
}

}  // namespace

void take_stop_signals_in_one_thread(StopSignal& stop) {
  const sigset_t set = stop_signals();
  if (sigisemptyset(&set)) return;
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  try {
    std::thread([set, &stop] {
      const int first = next_signal(set, nullptr);
      if (!g_graceful.load() || stop.requested()) end_by_signal(first);
      stop.request();
      const auto grace_over = std::chrono::steady_clock::now() + kStopGrace;
      const int second = next_signal(set, &grace_over);
      end_by_signal(second != 0 ? second : first);
    }).detach();
  } catch (const std::system_error&) {
    // No thread to spare (a process limit): the signals keep their default action and
    // end the process at once, as they end grep.
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
}

void stop_gracefully_from_now() { g_graceful.store(true); }

}  // namespace gpufilter::cli
