// Multiline records: a source's `multiline:` joins consecutive lines of one input into
// one record that the rules match as a whole (a Java stack trace and its "at ..." lines),
// as Vector's and Fluent Bit's multiline parsers do. The lines are scanned as usual; the
// joining happens after the scan, on the scan thread (RuleConsumer), so the record keeps
// its bytes (lines joined by '\n') and the occurrences the scan found in each line.
//
//   start: REGEX         a line that matches begins a new record
//   continuation: REGEX  a line that matches continues the current record
//   (with both, a line matching neither begins a new record; with start alone, every
//    other line continues; with continuation alone, every other line begins one)
//   max_lines, max_bytes a record that reaches either is handed on as it is
//   timeout              a record with no new line for this long is handed on
//
// The regexes are PCRE2 (as rules' regex:) and run on the host against each line.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/core/record_fields.hpp"
#include "gpufilter/regex/capture_regex.hpp"

namespace gpufilter::daemon {

struct MultilineConfig {
  std::string start;
  std::string continuation;
  std::size_t max_lines = 500;
  std::size_t max_bytes = 1u << 20;
  std::chrono::milliseconds timeout{1000};
  bool operator==(const MultilineConfig&) const = default;
};

// A source's compiled rules for joining; one per source, shared by its inputs (only the
// scan thread uses it: the regexes keep match data). Throws regex::RegexError.
class Multiline {
 public:
  explicit Multiline(MultilineConfig config);
  enum class Role { kStart, kContinue };
  Role role(std::string_view line) const;
  const MultilineConfig& config() const noexcept { return config_; }

 private:
  MultilineConfig config_;
  std::unique_ptr<regex::CaptureRegex> start_;
  std::unique_ptr<regex::CaptureRegex> continuation_;
};

// One input's record being joined.
class Joiner {
 public:
  using Clock = std::chrono::steady_clock;
  struct Record {
    std::string_view text;                   // lines joined by '\n', without a final one
    std::span<const Occurrence> occurrences;  // relative to text[0]
    std::uint64_t offset = 0;                // of its first line in the input
    const RecordFields* fields = nullptr;    // its first line's
  };
  using Emit = std::function<void(const Record&)>;

  explicit Joiner(std::shared_ptr<const Multiline> multiline) : multiline_(std::move(multiline)) {}

  // One line (without its '\n'), its occurrences relative to it: hands on the record it
  // ends (when it begins one, or the record is full), then keeps it.
  void line(std::string_view text, std::span<const Occurrence> occurrences, std::uint64_t offset,
            const std::shared_ptr<const RecordFields>& fields, Clock::time_point now, const Emit& emit);
  // Hands on the record being joined, if any.
  void flush(const Emit& emit);
  // A record waits and its last line came `timeout` or more before `now`.
  bool due(Clock::time_point now) const {
    return lines_ > 0 && now - last_ >= multiline_->config().timeout;
  }

 private:
  std::shared_ptr<const Multiline> multiline_;
  std::string text_;
  std::vector<Occurrence> occurrences_;
  std::uint64_t offset_ = 0;
  std::shared_ptr<const RecordFields> fields_;
  std::size_t lines_ = 0;
  Clock::time_point last_{};
};

}  // namespace gpufilter::daemon
