// Multiline records (multiline.hpp): which lines begin a record, and the joining.
#include "gpufilter/daemon/multiline.hpp"

#include <algorithm>

namespace gpufilter::daemon {

Multiline::Multiline(MultilineConfig config) : config_(std::move(config)) {
  config_.max_lines = std::max<std::size_t>(config_.max_lines, 1);
  if (!config_.start.empty())
    start_ = std::make_unique<regex::CaptureRegex>(config_.start, regex::Syntax::kPerl, false, false);
  if (!config_.continuation.empty())
    continuation_ = std::make_unique<regex::CaptureRegex>(config_.continuation, regex::Syntax::kPerl, false, false);
}

Multiline::Role Multiline::role(std::string_view line) const {
  if (continuation_ && continuation_->match(line, nullptr)) return Role::kContinue;
  if (start_) return start_->match(line, nullptr) || continuation_ ? Role::kStart : Role::kContinue;
  return Role::kStart;  // continuation alone: what does not continue begins a record
}

void Joiner::line(std::string_view text, std::span<const Occurrence> occurrences, std::uint64_t offset,
                  const std::shared_ptr<const RecordFields>& fields, Clock::time_point now, const Emit& emit) {
  const MultilineConfig& config = multiline_->config();
  const bool begins = multiline_->role(text) == Multiline::Role::kStart;
  // A full record is handed on as it is; the line then begins the next.
  if (lines_ > 0 &&
      (begins || lines_ >= config.max_lines || text_.size() + 1 + text.size() > config.max_bytes))
    flush(emit);
  const std::uint32_t at = static_cast<std::uint32_t>(lines_ == 0 ? 0 : text_.size() + 1);
  if (lines_ == 0) {
    offset_ = offset;
    fields_ = fields;
  } else {
    text_.push_back('\n');
  }
  text_.append(text);
  for (const Occurrence& o : occurrences) occurrences_.push_back(Occurrence{o.position + at, o.pattern});
  ++lines_;
  last_ = now;
}

void Joiner::flush(const Emit& emit) {
  if (lines_ == 0) return;
  Record r;
  r.text = text_;
  r.occurrences = occurrences_;
  r.offset = offset_;
  r.fields = fields_.get();
  emit(r);
  text_.clear();
  occurrences_.clear();
  fields_.reset();
  lines_ = 0;
}

}  // namespace gpufilter::daemon
