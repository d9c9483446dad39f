// gpufilterd --test-filter: a fail2ban filter over a log, as fail2ban-regex shows it.
#pragma once

namespace gpufilter::daemon {

// argv[first..argc): FILTER LOG [--fail2ban-dir DIR] [--out ip|id|user|msg|json|KEY].
// Prints the summary (lines matched, missed, ignored; hits per failregex) or, with --out,
// one line per failure; returns the exit status (0, or 2 with a message on standard error).
int test_filter(int argc, char** argv, int first);

}  // namespace gpufilter::daemon
