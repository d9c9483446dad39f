#include "gpufilter/grep/stream_grep.hpp"

#include <algorithm>
#include <string_view>

#include "gpufilter/core/utf8.hpp"

namespace gpufilter {

StreamGrep::StreamGrep(Scanner& scanner, SearchOptions options, Sink& sink, RecordChannel& channel,
                               StreamGrepConfig config)
    : scanner_(scanner),
      options_(options),
      sink_(sink),
      config_(config),
      loop_(scanner, *this, channel, config.idle_wait) {}

StreamGrep::~StreamGrep() = default;

void StreamGrep::run() {
  loop_.run();
  for (auto& [id, input] : inputs_) finish(input);
  for (auto& [id, input] : parked_) finish(input);
  sink_.flush();
}

void StreamGrep::open(const BatchEntry& e) {
  if (e.continues != kNoStream) {
    auto parked = parked_.find(e.continues);
    if (parked != parked_.end()) {
      inputs_.emplace(e.stream, std::move(parked->second));
      parked_.erase(parked);
      return;
    }
  }
  Input input;
  input.searcher = std::make_unique<Searcher>(scanner_.table(), options_, sink_);
  input.searcher->begin_input(e.name);
  inputs_.emplace(e.stream, std::move(input));
}

void StreamGrep::close(const BatchEntry& e) {
  auto it = inputs_.find(e.stream);
  if (it == inputs_.end()) return;
  if (e.ends_input) finish(it->second);
  else parked_.emplace(e.stream, std::move(it->second));
  inputs_.erase(it);
}

void StreamGrep::finish(Input& input) {
  if (input.finished) return;
  input.finished = true;
  const InputSummary summary = input.searcher->finish_input();
  if (summary.selected_lines > 0) {
    selected_ = true;
    if (config_.stop_on_first_selected) decide_all();
  }
}

void StreamGrep::decide_all() {
  if (decided_) return;
  decided_ = true;
  if (on_decided_) on_decided_();
}

void StreamGrep::lines(const BatchEntry& e, const Chunk& piece, std::span<const Occurrence> occurrences) {
  lines_ += count_byte(std::string_view(piece.data, piece.size), '\n');
  auto it = inputs_.find(e.stream);
  if (it == inputs_.end() || it->second.finished || decided_) return;
  Input& input = it->second;
  input.searcher->skip_lines(e.skipped);
  if (input.searcher->consume(piece, occurrences) == Flow::kStop) {
    // The input is decided (-m reached, -l or -q matched): say so now, not at its end.
    finish(input);
    if (config_.inputs_to_decide > 0 && ++inputs_decided_ >= config_.inputs_to_decide) decide_all();
  }
}

}  // namespace gpufilter
