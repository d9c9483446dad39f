// Standard descriptors that the process was started without (`prog <&-`, `>&-`, `2>&-`).
//
// Every descriptor the process creates (a StopSignal's self-pipe, a signal pipe, an
// input file) takes the lowest free number. With descriptor 0 closed the first pipe
// becomes standard input, and the program reads its own pipe forever; with 1 closed its
// output goes into that pipe. So each closed one is reopened on /dev/null before anything
// else is opened, in the mode opposite to its use (as gnulib's stdopen does): a read of
// standard input or a write of standard output then fails with EBADF, which is what
// grep reports for a closed one.
#pragma once

namespace gpufilter {

struct StandardDescriptors {
  bool stdin_closed = false;
  bool stdout_closed = false;
  bool stderr_closed = false;
};

// Call first thing in main(), before any descriptor is created. Never throws; a
// descriptor that cannot be reopened is left closed (and reported as closed).
StandardDescriptors reopen_closed_standard_descriptors() noexcept;

}  // namespace gpufilter
