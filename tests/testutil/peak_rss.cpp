// gpufilter-test-peak-rss FILE PROGRAM [ARG]...: runs PROGRAM (a path) and writes its peak
// resident set in KiB (wait4's ru_maxrss) to FILE, then ends as PROGRAM did: the same exit
// status, or the same signal.
//
// Why: Linux keeps a process's resident high-water mark across execve, and a child forked
// (or vforked) from the test process starts with the test's resident set, so a test
// process grown to 260 MB (the GPU machine's, after its earlier tests) read 260 MB as
// every child's peak. This program starts fresh, a few hundred KiB, and PROGRAM is forked
// from it: its ru_maxrss is its own. run_process_measured() runs commands through it.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fputs("usage: gpufilter-test-peak-rss FILE PROGRAM [ARG]...\n", stderr);
    return 127;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("gpufilter-test-peak-rss: fork");
    return 127;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // gone with this program, whatever ends it
    execv(argv[2], argv + 2);
    std::fprintf(stderr, "gpufilter-test-peak-rss: cannot start %s: %s\n", argv[2], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0)
    if (errno != EINTR) return 127;
  std::FILE* out = std::fopen(argv[1], "w");
  if (out != nullptr) {
    std::fprintf(out, "%ld\n", usage.ru_maxrss);
    std::fclose(out);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WTERMSIG(status);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // the program's signal, not a core of this one
  std::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  std::raise(sig);
  return 128 + sig;
}
