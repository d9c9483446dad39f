// The --state file: format, parse, checked load, atomic and durable save, and the head
// fingerprint.
#include "gpufilter/sources/follow_state.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/file_trust.hpp"

namespace gpufilter {

namespace {

constexpr std::string_view kHeader = "gpufilter-follow-state 1";

std::string errno_text(int error_number) { return std::strerror(error_number); }

// Reads one space-terminated number of `base` from `rest`; false when there is none.
bool take_number(std::string_view& rest, int base, std::uint64_t& value) {
  const std::size_t space = rest.find(' ');
  if (space == 0 || space == std::string_view::npos) return false;
  const char* first = rest.data();
  const char* last = rest.data() + space;
  const auto [ptr, ec] = std::from_chars(first, last, value, base);
  if (ec != std::errc() || ptr != last) return false;
  rest.remove_prefix(space + 1);
  return true;
}

}  // namespace

std::optional<std::uint64_t> head_fingerprint(int fd, std::uint64_t head_len) {
  char buffer[kStateHeadBytes];
  if (head_len > sizeof buffer) return std::nullopt;
  std::size_t got = 0;
  while (got < head_len) {
    const ssize_t n = ::pread(fd, buffer + got, head_len - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  return fnv1a64(std::string_view(buffer, got));
}

std::string format_follow_state(const std::vector<FollowStateEntry>& entries) {
  std::string text(kHeader);
  text += '\n';
  for (const FollowStateEntry& e : entries) {
    if (e.path.find('\n') != std::string::npos)
      throw ConfigError("--state cannot record a path holding a newline: " + e.path);
    char numbers[128];
    std::snprintf(numbers, sizeof numbers, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %016" PRIx64 " ", e.dev,
                  e.ino, e.offset, e.head_len, e.head_hash);
    text += numbers;
    text += e.path;
    text += '\n';
  }
  return text;
}

std::vector<FollowStateEntry> parse_follow_state(std::string_view text, const std::string& name) {
  std::vector<FollowStateEntry> entries;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t nl = text.find('\n');
    // A state file we wrote always ends in a newline; a last line without one was cut.
    if (nl == std::string_view::npos)
      throw ConfigError(name + ": line " + std::to_string(number) + ": the line does not end (a cut file?)");
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (number == 1) {
      if (line != kHeader)
        throw ConfigError(name + ": line 1: not a gpufilter follow state file (expected \"" + std::string(kHeader) +
                          "\")");
      continue;
    }
    FollowStateEntry e;
    if (!take_number(line, 10, e.dev) || !take_number(line, 10, e.ino) || !take_number(line, 10, e.offset) ||
        !take_number(line, 10, e.head_len) || !take_number(line, 16, e.head_hash) || line.empty())
      throw ConfigError(name + ": line " + std::to_string(number) +
                        ": expected \"DEV INO OFFSET HEAD_LEN HEAD_HASH PATH\"");
    if (e.head_len > kStateHeadBytes || e.head_len > e.offset)
      throw ConfigError(name + ": line " + std::to_string(number) + ": HEAD_LEN must be at most min(1024, OFFSET)");
    e.path = std::string(line);
    entries.push_back(std::move(e));
  }
  if (number == 0) throw ConfigError(name + ": line 1: the file is empty (expected \"" + std::string(kHeader) + "\")");
  return entries;
}

void check_state_file_trust(const std::string& name, unsigned mode, unsigned owner, unsigned euid) {
  if ((mode & (S_IWGRP | S_IWOTH)) != 0) {
    char octal[16];
    std::snprintf(octal, sizeof octal, "%04o", mode & 07777);
    throw ConfigError(name + ": the state file is writable by other users (mode " + octal +
                      "); refusing to trust it (chmod go-w " + name + ")");
  }
  if (owner != euid && owner != 0)
    throw ConfigError(name + ": the state file belongs to uid " + std::to_string(owner) + ", not to this user (uid " +
                      std::to_string(euid) + ") or root; refusing to trust it");
}

std::vector<FollowStateEntry> load_follow_state(const std::string& state_path) {
  // The directory is checked even before the first save: the file will be renamed into it.
  check_directories_trust(state_path, ::geteuid());
  // O_NONBLOCK: a FIFO planted at the path must not hang the start; it is refused below.
  const int fd = ::open(state_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    throw ConfigError(state_path + ": cannot read the state file: " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw ConfigError(state_path + ": cannot read the state file: " + errno_text(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ConfigError(state_path + ": the state file is not a regular file");
  }
  try {
    check_state_file_trust(state_path, st.st_mode, st.st_uid, ::geteuid());
  } catch (...) {
    ::close(fd);
    throw;
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw ConfigError(state_path + ": cannot read the state file: " + errno_text(error));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return parse_follow_state(text, state_path);
}

void save_follow_state(const std::string& state_path, std::string_view text) {
  const std::string tmp = state_path + ".tmp";
  // Callers pass errno as read right after the failed call, before anything can change it.
  auto fail = [&](const std::string& what, int error) {
    throw ConfigError(state_path + ": cannot write the state file: " + what + ": " + errno_text(error));
  };
  constexpr int kCreate = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
  int fd = ::open(tmp.c_str(), kCreate, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Left by a process killed in the middle of a save (or planted): never written
    // through, always replaced by a file of our own.
    if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
      const int error = errno;
      fail("remove the stale " + tmp, error);
    }
    fd = ::open(tmp.c_str(), kCreate, 0600);
  }
  if (fd < 0) {
    const int error = errno;
    fail(tmp, error);
  }
  // From here on a failure removes the temporary file: STATE stays as it was.
  // `step`: "" (writing), "fsync " or "rename ", a literal, so nothing changes errno first.
  auto fail_removing = [&](const char* step, bool close_it) {
    const int error = errno;
    if (close_it) ::close(fd);
    ::unlink(tmp.c_str());
    fail(step + tmp, error);
  };
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_removing("", true);
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) fail_removing("fsync ", true);
  if (::close(fd) != 0) fail_removing("", false);
  if (::rename(tmp.c_str(), state_path.c_str()) != 0) fail_removing("rename ", false);
  // The rename is an update of the directory: without this a crash may bring back the old
  // name (or on some filesystems neither).
  const std::size_t slash = state_path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : state_path.substr(0, slash);
  const int dir = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    const int error = errno;
    fail("open its directory " + directory, error);
  }
  // EINVAL: a filesystem that cannot sync a directory (some FUSE ones); nothing to wait for.
  if (::fsync(dir) != 0 && errno != EINVAL) {
    const int error = errno;
    ::close(dir);
    fail("fsync its directory " + directory, error);
  }
  ::close(dir);
}

}  // namespace gpufilter
