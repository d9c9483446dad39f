#include "file_farm.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <system_error>
#include <utility>

#include "gpufilter/cli/options.hpp"

namespace gpufilter::cli {
namespace {

// A farm thread's write after the farm was cancelled (an early end: -q answered, the
// output closed): unwinds the file's search; nothing is reported.
struct Cancelled : std::exception {
  const char* what() const noexcept override { return "cancelled"; }
};

}  // namespace

// Where a farm thread's Outputs write: into the held output of the file it searches.
class FileFarm::HeldWriter final : public Writer {
 public:
  HeldWriter(FileFarm& farm, HeldOutput::Kind kind) : farm_(farm), kind_(kind) {}
  void bind(HeldOutput* held) noexcept { held_ = held; }
  // From now on every write is dropped (a cancelled farm; the Outputs' last flush).
  void drop() noexcept { held_ = nullptr; }

  void write(std::string_view bytes) override { put(kind_, bytes); }

  void put(HeldOutput::Kind kind, std::string_view bytes) {
    if (held_ == nullptr) return;
    HeldOutput& h = *held_;
    std::unique_lock lock(farm_.out_mutex_);
    // Past the bound, wait until the file's turn has come and what it holds is written.
    while (h.bytes_ >= HeldOutput::kHeldBytes) {
      if (farm_.cancelled_.load(std::memory_order_relaxed)) throw Cancelled();
      ++farm_.waiting_for_room_;
      // A writer waiting for the files before this one to finish must not wait for this.
      if (farm_.writer_waits_for_ != nullptr) farm_.writer_wake_.notify_one();
      farm_.room_.wait_for(lock, std::chrono::milliseconds(50));
      --farm_.waiting_for_room_;
    }
    if (farm_.cancelled_.load(std::memory_order_relaxed)) throw Cancelled();
    if (!h.pieces_.empty() && h.pieces_.back().kind == kind && kind != HeldOutput::Kind::kSeparator)
      h.pieces_.back().bytes.append(bytes);
    else
      h.pieces_.push_back({kind, std::string(bytes)});
    h.bytes_ += bytes.size();
    // The writer is woken for a buffer's worth; what a small file outputs goes with its
    // end (finish()).
    const bool wake = farm_.writer_waits_for_ == &h && farm_.writer_ready(h);
    lock.unlock();
    if (wake) farm_.writer_wake_.notify_one();
  }

 private:
  FileFarm& farm_;
  HeldOutput::Kind kind_;
  HeldOutput* held_ = nullptr;
};

FileFarm::FileFarm(std::size_t threads, MakeLane make_lane, const StopSignal* outer)
    : make_lane_(std::move(make_lane)), outer_(outer) {
  threads_.reserve(threads);
  try {
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  } catch (const std::system_error&) {
    // Out of threads (ulimit -u): the farm works with those it got, if any.
    if (threads_.empty()) throw;
  }
}

FileFarm::~FileFarm() {
  cancelled_.store(true);
  stop_.request();
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  room_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::shared_ptr<HeldOutput> FileFarm::submit(Task task) {
  auto held = std::make_shared<HeldOutput>();
  {
    std::lock_guard lock(out_mutex_);
    ++submitted_;
  }
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back({std::move(task), held});
    // A sleeping thread is woken only when the awake ones (searching, or about to look at
    // the queue) have more waiting than one each: a tree of tiny files is then searched by
    // as many threads as keep up, without a wake-up (a futex call and a switch) per file.
    wake = sleeping_ > 0 && jobs_.size() > threads_.size() - sleeping_;
  }
  if (wake) wake_.notify_one();
  return held;
}

// A farm thread: files in the order submitted, each with this thread's lane (made at the
// first file) writing into the file's held output. Nothing is thrown across the thread.
void FileFarm::work() {
  HeldWriter out_writer(*this, HeldOutput::Kind::kOut);
  HeldWriter err_writer(*this, HeldOutput::Kind::kErr);
  Output out(out_writer, false, 64u << 10);
  Output err(err_writer, true, 4u << 10);
  std::unique_ptr<Lane> lane;
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      while (!closing_ && jobs_.empty()) {
        ++sleeping_;
        wake_.wait(lock);
        --sleeping_;
      }
      if (closing_) break;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    out_writer.bind(job.held.get());
    err_writer.bind(job.held.get());
    FarmOutcome outcome;
    const bool cancelled = !run(job, lane, out_writer, out, err, outcome);
    // What a cancelled file left in the Outputs' buffers goes nowhere.
    out_writer.drop();
    err_writer.drop();
    if (cancelled) {
      out.flush();
      err.flush();
    }
    finish(*job.held, cancelled ? nullptr : &outcome);
  }
  out_writer.drop();
  err_writer.drop();
}

