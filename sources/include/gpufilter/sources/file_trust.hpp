// The directory half of the StrictModes checks (ssh's name for them): a file that only
// its owner can write is still not safe if another user can swap it for a file of theirs
// through a directory above it. gpufilter checks the directories above the files it
// trusts (gpufilterd's configuration, pattern and token files, and --state files).
#pragma once

#include <optional>
#include <string>

namespace gpufilter {

// Why a directory with this mode and owner is unsafe for a process running as `euid`:
// another owner than root or `euid`, or writable by group or others without the sticky
// bit (as /tmp has, where only an entry's owner may rename or remove it). Nothing when it
// is safe.
std::optional<std::string> directory_trust_problem(unsigned mode, unsigned owner, unsigned euid);

// Checks every directory from `path`'s own (symbolic links resolved) up to "/" with
// directory_trust_problem(), and where `path` is a link, those above the file it leads to. Throws ConfigError naming `path`, the directory and the fix.
// `path` itself need not exist yet (a state file before the first save); its directory must.
void check_directories_trust(const std::string& path, unsigned euid);

}  // namespace gpufilter
