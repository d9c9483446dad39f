// Follower: followed files -> framing -> RecordChannel, all on the one I/O thread
// (follower.hpp).
//
// One line's way through this file:
//   wake-up: an inotify event (read_events) or the timer (arm_poll) -> service(input)
//   pump: pread() into the input's LineFramer at read_pos    (the only place bytes come in)
//   hand_on: framer.ready() -> channel.append -> framer.consumed()
//         -> all taken: read on | the channel is full: park until on_space
// and what service() does around it, on every wake-up, for each path:
//   1. read the open file to its end; fstat: smaller than what was read -> copytruncate
//   2. stat(path): another (device, inode), or no file at all -> the file was rotated
//   3. the old file: read it to its end once more, its unterminated last line becomes a
//      line, close its stream (the input goes on)
//   4. the new file: a stream that continues the old one, read from offset 0
// Nothing here blocks: a parked input is not read, so memory stays at the framer's (one
// read plus a partial line) and the channel's batches.
//
// Every stream is a Segment: one file read from a start offset under one stream id. A
// Segment stays after its stream is closed until the consumer has acknowledged all of it,
// because until then the state file must still name it (follow_state.hpp).
#include "gpufilter/sources/follower.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/unique_fd.hpp"
#include "gpufilter/sources/follow_state.hpp"
#include "gpufilter/sources/line_framer.hpp"

namespace gpufilter {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// With inotify, the timer is only a safety net (a lost or overflowed event).
constexpr std::chrono::milliseconds kSafetyInterval{1000};
// How much one input reads in one turn of the I/O thread before it lets others run.
constexpr std::size_t kTurnBytes = 8u << 20;
constexpr std::uint32_t kDirEvents = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB | IN_CLOSE_WRITE;

// A file's identity: what tells a rotated file from the one that took its name.
struct Identity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  bool operator==(const Identity&) const = default;
};

Identity identity_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

using Fd = UniqueFd;

// A regular file opened for reading, or why not (an errno text).
struct Opened {
  Fd fd;
  Identity id;
  std::uint64_t size = 0;
  int error = 0;  // 0: opened
};

Opened open_regular(const std::string& path) {
  Opened o;
  // O_NONBLOCK: a FIFO in a file's place must not block the I/O thread in open().
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    o.error = errno;
    return o;
  }
  o.fd = Fd(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    o.error = errno;
    o.fd.reset();
  } else if (!S_ISREG(st.st_mode)) {
    o.error = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    o.fd.reset();
  } else {
    o.id = identity_of(st);
    o.size = static_cast<std::uint64_t>(st.st_size);
  }
  return o;
}

std::string describe_error(int error) { return error == EINVAL ? "not a regular file" : std::strerror(error); }

bool short_of_descriptors(int error) { return error == EMFILE || error == ENFILE; }

// Descriptors a followed file never takes: the rest of the process needs some after the
// files are open (the stop pipe's, a --state file's temporary, the output's, the OpenCL
// driver's). With every descriptor taken by files, gpufilter once failed outright.
constexpr rlim_t kDescriptorReserve = 16;

// Each open file is a descriptor: the soft open-file limit is raised, up to the hard
// limit, to the files plus a reserve for everything else, as Listener does for its
// connections. Returns the soft limit now (RLIM_INFINITY: none).
rlim_t fit_descriptor_limit(std::size_t files) {
  constexpr rlim_t kRest = 128;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return RLIM_INFINITY;
  if (limit.rlim_cur == RLIM_INFINITY) return limit.rlim_cur;
  const rlim_t wanted = static_cast<rlim_t>(std::min<std::size_t>(files, 1u << 30)) + kRest;
  if (limit.rlim_cur >= wanted) return limit.rlim_cur;
  rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  if (raised.rlim_cur > limit.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
  return limit.rlim_cur;
}

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Whether two paths name one file: the same file now, or (one of them not there yet) the
// same place once made absolute and normalized.
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ignored;
  return std::filesystem::absolute(a, ignored).lexically_normal() == std::filesystem::absolute(b, ignored).lexically_normal();
}

