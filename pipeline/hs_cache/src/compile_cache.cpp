#include "gpufilter/hs_cache/compile_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gpufilter/core/fnv.hpp"

namespace gpufilter::hs_cache {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kMagic = "GFHSDB01";

void put_u64(std::string& out, std::uint64_t value) {
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<char>((value >> (8 * k)) & 0xff));
}

std::uint64_t get_u64(std::string_view in, std::size_t at) {
  std::uint64_t value = 0;
  for (int k = 7; k >= 0; --k) value = (value << 8) | static_cast<unsigned char>(in[at + static_cast<std::size_t>(k)]);
  return value;
}

// Everything the compile reads, in one string: equal keys give equal databases.
std::string key_of(const Request& r) {
  std::string key = "gpufilter hs-cache 1\n";
  key += hs_version();
  key.push_back('\n');
  hs_platform_info_t platform{};
  if (hs_populate_platform(&platform) == HS_SUCCESS) {
    put_u64(key, platform.tune);
    put_u64(key, platform.cpu_features);
  }
  put_u64(key, r.mode);
  put_u64(key, r.lengths.empty() ? 0 : 1);
  put_u64(key, r.expressions.size());
  for (std::size_t k = 0; k < r.expressions.size(); ++k) {
    const std::size_t length = r.lengths.empty() ? std::strlen(r.expressions[k]) : r.lengths[k];
    put_u64(key, r.flags[k]);
    put_u64(key, r.ids[k]);
    put_u64(key, length);
    key.append(r.expressions[k], length);
  }
  return key;
}

std::string file_name(std::string_view key) {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.hsdb", static_cast<unsigned long long>(fnv1a64(key)));
  return name;
}

bool read_file(const fs::path& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
            static_cast<std::uintmax_t>(st.st_size) <= kMaxBytes;
  if (ok) {
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (ok && done < out.size()) {
      const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ok = false;
      else done += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  return ok;
}

hs_database_t* load(const fs::path& path, std::string_view key) {
  std::string file;
  if (!read_file(path, file)) return nullptr;
  const std::size_t head = kMagic.size() + 8;
  if (file.size() < head + 8 || std::string_view(file).substr(0, kMagic.size()) != kMagic) return nullptr;
  const std::uint64_t key_size = get_u64(file, kMagic.size());
  if (key_size != key.size() || file.size() - head - 8 < key_size) return nullptr;
  if (std::string_view(file).substr(head, key.size()) != key) return nullptr;
  // Then the database's size, its bytes and their checksum (Hyperscan's own covers only
  // part of them).
  const std::size_t at = head + key.size();
  if (file.size() - at < 16) return nullptr;
  const std::uint64_t db_size = get_u64(file, at);
  if (db_size != file.size() - at - 16) return nullptr;
  const std::string_view db(file.data() + at + 8, static_cast<std::size_t>(db_size));
  if (get_u64(file, file.size() - 8) != fnv1a64(db)) return nullptr;
  hs_database_t* database = nullptr;
  if (hs_deserialize_database(db.data(), db.size(), &database) != HS_SUCCESS) return nullptr;
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used now: the last to be evicted
  return database;
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Oldest first out until the folder is within kMaxBytes and kMaxFiles.
void evict(const fs::path& dir) {
  struct Entry {
    fs::path path;
    fs::file_time_type used;
    std::uintmax_t size;
  };
  std::vector<Entry> entries;
  std::uintmax_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".hsdb") continue;
    std::error_code e;
    const auto size = it->file_size(e);
    const auto used = it->last_write_time(e);
    if (e) continue;
    entries.push_back({it->path(), used, size});
    total += size;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (std::size_t k = 0; k < entries.size() && (total > kMaxBytes || entries.size() - k > kMaxFiles); ++k) {
    fs::remove(entries[k].path, ec);
    total -= entries[k].size;
  }
}

void store(const fs::path& dir, const std::string& name, std::string_view key, const hs_database_t* database) {
  char* bytes = nullptr;
  std::size_t length = 0;
  if (hs_serialize_database(database, &bytes, &length) != HS_SUCCESS) return;
  std::string file(kMagic);
  put_u64(file, key.size());
  file.append(key);
  put_u64(file, length);
  file.append(bytes, length);
  std::free(bytes);  // Hyperscan's misc allocator: malloc
  put_u64(file, fnv1a64(std::string_view(file).substr(file.size() - length)));
  if (file.size() > kMaxBytes) return;
  std::string temp = (dir / (name + ".XXXXXX")).string();
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return;
  const bool written = write_all(fd, file);
  ::close(fd);
  // Renamed whole into place: a reader sees the old file, the new one or none.
  if (!written || ::rename(temp.c_str(), (dir / name).c_str()) != 0) {
    ::unlink(temp.c_str());
    return;
  }
  evict(dir);
}

hs_error_t compile_now(const Request& r, hs_database_t** database, hs_compile_error_t** error) {
  const auto count = static_cast<unsigned>(r.expressions.size());
  if (r.lengths.empty())
    return hs_compile_multi(r.expressions.data(), r.flags.data(), r.ids.data(), count, r.mode, nullptr, database,
                            error);
  return hs_compile_lit_multi(r.expressions.data(), r.flags.data(), r.ids.data(), r.lengths.data(), count, r.mode,
                              nullptr, database, error);
}

}  // namespace

std::optional<fs::path> directory() {
  fs::path dir;
  if (const char* set = std::getenv("GPUFILTER_CACHE_DIR")) {
    if (*set == '\0') return std::nullopt;
    dir = set;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    dir = fs::path(xdg) / "gpufilter" / "hyperscan";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    dir = fs::path(home) / ".cache" / "gpufilter" / "hyperscan";
  } else {
    return std::nullopt;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return std::nullopt;
    ::chmod(dir.c_str(), 0700);
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return std::nullopt;
  return dir;
}

bool stored(const Request& request) noexcept {
  try {
    const std::optional<fs::path> dir = directory();
    if (!dir) return false;
    struct stat st {};
    const fs::path path = *dir / file_name(key_of(request));
    return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
  } catch (...) {
    return false;
  }
}

hs_error_t compile(const Request& request, hs_database_t** database, hs_compile_error_t** error) {
  std::optional<fs::path> dir;
  std::string key, name;
  try {
    dir = directory();
    if (dir) {
      key = key_of(request);
      name = file_name(key);
      if (hs_database_t* cached = load(*dir / name, key)) {
        *database = cached;
        *error = nullptr;
        return HS_SUCCESS;
      }
    }
  } catch (...) {  // no memory for the key, a path that cannot be formed: compile as without
    dir.reset();
  }
  const auto start = std::chrono::steady_clock::now();
  const hs_error_t rc = compile_now(request, database, error);
  if (rc != HS_SUCCESS || !dir || std::chrono::steady_clock::now() - start < request.store_after) return rc;
  try {
    store(*dir, name, key, *database);
  } catch (...) {  // the database is compiled; only the next run's copy is lost
  }
  return rc;
}

}  // namespace gpufilter::hs_cache
