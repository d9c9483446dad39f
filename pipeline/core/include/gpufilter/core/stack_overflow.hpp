// A stack overflow reported as grep reports it ("stack overflow", exit 2) instead of a
// death by SIGSEGV. glibc's regex matcher, which runs back-references here as in grep,
// recurses without end on some of them (`\(\)\1\{,3\}\+`); grep 3.8 catches the overflow
// with gnulib's c-stack and exits 2. The same here: the program installs the handler
// (report_stack_overflow(), from main), and every thread that may recurse so gives itself
// an alternate signal stack first (prepare_thread_for_stack_overflow(), cheap after the
// first call on a thread), for the handler to run on. Any other SIGSEGV stays a crash.
#pragma once

namespace gpufilter {

// Installs the SIGSEGV handler: a fault within the faulting thread's stack guard writes
// "<program>: stack overflow" and exits 2; any other is raised again as it came.
// Nothing under AddressSanitizer, which reports overflows itself.
void report_stack_overflow(const char* program) noexcept;

// The calling thread's alternate signal stack (and its stack's bounds, for the handler),
// once per thread; freed when the thread ends.
void prepare_thread_for_stack_overflow() noexcept;

}  // namespace gpufilter