// The file's first `size` bytes (fewer if it holds fewer).
std::string read_head(int fd, std::uint64_t size) {
  std::string head(static_cast<std::size_t>(size), '\0');
  std::size_t got = 0;
  while (got < head.size()) {
    const ssize_t n = ::pread(fd, head.data() + got, head.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  head.resize(got);
  return head;
}

// One stream: a file read from `start` under one stream id.
struct Segment {
  StreamId id = kNoStream;
  Identity file;
  std::uint64_t start = 0;  // the acknowledged offset until the consumer says more
  std::string head;         // the file's first bytes as read, up to kStateHeadBytes
  bool closed = false;
  std::uint64_t handed_end = 0;  // once closed: the stream offset just past its last line
  std::uint64_t read_end = 0;    // once closed: the file offset it was read to
};

// One followed path: the file it names now (or named last), read through a LineFramer.
struct Input {
  std::string path;
  std::string dir;

  // The file being read, and how far.
  Fd fd;
  Identity file;
  std::optional<LineFramer> framer;
  std::uint64_t read_pos = 0;  // file offset of the next read
  bool ending = false;         // replaced or gone: its last line is framed; close once handed on
  bool vanished = false;       // the path names no file now

  Opened next;  // the file that took the path's place, opened as soon as it was seen

  std::deque<Segment> segments;     // oldest first; back() is the open stream, if any
  StreamId continues = kNoStream;   // a stream closed with the input going on
  bool parked = false;              // the channel was full: on_space resumes it
  bool turn_posted = false;         // more to read: a later turn of the I/O thread goes on
  bool failed = false;              // a read error ended it
  bool done = false;                // stop(): its last stream is closed
  std::uint64_t too_long_seen = 0;  // of the current framer, already counted
  int file_wd = -1;
  int dir_wd = -1;
  std::string last_notice;  // about the path itself, said once until it changes

  // No descriptor was left to open the file with (EMFILE, ENFILE, or the reserve): it is
  // tried again at each poll, and report_waiting() names it meanwhile.
  bool waits_for_fd = false;
  // begin() waits for a descriptor: the path's file and size when it first tried, so that
  // without --from-start it is still read from where it ended then, not from a later end.
  bool unbegun = false;
  bool wait_saw_file = false;
  Identity wait_file;
  std::uint64_t wait_size = 0;
};

}  // namespace

struct Follower::Impl {
  Impl(asio::io_context& io_context, RecordChannel& record_channel, FollowConfig follow_config, Notices& sink);

  void start();
  void stop();
  void on_space();
  void save(bool force);

  // ---- Reading one path (service() and what it calls).
  void begin(Input& in);
  void resume(Input& in, const FollowStateEntry& saved, Opened current);
  Opened find_moved(const Input& in, const FollowStateEntry& saved) const;
  void service(Input& in);
  void look_at_path(Input& in);
  void follow(Input& in, Opened file, std::uint64_t start);
  bool pump(Input& in);
  void go_on_later(Input& in);
  bool hand_on(Input& in);
  void restart_truncated(Input& in);
  void end_segment(Input& in, bool ends_input);
  void drop_file(Input& in);
  void count_too_long(Input& in);
  void finish_for_stop(Input& in);
  void guarded(Input& in, void (Impl::*step)(Input&)) noexcept;
  void service_all(bool include_parked) noexcept;
  void say(Input& in, const std::string& message);
  void update_stopped();
  Opened open_file(const std::string& path) const;
  void defer_begin(Input& in);
  void report_waiting();

  // ---- Wake-ups.
  void read_events();
  void handle_events(std::size_t n);
  void arm_poll();
  void arm_state_save();
  void watch_dir(Input& in);
  void watch_file(Input& in);
  int add_watch(const std::string& target, std::uint32_t mask, Input& in);
  void remove_watch(int& wd, Input& in);
  std::chrono::milliseconds poll_period() const;

  // ---- State.
  std::vector<FollowStateEntry> state_entries();
  std::uint64_t acknowledged(const Segment& s) const;
  const FollowStateEntry* take_saved(const std::string& path);
  FollowStateEntry waiting_entry(const Input& in) const;

  asio::io_context& io;
  RecordChannel& channel;
  FollowConfig config;
  Notices& notices;
  std::vector<std::unique_ptr<Input>> inputs;
  std::vector<FollowStateEntry> saved;
  std::vector<bool> saved_used;

  std::optional<asio::posix::stream_descriptor> inotify;
  std::unordered_map<int, std::vector<Input*>> watchers;  // inotify watch -> its inputs
  std::array<char, 64 * 1024> events{};
  asio::steady_timer poll_timer;
  asio::steady_timer state_timer;
  std::string last_state_text;
  std::string too_long_text;  // the notice for a file's first over-long line
  bool state_error_noticed = false;
  rlim_t open_files_limit = RLIM_INFINITY;  // the soft limit once start() raised it
  int fd_ceiling = INT_MAX;                 // a file opened at this descriptor or above waits
  std::string waiting_said;                 // report_waiting()'s last notice

  // Handlers check this before touching the Impl: one may still be queued when a Follower
  // is destroyed without stop() (a simulated crash), and run on a later io.run().
  std::shared_ptr<int> life = std::make_shared<int>(0);
  bool started = false;
  bool stopping = false;
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> lines_too_long{0};
  std::atomic<std::uint64_t> rotations{0};
  std::atomic<std::uint64_t> truncations{0};
};

Follower::Impl::Impl(asio::io_context& io_context, RecordChannel& record_channel, FollowConfig follow_config,
                     Notices& sink)
    : io(io_context),
      channel(record_channel),
      config(std::move(follow_config)),
      notices(sink),
      poll_timer(io_context),
      state_timer(io_context) {
  config.read_bytes = std::max<std::size_t>(config.read_bytes, 1);
  config.poll_interval = std::max(config.poll_interval, std::chrono::milliseconds(1));
  config.state_interval = std::max(config.state_interval, std::chrono::milliseconds(1));
  // The channel takes lines shorter than a batch: a longer one is dropped like any line
  // over --max-line-bytes (and the notice says which limit it met).
  if (config.max_line_bytes >= channel.batch_bytes()) {
    config.max_line_bytes = channel.batch_bytes() - 1;
    too_long_text =
        "a line longer than " + std::to_string(config.max_line_bytes) + " bytes (the record batch size) was dropped";
  } else {
    too_long_text = "a line longer than --max-line-bytes (" + std::to_string(config.max_line_bytes) + ") was dropped";
  }
  for (const std::string& path : config.paths) {
    if (!config.state_path.empty() && path.find('\n') != std::string::npos)
      throw ConfigError("--state cannot record a path holding a newline: " + path);
    // Each save of the state would be a new line of the followed file, read and recorded
    // in the next save, forever.
    if (!config.state_path.empty() && same_file(path, config.state_path))
      throw ConfigError(config.state_path + ": the --state file is also a followed file");
    auto in = std::make_unique<Input>();
    in->path = path;
    in->dir = dir_of(path);
    inputs.push_back(std::move(in));
  }
  if (!config.state_path.empty()) {
    saved = load_follow_state(config.state_path);
    saved_used.assign(saved.size(), false);
  }
}

// ---------------------------------------------------------------------------------------
// Start and resume

void Follower::Impl::start() {
  if (started) return;
  started = true;
  open_files_limit = fit_descriptor_limit(inputs.size());
  if (open_files_limit != RLIM_INFINITY)
    fd_ceiling = static_cast<int>(std::min<rlim_t>(INT_MAX, open_files_limit > kDescriptorReserve
                                                                 ? open_files_limit - kDescriptorReserve
                                                                 : 0));
  if (config.use_inotify) {
    const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd >= 0) {
      inotify.emplace(io, fd);
    } else {
      notices.notice(std::string("inotify is unavailable (") + std::strerror(errno) + "); polling every " +
                     std::to_string(config.poll_interval.count()) + " ms");
    }
  }
  for (auto& in : inputs) {
    // The directory first: a file created after the look below still wakes us.
    watch_dir(*in);
    guarded(*in, &Impl::begin);
  }
  report_waiting();
  if (inotify) read_events();
  arm_poll();
  arm_state_save();
  // The first reads (--from-start, a resumed offset) run on the I/O thread like all others.
  asio::post(io, [this, alive = std::weak_ptr<int>(life)] {
    if (!alive.expired() && !stopping) service_all(true);
  });
}

