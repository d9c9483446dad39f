// FileWalk: the files a grep command line names, as GNU grep 3.8 finds them: operands in
// order, directories walked depth first in the order the directory lists its entries
// (as grep's fts does: read 100,000 at a time, a batch of more than 10,000 put in inode
// order except on tmpfs, NFS and CIFS) under -r/-R, with grep's rules for symbolic links,
// devices, --include/--exclude/--exclude-dir and its messages. It opens nothing that it
// would not search; what it cannot read it hands on as an error, in its place.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/core/unique_fd.hpp"

namespace gpufilter::cli {

using gpufilter::UniqueFd;

struct WalkEntry {
  enum class Kind;
  WalkEntry() = default;
  WalkEntry(Kind k, std::string n, int e, bool on_command_line)
      : kind(k), name(std::move(n)), error(e), command_line(on_command_line) {}

  enum class Kind {
    kSearch,  // search `name`
    kError,   // `name` could not be read: errno `error` (grep's message, exit status 2)
    kLoop,    // `name` is a directory that contains itself (-R): grep's warning only
  };
  Kind kind = Kind::kSearch;
  std::string name;  // as grep prints it
  int error = 0;
  bool command_line = false;
  // kSearch of a regular file met in a directory, when the walk opens files
  // (FileWalk::open_files): the file, open for reading (closed with the entry).
  UniqueFd file;
  // kSearch of a file met in a directory that the directory (or a stat) says is regular.
  bool regular = false;
  // kSearch of a regular file met in a directory, when the walk does not open files: that
  // directory, open (null where no descriptor was to be had), and the file's name in it,
  // so that whoever opens the file looks up one name, not its path from the root.
  std::shared_ptr<const UniqueFd> directory;
  std::string base;
};

class FileWalk {
 public:
  explicit FileWalk(const Options& options);

  // Calls `visit` for each entry in grep's order until it returns false. An empty operand
  // list with -r walks the working directory, naming files without "./".
  void walk(const std::vector<std::string>& operands, const std::function<bool(WalkEntry&&)>& visit);

  // Whether file names are printed by default (no -H or -h): several operands, or with
  // -r one operand that is a directory.
  static bool names_files(const Options& options);

  // Regular files met in directories are opened here, relative to their directory (no
  // path lookup from the root per file), and handed on open (WalkEntry::file); one that
  // cannot be opened is an error entry in its place, as opening it later would be.
  void open_files(bool on) noexcept { open_files_ = on; }
  // Else, up to `descriptors` directories stay open for the entries handed out
  // (WalkEntry::directory) until those are opened; past that, a file is opened by its path.
  void keep_directories(int descriptors) noexcept;

 private:
  // The file globs' verdict on `name` (grep's excluded_file_name): `anchored` matches the
  // whole name (a base name while recursing), else any suffix after a '/' too.
  bool file_excluded(const std::string& name, bool anchored) const;
  bool directory_excluded(const std::string& name, bool anchored) const;
  bool operand(const std::string& name);
  bool openable(const std::string& name);
  static std::string fts_root(std::string name);
  // What readdir() gave for one entry.
  struct DirEntry {
    std::string base;
    unsigned char type;
    ino_t inode;
  };
  struct DirCloser {
    void operator()(DIR* dir) const noexcept;
  };
  // A folder being walked: a frame of walk_tree()'s stack. Only its place in path_ is
  // kept, not a copy of its path: a tree thousands of levels deep costs memory in
  // proportion to its depth, not its square, and no stack (grep's fts walks without
  // recursion too).
  struct Level {
    std::size_t path_size = 0;  // path_.substr(0, path_size) is its fts path
    dev_t dev = 0;
    ino_t ino = 0;
    std::unique_ptr<DIR, DirCloser> dir;   // null while closed for a subfolder
    std::vector<DirEntry> batch;           // the entries read last (read_batch())
    std::size_t next = 0;                  // the next of them to visit
    int error = 0;                         // readdir() failed after the batch (errno)
    bool more = true;                      // entries remain to be read after the batch
    std::shared_ptr<const UniqueFd> held;  // a descriptor the entries handed out keep
  };
  std::string printed(std::string_view fts_path) const;
  bool walk_tree(const std::string& root, int fd, dev_t dev, ino_t ino);
  bool enter(int fd, dev_t dev, ino_t ino);
  bool leave();
  void read_batch(Level& level) const;
  bool entry(Level& level, const DirEntry& entry);
  bool descend(Level& level, const std::string& base, const std::string& name, const struct stat& st);
  bool symbolic_link(DIR* dir, const std::string& name, const std::string& base);
  std::shared_ptr<const UniqueFd> kept_directory(DIR* dir) const;

  // A --include, --exclude or --exclude-dir pattern as gnulib's exclude keeps it, read
  // once: with wildcards for fnmatch, or without as the unescaped string it compares.
  struct Glob {
    std::string text;
    bool wildcards;
    bool include;
  };
  static Glob glob_of(const std::string& pattern, bool include);
  static bool glob_matches(const Glob& glob, const std::string& name, bool anchored);

  const Options& options_;
  std::vector<Glob> file_globs_, dir_globs_;
  bool omit_dot_slash_ = false;
  bool open_files_ = false;
  std::shared_ptr<std::atomic<int>> directories_left_;  // descriptors keep_directories() allows
  std::vector<std::pair<dev_t, ino_t>> ancestors_;  // directories being walked (-R loops)
  // Folders being walked that are open, and how many may be: past that, a folder whose
  // entries are all read is closed while its subfolder is walked, and reopened after
  // (from the subfolder's "..", as grep's fts does; by its path under -R), so that a tree
  // of any depth is walked within the descriptor limit.
  std::size_t open_levels_ = 0;
  std::size_t most_open_levels_ = 256;
  std::deque<Level> levels_;  // the folders being walked, the innermost last
  std::string path_;          // the fts path of the folder whose entries are visited
  const std::function<bool(WalkEntry&&)>* visit_ = nullptr;
};

}  // namespace gpufilter::cli

namespace gpufilter::cli {

// A FileWalk on a thread of its own, a bounded queue of entries ahead of the search:
// under -r, reading directories and the file globs' verdicts overlap with the scanning
// of the files found before. Entries come out in the walk's order (errors and loop
// warnings in their places), so output stays as without it.
class WalkAhead {
 public:
  // `open_files`: the walk opens the regular files it finds (FileWalk::open_files) where
  // the descriptor limit leaves room for those waiting.
  WalkAhead(const Options& options, const std::vector<std::string>& operands, bool open_files = true,
            std::size_t capacity = 128);
  ~WalkAhead();  // stops the walk and joins its thread
  WalkAhead(const WalkAhead&) = delete;
  WalkAhead& operator=(const WalkAhead&) = delete;

  // The next entry into `entry`; false at the walk's end. Rethrows what the walk threw.
  bool next(WalkEntry& entry);

 private:
  struct Queue;
  std::unique_ptr<Queue> queue_;
  std::deque<WalkEntry> taken_;  // entries taken from the queue, not yet handed out
  std::thread thread_;
};

}  // namespace gpufilter::cli
