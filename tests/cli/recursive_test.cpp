// Directories as GNU grep 3.8 treats them: -r, -R, -d, -D, --include, --exclude,
// --exclude-from and --exclude-dir, compared with grep on trees made here (nested folders,
// symbolic links to files and folders, a loop, a dangling link, a FIFO, binary and empty
// files). Both tools list a folder in the order the file system gives, so the output,
// standard error and exit status must be equal byte for byte.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

class Recursive : public ::testing::Test {
 protected:
  void SetUp() override {
    dir.make_dir("t");
    dir.make_dir("t/logs");
    dir.make_dir("t/logs/old");
    dir.make_dir("t/.git");
    dir.make_dir("t/src");
    dir.write("t/a.txt", "foo one\nbar\n");
    dir.write("t/b.log", "no match here\n");
    dir.write("t/logs/app.log", "foo in a log\nfoo again\n");
    dir.write("t/logs/old/app.log.1", "old foo\n");
    dir.write("t/logs/binary.dat", std::string("foo\0binary", 10));
    dir.write("t/.git/config", "foo hidden\n");
    dir.write("t/src/main.c", "int foo;\n");
    dir.write("t/src/empty.c", "");
    ASSERT_EQ(::symlink("../a.txt", (root + "/src/link.txt").c_str()), 0);
    ASSERT_EQ(::symlink("../logs", (root + "/src/logs-link").c_str()), 0);
    ASSERT_EQ(::symlink("..", (root + "/logs/old/up").c_str()), 0);  // a loop under -R
    ASSERT_EQ(::symlink("nowhere", (root + "/dangling").c_str()), 0);
  }

  TempDir dir;
  std::string root = dir.path() + "/t";
};

TEST_F(Recursive, FlagsAndOutputModesAsGrep) {
  const std::vector<Args> flags = {
      {"-r"},       {"-R"},         {"-rn"},           {"-rc"},   {"-rl"},      {"-rL"},         {"-rh"},
      {"-ro", "-b"}, {"-r", "-i"},  {"-rZl"},          {"-rs"},   {"-Rs", "-c"}, {"-r", "-a"},  {"-r", "-I"},
      {"-r", "-m1"}, {"-rq"},       {"-d", "recurse"}, {"-r", "-v", "-c"}, {"-r", "-w"},
      // -r after -R leaves -R's walk (grep's -r only sets the directories action).
      {"-R", "-r"},  {"-r", "-R"},  {"--dereference-recursive", "--recursive"}, {"-R", "-d", "recurse"},
  };
  for (const Args& f : flags) {
    expect_same(f + Args{"foo", root}, {}, rotating_knobs(2));
    expect_same(f + Args{"foo", root + "/logs", root + "/a.txt"}, {}, rotating_knobs(1));
  }
}

TEST_F(Recursive, IncludeExcludeAndExcludeDirAsGrep) {
  const std::string excludes = dir.write("excludes", "*.log\n*.c\n");
  // Trailing white space trimmed, blank lines skipped (gnulib's add_exclude_fp): a file of
  // blank lines adds nothing, so an --include after it still decides alone.
  const std::string spaced = dir.write("spaced", "*.log \n\n*.c\r\n \t\n");
  const std::string blank = dir.write("blank", "\n  \n");
  // A NUL ends a pattern (gnulib reads C strings), after the trailing space is trimmed; an
  // empty one is still a pattern (an --exclude first: files that match no glob are in).
  const std::string nul = dir.write("nul", std::string("a.txt\0junk\n\0x \n", 15));
  const std::vector<Args> globs = {
      {"--include=*.log"},
      {"--include=*.log", "--include=*.txt"},
      {"--exclude=*.log"},
      {"--exclude=*.log", "--include=app.*"},
      {"--include=app.*", "--exclude=*.log"},
      {"--include=*.log", "--exclude=app.log"},
      {"--exclude=a*"},
      {"--exclude=*/*"},
      {"--include=*"},
      {"--exclude-dir=logs"},
      {"--exclude-dir=logs/"},
      {"--exclude-dir=old", "--include=*.1"},
      {"--exclude-dir=.git"},
      {"--exclude-dir=*"},
      {"--exclude-dir=t"},
      {"--exclude-from=" + excludes},
      {"--exclude-from=" + spaced},
      {"--exclude-from=" + blank, "--include=*.log"},
      {"--exclude-from=" + nul},
      {"--exclude-from=" + nul, "--include=*.log"},
      {"--include=main.c"},
      {"--exclude=main.c"},
  };
  for (const Args& g : globs) {
    expect_same(Args{"-r"} + g + Args{"foo", root}, {}, rotating_knobs(1));
    expect_same(Args{"-R"} + g + Args{"-c", "foo", root}, {}, rotating_knobs(1));
    // On the command line they match the operand's name or any suffix after a '/'.
    expect_same(g + Args{"foo", root + "/a.txt", root + "/logs/app.log", root + "/src/main.c"}, {}, rotating_knobs(1));
  }
}