// The k-th input naming a path takes the k-th saved entry for it (a path given twice).
const FollowStateEntry* Follower::Impl::take_saved(const std::string& path) {
  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (!saved_used[i] && saved[i].path == path) {
      saved_used[i] = true;
      return &saved[i];
    }
  }
  return nullptr;
}

void Follower::Impl::begin(Input& in) {
  Opened current = open_file(in.path);
  if (short_of_descriptors(current.error)) {
    defer_begin(in);  // its saved entry, if any, waits with it
    return;
  }
  const bool waited = std::exchange(in.unbegun, false);
  in.waits_for_fd = false;
  if (const FollowStateEntry* entry = take_saved(in.path)) {
    resume(in, *entry, std::move(current));
    return;
  }
  if (current.error != 0) {
    // Followed from its first byte once it appears: all of it is new.
    say(in, in.path + ": " + describe_error(current.error) + "; waiting for it to appear");
    return;
  }
  std::uint64_t start = config.from_start ? 0 : current.size;
  // Waited for a descriptor: what was written since it first tried is new. A file that was
  // not there then, or another one now, is new altogether.
  if (waited && !config.from_start)
    start = in.wait_saw_file && current.id == in.wait_file && current.size >= in.wait_size ? in.wait_size : 0;
  follow(in, std::move(current), start);
}

