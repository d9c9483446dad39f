// Output over its Writers: buffering (nothing reaches the writer before a flush, a full
// buffer or a line end when line-buffered), writes larger than the buffer, numbers, and
// FdWriter's errors (EPIPE is "closed").
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include <gtest/gtest.h>

#include "gpufilter/sinks/output.hpp"

namespace gpufilter {
namespace {

TEST(Output, BuffersUntilFlushed) {
  StringWriter w;
  {
    Output out(w);
    out.write("abc");
    out.put(':');
    out.write_number(18446744073709551615u);
    out.end_line();
    EXPECT_EQ(w.text(), "");
    out.flush();
    EXPECT_EQ(w.text(), "abc:18446744073709551615\n");
    out.write("tail");
  }
  EXPECT_EQ(w.text(), "abc:18446744073709551615\ntail");  // the destructor flushes
}

TEST(Output, LineBufferedWritesEachLine) {
  StringWriter w;
  Output out(w, true);
  out.write("one");
  EXPECT_EQ(w.text(), "");
  out.end_line();
  EXPECT_EQ(w.text(), "one\n");
}

TEST(Output, SmallBufferKeepsOrderAcrossLargeWrites) {
  StringWriter w;
  Output out(w, false, 4);
  out.write("ab");
  out.write("cdef");  // not smaller than the buffer: written through, after "ab"
  out.write("gh");
  out.write("ij");    // does not fit beside "gh": "gh" goes first
  out.flush();
  EXPECT_EQ(w.text(), "abcdefghij");
}

TEST(Output, FdWriterReportsAClosedPipe) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[0]);
  const auto old = std::signal(SIGPIPE, SIG_IGN);
  Output out(fds[1]);
  out.write("lost");
  try {
    out.flush();
    ADD_FAILURE() << "no error";
  } catch (const OutputError& e) {
    EXPECT_TRUE(e.closed());
    EXPECT_STREQ(e.what(), "write error: Broken pipe");
  }
  std::signal(SIGPIPE, old);
  ::close(fds[1]);
}

TEST(Output, FdWriterWritesTheDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  {
    Output out(fds[1]);
    out.write("through the pipe\n");
  }
  ::close(fds[1]);
  char buffer[64];
  const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buffer, n > 0 ? static_cast<std::size_t>(n) : 0), "through the pipe\n");
}

}  // namespace
}  // namespace gpufilter