// Large folders: grep's fts reads 100,000 entries at a time and sorts a batch of more
// than 10,000 by inode number (not on tmpfs, NFS or CIFS), so its order is not the file
// system's there: 10,000 entries (listed as given), 10,001 and 12,000 (sorted here,
// unless the temporary folder is on tmpfs, and then on /dev/shm as well when it is one;
// under -R fts cannot tell the file system, and sorts on tmpfs too).
TEST_F(Recursive, LargeFoldersInGrepsOrder) {
  std::vector<std::string> bases = {dir.path()};
  if (::access("/dev/shm", W_OK) == 0) bases.push_back("/dev/shm");
  for (const std::string& base : bases) {
    std::string where = base == dir.path() ? dir.make_dir("large") : base + "/gpufilter-large-" + std::to_string(::getpid());
    if (base != dir.path()) {
      ASSERT_EQ(::mkdir(where.c_str(), 0700), 0) << where;
    }
    for (const int n : {10000, 10001, 12000}) {
      const std::string folder = where + "/d" + std::to_string(n);
      ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0);
      for (int i = 0; i < n; ++i) {
        // Names that the file system does not list in inode order: every 7th holds no match.
        const std::string name = folder + "/f" + std::to_string((i * 7919) % 100003) + ".log";
        std::FILE* f = std::fopen(name.c_str(), "w");
        ASSERT_NE(f, nullptr) << name;
        std::fputs(i % 7 == 0 ? "nothing\n" : "foo\n", f);
        std::fclose(f);
      }
      expect_same({"-r", "foo", folder}, {}, rotating_knobs(1));
      expect_same({"-rl", "foo", folder}, {}, rotating_knobs(1));
      expect_same({"-R", "-c", "foo", folder}, {}, rotating_knobs(1));  // -R sorts on tmpfs too
    }
    if (base != dir.path()) std::filesystem::remove_all(where);
  }
}

// grep's and gpufilter's runs of `args`, each started by `prefix` and wrapped in
// `around(run)`, must print the same, say the same (up to the program's name) and end alike.
void expect_same_runs(const Args& prefix, const Args& args,
                      const std::function<ProcessResult(const std::function<ProcessResult()>&)>& around) {
  auto messages = [](std::string err, const std::string& program) {
    for (std::size_t at = 0; (at = err.find(program + ": ", at)) != std::string::npos;) err.replace(at, program.size(), "PROG");
    return err;
  };
  Args grep_args = args;
  std::erase(grep_args, "-j1");
  const ProcessResult grep = around([&] { return run_process(prefix + Args{"grep"} + grep_args); });
  const ProcessResult ours = around([&] { return run_process(prefix + Args{gpufilter_binary()} + args); });
  const std::string what = ::testing::PrintToString(args);
  EXPECT_EQ(ours.out, grep.out) << what;
  EXPECT_EQ(messages(ours.err, "gpufilter"), messages(grep.err, "grep")) << what;
  EXPECT_EQ(ours.status, grep.status) << what;
}