// The state of a path whose begin() waits for a descriptor: its saved entry, not yet
// taken, or where it will be read from. Without this the state file would say "read it
// from the start", and a restart would repeat the whole file.
FollowStateEntry Follower::Impl::waiting_entry(const Input& in) const {
  std::size_t earlier = 0;  // inputs before this one naming the same path take the first entries
  for (const auto& other : inputs) {
    if (other.get() == &in) break;
    if (other->path == in.path && other->unbegun) ++earlier;
  }
  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (saved_used[i] || saved[i].path != in.path) continue;
    if (earlier-- == 0) return saved[i];
  }
  FollowStateEntry e;
  e.path = in.path;
  if (!config.from_start && in.wait_saw_file) {
    e.dev = in.wait_file.dev;
    e.ino = in.wait_file.ino;
    e.offset = in.wait_size;
    e.head_hash = fnv1a64({});  // head_len 0: resume() then checks the identity and size only
  }
  return e;
}

void Follower::Impl::defer_begin(Input& in) {
  in.waits_for_fd = true;
  if (in.unbegun) return;
  in.unbegun = true;
  struct stat st {};
  in.wait_saw_file = ::stat(in.path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  if (in.wait_saw_file) {
    in.wait_file = identity_of(st);
    in.wait_size = static_cast<std::uint64_t>(st.st_size);
  }
}

// A file opened at a descriptor of fd_ceiling or above would leave fewer than the reserve
// free: descriptors are allocated lowest first, so every one below it is taken. It is
// closed again and waits, as if open() had failed with EMFILE.
Opened Follower::Impl::open_file(const std::string& path) const {
  Opened o = open_regular(path);
  if (o.error == 0 && o.fd.get() >= fd_ceiling) {
    o.fd.reset();
    o.error = EMFILE;
  }
  return o;
}

// One notice for every file that waits for a descriptor (not one per file: thousands of
// them would bury everything else), said again only when the number changes.
void Follower::Impl::report_waiting() {
  constexpr std::size_t kNamed = 10;
  std::size_t waiting = 0;
  std::string names;
  for (const auto& in : inputs) {
    if (!in->waits_for_fd || in->failed) continue;
    if (++waiting <= kNamed) names += (waiting > 1 ? ", " : "") + in->path;
  }
  std::string text;
  if (waiting > 0) {
    const std::string limit = open_files_limit == RLIM_INFINITY ? "" : std::to_string(open_files_limit) + ", ";
    text = std::to_string(waiting) + " of " + std::to_string(inputs.size()) +
           " followed files wait for a file descriptor (open files are limited to " + limit +
           "ulimit -n), tried again at each poll: " + names +
           (waiting > kNamed ? " and " + std::to_string(waiting - kNamed) + " more" : "");
  } else if (!waiting_said.empty()) {
    text = "no followed file waits for a file descriptor now";
  }
  if (text.empty() || text == waiting_said) return;
  waiting_said = text;
  notices.notice(text);
}

void Follower::Impl::resume(Input& in, const FollowStateEntry& entry, Opened current) {
  const Identity saved_id{entry.dev, entry.ino};
  if (current.error == 0 && current.id == saved_id) {
    if (current.size >= entry.offset && head_fingerprint(current.fd.get(), entry.head_len) == entry.head_hash) {
      follow(in, std::move(current), entry.offset);
      return;
    }
    say(in, in.path + ": truncated or rewritten since the state was saved; reading it from the start");
    follow(in, std::move(current), 0);
    return;
  }
  if (saved_id != Identity{}) {
    // Rotated while we were down: the saved file may live on under another name. Its rest
    // comes first; service() then sees the path name another file and switches to it.
    Opened old = find_moved(in, entry);
    if (old.error == 0) {
      say(in, in.path + ": was rotated while not followed; reading the rest of the old file first");
      follow(in, std::move(old), entry.offset);
      return;
    }
    if (current.error == 0)
      say(in, in.path + ": the file the state file names is gone; reading the new one from the start");
  }
  if (current.error != 0) {
    say(in, in.path + ": " + describe_error(current.error) + "; waiting for it to appear");
    return;
  }
  follow(in, std::move(current), 0);
}

// A regular file in the path's directory with the saved identity and fingerprint.
Opened Follower::Impl::find_moved(const Input& in, const FollowStateEntry& entry) const {
  Opened none;
  none.error = ENOENT;
  DIR* dir = ::opendir(in.dir.c_str());
  if (dir == nullptr) return none;
  Opened found = std::move(none);
  while (const dirent* d = ::readdir(dir)) {
    if (static_cast<std::uint64_t>(d->d_ino) != entry.ino) continue;
    const std::string candidate = in.dir + "/" + d->d_name;
    Opened o = open_regular(candidate);
    if (o.error != 0 || o.id != Identity{entry.dev, entry.ino} || o.size < entry.offset) continue;
    if (head_fingerprint(o.fd.get(), entry.head_len) != entry.head_hash) continue;
    found = std::move(o);
    break;
  }
  ::closedir(dir);
  return found;
}

// ---------------------------------------------------------------------------------------
// Reading

// Opens a stream for `file` from `start`, continuing the input's last one if any.
void Follower::Impl::follow(Input& in, Opened file, std::uint64_t start) {
  Segment s;
  s.id = channel.new_stream_id();
  s.file = file.id;
  s.start = start;
  s.head = read_head(file.fd.get(), std::min<std::uint64_t>(start, kStateHeadBytes));
  in.fd = std::move(file.fd);
  in.file = file.id;
  in.read_pos = start;
  in.framer.emplace(config.max_line_bytes, start);
  in.too_long_seen = 0;
  in.ending = false;
  in.vanished = false;
  in.last_notice.clear();
  in.segments.push_back(std::move(s));
  channel.open(in.segments.back().id, in.path, in.continues, config.origin);
  in.continues = kNoStream;
  // Before the first read: a write after that read must wake us.
  watch_file(in);
}

void Follower::Impl::service(Input& in) {
  if (in.failed || stopping) return;
  in.parked = false;
  if (in.unbegun) {
    begin(in);
    if (in.unbegun) return;
  }
  // 1. Read the open file to its current end (renamed or unlinked, the fd still reads it).
  if (in.fd && !in.ending) {
    if (!pump(in)) return;  // parked, or more to read on the next turn
    struct stat st {};
    if (::fstat(in.fd.get(), &st) != 0) throw SourceError(in.path, errno);
    if (static_cast<std::uint64_t>(st.st_size) < in.read_pos) {
      restart_truncated(in);
      if (!pump(in)) return;
    }
  }
  // 2. What does the path name now?
  if (!in.ending && !in.next.fd) look_at_path(in);
  // 3. Replaced or gone: read the old file to its end once more (whatever was written
  //    before the rename or unlink is visible now), its unterminated last line becomes a
  //    line, and its stream closes with the input going on.
  if (in.fd && (in.next.fd || in.vanished)) {
    if (!in.ending) {
      if (!pump(in)) return;
      in.framer->end_of_stream();
      in.ending = true;
    }
    if (!hand_on(in)) return;
    end_segment(in, /*ends_input=*/false);
    drop_file(in);
  }
  // 4. A new file in the path's place: follow it from its first byte.
  if (!in.fd && in.next.fd) {
    // Even with the identity of the file that went away: once closed, its inode number
    // may have gone to a new file (deleted, then re-created), so it is read from 0.
    if (in.segments.empty()) {
      say(in, in.path + ": has appeared; following it");
    } else {
      rotations.fetch_add(1, std::memory_order_relaxed);
      say(in, in.path + ": has been replaced; following new file");
    }
    Opened file = std::move(in.next);
    in.next = Opened{};
    follow(in, std::move(file), 0);
    pump(in);
  }
}

// Sets in.vanished or in.next from what the path names now.
void Follower::Impl::look_at_path(Input& in) {
  struct stat st {};
  int error = 0;
  if (::stat(in.path.c_str(), &st) != 0)
    error = errno;
  else if (!S_ISREG(st.st_mode))
    error = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
  if (error != 0) {
    in.waits_for_fd = false;  // no file to wait for a descriptor for
    if (in.fd)
      in.vanished = true;
    else if (error != ENOENT)
      say(in, in.path + ": " + describe_error(error) + "; waiting for it to appear");
    return;
  }
  in.vanished = false;
  if (in.fd && identity_of(st) == in.file) return;
  Opened o = open_file(in.path);
  in.waits_for_fd = short_of_descriptors(o.error);
  if (o.error != 0) {
    // The old file is ended and closed (a descriptor freed), the new one tried again.
    if (in.fd) in.vanished = true;
    if (!in.waits_for_fd) say(in, in.path + ": " + describe_error(o.error) + "; waiting for it to appear");
    return;
  }
  if (in.fd && o.id == in.file) return;  // renamed back between the stat and the open
  in.next = std::move(o);
}

// Reads the open file to its current end, handing every whole line on. False when the
// channel is full (the input is parked and reads nothing more until on_space()), or when
// this turn's share is read and a later turn goes on (other inputs and stop() wait
// meanwhile: a large file read --from-start must not hold the I/O thread).
bool Follower::Impl::pump(Input& in) {
  std::size_t budget = std::max<std::size_t>(kTurnBytes, 4 * config.read_bytes);
  for (;;) {
    // Hand on what is framed before reading more: that bounds the framer to one read
    // plus a partial line.
    if (!hand_on(in)) return false;
    const std::span<char> room = in.framer->prepare(config.read_bytes);
    const std::size_t want = std::min(room.size(), config.read_bytes);
    const ssize_t n = ::pread(in.fd.get(), room.data(), want, static_cast<off_t>(in.read_pos));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SourceError(in.path, errno);
    }
    if (n == 0) return true;  // the file's current end
    const auto got = static_cast<std::size_t>(n);
    budget -= std::min(budget, got);
    // The first bytes, for the state file's fingerprint, as they were read.
    Segment& s = in.segments.back();
    if (in.read_pos < kStateHeadBytes && s.head.size() == in.read_pos) {
      s.head.append(room.data(), std::min<std::size_t>(got, kStateHeadBytes - s.head.size()));
    }
    in.framer->commit(got);
    in.read_pos += got;
    count_too_long(in);
    if (budget == 0) {
      if (!hand_on(in)) return false;
      go_on_later(in);
      return false;
    }
  }
}

