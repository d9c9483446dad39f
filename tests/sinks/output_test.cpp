// Output over its Writers: buffering (nothing reaches the writer before a flush, a full
// buffer or a line end when line-buffered), writes larger than the buffer, numbers, and
// FdWriter's errors (EPIPE is "closed"), and write-behind (a thread that writes full
// buffers; labelled `concurrency`, so ThreadSanitizer runs it).
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

// Write-behind: full buffers go to the Output's thread, in order with writes larger than
// the buffer, and flush() returns once everything is written.
TEST(Output, WriteBehindKeepsOrderAndFlushWaits) {
  StringWriter w;
  std::string expected;
  {
    Output out(w, false, 8, /*write_behind=*/true);
    for (int i = 0; i < 2000; ++i) {
      const std::string piece = i % 97 == 0 ? std::string(20, static_cast<char>('a' + i % 26)) : std::to_string(i) + ",";
      out.write(piece);
      expected += piece;
      if (i % 500 == 0) {
        out.flush();
        EXPECT_EQ(w.text(), expected);
      }
    }
    out.put('!');
    expected += '!';
  }
  EXPECT_EQ(w.text(), expected);  // the destructor flushes and joins
}

TEST(Output, WriteBehindRethrowsAWriteErrorOnTheCallersThread) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[0]);
  const auto old = std::signal(SIGPIPE, SIG_IGN);
  {
    Output out(fds[1], false, 16, /*write_behind=*/true);
    out.write("0123456789");
    out.write("0123456789");  // the first buffer goes to the thread, which fails
    try {
      out.flush();
      ADD_FAILURE() << "no error";
    } catch (const OutputError& e) {
      EXPECT_TRUE(e.closed());
    }
    out.flush();  // reported once; nothing is left to write
  }
  std::signal(SIGPIPE, old);
  ::close(fds[1]);
}

TEST(Output, LineBufferedIgnoresWriteBehind) {
  StringWriter w;
  Output out(w, true, 64, /*write_behind=*/true);
  out.write("one");
  out.end_line();
  EXPECT_EQ(w.text(), "one\n");  // written on this thread, at once
}

}  // namespace
}  // namespace gpufilter
