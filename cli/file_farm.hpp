// FileFarm: many files searched at once, one per thread, their output held per file and
// written in the order the files were given, so that what comes out is what searching
// one file after another would print. Under -r a tree of small files is searched on every
// core (one pipeline thread per file was what bounded it), and compressed files decode
// and are searched side by side.
//
//   walk (in order) -> submit(task) -> a farm thread: task(lane) -> HeldOutput
//   main thread: write_out(held), file after file in the walk's order -> Output
//
// Memory stays bounded: a file's held output grows to kHeldBytes, then its thread waits
// until the file's turn comes and its output is written as it is made. The caller keeps a
// bounded number of files submitted ahead of the one it writes.
//
// Every file's held output is guarded by the farm's one output mutex (a file's threads
// touch it a few times: at a flush and at its end). A writer that must wait for a file
// sleeps until that file is done and half the files in flight after it are too (or every
// file is done, or a thread waits for room), then writes them all without a wait: a tree
// of tiny files wakes it once every few files, not once a file.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/core/stop_signal.hpp"
#include "gpufilter/sinks/output.hpp"
#include "gpufilter/sinks/writer.hpp"

namespace gpufilter::cli {

// What became of one file searched on a farm thread.
struct FarmOutcome {
  bool selected = false;  // some line was selected
  bool trouble = false;   // an error was reported (exit status 2)
  bool output = false;    // grep's separator rule: the file output (or selected) a line
  bool deferred = false;  // not searched here: the caller searches it in its turn
  bool fatal = false;     // the matcher failed on a line (MatchError): grep stops there
  std::uint64_t bytes = 0;
};

// One file's output while it waits for its turn: what its thread wrote to standard output
// and to standard error, in the order written, and the place of a group separator that
// depends on the files before it.
class HeldOutput {
 public:
  enum class Kind { kOut, kErr, kSeparator };
  // Up to this much is held per file; past it the writer waits for the file's turn.
  static constexpr std::size_t kHeldBytes = 1u << 20;

 private:
  friend class FileFarm;
  struct Piece {
    Kind kind;
    std::string bytes;
  };
  std::deque<Piece> pieces_;
  std::size_t bytes_ = 0;
  bool done_ = false;
  FarmOutcome outcome_;
};

class FileFarm {
 public:
  // What a farm thread searches with: the front end's scanner, searcher and printer for
  // one thread, made on that thread at its first file, printing into the Outputs given.
  struct Lane {
    virtual ~Lane() = default;
  };
  using MakeLane = std::function<std::unique_ptr<Lane>(Output& out, Output& err)>;
  // One file's search on a farm thread. `separator` is called where a group separator
  // goes before the file's first group if some earlier file output a line. Exceptions
  // are caught on the farm thread and reported as the file's trouble.
  struct Context {
    Lane& lane;
    Output& out;
    Output& err;
    std::function<void()> separator;
  };
  using Task = std::function<FarmOutcome(Context& context)>;

  // `outer`: the run's stop (SIGINT, SIGTERM), passed on to the farm's own while the
  // caller waits in write_out(). Starts up to `threads` threads; throws std::system_error
  // when it cannot start one.
  FileFarm(std::size_t threads, MakeLane make_lane, const StopSignal* outer = nullptr);
  // Cancels the files not yet written (their reads stop, their threads at their next
  // write) and joins.
  ~FileFarm();
  FileFarm(const FileFarm&) = delete;
  FileFarm& operator=(const FileFarm&) = delete;

  std::size_t threads() const noexcept { return threads_.size(); }
  // What the farm's files read with: requested when the farm is cancelled, or once the
  // outer stop is (seen within 0.1 s by write_out()).
  StopSignal& stop() noexcept { return stop_; }

  // Queues a file's search; its output waits in the HeldOutput returned.
  std::shared_ptr<HeldOutput> submit(Task task);

  // Writes `held`'s output as it comes, until its file is done, to `out` and `err`
  // (standard error after standard output is flushed); `separator` writes a group
  // separator where the file's first group needs one. Returns the file's outcome.
  // Throws what writing throws (OutputError).
  FarmOutcome write_out(HeldOutput& held, Output& out, Output& err, const std::function<void()>& separator);

 private:
  struct Job {
    Task task;
    std::shared_ptr<HeldOutput> held;
  };
  class HeldWriter;
  void work();
  bool run(Job& job, std::unique_ptr<Lane>& lane, HeldWriter& out_writer, Output& out, Output& err,
           FarmOutcome& outcome);
  void finish(HeldOutput& held, const FarmOutcome* outcome);
  // Under out_mutex_: whether the writer waiting for `held` has something to do.
  bool writer_ready(const HeldOutput& held) const noexcept;

  static constexpr std::size_t kWakeBytes = 32u << 10;  // held output that wakes the writer
  MakeLane make_lane_;
  const StopSignal* outer_;
  StopSignal stop_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool closing_ = false;
  std::size_t sleeping_ = 0;  // threads waiting for a job
  std::atomic<bool> cancelled_{false};
  // Every HeldOutput's state, and the writer's wait: the files submitted and finished,
  // the file the writer waits for (null: none) and the count finished that wakes it, the
  // threads waiting for room in a held output.
  std::mutex out_mutex_;
  std::condition_variable writer_wake_;
  std::condition_variable room_;
  std::uint64_t submitted_ = 0;
  std::uint64_t finished_ = 0;
  const HeldOutput* writer_waits_for_ = nullptr;
  std::uint64_t writer_wakes_at_ = 0;
  std::size_t waiting_for_room_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace gpufilter::cli