void Follower::Impl::go_on_later(Input& in) {
  if (in.turn_posted) return;
  in.turn_posted = true;
  asio::post(io, [this, &in, alive = std::weak_ptr<int>(life)] {
    if (alive.expired()) return;
    in.turn_posted = false;
    if (!stopping && !in.parked) guarded(in, &Impl::service);
  });
}

// framer.ready() -> channel.append -> framer.consumed(). False when the channel took less.
bool Follower::Impl::hand_on(Input& in) {
  for (;;) {
    const LineFramer::Ready r = in.framer->ready();
    if (r.lines.empty()) return true;
    const std::size_t taken = channel.append(in.segments.back().id, r.offset, r.lines, r.skipped);
    in.framer->consumed(taken);
    count_too_long(in);  // an over-long line behind the taken ones is dropped now
    if (taken < r.lines.size()) {
      in.parked = true;
      return false;
    }
  }
}

// copytruncate: the file shrank below what was read. The same fd is read again from 0 as
// a new stream continuing the input; a partial line held from before is dropped (its
// bytes are gone from the file). A new stream, not the same one from 0: the consumer's
// acknowledgements of the old offsets then cannot be taken for the new ones.
void Follower::Impl::restart_truncated(Input& in) {
  truncations.fetch_add(1, std::memory_order_relaxed);
  notices.notice(in.path + ": file truncated");
  end_segment(in, /*ends_input=*/false);
  Opened same;
  same.fd = std::move(in.fd);
  same.id = in.file;
  remove_watch(in.file_wd, in);
  follow(in, std::move(same), 0);
}