// A FIFO met while recursing is skipped by -r (grep's default -D read applies to the
// command line only) and read by grep 3.8's -R unless -D skip, which waits for a writer as
// grep does: here a thread writes one line for each run.
TEST_F(Recursive, AFifoInTheTreeIsReadByDashROnly) {
  const std::string fifo = root + "/src/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_same({"-r", "foo", root});
  expect_same({"-rc", "-D", "skip", "foo", root});
  expect_same({"-Rc", "-D", "skip", "foo", root});
  auto with_a_writer = [&](const std::function<ProcessResult()>& run) {
    std::thread writer([&] {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);  // waits for the reader
      if (fd < 0) return;
      (void)!::write(fd, "foo from the fifo\n", 18);
      ::close(fd);
    });
    // A run that never opened the FIFO leaves the writer waiting: be its reader.
    auto release = [&] {
      const int unblock = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      writer.join();
      if (unblock >= 0) ::close(unblock);
    };
    try {
      const ProcessResult result = run();
      release();
      return result;
    } catch (...) {
      release();
      throw;
    }
  };
  for (const Args& a : {Args{"-R"}, Args{"-Rc", "-j1"}, Args{"-Rn", "-D", "read"}, Args{"-rn", "-D", "read"}})
    expect_same_runs({"/usr/bin/env"}, a + Args{"foo", root}, with_a_writer);
}

// A folder that can be listed but not searched (mode 644), as a user other than root sees
// it: grep reports each entry's "Permission denied", symbolic links under -r included (it
// opens them with O_NOFOLLOW and ignores only ELOOP), and applies the file globs, not
// --exclude-dir, to a subfolder it cannot stat. Run as `nobody` when the test is root.
TEST_F(Recursive, AFolderThatCannotBeSearchedAsGrep) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (to act as nobody)";
  dir.make_dir("t/locked");
  dir.make_dir("t/locked/inner");
  dir.write("t/locked/x.txt", "foo locked\n");
  dir.write("t/locked/inner/y.txt", "foo inner\n");
  ASSERT_EQ(::symlink("x.txt", (root + "/locked/xl").c_str()), 0);
  ASSERT_EQ(::symlink("inner", (root + "/locked/il").c_str()), 0);
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);  // nobody may walk the tree
  for (const std::string& d : {root, root + "/logs", root + "/logs/old", root + "/.git", root + "/src", root + "/locked/inner"})
    ::chmod(d.c_str(), 0755);
  ASSERT_EQ(::chmod((root + "/locked").c_str(), 0644), 0);
  const Args as_nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
  if (run_process(as_nobody + Args{gpufilter_binary(), "-q", "foo", root + "/a.txt"}).status != 0)
    GTEST_SKIP() << "nobody cannot run " << gpufilter_binary() << " on " << root;
  auto once = [](const std::function<ProcessResult()>& run) { return run(); };
  for (const Args& a : {Args{"-r"}, Args{"-R"}, Args{"-r", "--exclude=x*"}, Args{"-r", "--exclude=inner"},
                        Args{"-r", "--include=*.txt"}, Args{"-r", "--exclude-dir=inner"}, Args{"-r", "--exclude=?l"},
                        Args{"-R", "--exclude=il"}, Args{"-rc", "-j1"}})
    expect_same_runs(as_nobody, a + Args{"foo", root}, once);
  // A folder named on the command line that cannot be opened (mode 311): grep opens an
  // operand before -d skip or --exclude-dir leave it out, and reports it.
  ASSERT_EQ(::chmod((root + "/locked").c_str(), 0311), 0);
  for (const Args& a : {Args{"-d", "skip"}, Args{"-r", "--exclude-dir=locked"}, Args{"-d", "read"}, Args{"-r"}})
    for (const std::string& operand : {root + "/locked", root + "/locked/"})
      expect_same_runs(as_nobody, a + Args{"-c", "foo", operand, root + "/a.txt"}, once);
  ::chmod((root + "/locked").c_str(), 0755);
}

