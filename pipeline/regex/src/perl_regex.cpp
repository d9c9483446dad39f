// -P: PCRE2 with grep 3.8's options (pcresearch.c, Pcompile and Pexecute): one pattern,
// PCRE2_DOLLAR_ENDONLY, -i as PCRE2_CASELESS, -x as PCRE2_EXTRA_MATCH_LINE, -w as
// "(?<!\w)(?:P)(?!\w)", and in a UTF-8 locale PCRE2_UTF with invalid UTF-8 as a barrier.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "gpufilter/regex/line_regex.hpp"
#include "regex_internal.hpp"

namespace gpufilter::regex {
namespace {

struct CodeDeleter {
  void operator()(pcre2_code* c) const noexcept { pcre2_code_free(c); }
};
struct DataDeleter {
  void operator()(pcre2_match_data* d) const noexcept { pcre2_match_data_free(d); }
};
struct ContextDeleter {
  void operator()(pcre2_compile_context* c) const noexcept { pcre2_compile_context_free(c); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* c) const noexcept { pcre2_match_context_free(c); }
};
struct JitStackDeleter {
  void operator()(pcre2_jit_stack* s) const noexcept { pcre2_jit_stack_free(s); }
};

class PerlRegex final : public LineRegex {
 public:
  PerlRegex(std::string pattern, const RegexOptions& options) : pattern_(std::move(pattern)), options_(options) {
    compile_pattern();
  }

  std::size_t size() const noexcept override { return 1; }
  bool selects(std::size_t, std::string_view line) override {
    std::size_t begin = 0, end = 0;
    return execute(line, 0, begin, end);
  }
  bool find(std::string_view line, std::size_t from, std::span<const std::uint32_t>, Found& out) override {
    std::size_t begin = 0, end = 0;
    if (!execute(line, from, begin, end)) return false;
    out = {begin, end - begin, false};
    return true;
  }
  std::unique_ptr<LineRegex> clone() const override { return std::make_unique<PerlRegex>(pattern_, options_); }
  // Lines end in '\n' there: not for -z.
  bool prepare_lines() override { return !options_.null_data; }
  bool select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                    std::vector<const char*>& line_ends) override;

 private:
  void compile_pattern();
  int run(std::string_view subject, std::size_t offset, std::uint32_t flags);
  bool grow_limits(int rc);
  [[noreturn]] static int fail(int rc);
  bool execute(std::string_view line, std::size_t from, std::size_t& begin, std::size_t& end);

  std::string pattern_;
  RegexOptions options_;
  std::unique_ptr<pcre2_code, CodeDeleter> code_;
  std::unique_ptr<pcre2_match_data, DataDeleter> data_;
  // Grown as grep grows them (jit_exec): the JIT stack from PCRE2's 32 KiB, doubled, and
  // the depth limit, doubled, each while under half its type's range.
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> match_context_;
  std::unique_ptr<pcre2_jit_stack, JitStackDeleter> jit_stack_;
  std::size_t jit_stack_size_ = 32 * 1024;
  bool jit_ = false;  // compiled by the JIT: pcre2_jit_match()
  std::uint32_t depth_limit_ = 0;  // 0: PCRE2's default, not yet read
  bool empty_match_[2] = {false, false};  // [bol]: does the pattern match "" (grep's shortcut)
};

void PerlRegex::compile_pattern() {
  std::uint32_t flags = PCRE2_DOLLAR_ENDONLY | (options_.ignore_case ? PCRE2_CASELESS : 0);
  if (options_.utf8) flags |= PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  std::unique_ptr<pcre2_compile_context, ContextDeleter> context(pcre2_compile_context_create(nullptr));
  if (!context) throw std::bad_alloc();
  if (options_.whole_line) pcre2_set_compile_extra_options(context.get(), PCRE2_EXTRA_MATCH_LINE);
  std::string text = pattern_;
  // -x wins: grep 3.8 writes -x's form where -w's would go (pcresearch.c), so the pattern is
  // not wrapped for -w at all ('(*UCP)a' compiles, 'a)(?:b' does not).
  if (options_.word && !options_.whole_line) text = "(?<!\\w)(?:" + text + ")(?!\\w)";
  int code = 0;
  PCRE2_SIZE offset = 0;
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), flags, &code, &offset,
                            context.get()));
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    throw RegexError({reinterpret_cast<const char*>(message)});
  }
  // A failure only leaves the interpreter. With JIT code, the JIT's own entry, which checks
  // nothing: not where the subject's UTF-8 is to be checked ("(*UTF)" in the C locale, where
  // an encoding error is grep's error, not a barrier).
  std::size_t jit_size = 0;
  std::uint32_t all = 0;
  jit_ = pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE) == 0 &&
         pcre2_pattern_info(code_.get(), PCRE2_INFO_JITSIZE, &jit_size) == 0 && jit_size > 0 &&
         pcre2_pattern_info(code_.get(), PCRE2_INFO_ALLOPTIONS, &all) == 0 &&
         ((all & PCRE2_UTF) == 0 || (all & PCRE2_MATCH_INVALID_UTF) != 0);
  data_.reset(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  if (!data_) throw std::bad_alloc();
  empty_match_[0] = run({}, 0, PCRE2_NOTBOL) >= 0;
  empty_match_[1] = run({}, 0, 0) >= 0;
}