void Follower::Impl::end_segment(Input& in, bool ends_input) {
  Segment& s = in.segments.back();
  s.closed = true;
  s.handed_end = in.framer->offset();
  s.read_end = in.read_pos;
  channel.close(s.id, ends_input);
  in.continues = ends_input ? kNoStream : s.id;
  in.framer.reset();
  in.ending = false;
}

void Follower::Impl::drop_file(Input& in) {
  remove_watch(in.file_wd, in);
  in.fd.reset();
  in.vanished = false;
}

void Follower::Impl::count_too_long(Input& in) {
  const std::uint64_t now = in.framer->lines_too_long();
  if (now == in.too_long_seen) return;
  // Once per file: a file of long lines would otherwise say so for every one.
  if (in.too_long_seen == 0) {
    notices.notice(in.path + ": " + too_long_text);
  }
  lines_too_long.fetch_add(now - in.too_long_seen, std::memory_order_relaxed);
  in.too_long_seen = now;
}

// A notice about the path itself, said once until another one replaces it.
void Follower::Impl::say(Input& in, const std::string& message) {
  if (message == in.last_notice) return;
  in.last_notice = message;
  notices.notice(message);
}

// No exception leaves a handler: a failing input is noticed, closed and not read again.
void Follower::Impl::guarded(Input& in, void (Impl::*step)(Input&)) noexcept {
  try {
    (this->*step)(in);
  } catch (const std::exception& e) {
    try {
      const std::string what = e.what();
      notices.notice((what.starts_with(in.path + ": ") ? what : in.path + ": " + what) + "; no longer followed");
    } catch (...) {
    }
    try {
      if (!in.segments.empty() && !in.segments.back().closed) {
        end_segment(in, /*ends_input=*/true);
      } else if (in.continues != kNoStream) {
        const StreamId id = channel.new_stream_id();  // see finish_for_stop()
        channel.open(id, in.path, in.continues, config.origin);
        channel.close(id, /*ends_input=*/true);
        in.continues = kNoStream;
      }
    } catch (...) {
    }
    drop_file(in);
    in.next = Opened{};
    in.failed = true;
    in.done = true;
    in.parked = false;
  }
}

void Follower::Impl::service_all(bool include_parked) noexcept {
  for (auto& in : inputs) {
    if (in->parked && !include_parked) continue;
    guarded(*in, &Impl::service);
  }
}

// ---------------------------------------------------------------------------------------
// Backpressure and stop

