#include "gpufilter/regex/capture_regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <new>

namespace gpufilter::regex {

std::string host_group() {
  // fail2ban's HOST without its DNS name part: an address is what a jail bans.
  return "(?:::f{4,6}:)?(?P<host>(?:\\d{1,3}\\.){3}\\d{1,3}|"
         "(?:[0-9a-fA-F]{1,4}::?|::){1,7}(?:[0-9a-fA-F]{1,4}|(?<=:):))";
}

std::string with_host_tags(std::string_view pattern) {
  std::string out;
  for (std::size_t at = 0; at < pattern.size();) {
    const std::size_t tag = pattern.find(kHostTag, at);
    if (tag == std::string_view::npos) {
      out.append(pattern.substr(at));
      break;
    }
    out.append(pattern.substr(at, tag - at));
    out += host_group();
    at = tag + kHostTag.size();
  }
  return out;
}

struct CaptureRegex::Perl {
  pcre2_code* code = nullptr;
  pcre2_match_data* data = nullptr;
  std::vector<std::uint32_t> numbers;  // group number per name
  ~Perl() {
    if (data != nullptr) pcre2_match_data_free(data);
    if (code != nullptr) pcre2_code_free(code);
  }
};

CaptureRegex::~CaptureRegex() = default;

CaptureRegex::CaptureRegex(const std::string& pattern, Syntax syntax, bool ignore_case, bool word) {
  if (syntax != Syntax::kPerl) {
    RegexOptions o;
    o.syntax = syntax;
    o.ignore_case = ignore_case;
    o.word = word;
    grep_ = compile({pattern}, o);
    return;
  }
  perl_ = std::make_unique<Perl>();
  // Bytes, as the daemon reads its lines; -w as grep -P applies it.
  const std::string text = word ? "(?<!\\w)(?:" + pattern + ")(?!\\w)" : pattern;
  int code = 0;
  PCRE2_SIZE offset = 0;
  perl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                              PCRE2_DOLLAR_ENDONLY | (ignore_case ? PCRE2_CASELESS : 0u), &code, &offset, nullptr);
  if (perl_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    throw RegexError({reinterpret_cast<const char*>(message)});
  }
  pcre2_jit_compile(perl_->code, PCRE2_JIT_COMPLETE);  // a failure only leaves the interpreter
  perl_->data = pcre2_match_data_create_from_pattern(perl_->code, nullptr);
  if (perl_->data == nullptr) throw std::bad_alloc();
  std::uint32_t count = 0, entry_size = 0;
  PCRE2_SPTR table = nullptr;
  pcre2_pattern_info(perl_->code, PCRE2_INFO_NAMECOUNT, &count);
  pcre2_pattern_info(perl_->code, PCRE2_INFO_NAMEENTRYSIZE, &entry_size);
  pcre2_pattern_info(perl_->code, PCRE2_INFO_NAMETABLE, &table);
  for (std::uint32_t i = 0; i < count; ++i) {
    const PCRE2_SPTR entry = table + static_cast<std::size_t>(i) * entry_size;
    perl_->numbers.push_back((static_cast<std::uint32_t>(entry[0]) << 8) | entry[1]);
    names_.emplace_back(reinterpret_cast<const char*>(entry + 2));
  }
}

bool CaptureRegex::match(std::string_view line, std::vector<std::string>* values) {
  if (grep_) {
    if (values != nullptr) values->clear();
    return grep_->selects(0, line);
  }
  // PCRE2 10.42 refuses a null subject even for no bytes.
  const char* bytes = line.empty() ? "" : line.data();
  const int rc = pcre2_match(perl_->code, reinterpret_cast<PCRE2_SPTR>(bytes), line.size(), 0, 0, perl_->data, nullptr);
  if (rc == PCRE2_ERROR_NOMEMORY) throw std::bad_alloc();
  if (rc < 0) return false;  // no match, or a backtracking limit: not a match
  if (values != nullptr) {
    values->assign(names_.size(), std::string());
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(perl_->data);
    for (std::size_t i = 0; i < names_.size(); ++i) {
      const std::uint32_t n = perl_->numbers[i];
      if (static_cast<int>(n) >= rc && rc > 0) continue;  // after the last group that took part
      const PCRE2_SIZE begin = ovector[2 * n], end = ovector[2 * n + 1];
      if (begin == PCRE2_UNSET || end < begin) continue;
      (*values)[i].assign(line.data() + begin, end - begin);
    }
  }
  return true;
}

}  // namespace gpufilter::regex
