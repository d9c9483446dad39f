#include "gpufilter/fail2ban/pyregex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <new>
#include <stdexcept>

#include "gpufilter/core/utf8.hpp"

namespace gpufilter::fail2ban {
namespace {

std::atomic<std::uint64_t> g_limit_failures{0};

bool stopped_at_limit(int rc) {
  return rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT;
}

// PCRE2 refuses group names over 32 bytes; Python has no such limit.
constexpr std::size_t kMaxGroupName = 32;

bool is_hex(std::string_view s) {
  for (const char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// An escape outside or inside a class: \Z is Python's end of string (PCRE2's \z; PCRE2's
// \Z also matches before a final newline), \u and \U are Python's code point escapes.
std::size_t translate_escape(std::string_view p, std::size_t i, bool in_class, std::string& out) {
  if (i + 1 >= p.size()) throw std::invalid_argument("bad escape (end of pattern)");
  const char n = p[i + 1];
  if (n == 'Z' && !in_class) {
    out += "\\z";
    return i + 2;
  }
  if (n == 'u' || n == 'U') {
    const std::size_t digits = n == 'u' ? 4 : 8;
    const std::string_view hex = p.substr(i + 2, digits);
    if (hex.size() != digits || !is_hex(hex)) throw std::invalid_argument("incomplete escape \\" + std::string(1, n));
    out += "\\x{" + std::string(hex) + "}";
    return i + 2 + digits;
  }
  if (n == 'N') throw std::invalid_argument("named Unicode escape \\N{...} has no PCRE2 form");
  // Python's str whitespace (\s) holds \x1c-\x1f too, PCRE2's does not; \v is the vertical
  // tab alone in Python, every vertical space in PCRE2.
  if (n == 's') {
    out += in_class ? "\\s\\x1c-\\x1f" : "[\\s\\x1c-\\x1f]";
    return i + 2;
  }
  if (n == 'S' && !in_class) {
    out += "[^\\s\\x1c-\\x1f]";
    return i + 2;
  }
  if (n == 'v') {
    out += "\\x0b";
    return i + 2;
  }
  // An ASCII letter Python does not know is an error there ("bad escape"), not a PCRE2
  // class such as \p{L} or \h.
  const std::string_view known = in_class ? "abdDfnrsStwWx" : "aAbBdDfnrsStwWxZ";
  if (std::isalpha(static_cast<unsigned char>(n)) && known.find(n) == std::string_view::npos)
    throw std::invalid_argument("bad escape \\" + std::string(1, n));
  out += p.substr(i, 2);
  return i + 2;
}

// (?flags) or (?flags:...): PCRE2 knows i, m, s and x as Python does; u (Unicode) is what
// PCRE2_UCP gives every pattern here; a (ASCII) and L (locale) have no PCRE2 form.
std::size_t translate_flags(std::string_view p, std::size_t i, bool at_start, std::string& out) {
  std::size_t j = i + 2;
  std::string flags;
  while (j < p.size() && (std::isalpha(static_cast<unsigned char>(p[j])) || p[j] == '-')) flags += p[j++];
  if (j >= p.size() || (p[j] != ')' && p[j] != ':')) {
    out += p.substr(i, 2);
    return i + 2;
  }
  std::string kept;
  for (const char f : flags) {
    if (f == 'a' || f == 'L') throw std::invalid_argument("inline flag (?" + std::string(1, f) + ") has no PCRE2 form");
    if (f != 'u') kept += f;
  }
  if (p[j] == ')') {
    // Python 3.11 refuses global flags anywhere but at the start of the expression.
    if (!at_start) throw std::invalid_argument("global flags not at the start of the expression");
    if (!kept.empty()) out += "(?" + kept + ")";
    return j + 1;
  }
  out += "(?" + kept + ":";
  return j + 1;
}

std::size_t translate_group(std::string_view p, std::size_t i, bool at_start, std::string& out) {
  if (p.substr(i, 4) == "(?P<") {
    const std::size_t close = p.find('>', i + 4);
    if (close != std::string_view::npos && close - (i + 4) > kMaxGroupName) {
      throw std::invalid_argument("group name longer than PCRE2's 32 characters");
    }
  }
  // (?(name)yes|no): PCRE2 reads (?(R...) and (?(DEFINE) specially; (?(<name>) is exact.
  if (p.substr(i, 3) == "(?(") {
    std::size_t j = i + 3;
    while (j < p.size() && (std::isalnum(static_cast<unsigned char>(p[j])) || p[j] == '_')) ++j;
    if (j < p.size() && p[j] == ')' && j > i + 3 && !std::isdigit(static_cast<unsigned char>(p[i + 3]))) {
      out += "(?(<" + std::string(p.substr(i + 3, j - i - 3)) + ">)";
      return j + 1;
    }
  }
  if (i + 2 < p.size() && (std::isalpha(static_cast<unsigned char>(p[i + 2])) || p[i + 2] == '-') && p[i + 2] != 'P') {
    return translate_flags(p, i, at_start, out);
  }
  out += "(";
  return i + 1;
}

// {,n} is {0,n} in Python; PCRE2 10.42 reads it as literal text.
std::size_t translate_brace(std::string_view p, std::size_t i, std::string& out) {
  std::size_t j = i + 1;
  if (j < p.size() && p[j] == ',') {
    std::size_t k = j + 1;
    while (k < p.size() && std::isdigit(static_cast<unsigned char>(p[k]))) ++k;
    if (k > j + 1 && k < p.size() && p[k] == '}') {
      out += "{0" + std::string(p.substr(j, k + 1 - j));
      return k + 1;
    }
  }
  out += '{';
  return i + 1;
}

// A class from p[i] == '['; the index past its ']'. Python's \S leaves \x1c-\x1f out (they
// are its whitespace), PCRE2's does not, and a class cannot subtract: a class holding \S
// becomes a choice between the rest of the class and \S without them, or, negated, Python's
// whitespace that the rest of the class does not hold.
std::size_t translate_class(std::string_view p, std::size_t i, std::string& out) {
  ++i;
  const bool negated = i < p.size() && p[i] == '^';
  if (negated) ++i;
  const std::size_t body_start = i;  // a ']' right at the start is a literal in both
  std::string body;
  bool not_space = false;  // the class holds \S
  for (;;) {
    if (i >= p.size()) throw std::invalid_argument("unterminated character set");
    const char c = p[i];
    if (c == ']' && i > body_start) break;
    if (c == '\\' && i + 1 < p.size() && p[i + 1] == 'S') {
      // A range with a class at either end is Python's error: [a-\S], [\S-z].
      const bool after_dash = i > body_start + 1 && p[i - 1] == '-' && p[i - 2] != '\\';
      const bool before_dash = i + 3 < p.size() && p[i + 2] == '-' && p[i + 3] != ']';
      if (after_dash || before_dash) throw std::invalid_argument("bad character range with \\S");
      not_space = true;
      i += 2;
    } else if (c == '\\') {
      i = translate_escape(p, i, true, body);
    } else {
      // Python reads "[:" inside a class as two characters, PCRE2 as a POSIX class; a '^'
      // first in what is left would negate it.
      body += (c == '[' || (c == '^' && body.empty())) ? std::string("\\") + c : std::string(1, c);
      ++i;
    }
  }
  if (!not_space) out += (negated ? "[^" : "[") + body + "]";
  else if (!negated) out += body.empty() ? "(?:(?![\\x1c-\\x1f])\\S)" : "(?:[" + body + "]|(?![\\x1c-\\x1f])\\S)";
  else out += body.empty() ? "[\\s\\x1c-\\x1f]" : "(?:(?![" + body + "])[\\s\\x1c-\\x1f])";
  return i + 1;
}

}  // namespace

std::string translate_python_regex(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  for (std::size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\\') {
      i = translate_escape(p, i, false, out);
    } else if (c == '[') {
      i = translate_class(p, i, out);
    } else if (c == '(' && i + 1 < p.size() && p[i + 1] == '?') {
      const bool at_start = out.find_first_not_of("()?imsxu") == std::string::npos || out.empty();
      i = translate_group(p, i, at_start, out);
    } else if (c == '{') {
      i = translate_brace(p, i, out);
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

namespace {

// A thread's match state, shared by every pattern it searches: the match data (as many
// pairs as the most groups searched for yet), and what a long or hard line needs beyond
// PCRE2's defaults, made at the first such line. A pattern holds none of it, so that
// several threads search one compiled pattern at once (a filter's lines in pieces).
struct MatchState {
  pcre2_match_data* data = nullptr;
  std::uint32_t pairs = 0;
  // Made at the first line that outgrows JIT's default 32 KiB stack (a long line under a
  // backtracking pattern): Python's re has no such limit, so neither may a match here.
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* limits = nullptr;  // made at the first search a limit stops
  ~MatchState() {
    if (limits != nullptr) pcre2_match_context_free(limits);
    if (context != nullptr) pcre2_match_context_free(context);
    if (stack != nullptr) pcre2_jit_stack_free(stack);
    if (data != nullptr) pcre2_match_data_free(data);
  }
  pcre2_match_data* data_for(std::uint32_t captures) {
    if (captures + 1 > pairs) {
      const std::uint32_t want = std::max<std::uint32_t>(captures + 1, std::max<std::uint32_t>(16, pairs * 2));
      pcre2_match_data* grown = pcre2_match_data_create(want, nullptr);
      if (grown == nullptr) throw std::bad_alloc();
      if (data != nullptr) pcre2_match_data_free(data);
      data = grown;
      pairs = want;
    }
    return data;
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

struct PyRegex::Code {
  pcre2_code* code = nullptr;
  // The pattern's translated text where it is ASCII (else empty), for its twin.
  std::string ascii_text;
  bool jit = false;  // compiled by the JIT: matched through pcre2_jit_match(), without pcre2_match()'s checks
  std::uint32_t captures = 0;  // PCRE2_INFO_CAPTURECOUNT, read once
  ~Code() {
    if (code != nullptr) pcre2_code_free(code);
  }
  // pcre2_match() into the thread's match data, again with a JIT stack of up to 64 MiB,
  // then through the interpreter (its heap limit, 20 MB by default), when a limit stopped it.
  int match(MatchState& s, PCRE2_SPTR subject, std::size_t length, std::size_t pos) const {
    pcre2_match_data* data = s.data_for(captures);
    // Every UTF pattern is compiled with PCRE2_MATCH_INVALID_UTF (a twin reads bytes), so
    // the JIT code takes any subject (pcre2_match() would not check it either).
    int rc = jit ? pcre2_jit_match(code, subject, length, pos, 0, data, s.context)
                 : pcre2_match(code, subject, length, pos, 0, data, s.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && s.stack == nullptr) {
      s.stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
      s.context = pcre2_match_context_create(nullptr);
      if (s.stack == nullptr || s.context == nullptr) throw std::bad_alloc();
      pcre2_jit_stack_assign(s.context, nullptr, s.stack);
      rc = pcre2_match(code, subject, length, pos, 0, data, s.context);
    }
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(code, subject, length, pos, PCRE2_NO_JIT, data, s.context);
    if (stopped_at_limit(rc)) {
      // The interpreter again with limits 50 and 13 times PCRE2's defaults (500 M steps,
      // 256 MiB of backtracking memory): what Python's re finds in seconds is found.
      if (s.limits == nullptr) {
        s.limits = pcre2_match_context_create(nullptr);
        if (s.limits == nullptr) throw std::bad_alloc();
        pcre2_set_match_limit(s.limits, 500'000'000u);
        pcre2_set_depth_limit(s.limits, 500'000'000u);
        pcre2_set_heap_limit(s.limits, 256u * 1024u);  // KiB
      }
      rc = pcre2_match(code, subject, length, pos, PCRE2_NO_JIT, data, s.limits);
      if (stopped_at_limit(rc)) g_limit_failures.fetch_add(1, std::memory_order_relaxed);
    }
    return rc;
  }
  // `text` compiled with `options` (and by the JIT where it can be): nullopt, or PCRE2's
  // reason and where.
  std::optional<std::string> compile(const std::string& text, std::uint32_t options);
  // The same pattern compiled as bytes, for subjects that are all ASCII (twin()), made
  // at the first such subject by whichever thread meets it; itself where there is none.
  const Code& for_ascii() const;

 private:
  std::unique_ptr<Code> twin() const;
  mutable std::once_flag twin_once_;
  mutable std::unique_ptr<Code> twin_;
  mutable std::atomic<const Code*> for_ascii_{nullptr};  // the twin or this, once decided (read before call_once's call)
};

std::uint64_t PyRegex::limit_failures() noexcept { return g_limit_failures.load(std::memory_order_relaxed); }

// A twin of a pattern whose translated text is ASCII, compiled as bytes (no PCRE2_UTF,
// PCRE2_UCP or PCRE2_MATCH_INVALID_UTF), whose JIT code takes three quarters of the time
// (sshd's failregexes over an OpenSSH log: 0.101 s against 0.137).
// On a subject that is all ASCII the two find the same: \w, \d, \s, \b and the POSIX
// classes hold the same ASCII characters under UCP as in PCRE2's C-locale tables; an
// ASCII letter's other case is ASCII but for U+212A and U+017F, which an ASCII subject
// does not hold and an ASCII pattern names only as \x{...} above 255, refused without
// UTF (no twin); `.`, lookbehind lengths and code units are one byte a character.
std::unique_ptr<PyRegex::Code> PyRegex::Code::twin() const {
  if (ascii_text.empty()) return nullptr;
  auto twin = std::make_unique<Code>();
  std::uint32_t options = 0;  // this pattern's own, less the UTF ones
  pcre2_pattern_info(code, PCRE2_INFO_ARGOPTIONS, &options);
  options &= ~static_cast<std::uint32_t>(PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF);
  if (twin->compile(ascii_text, options) || twin->captures != captures) return nullptr;
  return twin;
}

std::optional<std::string> PyRegex::Code::compile(const std::string& text, std::uint32_t options) {
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  if (context == nullptr) throw std::bad_alloc();
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), options, &error, &offset, context);
  pcre2_compile_context_free(context);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return std::string(reinterpret_cast<const char*>(message)) + " at offset " + std::to_string(offset);
  }
  jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;  // a failure only leaves the interpreter
  pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &captures);
  return std::nullopt;
}

const PyRegex::Code& PyRegex::Code::for_ascii() const {
  if (const Code* decided = for_ascii_.load(std::memory_order_acquire)) return *decided;
  std::call_once(twin_once_, [this] {
    twin_ = twin();
    for_ascii_.store(twin_ != nullptr ? twin_.get() : this, std::memory_order_release);
  });
  return *for_ascii_.load(std::memory_order_acquire);
}

PyRegex::PyRegex(std::string_view python_pattern, bool multiline)
    : code_(std::make_unique<Code>()), pattern_(python_pattern) {
  const std::string text = translate_python_regex(python_pattern);
  // Python matches str (code points) with Unicode \w, \d, \s and \b; a log line that is not
  // valid UTF-8 is still searched, its bad bytes matching nothing but themselves.
  const std::uint32_t options =
      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (multiline ? PCRE2_MULTILINE : 0u);
  if (const std::optional<std::string> error = code_->compile(text, options))
    throw std::invalid_argument(*error + " of " + text);
  if (all_ascii(text)) code_->ascii_text = text;
  std::uint32_t count = 0, entry_size = 0;
  PCRE2_SPTR table = nullptr;
  pcre2_pattern_info(code_->code, PCRE2_INFO_NAMECOUNT, &count);
  pcre2_pattern_info(code_->code, PCRE2_INFO_NAMEENTRYSIZE, &entry_size);
  pcre2_pattern_info(code_->code, PCRE2_INFO_NAMETABLE, &table);
  for (std::uint32_t i = 0; i < count; ++i) {
    const PCRE2_SPTR entry = table + static_cast<std::size_t>(i) * entry_size;
    names_[reinterpret_cast<const char*>(entry + 2)] = (static_cast<std::size_t>(entry[0]) << 8) | entry[1];
  }
  for (const auto& [name, number] : names_) ordered_.emplace_back(name, number);  // the map's nodes stay put
}

PyRegex::PyRegex(PyRegex&&) noexcept = default;
PyRegex& PyRegex::operator=(PyRegex&&) noexcept = default;
PyRegex::~PyRegex() = default;

PyRegex::Match PyRegex::search(std::string_view subject, std::size_t pos, std::size_t endpos) const {
  Match m;
  search(m, subject, pos, endpos);
  return m;
}

bool PyRegex::search(Match& m, std::string_view subject, std::size_t pos, std::size_t endpos) const {
  m.subject = subject;
  m.ok = false;
  m.groups.clear();
  const std::size_t length = std::min(endpos, subject.size());
  if (pos > length) return false;
  static constexpr char kEmpty[] = "";  // pcre2_jit_match() is given no null subject
  const char* text = subject.data() != nullptr ? subject.data() : kEmpty;
  MatchState& state = match_state();
  const Code& code = !code_->ascii_text.empty() && all_ascii(std::string_view(text, length)) ? code_->for_ascii() : *code_;
  const int rc = code.match(state, reinterpret_cast<PCRE2_SPTR>(text), length, pos);
  if (rc <= 0) return false;  // no match, or a match limit: both are "not found" here
  const std::uint32_t groups = code_->captures;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
  m.groups.resize(groups + 1);
  for (std::uint32_t g = 0; g <= groups; ++g) {
    if (g < static_cast<std::uint32_t>(rc) && ov[2 * g] != PCRE2_UNSET) {
      m.groups[g] = {static_cast<std::ptrdiff_t>(ov[2 * g]), static_cast<std::ptrdiff_t>(ov[2 * g + 1])};
    }
  }
  m.ok = true;
  return true;
}

std::optional<std::string> PyRegex::Match::group(std::size_t g) const {
  if (g >= groups.size() || !groups[g].set()) return std::nullopt;
  return std::string(subject.substr(start(g), end(g) - start(g)));
}

void PyRegex::group_views(const Match& m, GroupViews& out) const {
  out.clear();
  out.reserve(ordered_.size());
  for (const auto& [name, number] : ordered_) {
    if (number < m.groups.size() && m.groups[number].set())
      out.emplace_back(name, m.subject.substr(m.start(number), m.end(number) - m.start(number)));
    else
      out.emplace_back(name, std::nullopt);
  }
}

std::optional<std::string> PyRegex::group(const Match& m, const std::string& name) const {
  const auto it = names_.find(name);
  if (it == names_.end()) return std::nullopt;
  return m.group(it->second);
}

std::string py_sub(const PyRegex& re, std::string_view text,
                   const std::function<std::string(const PyRegex::Match&)>& fn, std::size_t count) {
  std::string out;
  std::size_t pos = 0, last = 0, done = 0;
  while (pos <= text.size()) {
    const PyRegex::Match m = re.search(text, pos);
    if (!m) break;
    out.append(text.substr(last, m.start() - last));
    out += fn(m);
    last = m.end();
    if (count != 0 && ++done >= count) break;
    if (m.end() == m.start()) {
      if (m.end() < text.size()) out += text[m.end()];
      last = pos = m.end() + 1;
    } else {
      pos = m.end();
    }
  }
  if (last < text.size()) out.append(text.substr(last));
  return out;
}

namespace {

// The length of the valid UTF-8 sequence at text[i] (1-4), or 0 with `subpart` set to how
// many bytes form its maximal invalid subpart (at least 1), as Unicode and CPython count.
std::size_t utf8_sequence(std::string_view text, std::size_t i, std::size_t& subpart) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  subpart = 1;
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if (i + k >= text.size() || b(i + k) < (k == 1 ? lo : 0x80) || b(i + k) > (k == 1 ? hi : 0xBF)) {
      subpart = k;
      return 0;
    }
  }
  return n;
}

}  // namespace

bool valid_utf8(std::string_view text) {
  if (all_ascii(text)) return true;  // most log lines, eight bytes at a time
  std::size_t subpart = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i, subpart);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_replaced(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  std::size_t subpart = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i, subpart);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += subpart;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace gpufilter::fail2ban
