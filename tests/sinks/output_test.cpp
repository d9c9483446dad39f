// Output over its Writers: buffering (nothing reaches the writer before a flush, a full
// buffer or a line end when line-buffered), writes larger than the buffer, numbers, and
// FdWriter's errors (EPIPE is "closed"), and write-behind (a thread that writes full
// buffers; labelled `concurrency`, so ThreadSanitizer runs it).
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

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

// A file on tmpfs (FdWriter's space_ahead). Null where /dev/shm is not tmpfs.
int tmpfs_file(bool append, std::string& path) {
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC) return -1;
  path = "/dev/shm/gpufilter-output-test-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0 || !append) return fd;
  ::close(fd);
  return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
}

struct FileSpace {
  std::uint64_t size, allocated;
};
FileSpace file_space(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return {static_cast<std::uint64_t>(st.st_size), static_cast<std::uint64_t>(st.st_blocks) * 512};
}

// Writes 40 pieces of a MiB and a byte (pages are not the writes' unit) through a
// FdWriter with space_ahead, each piece of its own byte. Returns the largest allocation
// seen past the file's size while writing.
constexpr std::size_t kPiece = (1u << 20) + 1;
std::uint64_t write_40_pieces(int fd, const std::string& path) {
  std::uint64_t most_ahead = 0;
  FdWriter w(fd, /*space_ahead=*/true);
  for (int i = 0; i < 40; ++i) {
    w.write(std::string(kPiece, static_cast<char>('a' + i % 26)));
    if (i < 20) continue;
    // The thread reserves on its own time (slowly under a sanitizer): up to 0.25 s a
    // piece for it to be a step (8 MiB) ahead.
    for (int wait = 0; wait < 50; ++wait) {
      const FileSpace space = file_space(path);
      EXPECT_EQ(space.size, (static_cast<std::uint64_t>(i) + 1) * kPiece);  // KEEP_SIZE
      const std::uint64_t ahead = space.allocated > space.size ? space.allocated - space.size : 0;
      most_ahead = std::max(most_ahead, ahead);
      if (ahead > (8u << 20)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return most_ahead;
}

// Past 16 MiB the pages of a file on tmpfs are allocated ahead of the writes, its size
// stays what was written, and what was allocated past the end is given back at the end.
TEST(Output, SpaceAheadOnTmpfsKeepsTheSizeAndGivesTheRestBack) {
  std::string path;
  const int fd = tmpfs_file(false, path);
  if (fd < 0) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  const std::uint64_t most_ahead = write_40_pieces(fd, path);
  EXPECT_GT(most_ahead, 8u << 20);
  EXPECT_LT(most_ahead, (64u + 8u) << 20);  // under kAhead and a step, whole pages
  const FileSpace after = file_space(path);
  EXPECT_EQ(after.size, 40 * kPiece);
  EXPECT_LE(after.allocated, (after.size + 4095) / 4096 * 4096);  // nothing left past the end
  std::string back(40 * kPiece, '\0');
  EXPECT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  for (std::size_t i = 0; i < 40; ++i)
    ASSERT_EQ(back.find_first_not_of(static_cast<char>('a' + i % 26), i * kPiece),
              i == 39 ? std::string::npos : (i + 1) * kPiece)
        << i;
  ::close(fd);
  ::unlink(path.c_str());
}

// O_APPEND: where the writes land is not the writer's to know, so nothing is reserved.
TEST(Output, SpaceAheadLeavesAnAppendingFileAlone) {
  std::string path;
  const int fd = tmpfs_file(true, path);
  if (fd < 0) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  {
    FdWriter w(fd, /*space_ahead=*/true);
    const std::string piece(1u << 20, 'x');
    for (int i = 0; i < 40; ++i) w.write(piece);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const FileSpace space = file_space(path);
    EXPECT_EQ(space.size, 40u << 20);
    EXPECT_LE(space.allocated, space.size);
  }
  ::close(fd);
  ::unlink(path.c_str());
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
