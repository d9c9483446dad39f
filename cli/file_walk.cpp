#include "file_walk.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace gpufilter::cli {
namespace {

bool is_device(mode_t mode) { return S_ISCHR(mode) || S_ISBLK(mode) || S_ISSOCK(mode) || S_ISFIFO(mode); }

}  // namespace

FileWalk::FileWalk(const Options& options) : options_(options) {
  for (const FileGlob& g : options.file_globs) file_globs_.push_back(glob_of(g.pattern, g.include));
  for (const std::string& d : options.exclude_dirs) dir_globs_.push_back(glob_of(d, false));
  // A sixteenth of the descriptor limit for the folders being walked (2 at least).
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    most_open_levels_ = std::clamp<std::size_t>(limit.rlim_cur / 16, 2, most_open_levels_);
}

// gnulib's add_exclude with EXCLUDE_WILDCARDS: fnmatch_pattern_has_wildcards decides, and
// a pattern without wildcards is stored unescaped (unescape_pattern).
FileWalk::Glob FileWalk::glob_of(const std::string& pattern, bool include) {
  bool wildcards = false;
  for (std::size_t i = 0; i < pattern.size() && !wildcards; ++i) {
    const char c = pattern[i];
    wildcards = c == '?' || c == '*' || c == '[' || c == ']';
    if (c == '\\' && i + 1 < pattern.size()) ++i;
  }
  if (wildcards) return {pattern, true, include};
  std::string text;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) ++i;
    text += pattern[i];
  }
  return {std::move(text), false, include};
}

// gnulib's exclude, as grep calls it. A pattern with wildcards goes through fnmatch without
// flags ('*' matches '/' and a leading '.'); unanchored, it may also match any suffix
// that follows a '/' not followed by another (exclude_fnmatch). A pattern without is
// compared as a string with the name and, unanchored, with every suffix after a '/',
// even an empty one or one that starts with '/' (file_name_matches).
bool FileWalk::glob_matches(const Glob& glob, const std::string& name, bool anchored) {
  if (!glob.wildcards) {
    if (glob.text == name) return true;
    if (anchored) return false;
    for (std::size_t i = 0; i < name.size(); ++i)
      if (name[i] == '/' && name.compare(i + 1, std::string::npos, glob.text) == 0) return true;
    return false;
  }
  const char* pattern = glob.text.c_str();
  if (::fnmatch(pattern, name.c_str(), 0) == 0) return true;
  if (anchored) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (name[i] == '/' && name[i + 1] != '/' && ::fnmatch(pattern, name.c_str() + i + 1, 0) == 0) return true;
  return false;
}