// A file's search is over: its outcome (none when cancelled) is the writer's, which is
// woken if it waits for this file or for enough files after it.
void FileFarm::finish(HeldOutput& held, const FarmOutcome* outcome) {
  std::unique_lock lock(out_mutex_);
  if (outcome != nullptr) held.outcome_ = *outcome;
  held.done_ = true;
  ++finished_;
  const bool wake = writer_waits_for_ != nullptr && writer_ready(*writer_waits_for_);
  lock.unlock();
  if (wake) writer_wake_.notify_one();  // after the unlock: the writer woken does not wait for the mutex
}

bool FileFarm::writer_ready(const HeldOutput& held) const noexcept {
  if (held.bytes_ >= kWakeBytes) return true;
  return held.done_ && (finished_ >= writer_wakes_at_ || finished_ == submitted_ || waiting_for_room_ > 0);
}

// One file with this thread's lane (made at its first file), its outcome into `outcome`;
// false when the farm was cancelled during it.
bool FileFarm::run(Job& job, std::unique_ptr<Lane>& lane, HeldWriter& out_writer, Output& out, Output& err,
                   FarmOutcome& outcome) {
  auto report = [&](const char* what) {
    outcome.trouble = true;
    out.flush();
    err.write(std::string(kProgram) + ": " + what + "\n");
    err.flush();
  };
  try {
    try {
      if (!lane) lane = make_lane_(out, err);
      Context context{*lane, out, err, [&] {
                        out.flush();
                        out_writer.put(HeldOutput::Kind::kSeparator, {});
                      }};
      outcome = job.task(context);
      out.flush();
      err.flush();
    } catch (const Cancelled&) {
      throw;
    } catch (const std::bad_alloc&) {
      report("memory exhausted");
    } catch (const std::exception& e) {
      report(e.what());
    }
  } catch (const Cancelled&) {
    return false;
  }
  return true;
}

FarmOutcome FileFarm::write_out(HeldOutput& held, Output& out, Output& err,
                                const std::function<void()>& separator) {
  std::unique_lock lock(out_mutex_);
  for (;;) {
    if (!held.done_ && held.bytes_ < kWakeBytes) {
      // Woken when the file is done and half the files in flight after it are too.
      writer_waits_for_ = &held;
      writer_wakes_at_ = finished_ + std::max<std::uint64_t>(1, (submitted_ - finished_) / 2);
      while (!writer_ready(held)) {
        if (writer_wake_.wait_for(lock, std::chrono::milliseconds(100)) == std::cv_status::timeout) {
          if (outer_ != nullptr && outer_->requested()) stop_.request();
          if (!held.pieces_.empty()) break;  // what the file holds so far, at least every 0.1 s
        }
      }
      writer_waits_for_ = nullptr;
    }
    std::deque<HeldOutput::Piece> pieces = std::exchange(held.pieces_, {});
    const bool done = held.done_;
    const bool room = held.bytes_ >= HeldOutput::kHeldBytes;
    held.bytes_ = 0;
    lock.unlock();
    if (room) room_.notify_all();
    for (HeldOutput::Piece& piece : pieces) {
      switch (piece.kind) {
        case HeldOutput::Kind::kOut: out.write(piece.bytes); break;
        case HeldOutput::Kind::kErr:
          out.flush();
          err.write(piece.bytes);
          err.flush();
          break;
        case HeldOutput::Kind::kSeparator: separator(); break;
      }
    }
    if (done) return held.outcome_;
    lock.lock();
  }
}

}  // namespace gpufilter::cli
