// StrictModes for directories: see file_trust.hpp.
#include "gpufilter/sources/file_trust.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

std::optional<std::string> directory_trust_problem(unsigned mode, unsigned owner, unsigned euid) {
  if (owner != 0 && owner != euid) return "it belongs to uid " + std::to_string(owner) + ", who could replace what is in it";
  if ((mode & (S_IWGRP | S_IWOTH)) != 0 && (mode & S_ISVTX) == 0) {
    char octal[16];
    std::snprintf(octal, sizeof octal, "%04o", mode & 07777);
    return std::string("group or others may write it (mode ") + octal + ") and it has no sticky bit";
  }
  return std::nullopt;
}

namespace {

using Resolved = std::unique_ptr<char, decltype(&std::free)>;

// `dir` (resolved) and every directory above it, up to "/".
void check_chain(const std::string& path, const std::filesystem::path& dir, unsigned euid) {
  for (std::filesystem::path d = dir;; d = d.parent_path()) {
    struct stat st {};
    if (::stat(d.c_str(), &st) != 0)
      throw ConfigError(path + ": cannot check the directory " + d.string() + ": " + std::strerror(errno));
    if (const auto problem = directory_trust_problem(st.st_mode, st.st_uid, euid)) {
      const bool owner = st.st_uid != 0 && st.st_uid != euid;
      throw ConfigError(path + ": refused: the directory " + d.string() + " is not safe: " + *problem +
                        "; fix: " + (owner ? "move the file elsewhere, or chown " + std::to_string(euid) + " "
                                           : "chmod go-w ") +
                        d.string());
    }
    if (d == d.root_path()) break;
  }
}

}  // namespace

void check_directories_trust(const std::string& path, unsigned euid) {
  // The directory the name is in (a state file is renamed into it) ...
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const Resolved real(::realpath(dir.c_str(), nullptr), &std::free);
  if (!real) throw ConfigError(path + ": cannot resolve its directory " + dir.string() + ": " + std::strerror(errno));
  const std::filesystem::path own = real.get();
  check_chain(path, own, euid);
  // ... and, where the name is a link, the directory of the file it leads to.
  if (const Resolved file(::realpath(path.c_str(), nullptr), &std::free); file) {
    const std::filesystem::path target = std::filesystem::path(file.get()).parent_path();
    if (target != own) check_chain(path, target, euid);
  }
}

}  // namespace gpufilter