int PerlRegex::run(std::string_view subject, std::size_t offset, std::uint32_t flags) {
  for (;;) {
    // pcre2_jit_match() reads no length before the pointer: an empty subject still needs one.
    const auto text = reinterpret_cast<PCRE2_SPTR>(subject.data() != nullptr ? subject.data() : "");
    const int rc = jit_ ? pcre2_jit_match(code_.get(), text, subject.size(), offset, flags, data_.get(),
                                          match_context_.get())
                        : pcre2_match(code_.get(), text, subject.size(), offset, flags, data_.get(),
                                      match_context_.get());
    if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
    if (!grow_limits(rc)) return fail(rc);
  }
}

// grep's jit_exec: a larger JIT stack, or a deeper limit, and the match again.
bool PerlRegex::grow_limits(int rc) {
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT && jit_stack_size_ <= INT_MAX / 2) {
    const std::size_t old_size = jit_stack_size_;
    jit_stack_size_ *= 2;
    jit_stack_.reset(pcre2_jit_stack_create(old_size, jit_stack_size_, nullptr));
    if (!match_context_) match_context_.reset(pcre2_match_context_create(nullptr));
    if (!jit_stack_ || !match_context_) throw MatchError("memory exhausted");
    pcre2_jit_stack_assign(match_context_.get(), nullptr, jit_stack_.get());
    return true;
  }
  if (rc == PCRE2_ERROR_DEPTHLIMIT) {
    if (depth_limit_ == 0) pcre2_config(PCRE2_CONFIG_DEPTHLIMIT, &depth_limit_);
    if (depth_limit_ == 0 || depth_limit_ >= UINT32_MAX / 2) return false;
    if (!match_context_) match_context_.reset(pcre2_match_context_create(nullptr));
    if (!match_context_) throw MatchError("memory exhausted");
    depth_limit_ *= 2;
    pcre2_set_depth_limit(match_context_.get(), depth_limit_);
    return true;
  }
  return false;
}

int PerlRegex::fail(int rc) {
  // grep's words (pcresearch.c, Pexecute), after the file's name.
  switch (rc) {
    case PCRE2_ERROR_NOMEMORY: throw MatchError("memory exhausted");
    case PCRE2_ERROR_JIT_STACKLIMIT: throw MatchError("exhausted PCRE JIT stack");
    case PCRE2_ERROR_MATCHLIMIT: throw MatchError("exceeded PCRE's backtracking limit");
    case PCRE2_ERROR_DEPTHLIMIT: throw MatchError("exceeded PCRE's nested backtracking limit");
    case PCRE2_ERROR_RECURSELOOP: throw MatchError("PCRE detected recurse loop");
    case PCRE2_ERROR_HEAPLIMIT: throw MatchError("exceeded PCRE's heap limit");
    default: throw MatchError("internal PCRE error: " + std::to_string(rc));
  }
}

// Pexecute for one line, from `from`: grep skips bytes that can never start a UTF-8
// character (they cannot match), and answers an empty rest of line from its precomputed
// empty match.
bool PerlRegex::execute(std::string_view line, std::size_t from, std::size_t& begin, std::size_t& end) {
  std::size_t subject = 0;
  std::size_t p = from;
  bool bol = from == 0;
  {
    if (options_.utf8) {
      while (p < line.size()) {
        const unsigned char c = static_cast<unsigned char>(line[p]);
        const bool never_starts = (c >= 0x80 && c <= 0xC1) || c >= 0xF5;
        if (!never_starts) break;
        subject = ++p;
        bol = false;
      }
    }
    if (p == line.size()) {
      if (!empty_match_[bol ? 1 : 0]) return false;
      begin = end = p;
      return true;
    }
    const std::string_view rest = line.substr(subject);
    if (run(rest, p - subject, bol ? 0 : PCRE2_NOTBOL) < 0) return false;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data_.get());
    begin = subject + ovector[0];
    end = subject + ovector[1];
    return true;
  }
}

// Each line of the piece asked as selects() asks it, without a caller's cut and call a line.
bool PerlRegex::select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                             std::vector<const char*>& line_ends) {
  std::size_t begin = 0, end = 0;
  for (std::size_t at = 0; at < piece.size();) {
    const void* nl = std::memchr(piece.data() + at, '\n', piece.size() - at);
    const std::size_t last =
        nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - piece.data()) : piece.size();
    if (execute(piece.substr(at, last - at), 0, begin, end)) {
      line_starts.push_back(piece.data() + at);
      line_ends.push_back(piece.data() + last);
    }
    at = last + 1;
  }
  return true;
}

}  // namespace

std::unique_ptr<LineRegex> compile_perl(const std::vector<std::string>& patterns, const RegexOptions& options) {
  if (patterns.size() > 1) throw RegexError({"the -P option only supports a single pattern"});
  return std::make_unique<PerlRegex>(patterns.empty() ? std::string() : patterns.front(), options);
}

}  // namespace gpufilter::regex