bool FileWalk::names_files(const Options& options) {
  if (options.files.size() > 1) return true;
  if (options.directories != Directories::kRecurse) return false;
  if (options.files.empty()) return true;  // the working directory
  struct stat st {};
  return options.files[0] != "-" && ::stat(options.files[0].c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// grep's excluded_file_name: the last glob that matches decides (--include includes,
// --exclude excludes); when none matches, a file is excluded only if the first is an
// --include.
bool FileWalk::file_excluded(const std::string& name, bool anchored) const {
  for (auto glob = file_globs_.rbegin(); glob != file_globs_.rend(); ++glob)
    if (glob_matches(*glob, name, anchored)) return !glob->include;
  return !file_globs_.empty() && file_globs_.front().include;
}

bool FileWalk::directory_excluded(const std::string& name, bool anchored) const {
  return std::any_of(dir_globs_.begin(), dir_globs_.end(),
                     [&](const Glob& glob) { return glob_matches(glob, name, anchored); });
}

void FileWalk::walk(const std::vector<std::string>& operands, const std::function<bool(WalkEntry&&)>& visit) {
  visit_ = &visit;
  ancestors_.clear();
  omit_dot_slash_ = operands.empty() && options_.directories == Directories::kRecurse;
  if (omit_dot_slash_) {
    operand(".");
    return;
  }
  for (const std::string& name : operands)
    if (!operand(name)) return;
}

// As fts_open reads a root: two or more trailing slashes become one ("t//" walks as "t/",
// its files named "t/f"). Only a directory walked is such a root: grep opens every other
// operand, and names it in an error, as given ("nope//: No such file or directory").
std::string FileWalk::fts_root(std::string name) {
  if (name.size() > 2 && name.back() == '/')
    while (name.size() > 1 && name[name.size() - 2] == '/') name.pop_back();
  return name;
}

// A command-line operand (grep's grepdesc): globs match any suffix of its name; a device
// is read unless -D skip; a directory is read (and refused), skipped or walked.
bool FileWalk::operand(const std::string& name) {
  const auto& visit = *visit_;
  struct stat st {};
  if (name == "-" || ::stat(name.c_str(), &st) != 0) return visit({WalkEntry::Kind::kSearch, name, 0, true});
  if (S_ISDIR(st.st_mode)) {
    if (options_.directories == Directories::kSkip) return openable(name);
    const std::string root = options_.directories == Directories::kRecurse ? fts_root(name) : name;
    // grep matches the operand as written ("t//"), not as fts names it.
    if (!omit_dot_slash_ && directory_excluded(name, false)) return openable(name);  // even when not walked
    if (options_.directories == Directories::kRead) return visit({WalkEntry::Kind::kSearch, name, 0, true});
    const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return visit({WalkEntry::Kind::kError, root, errno, true});
    return walk_tree(root, fd, st.st_dev, st.st_ino);
  }
  const bool skipped = file_excluded(name, false) || (options_.devices == Devices::kSkip && is_device(st.st_mode));
  if (!skipped) return visit({WalkEntry::Kind::kSearch, name, 0, true});
  return openable(name);
}

// grep opens an operand before it looks at the globs, -d skip, --exclude-dir or -D skip:
// one it cannot open is reported even so (not blocking on a FIFO without a writer, where
// grep would wait). True: go on.
bool FileWalk::openable(const std::string& name) {
  const int fd = ::open(name.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return (*visit_)({WalkEntry::Kind::kError, name, errno, true});
  ::close(fd);
  return true;
}


namespace {

// gnulib's fts, as grep 3.8 walks: a directory's entries are read FTS_MAX_READDIR_ENTRIES
// at a time, and a batch of more than _FTS_INODE_SORT_DIR_ENTRIES_THRESHOLD is sorted by
// inode number first (fts_build, fts_compare_ino), except where the file system makes that
// useless (dirent_inode_sort_may_be_useful): so is the order of grep's output.
constexpr std::size_t kReaddirBatch = 100000;
constexpr std::size_t kInodeSortAbove = 10000;

// `logical`: -R, where grep's fts walks without FTS_CWDFD, its file-system check answers
// "unknown" and the batch is sorted on any file system.
bool inode_order_may_help(int fd, bool logical) {
  if (logical) return true;
  constexpr long kCifs = 0xFF534D42, kNfs = 0x6969, kTmpfs = 0x01021994;  // S_MAGIC_*
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return true;
  const long type = static_cast<long>(fs.f_type);
  return type != kCifs && type != kNfs && type != kTmpfs;
}

}  // namespace

void FileWalk::DirCloser::operator()(DIR* dir) const noexcept { ::closedir(dir); }

// The name grep prints for an fts path: without the "./" of the working directory walked
// when no operand is named.
std::string FileWalk::printed(std::string_view fts_path) const {
  if (omit_dot_slash_ && fts_path.size() > 2 && fts_path.compare(0, 2, "./") == 0) fts_path.remove_prefix(2);
  return std::string(fts_path);
}

// Reads the next batch of `level`'s entries, in grep's order (above).
void FileWalk::read_batch(Level& level) const {
  level.batch.clear();
  level.next = 0;
  while (level.batch.size() < kReaddirBatch) {
    errno = 0;
    const dirent* e = ::readdir(level.dir.get());
    if (e == nullptr) {
      level.error = errno;
      level.more = false;
      break;
    }
    const std::string_view base = e->d_name;
    if (base != "." && base != "..") level.batch.push_back({std::string(base), e->d_type, e->d_ino});
  }
  if (level.batch.size() > kInodeSortAbove && inode_order_may_help(::dirfd(level.dir.get()), options_.dereference))
    std::sort(level.batch.begin(), level.batch.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.inode < b.inode; });
}

// Enters the folder open on `fd` (which it takes), whose fts path is path_ and identity
// `dev`/`ino`: a new level of the walk. False: stop the walk.
bool FileWalk::enter(int fd, dev_t dev, ino_t ino) {
  std::unique_ptr<DIR, DirCloser> dir(::fdopendir(fd));
  if (!dir) {
    const int error = errno;
    ::close(fd);
    return (*visit_)({WalkEntry::Kind::kError, printed(path_), error, false});
  }
  Level& level = levels_.emplace_back();
  level.path_size = path_.size();
  level.dev = dev;
  level.ino = ino;
  level.dir = std::move(dir);
  ancestors_.emplace_back(dev, ino);
  ++open_levels_;
  read_batch(level);
  return true;
}

// Leaves the innermost level, whose entries are all visited; its parent, if closed
// meanwhile, is opened again: from this folder's ".." (or by its path under -R, whose
// folders may be reached through links), and must be the same folder. Where it cannot
// be, the walk stops with an error, as grep's does ("fts_read failed").
bool FileWalk::leave() {
  Level& child = levels_.back();
  const int child_fd = ::dirfd(child.dir.get());
  Level* parent = levels_.size() > 1 ? &levels_[levels_.size() - 2] : nullptr;
  int error = 0;
  if (parent != nullptr && !parent->dir) {
    path_.resize(parent->path_size);
    const int fd = options_.dereference ? ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                        : ::openat(child_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    error = errno;
    struct stat st {};
    if (fd >= 0 && (::fstat(fd, &st) != 0 || st.st_dev != parent->dev || st.st_ino != parent->ino)) {
      ::close(fd);
      error = ENOENT;  // moved during the walk
    } else if (fd >= 0) {
      parent->dir.reset(::fdopendir(fd));
      error = errno;
      if (!parent->dir) ::close(fd);
    }
    if (parent->dir) ++open_levels_;
  }
  levels_.pop_back();
  ancestors_.pop_back();
  --open_levels_;
  if (parent == nullptr) return true;
  path_.resize(parent->path_size);
  if (parent->dir) return true;
  (*visit_)({WalkEntry::Kind::kError, printed(path_), error, false});
  return false;
}

// Walks the folder `root` (an fts path) open on `fd`, depth first, in grep's order of its
// entries: a loop over a stack of levels, not a recursion. -r skips every symbolic link
// met here; -R follows them, and a directory that is its own ancestor is reported as a
// loop, not entered.
bool FileWalk::walk_tree(const std::string& root, int fd, dev_t dev, ino_t ino) {
  path_ = root;
  const std::size_t outer = levels_.size();
  bool go_on = enter(fd, dev, ino);
  while (go_on && levels_.size() > outer) {
    Level& level = levels_.back();
    if (level.next < level.batch.size()) {
      go_on = entry(level, level.batch[level.next++]);
    } else if (level.error != 0) {
      path_.resize(level.path_size);
      go_on = (*visit_)({WalkEntry::Kind::kError, printed(path_), std::exchange(level.error, 0), false});
    } else if (level.more) {
      read_batch(level);
    } else {
      go_on = leave();
    }
  }
  // Stopped: the folders still open are closed.
  while (levels_.size() > outer) {
    if (levels_.back().dir) --open_levels_;
    levels_.pop_back();
    ancestors_.pop_back();
  }
  return go_on;
}

void FileWalk::keep_directories(int descriptors) noexcept {
  directories_left_ = descriptors > 0 ? std::make_shared<std::atomic<int>>(descriptors) : nullptr;
}

// A descriptor of `dir` for the entries handed out, counted against keep_directories()'s
// allowance until the last entry lets it go; null where none is allowed or to be had.
// Only the walk takes from the allowance (the entries' owners give back), so a look at it
// and a take cannot race.
std::shared_ptr<const UniqueFd> FileWalk::kept_directory(DIR* dir) const {
  const std::shared_ptr<std::atomic<int>>& left = directories_left_;
  if (!left || left->load() <= 0) return nullptr;
  UniqueFd fd(::fcntl(::dirfd(dir), F_DUPFD_CLOEXEC, 0));
  if (fd.get() < 0) return nullptr;
  left->fetch_sub(1);
  return std::shared_ptr<const UniqueFd>(new UniqueFd(std::move(fd)), [left](const UniqueFd* p) {
    delete p;
    left->fetch_add(1);
  });
}

// One entry of the folder `level` (the innermost; path_ is its fts path). Its entries
// keep `level.held`, a descriptor of it, made at the first that needs it. False: stop.
bool FileWalk::entry(Level& level, const DirEntry& e) {
  const auto& visit = *visit_;
  DIR* dir = level.dir.get();
  const std::string& base = e.base;
  // path_ becomes the entry's fts path (a subfolder's, entered: enter() keeps it).
  path_.resize(level.path_size);
  if (path_.back() != '/') path_ += '/';
  path_ += base;
  std::string name = printed(path_);
  std::shared_ptr<const UniqueFd>& held = level.held;
  // grep -R's fts reaches every entry by its path (from "." where no operand is named),
  // and one of PATH_MAX bytes or more cannot be looked at: -r's reaches all.
  if (options_.dereference && path_.size() >= PATH_MAX) {
    if (file_excluded(base, true)) return true;
    return visit({WalkEntry::Kind::kError, name, ENAMETOOLONG, false});
  }
  unsigned char type = e.type;
  struct stat st {};
  if (type == DT_UNKNOWN || (options_.dereference && type == DT_LNK)) {
    if (::fstatat(::dirfd(dir), base.c_str(), &st, options_.dereference ? 0 : AT_SYMLINK_NOFOLLOW) != 0) {
      // A dangling link under -R: an error, unless the file globs leave it out anyway.
      const int error = errno;
      if (file_excluded(base, true)) return true;
      return visit({WalkEntry::Kind::kError, name, error, false});
    }
    type = IFTODT(st.st_mode);
  }
  if (type == DT_LNK) return symbolic_link(dir, name, base);
  if (type == DT_DIR) {
    // A folder that cannot be looked at (its parent can be listed, not searched) is no
    // folder to grep's fts: the file globs decide whether it is reported.
    if (st.st_ino == 0 && ::fstatat(::dirfd(dir), base.c_str(), &st, 0) != 0) {
      const int error = errno;
      if (file_excluded(base, true)) return true;
      return visit({WalkEntry::Kind::kError, name, error, false});
    }
    if (directory_excluded(base, true)) return true;
    const std::pair<dev_t, ino_t> id(st.st_dev, st.st_ino);
    if (std::find(ancestors_.begin(), ancestors_.end(), id) != ancestors_.end())
      return visit({WalkEntry::Kind::kLoop, name, 0, false});
    return descend(level, base, name, st);
  }
  if (file_excluded(base, true)) return true;
  // Devices met in the walk are read with -D read, and by grep 3.8's -R unless -D skip (a
  // FIFO is waited on until a writer comes and goes, as grep waits).
  const bool device = type == DT_CHR || type == DT_BLK || type == DT_FIFO || type == DT_SOCK;
  const bool read_devices =
      options_.devices == Devices::kRead || (options_.dereference && options_.devices == Devices::kCommandLine);
  if (device && !read_devices) return true;
  WalkEntry found{WalkEntry::Kind::kSearch, name, 0, false};
  found.regular = type == DT_REG;
  if (open_files_ && type == DT_REG) {
    found.file = UniqueFd(::openat(::dirfd(dir), base.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    // Out of descriptors (files waiting in a WalkAhead hold some): opened in its turn.
    if (found.file.get() < 0 && errno != EMFILE && errno != ENFILE)
      found = {WalkEntry::Kind::kError, name, errno, false};
  } else if (type == DT_REG) {
    if (!held) held = kept_directory(dir);  // none: the file is opened by its path
    if (held) {
      found.directory = held;
      found.base = base;
    }
  }
  return visit(std::move(found));
}

// Enters subfolder `base` of `level` (printed as `name`; its fts path is path_), whose
// stat is `st`. Where too many folders are open, `level` is closed meanwhile if all its
// entries are read (leave() opens it again), so that a tree of any depth is walked
// within the descriptor limit.
bool FileWalk::descend(Level& level, const std::string& base, const std::string& name, const struct stat& st) {
  const int sub = ::openat(::dirfd(level.dir.get()), base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sub < 0) return (*visit_)({WalkEntry::Kind::kError, name, errno, false});
  if (open_levels_ >= most_open_levels_ && !level.more) {
    level.dir.reset();
    --open_levels_;
  }
  return enter(sub, st.st_dev, st.st_ino);
}

// -r does not follow a symbolic link below the command line. grep opens it with O_NOFOLLOW
// and ignores only that open's ELOOP: where the folder can be listed but not searched,
// the link's "Permission denied" is reported.
bool FileWalk::symbolic_link(DIR* dir, const std::string& name, const std::string& base) {
  if (file_excluded(base, true)) return true;
  const int fd = ::openat(::dirfd(dir), base.c_str(), O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  if (errno == ELOOP) return true;
  return (*visit_)({WalkEntry::Kind::kError, name, errno, false});
}

// The walker thread pushes entries in batches and the search takes all that wait at once,
// so that the two threads meet once per batch, not once per file. The walker waits while
// `capacity` entries wait, and stops at its next batch once the search is done.
struct WalkAhead::Queue {
  static constexpr std::size_t kBatch = 64;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<WalkEntry> entries;
  std::size_t capacity = 0;
  bool ended = false;      // the walk is over (or failed: error)
  bool cancelled = false;  // the search wants no more entries
  std::exception_ptr error;

  // The walker's side: false once the search is done.
  bool push(std::vector<WalkEntry>& batch) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [this] { return cancelled || entries.size() < capacity; });
    if (cancelled) {
      batch.clear();  // closes what the walk opened
      return false;
    }
    const bool was_empty = entries.empty();
    for (WalkEntry& e : batch) entries.push_back(std::move(e));
    batch.clear();
    if (was_empty) changed.notify_all();
    return true;
  }
};

WalkAhead::WalkAhead(const Options& options, const std::vector<std::string>& operands, bool open_files,
                     std::size_t capacity)
    : queue_(std::make_unique<Queue>()) {
  queue_->capacity = std::max<std::size_t>(capacity, 1);
  Queue& q = *queue_;
  thread_ = std::thread([&q, &options, operands, open_files] {
    std::exception_ptr error;
    std::vector<WalkEntry> batch;
    try {
      FileWalk walk(options);
      // Files waiting here hold a descriptor each (up to twice the capacity and a batch):
      // opened ahead only where the limit leaves plenty (1024 is Linux's usual soft one).
      rlimit limit{};
      const bool limited = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
      walk.open_files(open_files && (!limited || limit.rlim_cur >= 4 * (q.capacity + Queue::kBatch)));
      // Else an eighth of the limit for directories kept open for the files' opens (none
      // under a limit so low that a deep walk's own directories may need them).
      if (!open_files)
        walk.keep_directories(!limited ? 4096 : limit.rlim_cur >= 256 ? static_cast<int>(limit.rlim_cur / 8) : 0);
      walk.walk(operands, [&q, &batch](WalkEntry&& entry) {
        batch.push_back(std::move(entry));
        return batch.size() < Queue::kBatch || q.push(batch);
      });
      if (!batch.empty()) q.push(batch);
    } catch (...) {
      error = std::current_exception();  // rethrown by next(), on the search's thread
    }
    std::lock_guard lock(q.mutex);
    q.ended = true;
    q.error = error;
    q.changed.notify_all();
  });
}

WalkAhead::~WalkAhead() {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->cancelled = true;
  }
  queue_->changed.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool WalkAhead::next(WalkEntry& entry) {
  if (taken_.empty()) {
    Queue& q = *queue_;
    std::unique_lock lock(q.mutex);
    q.changed.wait(lock, [&q] { return !q.entries.empty() || q.ended; });
    if (q.entries.empty()) {
      if (q.error) std::rethrow_exception(std::exchange(q.error, nullptr));
      return false;
    }
    taken_.swap(q.entries);
    q.changed.notify_all();  // room for the walker
  }
  entry = std::move(taken_.front());
  taken_.pop_front();
  return true;
}

}  // namespace gpufilter::cli