// Globs without wildcards are compared as strings, with the operand as written and each
// suffix after a '/' (empty, or starting with '/', too): gnulib's hashed patterns.
TEST_F(Recursive, GlobsWithoutWildcardsAsGnulibHashesThem) {
  expect_same({"-r", "--exclude-dir=", "foo", root + "/"});
  expect_same({"-r", "--exclude-dir=/", "foo", root + "//"});
  expect_same({"-r", "--exclude-dir=t", "foo", root + "//"});
  expect_same({"-r", "--exclude-dir=*/", "foo", root + "//"});
  expect_same({"-r", "--exclude-dir=t/", "foo", root + "/"});
  expect_same({"--exclude=/logs/app.log", "foo", root + "//logs/app.log", root + "/a.txt"});
  expect_same({"--exclude=logs/app.log", "foo", root + "//logs/app.log", root + "/a.txt"});
  expect_same({"--exclude=", "foo", root + "/a.txt"});
  expect_same({"-r", "--exclude=a\\.txt", "foo", root});
  expect_same({"-r", "--include=a\\.txt", "foo", root});
}

TEST_F(Recursive, DirectoriesAndDevicesActionsAsGrep) {
  expect_same({"foo", root});                                // Is a directory
  expect_same({"foo", root, root + "/a.txt"});
  expect_same({"-d", "skip", "foo", root, root + "/a.txt"});
  expect_same({"-d", "read", "foo", root + "/a.txt", root});
  expect_same({"-s", "foo", root});
  expect_same({"-r", "foo", root + "/a.txt"});                // one file: no name prefix
  expect_same({"-r", "foo", root + "/src/link.txt"});         // a link on the command line is followed
  expect_same({"-r", "foo", root + "/src/logs-link"});
  expect_same({"-r", "foo", root + "/dangling"});
  expect_same({"-r", "foo", root + "/missing", root});
  expect_same({"-r", "-D", "skip", "foo", root});
  expect_same({"-r", "foo", root + "/"});
  expect_same({"-r", "foo", "-", root}, "foo from stdin\n");
  // Two or more trailing slashes walk as one (fts), in names and messages alike.
  expect_same({"-r", "foo", root + "//"});
  expect_same({"-r", "-a", "-c", "foo", root + "/logs///"});
  // Only a directory walked loses its extra slashes; others are named as given.
  expect_same({"-r", "foo", root + "/nope//", root + "/a.txt//", root + "/logs//"});
  // --exclude-dir leaves out a folder named on the command line, walked or not.
  for (const Args& flags : {Args{}, Args{"-c"}, Args{"-L"}, Args{"-d", "read"}, Args{"-r"}})
    expect_same(flags + Args{"--exclude-dir=logs", "foo", root + "/logs", root + "/a.txt"});
}

// No operand: -r searches the working directory and names files without "./".
TEST_F(Recursive, NoOperandSearchesTheWorkingDirectory) {
  // A file named "-" at the top is named so, without its "./", and is a file, not
  // standard input (which holds a match too).
  dir.write("t/-", "foo in a file named dash\n");
  for (const Args& flags : {Args{"-r"}, Args{"-rn"}, Args{"-rc"}, Args{"-rl"}, Args{"-r", "--exclude-dir=."}}) {
    auto in_root = [&](const std::string& binary) {
      Args argv = {"/bin/sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", root, binary};
      argv = argv + flags + Args{"foo"};
      return run_process(argv, "foo on standard input\n", {"LC_ALL=C"});
    };
    const ProcessResult expected = in_root(grep_binary());
    const ProcessResult actual = in_root(gpufilter_binary());
    EXPECT_EQ(actual.out, expected.out) << describe_args(flags);
    EXPECT_EQ(actual.status, expected.status) << describe_args(flags);
  }
}

