// Hyperscan databases kept on disk between runs. Compiling is the slow part of starting a
// search with many patterns (about 1 ms a regex, 0.4 s for 10,000 literals on 2 cores);
// a run with the same patterns and options loads the database the last one compiled.
//
// The cache is a folder of files, one per pattern set, each holding everything the
// compile was given (the patterns, their flags and ids, the mode, Hyperscan's version and
// the CPU's features) beside the serialized database: a file is used only when all of it
// is equal, and Hyperscan checks the database's own checksum when it loads it. Anything
// wrong with the folder or a file (missing, unreadable, damaged, written by another user)
// is a miss, never an error: the patterns are compiled as without a cache.
//
// Where: $GPUFILTER_CACHE_DIR, else $XDG_CACHE_HOME/gpufilter/hyperscan, else
// $HOME/.cache/gpufilter/hyperscan; GPUFILTER_CACHE_DIR set to the empty string turns it
// off. Only a folder owned by the user and writable by nobody else is used. Only compiles
// that took long enough to be worth a file are stored; the folder is kept under
// kMaxBytes by removing the files used longest ago.
#pragma once

#include <hs/hs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>

namespace gpufilter::hs_cache {

inline constexpr std::uintmax_t kMaxBytes = std::uintmax_t{1} << 30;
inline constexpr std::size_t kMaxFiles = 512;  // a large regex set stores a database per group (HsGroups)

// What hs_compile_multi (or, with lengths, hs_compile_lit_multi) is given. No platform
// argument: the database is for this machine, as with a null platform.
struct Request {
  std::span<const char* const> expressions;
  std::span<const std::size_t> lengths;  // empty: NUL-terminated regexes; else literals
  std::span<const unsigned> flags;
  std::span<const unsigned> ids;
  unsigned mode = HS_MODE_BLOCK;
  // A compile that took less is not stored.
  std::chrono::nanoseconds store_after = std::chrono::milliseconds(10);
};

// As hs_compile_multi / hs_compile_lit_multi, with the same results: the database from the
// cache when an earlier run stored one for this request, else compiled (and stored when
// the compile took at least request.store_after). Never throws for the cache's sake.
hs_error_t compile(const Request& request, hs_database_t** database, hs_compile_error_t** error);

// Whether the cache holds a file for this request (its name; compile() still checks the
// contents): the compile would be a load. Never throws.
bool stored(const Request& request) noexcept;

// The folder in use (created if missing), or none: turned off, or unusable.
std::optional<std::filesystem::path> directory();

}  // namespace gpufilter::hs_cache