void Follower::Impl::on_space() {
  for (auto& in : inputs) {
    if (!in->parked) continue;
    guarded(*in, stopping ? &Impl::finish_for_stop : &Impl::service);
  }
  update_stopped();
}

void Follower::Impl::stop() {
  if (stopping) return;
  stopping = true;
  poll_timer.cancel();
  state_timer.cancel();
  if (inotify) {
    error_code ignored;
    inotify->close(ignored);
    inotify.reset();
    watchers.clear();
  }
  for (auto& in : inputs) guarded(*in, &Impl::finish_for_stop);
  update_stopped();
}

// Hands on what is framed and closes the input's stream for good. A partial last line
// stays unread: a restart with --state reads it again. A file already known to be
// replaced had its last line framed as a line: that goes on too.
void Follower::Impl::finish_for_stop(Input& in) {
  if (in.done) return;
  in.parked = false;
  if (in.fd) {
    if (!hand_on(in)) return;  // stays open until on_space()
    end_segment(in, /*ends_input=*/true);
    drop_file(in);
  } else if (in.continues != kNoStream) {
    // The file vanished and nothing took its place: its stream closed with the input
    // going on. An empty stream continuing it ends the input.
    const StreamId id = channel.new_stream_id();
    channel.open(id, in.path, in.continues, config.origin);
    channel.close(id, /*ends_input=*/true);
    in.continues = kNoStream;
  }
  in.next = Opened{};
  in.done = true;
}

void Follower::Impl::update_stopped() {
  if (!stopping) return;
  for (const auto& in : inputs) {
    if (!in->done) return;
  }
  stopped.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------
// Wake-ups: inotify and the timer

void Follower::Impl::read_events() {
  inotify->async_read_some(asio::buffer(events),
                           [this, alive = std::weak_ptr<int>(life)](error_code ec, std::size_t n) {
                             if (alive.expired() || ec == asio::error::operation_aborted || stopping) return;
                             if (ec) {
                               try {
                                 notices.notice("inotify: " + ec.message() + "; polling every " +
                                                std::to_string(config.poll_interval.count()) + " ms");
                               } catch (...) {
                               }
                               inotify.reset();
                               watchers.clear();
                               return;
                             }
                             try {
                               handle_events(n);
                             } catch (const std::exception&) {
                               service_all(false);  // out of memory for the list of inputs due: look at all of them
                             }
                             read_events();
                           });
}

void Follower::Impl::handle_events(std::size_t n) {
  std::vector<Input*> due;
  bool all = false;
  for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
    inotify_event ev;
    std::memcpy(&ev, events.data() + at, sizeof ev);
    at += sizeof(inotify_event) + ev.len;
    if ((ev.mask & IN_Q_OVERFLOW) != 0) {
      all = true;
      continue;
    }
    const auto it = watchers.find(ev.wd);
    if ((ev.mask & IN_IGNORED) != 0) {
      // The kernel dropped the watch (its directory went away): the timer adds it again.
      if (it == watchers.end()) continue;
      for (Input* in : it->second) {
        if (in->dir_wd == ev.wd) in->dir_wd = -1;
        if (in->file_wd == ev.wd) in->file_wd = -1;
      }
      watchers.erase(it);
      all = true;
      continue;
    }
    if (it == watchers.end()) continue;  // a file we let go of just now
    for (Input* in : it->second) {
      if (std::find(due.begin(), due.end(), in) == due.end()) due.push_back(in);
    }
  }
  if (all) {
    service_all(false);
    return;
  }
  for (Input* in : due) {
    if (!in->parked) guarded(*in, &Impl::service);
  }
}

std::chrono::milliseconds Follower::Impl::poll_period() const {
  if (!inotify) return config.poll_interval;
  for (const auto& in : inputs) {
    if (in->dir_wd < 0) return config.poll_interval;  // no directory watch: poll it
  }
  return std::max(kSafetyInterval, config.poll_interval);
}

void Follower::Impl::arm_poll() {
  poll_timer.expires_after(poll_period());
  poll_timer.async_wait([this, alive = std::weak_ptr<int>(life)](error_code ec) {
    if (alive.expired() || ec || stopping) return;
    if (inotify) {
      for (auto& in : inputs) {
        if (in->dir_wd >= 0) continue;
        try {
          watch_dir(*in);
        } catch (const std::exception&) {
          // Not watched: polled at poll_interval instead.
        }
      }
    }
    // Parked inputs too: if a space callback were ever lost, this retries.
    service_all(true);
    report_waiting();
    arm_poll();
  });
}

void Follower::Impl::watch_dir(Input& in) {
  if (!inotify || in.dir_wd >= 0) return;
  in.dir_wd = add_watch(in.dir, kDirEvents | IN_ONLYDIR, in);
}

