// The --state file of `gpufilter --follow`: for every followed path, the identity of the
// file being read (device, inode, a fingerprint of its first bytes) and the offset up to
// which the consumer has acknowledged its output. The Follower writes it; start() reads it.
//
// THE GUARANTEE. Every line that ends at or before the saved offset had its output written
// and flushed before the state was saved. A restart reads from the saved offset, so no
// line is lost. After a kill -9, the lines after the last saved offset whose output had
// already been written are written again: at most state_interval's worth plus one batch.
// After a clean stop (SIGTERM or SIGINT: main saves the state after the final flush)
// nothing is repeated.
//
// What a restart cannot see: lines written to a file that was deleted (not renamed) while
// gpufilter was down, and a file replaced by one with the same inode and the same first
// bytes (the fingerprint cannot tell them apart).
//
// Format, a small text file (decimal numbers, the hash in hex, the path is the rest of the
// line, so it may hold spaces but not a newline):
//
//   gpufilter-follow-state 1
//   DEV INO OFFSET HEAD_LEN HEAD_HASH PATH
//
// HEAD_LEN = min(1024, OFFSET) and HEAD_HASH = FNV-1a 64 of the file's first HEAD_LEN
// bytes. DEV = INO = OFFSET = 0 names no file: the path was missing, follow it from its
// first byte once it appears.
#pragma once

#include "gpufilter/core/fnv.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter {

// How many of a file's first bytes its fingerprint covers.
inline constexpr std::size_t kStateHeadBytes = 1024;

struct FollowStateEntry {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t offset = 0;     // acknowledged: every line before it was written and flushed
  std::uint64_t head_len = 0;   // min(kStateHeadBytes, offset)
  std::uint64_t head_hash = 0;  // fnv1a64 of the file's first head_len bytes
  std::string path;
  bool operator==(const FollowStateEntry&) const = default;
};

// FNV-1a 64 of the first `head_len` bytes of an open file (pread); nullopt when the file
// holds fewer bytes or cannot be read.
std::optional<std::uint64_t> head_fingerprint(int fd, std::uint64_t head_len);

// The file's text for `entries`. Throws ConfigError for a path holding a newline.
std::string format_follow_state(const std::vector<FollowStateEntry>& entries);
// Parses a state file's text; `name` (the file) and the line number go into the
// ConfigError thrown for anything malformed.
std::vector<FollowStateEntry> parse_follow_state(std::string_view text, const std::string& name);

// Whether a state file with this mode and owner may be trusted, as ssh's StrictModes
// decides for its key files: a state file tells gpufilter where to resume, so one that
// another user can write (group or others write bits, or another owner than `euid` or
// root) could make a restart skip lines or repeat them. Throws ConfigError naming `name`
// and saying what to fix; returns when the file is fine.
void check_state_file_trust(const std::string& name, unsigned mode, unsigned owner, unsigned euid);

// Reads and parses the state file; an empty list when it does not exist (a fresh start).
// Throws ConfigError naming the file when it cannot be read or parsed, when it is not a
// regular file, or when check_state_file_trust() refuses it.
std::vector<FollowStateEntry> load_follow_state(const std::string& state_path);
// Writes `text` so that a reader, a restart after kill -9 or after a machine crash sees
// the old file or the new one, whole, never half of one, and never a file of zero bytes:
//   1. STATE.tmp is created afresh (O_EXCL, O_NOFOLLOW, mode 0600): a stale one left by a
//      kill is removed first, and a symbolic link planted there is never followed;
//   2. the text is written and the file fsync()ed: a full disk or an I/O error shows up
//      here at the latest (delayed allocation and NFS report them only at fsync or close);
//   3. STATE.tmp is renamed over STATE, and the directory fsync()ed, so that the rename
//      itself survives a crash.
// A failure before the rename removes STATE.tmp and leaves STATE as it was; one in
// syncing the directory after it is reported too (the new STATE is in place, but might
// not survive a crash). Throws ConfigError naming the file, the step and the system's
// reason (for a full disk "No space left on device", past RLIMIT_FSIZE "File too large").
void save_follow_state(const std::string& state_path, std::string_view text);

}  // namespace gpufilter