// grep's and gpufilter's runs of `args` (LC_ALL=C), each under every shell prefix of
// `limits` ("ulimit -n 40 && "), must print the same, end alike and say the same after
// the program's name (nothing where grep says nothing).
void expect_same_under_limits(const Args& args, const std::vector<std::string>& limits) {
  auto message = [](const std::string& err) { return err.substr(std::min(err.find(": "), err.size())); };
  for (const std::string& limit : limits) {
    auto run = [&](const std::string& binary) {
      const Args argv = {"/bin/sh", "-c", limit + "exec \"$@\"", "sh", binary};
      return run_process(argv + args, {}, {"LC_ALL=C"});
    };
    const ProcessResult expected = run(grep_binary());
    const ProcessResult actual = run(gpufilter_binary());
    EXPECT_EQ(actual.out, expected.out) << describe_args(args) << limit;
    EXPECT_EQ(actual.status, expected.status) << describe_args(args) << limit;
    EXPECT_EQ(message(actual.err), message(expected.err)) << describe_args(args) << limit;
  }
}

// A tree of 1,200 files: more than the walk hands over in one batch or holds ahead, with
// the files opened by the walk (cli::WalkAhead), and again with 40 descriptors allowed,
// where the walk opens none ahead (grep needs only a few). -q and -l stop the search
// while the walk holds files open.
TEST(RecursiveLargeTree, SameAsGrepWithFilesOpenedAheadOrNot) {
  TempDir dir;
  for (int d = 0; d < 40; ++d) {
    const std::string sub = "tree/d" + std::to_string(d);
    dir.make_dir(sub);
    for (int f = 0; f < 30; ++f)
      dir.write(sub + "/f" + std::to_string(f) + ".log",
                (d * 30 + f) % 7 == 0 ? "x\nfoo " + std::to_string(f) + "\n" : "nothing\n");
  }
  const std::string root = dir.path() + "/tree";
  for (const Args& flags : {Args{"-r"}, Args{"-rc"}, Args{"-rl"}, Args{"-rq"}, Args{"-rn", "-m1"}})
    expect_same_under_limits(flags + Args{"foo", root}, {"", "ulimit -n 40 && "});
}

