// SIGINT and SIGTERM for gpufilter, as they end grep: at once until the scan begins; from
// then on the first one stops the reading, what was read is finished and flushed, and the
// run exits 0. A second one ends the process at once, and so does the first after a
// grace of a few seconds: what was read may take long to finish (a regular expression that
// glibc decides in time that grows faster than a long line), and one SIGTERM (`timeout`'s)
// must end the process. A signal the process was started ignoring stays ignored.
//
// No handler runs: both signals are blocked in every thread and one thread takes them with
// sigwait(), as gpufilterd does. A handler would not stay ours (PoCL compiles kernels with
// LLVM, which installs its own for these signals), and under ThreadSanitizer a handler runs
// only at the runtime's safe points, where now and then it never ran at all (a SIGTERM lost
// in about one run of 2,000 of Listen.NoHostListensOnLoopbackOnly).
#pragma once

#include "gpufilter/core/stop_signal.hpp"

namespace gpufilter::cli {

// Call in main() before any other thread starts, so that every thread inherits the mask.
// `stop` lives until the process ends.
void take_stop_signals_in_one_thread(StopSignal& stop);

// From now on a first stop signal asks `stop` to stop instead of ending the process.
void stop_gracefully_from_now();

}  // namespace gpufilter::cli