void Follower::Impl::watch_file(Input& in) {
  if (!inotify) return;
  remove_watch(in.file_wd, in);
  // Through /proc: the inode we opened, even if the path names another file by now.
  in.file_wd = add_watch("/proc/self/fd/" + std::to_string(in.fd.get()), IN_MODIFY, in);
  if (in.file_wd < 0) in.file_wd = add_watch(in.path, IN_MODIFY, in);
}

int Follower::Impl::add_watch(const std::string& target, std::uint32_t mask, Input& in) {
  const int wd = ::inotify_add_watch(inotify->native_handle(), target.c_str(), mask);
  if (wd < 0) return -1;
  std::vector<Input*>& list = watchers[wd];
  if (std::find(list.begin(), list.end(), &in) == list.end()) list.push_back(&in);
  return wd;
}

// A watch is shared by inputs naming the same file or directory: it goes with the last.
void Follower::Impl::remove_watch(int& wd, Input& in) {
  if (wd < 0) return;
  const auto it = watchers.find(wd);
  if (it != watchers.end()) {
    std::erase(it->second, &in);
    if (it->second.empty()) {
      if (inotify) ::inotify_rm_watch(inotify->native_handle(), wd);
      watchers.erase(it);
    }
  }
  wd = -1;
}

// ---------------------------------------------------------------------------------------
// State

void Follower::Impl::arm_state_save() {
  if (config.state_path.empty()) return;
  state_timer.expires_after(config.state_interval);
  state_timer.async_wait([this, alive = std::weak_ptr<int>(life)](error_code ec) {
    if (alive.expired() || ec || stopping) return;
    try {
      save(/*force=*/false);
      state_error_noticed = false;
    } catch (const std::exception& e) {
      // Said once: it would repeat every state_interval until the disk has room again.
      if (!state_error_noticed) {
        state_error_noticed = true;
        try {
          notices.notice(e.what());
        } catch (...) {
        }
      }
    }
    arm_state_save();
  });
}

// The offset up to which a stream's output is written: the consumer's acknowledgement,
// its start before any. A stream whose file ended in an unterminated line was handed that
// line with a '\n' added: the file offset is one less.
std::uint64_t Follower::Impl::acknowledged(const Segment& s) const {
  const std::uint64_t at = channel.acknowledged(s.id).value_or(s.start);
  return s.closed ? std::min(at, s.read_end) : at;
}

std::vector<FollowStateEntry> Follower::Impl::state_entries() {
  std::vector<FollowStateEntry> entries;
  for (auto& in : inputs) {
    // A closed stream wholly acknowledged is of no more use once a later one exists.
    while (in->segments.size() > 1) {
      const Segment& s = in->segments.front();
      if (!s.closed || channel.acknowledged(s.id).value_or(s.start) < s.handed_end) break;
      channel.forget(s.id);
      in->segments.pop_front();
    }
    if (in->unbegun) {
      entries.push_back(waiting_entry(*in));
      continue;
    }
    FollowStateEntry e;
    e.path = in->path;
    // No file followed yet: dev = ino = offset = 0, read it from its start when it appears.
    if (!in->segments.empty()) {
      const Segment& s = in->segments.front();
      e.dev = s.file.dev;
      e.ino = s.file.ino;
      e.offset = acknowledged(s);
      e.head_len = std::min<std::uint64_t>({kStateHeadBytes, e.offset, s.head.size()});
      e.head_hash = fnv1a64(std::string_view(s.head).substr(0, static_cast<std::size_t>(e.head_len)));
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

void Follower::Impl::save(bool force) {
  if (config.state_path.empty()) return;
  std::string text = format_follow_state(state_entries());
  if (!force && text == last_state_text) return;
  save_follow_state(config.state_path, text);
  last_state_text = std::move(text);
}

// ---------------------------------------------------------------------------------------
// Follower

Follower::Follower(asio::io_context& io, RecordChannel& channel, FollowConfig config, Notices& notices)
    : impl_(std::make_unique<Impl>(io, channel, std::move(config), notices)) {}

Follower::~Follower() = default;

void Follower::start() { impl_->start(); }
void Follower::stop() { impl_->stop(); }
bool Follower::stopped() const { return impl_->stopped.load(std::memory_order_acquire); }
void Follower::on_space() { impl_->on_space(); }
void Follower::save_state() { impl_->save(/*force=*/true); }

Follower::Counters Follower::counters() const {
  Counters c;
  c.lines_too_long = impl_->lines_too_long.load(std::memory_order_relaxed);
  c.rotations = impl_->rotations.load(std::memory_order_relaxed);
  c.truncations = impl_->truncations.load(std::memory_order_relaxed);
  return c;
}

}  // namespace gpufilter