// A tree deeper than the descriptors allow folders to stay open (a sixteenth of the limit):
// the walk closes a folder while its subfolder is walked and reopens it after, as grep's
// fts does, and finds what grep finds, in its order: 1,200 levels (paths past PATH_MAX,
// 4,096 bytes, below level 800: -r reaches them, -R reports the first and goes on), under
// the default limit and under 64 descriptors; then 21,200 levels.
TEST(RecursiveLargeTree, DeeperThanTheDescriptorLimitAsGrep) {
  TempDir dir;
  const std::string root = dir.make_dir("deep");
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (int level = 0; level < 1200; ++level) {
    ASSERT_EQ(::mkdirat(fd, "abcd", 0755), 0) << level;
    if (level % 50 == 7) {
      const int file = ::openat(fd, "f.log", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      ASSERT_GE(file, 0);
      const std::string text = level % 100 == 7 ? "foo " + std::to_string(level) + "\n" : "bar\n";
      ASSERT_EQ(::write(file, text.data(), text.size()), static_cast<ssize_t>(text.size()));
      ::close(file);
    }
    const int next = ::openat(fd, "abcd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = next;
    ASSERT_GE(fd, 0);
    if (level == 300) {
      ASSERT_EQ(::mkdirat(fd, "side", 0755), 0);  // a sibling after the deep branch returns
    }
  }
  // Where the 20,000 levels below go (closed at the end of the test).
  const std::unique_ptr<int, void (*)(int*)> bottom(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
  for (const Args& flags : {Args{"-r"}, Args{"-rc"}, Args{"-rl"}, Args{"-rL"}, Args{"-rn", "-m1"}, Args{"-R", "-c"}})
    expect_same_under_limits(flags + Args{"foo", root}, {"", "ulimit -n 64 && "});
  // 20,000 levels more below: no stack grows with the depth (the walk is a loop over
  // levels), nor memory with its square (a level keeps its place in one path).
  {
    int at = ::dup(*bottom);
    ASSERT_GE(at, 0);
    for (int level = 0; level < 20000; ++level) {
      ASSERT_EQ(::mkdirat(at, "d", 0755), 0) << level;
      const int next = ::openat(at, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ::close(at);
      at = next;
      ASSERT_GE(at, 0);
    }
    const int file = ::openat(at, "f.log", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_EQ(::write(file, "foo\n", 4), 4);
    ::close(file);
    ::close(at);
  }
  for (const Args& flags : {Args{"-rc"}, Args{"-rl"}}) expect_same_under_limits(flags + Args{"foo", root}, {""});
  // A file named on the command line is opened by its path, in grep as here: past
  // PATH_MAX, "File name too long" (exit 2).
  std::string deepest = root;
  for (int level = 0; level < 1200; ++level) deepest += "/abcd";
  const ProcessResult expected = run_process({grep_binary(), "-c", "foo", deepest + "/f.log"});
  const ProcessResult actual = run_process({gpufilter_binary(), "-c", "foo", deepest + "/f.log"});
  EXPECT_EQ(actual.status, 2);
  EXPECT_EQ(actual.status, expected.status);
  EXPECT_EQ(actual.out, expected.out);
  EXPECT_NE(actual.err.find("File name too long"), std::string::npos);
}

// grep opens an operand before it applies --include, --exclude and -D skip: one that
// cannot be opened is reported even when it would be skipped (a socket: ENXIO).
TEST_F(Recursive, AnOperandThatCannotBeOpenedIsReportedEvenWhenExcluded) {
  const std::string sock = root + "/sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  for (const Args& a : {Args{"--exclude=sock"}, Args{"--include=*.txt"}, Args{"-D", "skip"}})
    expect_same(a + Args{"foo", sock, root + "/a.txt"}, {}, rotating_knobs(1));
  ::close(fd);
}

// -d ACTION takes an unambiguous prefix, as grep's argmatch does; the messages of a bad or
// ambiguous one are grep's (the exit status is 2, not grep's 1: docs/grep-compatibility.md).
TEST_F(Recursive, DirectoriesActionAbbreviatedAsGrepTakesIt) {
  expect_same({"-d", "rec", "foo", root}, {}, rotating_knobs(1));
  expect_same({"--directories=s", "foo", root}, {}, rotating_knobs(1));
  for (const std::string& action : std::vector<std::string>{"re", "sideways", ""}) {
    const GrepRun g = run_grep({"-d", action, "foo", root});
    const GrepRun r = run_gpufilter({"-d", action, "foo", root});
    EXPECT_EQ(g.status, 1) << action;
    EXPECT_EQ(r.status, 2) << action;
    // Up to the usage lines, which name the program.
    const auto message = [](const std::string& err) {
      const std::size_t from = err.find(": ");
      return err.substr(from, err.find("\nUsage: ") - from);
    };
    EXPECT_EQ(message(r.err), message(g.err)) << action;
  }
}

TEST(RecursiveUsage, BadActionsAndExcludeFilesAreErrors) {
  for (const Args& args : {Args{"-d", "sideways", "x"}, Args{"-D", "sideways", "x"}, Args{"--directories=no", "x"},
                           Args{"--exclude-from=/nonexistent/file", "x"}}) {
    const ProcessResult r = run_process(Args{gpufilter_binary()} + args, "x\n");
    EXPECT_EQ(r.status, 2) << describe_args(args);
    EXPECT_FALSE(r.err.empty()) << describe_args(args);
  }
}

}  // namespace
}  // namespace gpufilter::test
