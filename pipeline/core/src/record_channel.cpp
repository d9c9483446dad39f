#include "gpufilter/core/record_channel.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace gpufilter {

RecordChannel::RecordChannel(Config config) : config_(config) {
  config_.batches = std::max<std::size_t>(config_.batches, 2);
  config_.batch_bytes = std::max<std::size_t>(config_.batch_bytes, 2);
  for (std::size_t i = 0; i < config_.batches; ++i) {
    auto batch = std::make_unique<RecordBatch>();
    batch->bytes.resize(config_.batch_bytes);
    free_.push_back(batch.get());
    all_.push_back(std::move(batch));
  }
}

RecordBatch* RecordChannel::current_locked() {
  if (current_ != nullptr) return current_;
  if (free_.empty()) return nullptr;
  current_ = free_.back();
  free_.pop_back();
  // Events that waited for a batch go first: they came before anything appended now.
  current_->entries.insert(current_->entries.end(), std::make_move_iterator(pending_.begin()),
                           std::make_move_iterator(pending_.end()));
  pending_.clear();
  return current_;
}

void RecordChannel::open(StreamId stream, std::string name, StreamId continues, std::uint32_t origin) {
  BatchEntry e;
  e.kind = BatchEntry::Kind::kOpen;
  e.stream = stream;
  e.name = std::move(name);
  e.continues = continues;
  e.origin = origin;
  std::lock_guard lock(mutex_);
  if (RecordBatch* b = current_locked()) b->entries.push_back(std::move(e));
  else pending_.push_back(std::move(e));
  ready_cv_.notify_one();
}

void RecordChannel::close(StreamId stream, bool ends_input) {
  BatchEntry e;
  e.kind = BatchEntry::Kind::kClose;
  e.stream = stream;
  e.ends_input = ends_input;
  std::lock_guard lock(mutex_);
  if (RecordBatch* b = current_locked()) b->entries.push_back(std::move(e));
  else pending_.push_back(std::move(e));
  ready_cv_.notify_one();
}

std::size_t RecordChannel::append(StreamId stream, std::uint64_t offset, std::string_view lines,
                                  std::uint64_t skipped, const std::shared_ptr<const RecordFields>& fields) {
  if (lines.empty()) return 0;
  if (lines.back() != '\n') throw std::invalid_argument("RecordChannel::append: lines must end in a newline");
  std::size_t taken = 0;
  std::unique_lock lock(mutex_);
  while (taken < lines.size()) {
    RecordBatch* b = current_locked();
    if (b == nullptr) {
      short_ = true;
      break;
    }
    const std::size_t room = b->bytes.size() - b->size;
    const std::string_view rest = lines.substr(taken);
    std::size_t fit = rest.size();
    if (fit > room) {
      const void* nl = room > 0 ? memrchr(rest.data(), '\n', room) : nullptr;
      fit = nl == nullptr ? 0 : static_cast<std::size_t>(static_cast<const char*>(nl) - rest.data()) + 1;
    }
    if (fit == 0) {
      if (b->size == 0) throw std::invalid_argument("RecordChannel::append: a line longer than a batch");
      ready_.push_back(b);  // full for this line: hand it on, continue in the next
      current_ = nullptr;
      ready_cv_.notify_one();
      continue;
    }
    std::memcpy(b->bytes.data() + b->size, rest.data(), fit);
    const std::uint64_t at = offset + taken;
    BatchEntry* last = b->entries.empty() ? nullptr : &b->entries.back();
    const bool extend = last != nullptr && last->kind == BatchEntry::Kind::kLines && last->stream == stream &&
                        last->end == b->size && last->offset + (last->end - last->begin) == at &&
                        (skipped == 0 || taken > 0) && last->fields == fields;
    if (extend) {
      last->end += fit;
    } else {
      BatchEntry e;
      e.kind = BatchEntry::Kind::kLines;
      e.stream = stream;
      e.begin = b->size;
      e.end = b->size + fit;
      e.offset = at;
      e.skipped = taken == 0 ? skipped : 0;
      e.fields = fields;
      b->entries.push_back(std::move(e));
    }
    b->size += fit;
    taken += fit;
    if (b->size == b->bytes.size()) {
      ready_.push_back(b);
      current_ = nullptr;
    }
  }
  ready_cv_.notify_one();
  return taken;
}

void RecordChannel::set_space_callback(std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  on_space_ = std::move(callback);
}

void RecordChannel::finish() {
  std::lock_guard lock(mutex_);
  finished_ = true;
  ready_cv_.notify_all();
}

void RecordChannel::wake() {
  std::lock_guard lock(mutex_);
  woken_ = true;
  ready_cv_.notify_all();
}

RecordBatch* RecordChannel::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto has_records = [&] {
    return !ready_.empty() || (current_ != nullptr && (current_->size > 0 || !current_->entries.empty())) ||
           (!pending_.empty() && !free_.empty());
  };
  if (!has_records() && !finished_ && !woken_ && timeout.count() != 0) {
    if (timeout.count() < 0) ready_cv_.wait(lock, [&] { return has_records() || finished_ || woken_; });
    else ready_cv_.wait_for(lock, timeout, [&] { return has_records() || finished_ || woken_; });
  }
  woken_ = false;
  if (!ready_.empty()) {
    RecordBatch* b = ready_.front();
    ready_.pop_front();
    return b;
  }
  if (!pending_.empty()) current_locked();
  if (current_ != nullptr && (current_->size > 0 || !current_->entries.empty())) {
    RecordBatch* b = current_;
    current_ = nullptr;
    return b;
  }
  return nullptr;
}

void RecordChannel::recycle(RecordBatch* batch) {
  std::function<void()> callback;
  {
    std::lock_guard lock(mutex_);
    batch->size = 0;
    batch->entries.clear();
    free_.push_back(batch);
    if (short_) {
      short_ = false;
      callback = on_space_;
    }
  }
  if (callback) callback();
}

bool RecordChannel::finished() const {
  std::lock_guard lock(mutex_);
  return finished_ && ready_.empty() && pending_.empty() &&
         (current_ == nullptr || (current_->size == 0 && current_->entries.empty()));
}

void RecordChannel::acknowledge(StreamId stream, std::uint64_t end_offset) {
  std::lock_guard lock(mutex_);
  acks_[stream] = end_offset;
}

std::optional<std::uint64_t> RecordChannel::acknowledged(StreamId stream) const {
  std::lock_guard lock(mutex_);
  const auto it = acks_.find(stream);
  if (it == acks_.end()) return std::nullopt;
  return it->second;
}

void RecordChannel::forget(StreamId stream) {
  std::lock_guard lock(mutex_);
  acks_.erase(stream);
}

}  // namespace gpufilter
