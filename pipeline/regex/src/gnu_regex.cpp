// -G and -E: glibc's GNU regex API with grep 3.8's syntax bits, and grep's -w/-x/-o rules
// from dfasearch.c (GEAcompile, EGexecute). grep decides whether a line matches with its
// DFA over the pattern wrapped for -w/-x ("\(^\|[^[:alnum:]_]\)\(P\)\([^[:alnum:]_]\|$\)",
// "^\(P\)$"), and finds -o/--color matches with regex's re_search and re_match. Both are
// done here with glibc's regex, which reads patterns exactly as grep's regex does.
#include <langinfo.h>
#include <locale.h>
#include <regex.h>

#include <algorithm>
#include <atomic>
#include <bitset>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <thread>

#include "gpufilter/core/stack_overflow.hpp"
#include "gpufilter/core/utf8.hpp"
#include "gpufilter/regex/line_regex.hpp"
#include "expansion.hpp"
#include "hs_select.hpp"
#include "hs_spans.hpp"
#include "literal_chains.hpp"
#include "regex_internal.hpp"

namespace gpufilter::regex {
namespace {

// grep's DFA reads a character only where RFC 3629 has one; glibc's regex reads a
// surrogate's encoding (ED A0-BF ..) and the forms past U+10FFFF (F4 90-BF .., F5-FD
// with 3 to 5 continuation bytes) as characters too, where grep's '.' and brackets match
// none of their bytes ("a.b" selects no "a\xed\xa0\x80b"). In a copy of such a line each
// of their bytes is 0xff, which glibc reads as a byte that nothing but itself matches;
// the offsets stay. `line` itself when it holds none (well-formed lines at once).
std::string_view glibc_characters_as_bytes(std::string_view line, std::string& copy) {
  std::size_t at = well_formed_utf8_prefix(line);
  if (at == line.size()) return line;
  bool copied = false;
  const auto* p = reinterpret_cast<const unsigned char*>(line.data());
  for (; at < line.size(); ++at) {
    const unsigned char c = p[at];
    std::size_t length = 0;
    if (c == 0xed && at + 1 < line.size() && p[at + 1] >= 0xa0) length = 3;
    else if (c == 0xf4 && at + 1 < line.size() && p[at + 1] >= 0x90) length = 4;
    else if (c >= 0xf5 && c <= 0xf7) length = 4;
    else if (c >= 0xf8 && c <= 0xfb) length = 5;
    else if (c >= 0xfc && c <= 0xfd) length = 6;
    if (length == 0 || line.size() - at < length) continue;
    bool tail = true;
    for (std::size_t k = 1; k < length; ++k) tail = tail && (p[at + k] & 0xc0) == 0x80;
    if (!tail) continue;
    if (!copied) copy.assign(line);
    copied = true;
    std::fill_n(copy.begin() + static_cast<std::ptrdiff_t>(at), length, '\xff');
    at += length - 1;
  }
  return copied ? std::string_view(copy) : line;
}

reg_syntax_t syntax_bits(const RegexOptions& o) {
  reg_syntax_t bits = o.syntax == Syntax::kExtended ? RE_SYNTAX_EGREP : RE_SYNTAX_GREP;
  if (o.ignore_case) bits |= RE_ICASE;
  // grep's DFA with DFA_EOL_NUL: a bracket's complement takes '\n' for -E too.
  if (o.null_data) bits &= ~static_cast<reg_syntax_t>(RE_HAT_LISTS_NOT_NEWLINE);
  return bits;
}

// Under -i, the pattern with each ASCII letter outside brackets a bracket of both its
// cases ("a\.b" is "[aA]\.[bB]"), for glibc to read without RE_ICASE: the fixed strings
// grep's own matcher folds byte by byte, and in the C locale any pattern, with glibc's
// fastmap then (grep turns it off under -i, for glibc bug 20381: -o -i over a log walked
// every start of every line). Only where both read alike: no back-reference (under RE_ICASE "\1"
// takes the group's text in either case), no escaped letter but \w \W \s \S \b \B,
// brackets whose letters come in both cases and whose ranges span no letter, no
// [:upper:], [:lower:], equivalence class or collating symbol. Nothing otherwise.
std::optional<std::string> letters_spelled_out(std::string_view p) {
  const auto letter = [](unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  std::string out;
  out.reserve(p.size() * 2);
  for (std::size_t i = 0; i < p.size(); ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c == '\\') {
      if (i + 1 >= p.size()) return std::nullopt;
      const auto n = static_cast<unsigned char>(p[i + 1]);
      if ((n >= '1' && n <= '9') || (letter(n) && std::string_view("wWsSbB").find(static_cast<char>(n)) == std::string_view::npos))
        return std::nullopt;
      out.append(p.substr(i, 2));
      ++i;
    } else if (c == '[') {
      std::size_t j = i + 1;
      if (j < p.size() && p[j] == '^') ++j;
      const std::size_t first = j;
      std::bitset<128> members;
      for (; j < p.size() && !(p[j] == ']' && j != first); ++j) {
        const auto b = static_cast<unsigned char>(p[j]);
        if (b == '[' && j + 1 < p.size() && (p[j + 1] == '=' || p[j + 1] == '.')) return std::nullopt;
        if (b == '[' && j + 1 < p.size() && p[j + 1] == ':') {
          const std::size_t close = p.find(":]", j + 2);
          if (close == std::string_view::npos) return std::nullopt;
          const std::string_view name = p.substr(j + 2, close - (j + 2));
          if (name == "upper" || name == "lower") return std::nullopt;
          j = close + 1;
          continue;
        }
        if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
          const auto high = static_cast<unsigned char>(p[j + 2]);
          if (b >= 0x80 || high >= 0x80 || high == '[') return std::nullopt;
          for (unsigned k = b; k <= high; ++k)
            if (letter(static_cast<unsigned char>(k))) return std::nullopt;
          j += 2;
          continue;
        }
        if (b < 0x80) members.set(b);
      }
      if (j >= p.size()) return std::nullopt;  // no ']': glibc's error, from the text given
      for (unsigned k = 'A'; k <= 'Z'; ++k)
        if (members[k] != members[k + 32]) return std::nullopt;
      out.append(p.substr(i, j + 1 - i));
      i = j;
    } else if (letter(c)) {
      out += '[';
      out += static_cast<char>(c | 0x20);
      out += static_cast<char>(c & ~0x20);
      out += ']';
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// glibc's compiler reads its syntax from a global (re_set_syntax): copies compile on
// their own threads, one at a time.
std::mutex& compile_mutex() {
  static std::mutex m;
  return m;
}

// The C locale, for a pattern's ASCII twin (GnuPattern).
locale_t c_locale() {
  static const locale_t c = ::newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  return c;
}

// Whether the locale's ranges order ASCII characters by their codes, as the C locale's do:
// a locale without collation rules (C.UTF-8) compares code points.
bool ranges_by_code() {
  const auto rules = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(::nl_langinfo(_NL_COLLATE_NRULES)));
  return rules == 0;
}

class InLocale {
 public:
  explicit InLocale(locale_t l) : old_(::uselocale(l)) {}
  ~InLocale() { ::uselocale(old_); }
  InLocale(const InLocale&) = delete;
  InLocale& operator=(const InLocale&) = delete;

 private:
  locale_t old_;
};

// One compiled GNU pattern with its registers.
//
// In a UTF-8 locale glibc reads a text a character at a time through mbrtowc (grep as
// well): -o over 250 MB of ASCII logs cost 2.9 s against 0.74 s in the C locale. On a
// line of ASCII alone an ASCII pattern reads as in the C locale -- the same matcher, its
// classes and case folding agreeing on every ASCII character, its ranges too where the
// locale orders by code point -- so such a pattern keeps a twin compiled in the C locale
// (when first asked), and a caller that knows its line to be ASCII asks the twin.
class GnuPattern {
 public:
  GnuPattern() = default;
  GnuPattern(const GnuPattern&) = delete;
  GnuPattern& operator=(const GnuPattern&) = delete;
  ~GnuPattern() {
    if (compiled_) ::regfree(&buffer_);
    if (twin_ == Twin::kCompiled) ::regfree(&twin_buffer_);
    std::free(registers_.start);
    std::free(registers_.end);
  }

  // nullptr, or glibc's message. `positions`: the groups' registers are wanted (else
  // RE_NO_SUB; match_end() still answers).
  const char* compile(std::string_view text, reg_syntax_t bits, bool positions, const RegexOptions& options) {
    // The fixed strings grep's own matcher takes under -i fold ASCII letters only, byte by
    // byte (its kwset's table): glibc's RE_ICASE (or a translation table) reads the line
    // as case-folded characters instead and finds the empty string elsewhere ("-F -w -i
    // -e ''" in UTF-8 ended the -w walk inside a multibyte character). Their letters are
    // brackets of both cases instead.
    std::optional<std::string> spelled = options.ignore_case ? letters_spelled_out(text) : std::nullopt;
    std::string folded;
    if (options.fixed_matcher && spelled) {  // an escaped fixed string always spells out
      folded = std::move(*spelled);
      spelled.reset();
      text = folded;
      bits &= ~static_cast<reg_syntax_t>(RE_ICASE);
    }
    const bool ignore_case = options.ignore_case && !options.fixed_matcher;
    newline_anchor_ = !options.null_data;  // with -z '\n' is an ordinary character
    bits_ = positions ? bits : bits | RE_NO_SUB;
    const reg_syntax_t exact_bits = bits_ & ~static_cast<reg_syntax_t>(RE_ICASE);
    // In the C locale (the twin's too) the letters spelled out read as RE_ICASE does.
    // grep: no fastmap with -i, to work around glibc bug 20381 (the twin too).
    const char* error = spelled && !options.utf8 && compile_into(buffer_, *spelled, exact_bits, true) == nullptr
                            ? nullptr
                            : compile_into(buffer_, text, bits_, !ignore_case);
    if (error != nullptr) return error;
    compiled_ = true;
    positions_ = positions;
    if (options.utf8 && all_ascii(text) && ranges_by_code()) {
      twin_ = Twin::kWanted;
      text_.assign(spelled ? std::string_view(*spelled) : text);
      twin_bits_ = spelled ? exact_bits : bits_;
    }
    return nullptr;
  }

  // With -z grep's DFA reads '\n' as an ordinary byte: an anchor holds at a record's ends
  // alone. glibc's matcher, even with newline_anchor off, lets '^' match right after a
  // '\n' it has consumed and '$' right before one ("a.^b" on "a\nb"). A pattern set
  // that grep's DFA decides, and that holds no '\v', is searched in a copy of the record
  // whose '\n' are '\v': a control and space character as '\n' is, in every class and
  // range such a set can hold (GnuRegex::compile_all()), never an anchor's neighbour.
  void read_newline_as_vt() noexcept { newline_as_vt_ = true; }

  // re_search over line[0, n) from `start` for `range` bytes: the start of the match, -1.
  // `ascii`: the line holds no byte above 0x7f (the twin may read it).
  regoff_t search(std::string_view line, std::size_t start, std::size_t range, bool ascii, bool not_eol = false) {
    if (newline_as_vt_ && line.find('\n') != std::string_view::npos) {
      flat_.assign(line);
      std::replace(flat_.begin(), flat_.end(), '\n', '\v');
      line = flat_;
    }
    re_pattern_buffer& b = reader(ascii);
    not_eol_ = not_eol;
    b.not_eol = not_eol ? 1 : 0;
    b.newline_anchor = newline_anchor_ ? 1 : 0;
    prepare_thread_for_stack_overflow();  // glibc may recurse without end: grep's answer then
    std::optional<InLocale> c;
    if (&b == &twin_buffer_) c.emplace(c_locale());
    const regoff_t r = ::re_search(&b, line.data(), static_cast<regoff_t>(line.size()), static_cast<regoff_t>(start),
                                   static_cast<regoff_t>(range), positions_ ? &registers_ : nullptr);
    if (r < -1) throw std::bad_alloc();
    searched_ = line;
    found_ = r;
    searched_by_ = &b;
    return r;
  }
  // re_match of string[0, length) at `start`: the length of the match, -1.
  regoff_t match(const char* string, regoff_t length, regoff_t start, bool ascii) {
    prepare_thread_for_stack_overflow();
    re_pattern_buffer& b = reader(ascii);
    b.not_eol = not_eol_ ? 1 : 0;
    return match_with(b, string, length, start, &registers_);
  }
  // Where the match search() found ends. Without positions (RE_NO_SUB) glibc fills no
  // registers: the match at that start is asked again, with the same flags, and is the
  // same (the longest there). Asking for the groups' registers costs more than that, and
  // glibc's walk of them (set_regs) never ended on some patterns of a group that can match
  // empty under '+' ("a(b.*||j*|cb)+" and more, fuzzed; grep 3.8 hangs on them too).
  regoff_t match_end() {
    if (positions_) return registers_.end[0];
    const regoff_t length =
        match_with(*searched_by_, searched_.data(), static_cast<regoff_t>(searched_.size()), found_, nullptr);
    return found_ + std::max<regoff_t>(length, 0);
  }
  void set_not_eol(bool on) noexcept { not_eol_ = on; }

 private:
  enum class Twin { kNone, kWanted, kCompiled };

  // `fastmap`: glibc keeps a table of the bytes a match may start with.
  const char* compile_into(re_pattern_buffer& b, std::string_view text, reg_syntax_t bits, bool fastmap) {
    std::memset(&b, 0, sizeof b);
    b.fastmap = fastmap ? static_cast<char*>(std::malloc(256)) : nullptr;
    if (fastmap && b.fastmap == nullptr) throw std::bad_alloc();
    b.translate = nullptr;
    const char* error;
    {
      const std::lock_guard<std::mutex> lock(compile_mutex());
      ::re_set_syntax(bits);
      error = ::re_compile_pattern(text.data(), text.size(), &b);
    }
    if (error != nullptr) {
      std::free(b.fastmap);
      b.fastmap = nullptr;
      return error;
    }
    b.newline_anchor = newline_anchor_ ? 1 : 0;
    return nullptr;
  }
  // The buffer that reads a line: the twin where it may.
  re_pattern_buffer& reader(bool ascii) {
    if (!ascii || twin_ == Twin::kNone) return buffer_;
    if (twin_ == Twin::kWanted) {
      const InLocale c(c_locale());
      twin_ = compile_into(twin_buffer_, text_, twin_bits_, !(twin_bits_ & RE_ICASE)) == nullptr ? Twin::kCompiled
                                                                                                : Twin::kNone;
      text_ = std::string();
      if (twin_ == Twin::kNone) return buffer_;
    }
    return twin_buffer_;
  }
  regoff_t match_with(re_pattern_buffer& b, const char* string, regoff_t length, regoff_t start,
                      re_registers* registers) {
    std::optional<InLocale> c;
    if (&b == &twin_buffer_) c.emplace(c_locale());
    const regoff_t r = ::re_match(&b, string, length, start, registers);
    if (r < -1) throw std::bad_alloc();
    return r;
  }

  re_pattern_buffer buffer_{};
  re_pattern_buffer twin_buffer_{};  // the C locale's reading (Twin::kCompiled)
  re_pattern_buffer* searched_by_ = &buffer_;
  re_registers registers_{};
  reg_syntax_t bits_ = 0;
  reg_syntax_t twin_bits_ = 0;  // bits_, or without RE_ICASE where the twin's letters are spelled out
  Twin twin_ = Twin::kNone;
  std::string text_;  // the twin's text until it is compiled
  bool compiled_ = false;
  bool newline_anchor_ = true;  // '^' and '$' match at a '\n' inside the text too
  bool positions_ = false;       // registers_ are filled
  bool newline_as_vt_ = false;   // read_newline_as_vt()
  bool not_eol_ = false;         // set_not_eol(), for match()
  std::string flat_;             // its copy of the record searched last
  std::string_view searched_;    // search()'s last text and answer
  regoff_t found_ = -1;
};

constexpr char kWordBeginBk[] = "\\(^\\|[^[:alnum:]_]\\)\\(";
constexpr char kWordEndBk[] = "\\)\\([^[:alnum:]_]\\|$\\)";
constexpr char kWordBegin[] = "(^|[^[:alnum:]_])(";
constexpr char kWordEnd[] = ")([^[:alnum:]_]|$)";
constexpr char kLineBeginBk[] = "^\\(";
constexpr char kLineEndBk[] = "\\)$";
constexpr char kLineBegin[] = "^(";
constexpr char kLineEnd[] = ")$";

// The pattern as grep's DFA reads it for line selection under -w or -x.
std::string wrapped(std::string_view pattern, const RegexOptions& o) {
  const bool bk = o.syntax != Syntax::kExtended;
  std::string text = o.whole_line ? (bk ? kLineBeginBk : kLineBegin) : (bk ? kWordBeginBk : kWordBegin);
  text.append(pattern);
  text += o.whole_line ? (bk ? kLineEndBk : kLineEnd) : (bk ? kWordEndBk : kWordEnd);
  return text;
}

// The Hyperscan database compile_fast() planned, built when it first pays (shared by the
// clones). Building costs about a millisecond an expression (1.2 s for 1,000 patterns of
// the bench's set), far more than glibc spends on the few candidate lines of a small
// input or of rare matches: glibc answers until its estimated time reaches the estimated
// build time (twice the best choice at worst), and at once where every line is asked.
constexpr std::uint64_t kBuildNsBase = 2'000'000, kBuildNsPerExpression = 1'000'000;
constexpr std::uint64_t kGlibcNsPerLine = 1000, kGlibcNsPerByte = 30;

struct FastPlan {
  std::vector<std::string> expressions;
  std::vector<std::uint32_t> ids;
  bool ignore_case = false;
  bool utf8 = false;
  bool every_pattern = false;  // a lines database (select_lines) is tried first
  std::uint64_t budget_ns = 0;
  std::atomic<std::uint64_t> spent_ns{0};
  std::atomic<bool> built{false};  // set once `fast` and `lines` are final
  std::mutex building;
  std::shared_ptr<const HsSelect> fast;  // null: Hyperscan took none of them
  bool lines = false;
  std::vector<std::string> ascii_expressions;  // the ASCII twin's texts (HsSelect::set_ascii_twin), or none
};

// The superset gate (GnuRegex::gate_rejects): the supersets of the patterns Hyperscan
// cannot read exactly, built once on the first long line one of them meets, shared by the
// copies.
struct GatePlan {
  std::vector<std::string> expressions;
  std::vector<std::uint32_t> ids;
  bool ignore_case = false;
  bool utf8 = false;
  std::once_flag once;
  std::shared_ptr<const HsSelect> gate;  // null: Hyperscan took none
};

// grep's choice between two matches: the leftmost, then the longer.
bool better(const Found& f, const Found& best) {
  return f.begin < best.begin || (f.begin == best.begin && f.length > best.length);
}

// -w with -x (EGexecute): a match of the whole rest of the line from `from` takes the line
// and its newline; any other match does not count.
bool whole_line_word(std::size_t length, std::size_t line_size, std::size_t from, Found& out) {
  if (length != line_size - from) return false;
  out = {from, line_size - from + 1, true};
  return true;
}

// The patterns glibc and grep's DFA read, stacked repetitions collapsed where no
// back-reference can read a group, and after back-references (expansion.hpp).
std::vector<std::string> collapsed(const std::vector<std::string>& patterns, const RegexOptions& options) {
  std::vector<std::string> out;
  out.reserve(patterns.size());
  for (const std::string& p : patterns)
    out.push_back(collapse_repeats(p, options.syntax == Syntax::kExtended, possible_backrefs(p)));
  return out;
}

class GnuRegex final : public LineRegex {
 public:
  GnuRegex(const std::vector<std::string>& patterns, const RegexOptions& options,
           const std::vector<PatternOrigin>& origins)
      : patterns_(collapsed(patterns, options)), options_(options), origins_(origins) {
    compile_all();
  }

  std::size_t size() const noexcept override { return patterns_.size(); }
  bool whole_list() const noexcept override { return whole_list_; }

  bool selects(std::size_t i, std::string_view line) override {
    new_line();  // a new question: the gate's answer is for another line
    return decide(i, line);
  }
  // The line as grep's DFA reads it (glibc_characters_as_bytes() in UTF-8), for glibc's
  // searches that stand for the DFA; grep's regex matcher (back-references, -o's spans,
  // constructs the DFA leaves to it) reads the line as glibc does.
  std::string_view as_dfa_reads(std::string_view line) {
    return !options_.utf8 || well_formed_line(line) ? line : glibc_characters_as_bytes(line, dfa_copy_);
  }
  std::string dfa_copy_;  // as_dfa_reads()'s copy of the line asked about
  bool decide(std::size_t i, std::string_view line) {
    if (!whole_list_ && !backref_[i] && (joined_walk_ || joined_line(line))) return joined_selects(line);
    return decide_alone(i, line);
  }
  // decide() where the list is known not to be asked joined for this line.
  bool decide_alone(std::size_t i, std::string_view line) {
    if (whole_list_) {
      const std::string_view read = dfa_supported_ ? as_dfa_reads(line) : line;
      return whole_select_.search(read, 0, read.size(), ascii_line(line)) >= 0;
    }
    return own_selects(i, line);
  }
  // grep's regex asks one regex of every backref-free pattern joined. On valid text that
  // is each pattern's own answer together; on a line that is not valid UTF-8 glibc can
  // answer the joined regex otherwise, when a pattern in it needs its multibyte reading
  // and another does not (-i -e A -e '\W' on "\xc4\xb1a0\xc0\xaf\xf0\x9f": no match).
  bool joined_line(std::string_view line) const {
    return options_.utf8 && !dfa_supported_ && backref_free_.size() > 1 && !valid_utf8(line);
  }

  // Pattern i alone, as if it were the only one.
  bool own_selects(std::size_t i, std::string_view line) {
    if (gate_rejects(i, line)) return false;
    Compiled& c = compiled(i);
    if (!c.backref && dfa_supported_) {
      const std::string_view read = as_dfa_reads(line);
      return c.select.search(read, 0, read.size(), ascii_line(line)) >= 0;
    }
    // grep's DFA superset passes the line before its regex decides: where the two read
    // the pattern differently ('{' starting a branch: a literal, or a repetition of
    // nothing), the superset's reading must hold too.
    if (corner_select_[i] && !list_superset_passes(line)) return false;
    return selects_by_regex(c.exact, line);
  }

  bool find(std::string_view line, std::size_t from, std::span<const std::uint32_t> only, Found& out) override;

  // Shares what is immutable (the Hyperscan database, the texts); glibc's compiled
  // patterns are the copy's own, compiled when first asked (re_search serializes the
  // threads that share one).
  std::unique_ptr<LineRegex> clone() const override { return std::unique_ptr<LineRegex>(new GnuRegex(*this, 0)); }

 private:
  struct Compiled {
    bool backref = false;
    GnuPattern select;  // the -w/-x wrapped form, without positions (grep's DFA)
    GnuPattern exact;   // the pattern itself, with positions (grep's regex)
  };

  GnuRegex(const GnuRegex& from, int)
      : patterns_(from.patterns_), options_(from.options_), origins_(from.origins_), backref_(from.backref_),
        select_texts_(from.select_texts_), dfa_supported_(from.dfa_supported_), select_flat_(from.select_flat_),
        whole_list_(from.whole_list_),
        backref_ids_(from.backref_ids_), backref_free_(from.backref_free_), corner_select_(from.corner_select_),
        list_superset_text_(from.list_superset_text_), spans_plan_(from.spans_plan_), ascii_only_(from.ascii_only_),
        joined_walk_(from.joined_walk_),
        gate_plan_(from.gate_plan_) {
    compiled_.resize(patterns_.size());
    plan_ = from.plan_;  // set once by compile_fast(): the pointer never changes after
    if (whole_list_) compile_whole_list();
    // `from` may be taking the plan's database on its own thread meanwhile (its fast_,
    // in_fast_, lines_mode_): this copy asks the plan itself.
    adopted_ = plan_ == nullptr;
    if (plan_ && plan_->built.load(std::memory_order_acquire)) adopt_fast();
    if (from.expected_) expected_ = from.expected_->clone();  // made before any copy
    expected_ids_ = from.expected_ids_;
    if (from.groups_) groups_ = from.groups_->clone();  // made before any copy
    chains_ = from.chains_;
  }

  // Pattern i compiled (in a clone, on first use: every pattern compiled in the original).
  Compiled& compiled(std::size_t i);
  void compile_all();
  void compile_corner_selects(const std::vector<DfaView>& views);
  bool compile_whole_list();
  // A select pattern (the DFA's reading): false where glibc refuses the text.
  bool compile_select(GnuPattern& p, const std::string& text) const;
  void compile_combined();
  bool selects_by_regex(GnuPattern& p, std::string_view line);
  bool gate_rejects(std::size_t i, std::string_view line);
  void plan_gate(const std::vector<DfaView>& views);
  void take_gate();
  bool joined_selects(std::string_view line);
  bool matches_empty(GnuPattern& p);
  void compile_fast(const std::vector<DfaView>& views);
  std::vector<DfaView> ascii_views(const std::vector<DfaView>& views);
  std::vector<std::string> fast_texts(const std::vector<DfaView>& read, std::vector<std::uint32_t>& ids) const;
  // The plan's database, built now if no clone built it yet, taken with a scratch of
  // this copy's own.
  void settle_fast();
  void adopt_fast();
  // glibc is to confirm a line for `candidates` patterns: counts its estimated time
  // against the plan's budget, and takes the database once built or paid for.
  void before_glibc(std::size_t line_size, std::size_t candidates);
  bool selects_any(std::string_view line, std::span<const std::uint32_t> candidates,
                   std::vector<std::uint32_t>* ids) override;
  void expect_candidates(std::span<const std::uint32_t> ids) override;
  void factors_known(std::size_t without_factor) override;
  bool groups_select(std::string_view line, std::span<const std::uint32_t> candidates,
                     std::vector<std::uint32_t>* ids);
  bool prepare_lines() override;
  bool select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                    std::vector<const char*>& line_ends) override;
  bool exact_match(GnuPattern& p, std::string_view line, std::size_t from, const Found& best, Found& out);
  bool word_walk(GnuPattern& p, std::string_view line, std::size_t from, std::size_t best, std::size_t& match,
                 std::size_t& length);

  std::vector<std::string> patterns_;
  RegexOptions options_;
  std::vector<PatternOrigin> origins_;
  std::vector<bool> backref_;  // by pattern: grep's possible_backrefs
  // By pattern: the text its `select` compiles (the DFA's reading, -w/-x wrapped).
  std::shared_ptr<std::vector<std::string>> select_texts_ = std::make_shared<std::vector<std::string>>();
  std::vector<std::unique_ptr<Compiled>> compiled_;
  // -w with -o/--color: grep runs one regex of every backref-free pattern joined by
  // newlines (RE_NEWLINE_ALT), whose -w walk differs from each pattern's own.
  std::unique_ptr<GnuPattern> combined_;
  bool combined_tried_ = false;
  // grep's DFA decides lines (else its regex does, for every pattern: dfa_view.cpp).
  bool dfa_supported_ = true;
  // -z with an anchor inside a pattern: the selects read '\n' as '\v' (compile_all()).
  bool select_flat_ = false;
  // grep wraps its whole list for -w/-x, and an ERE ')' that closes nothing closes that
  // wrapper: then the list is read as one text, as grep's DFA reads it.
  bool whole_list_ = false;
  GnuPattern whole_select_;
  std::vector<std::uint32_t> backref_ids_;
  std::vector<std::uint32_t> backref_free_;
  // By pattern, where grep's regex decides: the DFA's superset of the whole list
  // (list_superset_) is asked first, since the two differ on a corner of this pattern.
  std::vector<bool> corner_select_;
  std::shared_ptr<const std::string> list_superset_text_;  // the supersets, one branch each
  std::unique_ptr<GnuPattern> list_superset_;              // this copy's, compiled when first asked
  bool wrapper_closed_ = false;  // -w/-x with a stray ')': list_superset_ is the wrapped list's
  // plan_spans(): the expressions HsSpans walks, compiled once for every copy.
  struct SpansPlan {
    std::vector<std::string> expressions;
    bool ignore_case = false;
    std::once_flag once;
    std::unique_ptr<HsSpans> model;
  };
  std::shared_ptr<SpansPlan> spans_plan_;
  std::unique_ptr<HsSpans> spans_;  // this copy's (its own scratch)
  bool spans_tried_ = false;
  void plan_spans(const std::vector<DfaView>& views);
  HsSpans* walk_spans();  // the walk's, or null where glibc walks this line
  bool list_pass_fresh_ = false;                           // list_pass_ is for the line being decided
  bool list_pass_ = false;
  std::shared_ptr<FastPlan> plan_;  // null: nothing for Hyperscan to read
  bool adopted_ = true;              // plan_'s database is fast_ (or there is none)
  std::unique_ptr<HsSelect> fast_;  // selection of the patterns Hyperscan can read (in_fast_)
  // expect_candidates(): the same for those patterns alone, when Hyperscan reads them all.
  std::unique_ptr<HsSelect> expected_;
  std::vector<std::uint32_t> expected_ids_;
  std::vector<std::string> fast_expressions_;  // by pattern: its Hyperscan text ("" when not in fast_)
  bool lines_mode_ = false;  // fast_ is a multi-line database of every pattern (select_lines)
  std::vector<std::uint32_t> every_id_;  // select_lines(): every pattern, for a line asked alone
  // Sets of kGroupsFrom patterns or more, each with a factor (factors_known()): a line is
  // a candidate for a few of them, and a database per group of kGroupSize patterns
  // (HsGroups) answers for the groups of those few; no database of the whole set is
  // built. A group is built when glibc's time on its patterns has cost about its build,
  // or, once lines are asked in bulk (prepare_lines(), select_lines()), every group at
  // once on every core: a build on one thread was most of a dense set's run (1,358 Loghub
  // templates: 1.9 s on the H200 machine).
  static constexpr std::size_t kGroupsFrom = 64, kGroupSize = 64;
  std::unique_ptr<HsGroups> groups_;
  // Those of them that are literals joined by ".*" are decided without a database.
  std::shared_ptr<const LiteralChains> chains_;
  std::string folded_line_;  // groups_select(): the line with ASCII letters lowered, for chains_ under -i
  std::vector<std::uint32_t> groups_asked_;  // groups_select(): the groups a line has met
  std::vector<bool> in_fast_;
  bool ascii_only_ = false;  // fast_ reads lines of ASCII alone (-i or -w in UTF-8)
  // -w decided by grep's regex matcher (not its DFA), with several backref-free patterns
  // of which one matches the empty string: grep walks one regex of them all (the joined
  // pattern, RE_NEWLINE_ALT), whose longest match can hide a pattern's empty one that its
  // own walk accepts ("-w -e 'ß?' -e '\W'" in UTF-8 selects no "\t2\tß"). Those patterns
  // then decide a line together, through that regex alone.
  bool joined_walk_ = false;
  // Before glibc reads a long line for a pattern, the pattern's superset (superset_view())
  // in Hyperscan, linear in the line, rejects most of those it cannot select: glibc's time
  // grows with the square of a line on some patterns ("\([^[:space:]]\+\)\{1,3\}.y"
  // in UTF-8: 0.6 s on 4,000 'x', minutes on 70 KB), where grep's DFA superset rejects the
  // line at once. Built once, on the first such line, and shared by the copies.
  std::shared_ptr<GatePlan> gate_plan_;  // null: every pattern is Hyperscan's, or none has a superset it reads
  std::unique_ptr<HsSelect> gate_;       // this copy's scratch on the plan's database
  bool gate_tried_ = false;
  std::vector<bool> gated_;  // by pattern: its superset is in gate_
  std::vector<std::uint32_t> gate_ids_;  // the gate's patterns that match the line asked about
  bool gate_scanned_ = false;            // gate_ids_ holds the gate's answer (the line is valid text for it)
  bool gate_fresh_ = false;              // gate_ids_/gate_scanned_ are for the line being decided
  // A new line is asked about: the answers kept for the last one no longer hold.
  void new_line() noexcept { gate_fresh_ = list_pass_fresh_ = ascii_fresh_ = well_formed_fresh_ = false; }
  // Whether `line`, the one being decided, holds ASCII alone in a UTF-8 locale: glibc's
  // patterns then read it with their C-locale twins (GnuPattern), and Hyperscan's ASCII
  // reading takes it. Found once a line, when first asked (a line Hyperscan decides in
  // UTF-8 mode never is).
  bool ascii_line(std::string_view line) noexcept {
    if (!ascii_fresh_) {
      ascii_line_ = options_.utf8 && all_ascii(line);
      ascii_fresh_ = true;
    }
    return ascii_line_;
  }
  bool ascii_line_ = false;
  bool ascii_fresh_ = false;  // ascii_line_ is for the line being decided
  // Whether `line`, the one being decided, is well-formed UTF-8 (RFC 3629): Hyperscan's
  // UTF-8 mode reads it, and grep's DFA reads it as glibc does. Found once a line, when
  // first asked (the gate, the databases and each candidate's DFA reading ask it).
  bool well_formed_line(std::string_view line) noexcept {
    if (!well_formed_fresh_) {
      well_formed_line_ = well_formed_utf8_prefix(line) == line.size();
      well_formed_fresh_ = true;
    }
    return well_formed_line_;
  }
  bool well_formed_line_ = false;
  bool well_formed_fresh_ = false;  // well_formed_line_ is for the line being decided
  bool list_superset_passes(std::string_view line);
  // In UTF-8, -w's word characters are the C library's multibyte letters and digits, and
  // the wrapper's "[^[:alnum:]_]" a bracket grep's DFA leaves to regex: every line is
  // decided by grep's regex matcher, and Hyperscan reads none of it exactly.
  bool words_by_regex() const noexcept { return options_.utf8 && options_.word && !options_.whole_line; }
  // Whether Hyperscan's databases may read `line`: its length fits, and in UTF-8 it is
  // well-formed text (RFC 3629; ASCII alone where -i reads it as in the C locale).
  bool hyperscan_reads(std::string_view line) {
    return line.size() <= 0xffffffffu &&
           (!options_.utf8 || (ascii_only_ ? ascii_line(line) : well_formed_line(line)));
  }
  // find()'s walk along one line (not under -w): by pattern, its next match from the
  // walk's last `from` on (start -1: none; kNotAsked: not searched on this line yet).
  static constexpr regoff_t kNotAsked = -2;
  struct WalkNext {
    regoff_t start = kNotAsked;
    regoff_t end = 0;
  };
  struct Walk {
    const char* line = nullptr;
    std::size_t size = 0;
    std::size_t from = 0;
    std::vector<WalkNext> next;
    bool joined = false;  // joined_line() of the line
    bool ascii = false;   // the line holds ASCII alone, in UTF-8
  };
  Walk walk_;
};

void GnuRegex::compile_all() {
  const reg_syntax_t bits = syntax_bits(options_);
  std::vector<std::string> errors;
  // Before glibc sees them: a pattern it would expand without bound (expansion.hpp), as
  // compiled for selection: with -w/-x inside the wrapper, whose anchors count.
  const bool wrap = options_.word || options_.whole_line;
  for (std::size_t i = 0; i < patterns_.size(); ++i)
    if (const std::optional<std::string> why =
            too_wide(wrap ? wrapped(patterns_[i], options_) : patterns_[i], options_.syntax == Syntax::kExtended))
      errors.push_back(with_origin(origins_, i, why->c_str()));
  if (!errors.empty()) throw RegexError(std::move(errors));
  std::vector<DfaView> views;
  compiled_.reserve(patterns_.size());
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    auto c = std::make_unique<Compiled>();
    const std::string& p = patterns_[i];
    c->backref = possible_backrefs(p);
    backref_.push_back(c->backref);
    if (!c->backref) backref_free_.push_back(static_cast<std::uint32_t>(i));
    else backref_ids_.push_back(static_cast<std::uint32_t>(i));
    if (const char* error = c->exact.compile(p, bits, c->backref, options_))
      errors.push_back(with_origin(origins_, i, error));
    compiled_.push_back(std::move(c));
    views.push_back(dfa_view(p, options_.syntax, options_.utf8, options_.ignore_case, i + 1 < patterns_.size()));
    dfa_supported_ = dfa_supported_ && views.back().supported;
  }
  if (!errors.empty()) throw RegexError(std::move(errors));
  if (words_by_regex()) dfa_supported_ = false;
  // grep's DFA reads the patterns in turn: the warnings up to its first error, then it.
  std::vector<std::string> said;
  for (const DfaView& v : views) {
    if (v.error) {
      said.insert(said.end(), v.warnings.begin(), v.warnings.begin() + static_cast<std::ptrdiff_t>(v.warnings_before_error));
      said.push_back(*v.error);
      throw RegexError(std::move(said));
    }
    said.insert(said.end(), v.warnings.begin(), v.warnings.end());
  }
  // With -z, an anchor inside a pattern: where grep's DFA decides the records, they are
  // selected as it reads them (GnuPattern::read_newline_as_vt()); where its regex decides
  // (a back-reference, -w, in UTF-8 a construct the DFA leaves to regex) grep's answer
  // mixes the two readings: refused.
  const bool inner_anchor = std::any_of(views.begin(), views.end(), [](const DfaView& v) { return v.inner_anchor; });
  select_flat_ = options_.null_data && inner_anchor && dfa_supported_ &&
                 std::none_of(patterns_.begin(), patterns_.end(),
                              [](const std::string& p) { return p.find('\v') != std::string::npos; });
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (views[i].refusal) throw RegexError({with_origin(origins_, i, views[i].refusal->c_str())});
    if (views[i].anchor_in_repeated_group)
      throw RegexError({with_origin(
          origins_, i,
          ("an anchor or a word boundary beside other text in a repeated group (\"" + patterns_[i] +
           "\") is not supported; write the repetitions out")
              .c_str())});
    if (options_.null_data && views[i].inner_anchor && !select_flat_)
      throw RegexError({with_origin(origins_, i,
                                    "an anchor ('^' or '$') inside an expression is not supported with -z where grep's "
                                    "regex decides the records (a back-reference; in a UTF-8 locale \\< \\> \\b \\w \\s "
                                    "and most brackets; a '\\v' in a pattern)")});
    if (options_.null_data && options_.word && !options_.whole_line && views[i].anchor)
      throw RegexError({with_origin(
          origins_, i,
          "an anchor ('^' or '$') inside an expression is not supported with -z (with -w every anchor is inside one)")});
  }
  select_texts_->assign(patterns_.size(), std::string());
  corner_select_.assign(patterns_.size(), false);
  plan_gate(views);
  if (!dfa_supported_) {
    // grep's -w walk is one of the joined regex, whose shorter matches at a place are asked
    // of a string cut there (re_match): an anchor or a word assertion of one pattern then
    // holds at the cut ("[[:print:]_]\'" beside "[a-z]*\W" selects "-b kab2a", neither alone
    // does), and one pattern's empty match stops another's walk: such lists walk together.
    if (options_.word && !options_.whole_line && backref_free_.size() > 1)
      joined_walk_ = std::any_of(backref_free_.begin(), backref_free_.end(), [&](std::uint32_t i) {
        return views[i].anchor || views[i].assertion || matches_empty(compiled_[i]->exact);
      });
    compile_corner_selects(views);
    if (!joined_walk_) compile_fast(views);
    plan_spans(views);  // -o is regex's reading wherever the lines are decided
    return;
  }
  bool stray = false;
  for (const DfaView& v : views) stray = stray || v.stray_close;
  if (wrap && stray) {
    std::string joined;
    for (std::size_t i = 0; i < patterns_.size(); ++i) joined += (i ? "\n" : "") + patterns_[i];
    // A stray ')' closes the wrapper's group, so what follows it repeats the whole
    // wrapped text: "m+++++++)" and fourteen '+' under -w is 2^22 copies (fuzzing found it).
    const std::string text = wrapped(joined, options_);
    if (const std::optional<std::string> why = too_wide(text, options_.syntax == Syntax::kExtended))
      throw RegexError({*why + " (with -w or -x a stray ')' closes the group around the whole expression)"});
    const DfaView whole = dfa_view(text, options_.syntax, options_.utf8, options_.ignore_case);
    select_texts_->push_back(whole.select);  // the whole list's text, after the patterns'
    if (compile_whole_list()) {
      whole_list_ = true;
      return;
    }
    select_texts_->pop_back();
  }
  for (std::uint32_t i : backref_free_) {
    // The DFA's reading; should glibc refuse the rewritten text, the pattern as given.
    std::string& text = (*select_texts_)[i];
    text = wrap ? wrapped(views[i].select, options_) : views[i].select;
    if (compile_select(compiled_[i]->select, text)) continue;
    text = wrap ? wrapped(patterns_[i], options_) : patterns_[i];
    if (!compile_select(compiled_[i]->select, text))
      throw RegexError({with_origin(origins_, i, "invalid regular expression")});
  }
  compile_fast(views);
  plan_spans(views);
}

// find()'s walk through Hyperscan (HsSpans), where it reads every pattern as grep's regex
// does and no match depends on what lies before where a walk goes on: no -w/-x wrapper, no
// anchor or word assertion, no back-reference, no corner the DFA reads otherwise; ASCII
// patterns in UTF-8 (for lines of ASCII alone, where the locale orders ranges by code
// point, as GnuPattern's twin). A few dozen patterns at most: each costs
// Hyperscan a compile. Hyperscan refuses a pattern that matches the empty string, and then
// glibc walks.
void GnuRegex::plan_spans(const std::vector<DfaView>& views) {
  constexpr std::size_t kMostPatterns = 64;
  if (options_.word || options_.whole_line || options_.null_data || !backref_ids_.empty() ||
      patterns_.size() > kMostPatterns || wrapper_closed_ || (options_.utf8 && !ranges_by_code()))
    return;
  const std::vector<DfaView> c_views = options_.utf8 ? ascii_views(views) : std::vector<DfaView>();
  const std::vector<DfaView>& read = options_.utf8 ? c_views : views;
  auto plan = std::make_shared<SpansPlan>();
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    const DfaView& r = read[i];
    if (!r.pcre_ok || r.corner || views[i].corner || r.anchor || r.assertion || views[i].anchor ||
        views[i].assertion)
      return;
    plan->expressions.push_back(r.pcre);
  }
  plan->ignore_case = options_.ignore_case;
  spans_plan_ = std::move(plan);
}

HsSpans* GnuRegex::walk_spans() {
  if (!spans_plan_ || (options_.utf8 && !walk_.ascii)) return nullptr;
  if (!spans_tried_) {
    spans_tried_ = true;
    SpansPlan& plan = *spans_plan_;
    std::call_once(plan.once, [&] { plan.model = HsSpans::compile(plan.expressions, plan.ignore_case); });
    if (plan.model) spans_ = plan.model->clone();
  }
  return spans_.get();
}

// Where grep's regex decides lines, its DFA superset still passes them first, reading a
// '{' that starts a branch as a literal where regex reads a repetition of nothing: -E
// '{"id":[0-9]+' in UTF-8 (the bracket is regex's there) selects only lines with the
// '{'. Those patterns keep the superset's reading beside their own. The superset is the
// whole list's (grep's DFA reads the patterns joined): "-E -e '{' -e '[[=e=]]'" passes every
// line, the second pattern's superset being ".*", and regex's '{' then takes it. With -w
// in UTF-8 the wrapper's brackets are the superset's ".*": anywhere in the line.
void GnuRegex::compile_corner_selects(const std::vector<DfaView>& views) {
  const bool wrap = options_.whole_line || (options_.word && !options_.utf8);
  const reg_syntax_t bits = syntax_bits(options_);
  // With -w or -x an ERE ')' that closes nothing closes grep's wrapper around the whole
  // list ("{)|" under -w is "(^|W)({)" or "\)(W|$)\)"), whose superset then holds for
  // every pattern: the wrapped list's own, not its patterns' joined.
  const bool whole = (options_.word || options_.whole_line) &&
                     std::any_of(views.begin(), views.end(), [](const DfaView& v) { return v.stray_close; });
  wrapper_closed_ = whole;
  if (!whole && std::none_of(views.begin(), views.end(), [](const DfaView& v) { return v.corner; })) return;
  std::string list;  // RE_NEWLINE_ALT: one branch per pattern
  for (std::size_t j = 0; j < views.size(); ++j)
    list += (j ? "\n" : "") + (whole ? patterns_[j] : wrap ? wrapped(views[j].superset, options_) : views[j].superset);
  if (whole) list = dfa_view(wrapped(list, options_), options_.syntax, options_.utf8, options_.ignore_case).superset;
  // Compiled once for every corner pattern (a copy compiles it when first asked).
  list_superset_ = std::make_unique<GnuPattern>();
  if (list_superset_->compile(list, bits, false, options_) != nullptr) {
    list_superset_.reset();
    return;
  }
  list_superset_text_ = std::make_shared<const std::string>(std::move(list));
  for (std::size_t i = 0; i < patterns_.size(); ++i) corner_select_[i] = whole || views[i].corner;
}

// Whether the whole list's superset passes `line`: one search a line, however many
// corner patterns ask.
bool GnuRegex::list_superset_passes(std::string_view line) {
  if (!list_pass_fresh_) {
    if (!list_superset_) {  // a copy's: the original compiled the same text
      list_superset_ = std::make_unique<GnuPattern>();
      list_superset_->compile(*list_superset_text_, syntax_bits(options_), false, options_);
    }
    const std::string_view read = as_dfa_reads(line);  // the superset is the DFA's
    list_pass_ = list_superset_->search(read, 0, read.size(), ascii_line(line)) >= 0;
    list_pass_fresh_ = true;
  }
  return list_pass_;
}

bool GnuRegex::compile_whole_list() { return compile_select(whole_select_, select_texts_->back()); }

bool GnuRegex::compile_select(GnuPattern& p, const std::string& text) const {
  if (p.compile(text, syntax_bits(options_), false, options_) != nullptr) return false;
  if (select_flat_) p.read_newline_as_vt();
  return true;
}

GnuRegex::Compiled& GnuRegex::compiled(std::size_t i) {
  if (!compiled_[i]) {
    // A clone's: the original compiled the same texts, so they compile.
    auto c = std::make_unique<Compiled>();
    const reg_syntax_t bits = syntax_bits(options_);
    c->backref = backref_[i];
    c->exact.compile(patterns_[i], bits, c->backref, options_);
    if (!c->backref && dfa_supported_ && !whole_list_) compile_select(c->select, (*select_texts_)[i]);
    compiled_[i] = std::move(c);
  }
  return *compiled_[i];
}

// Whether a line holds a match of a Hyperscan text is the same without a ".*" (or "^.*")
// that begins it or a ".*" (or ".*$") that ends it: it matches the empty string at the
// line's edges. (A literal '.' is hex-escaped in dfa_view's text, so a bare '.' is any
// character.) Without them a match ends once, not at every byte to the line's end.
std::string without_edge_stars(std::string p) {
  for (bool trimmed = true; trimmed;) {
    trimmed = false;
    for (const char* head : {"^.*", ".*"}) {
      const std::size_t n = std::strlen(head);
      if (p.size() > n && p.compare(0, n, head) == 0 && p[n] != '*' && p[n] != '?' && p[n] != '+' && p[n] != '{') {
        p.erase(0, n);
        trimmed = true;
      }
    }
    for (const char* tail : {".*$", ".*"}) {
      const std::size_t n = std::strlen(tail);
      if (p.size() > n && p.compare(p.size() - n, n, tail) == 0 && p[p.size() - n - 1] != '\\' &&
          p[p.size() - n - 1] != '|' && p[p.size() - n - 1] != '(' && p[p.size() - n - 1] != ':') {
        p.erase(p.size() - n);
        trimmed = true;
      }
    }
  }
  return p;
}

// The patterns as the C locale reads them, for lines of ASCII alone in a UTF-8 locale
// (compile_fast): a pattern beyond ASCII has no such reading.
std::vector<DfaView> GnuRegex::ascii_views(const std::vector<DfaView>& views) {
  std::vector<DfaView> c_views;
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    c_views.push_back(dfa_view(patterns_[i], options_.syntax, false, options_.ignore_case, i + 1 < patterns_.size()));
    // grep reads it with regex in UTF-8 when some pattern needs it: the DFA's reading
    // must then agree with regex's (no corner). A bracket is regex's in UTF-8, and regex
    // folds case before it compares with a range ('Q' is in [0-c] for the DFA, not for
    // regex; dfa_view.cpp's folds_alike()).
    if (!all_ascii(patterns_[i]) || (!dfa_supported_ && c_views.back().corner)) c_views.back().pcre_ok = false;
    // grep's -w walk finds what the wrapper does (some match with no word character on
    // either side) only where every match is a character or more, and nothing holds at
    // the end of the string it cuts a shorter match from (an anchor, a word assertion).
    if (words_by_regex() && (views[i].anchor || views[i].assertion || matches_empty(compiled_[i]->exact)))
      c_views.back().pcre_ok = false;
  }
  return c_views;
}

// Hyperscan's texts of the patterns `read` has a reading of, -w and -x applied; `ids`
// gets the pattern of each.
std::vector<std::string> GnuRegex::fast_texts(const std::vector<DfaView>& read, std::vector<std::uint32_t>& ids) const {
  std::vector<std::string> expressions;
  for (std::uint32_t i : backref_free_) {
    if (!read[i].pcre_ok) continue;
    if (!dfa_supported_ && read[i].corner) continue;  // regex's reading decides it, not the DFA's
    const std::string& p = read[i].pcre;
    if (options_.whole_line) expressions.push_back("^(?:" + p + ")$");
    else if (options_.word) expressions.push_back("(?:^|[^[:alnum:]_\\n])(?:" + p + ")(?:[^[:alnum:]_\\n]|$)");
    else expressions.push_back(without_edge_stars(p));
    ids.push_back(i);
  }
  return expressions;
}

// The patterns Hyperscan reads as grep's DFA does go to one Hyperscan database.
void GnuRegex::compile_fast(const std::vector<DfaView>& views) {
  // The Hyperscan reading takes a line to hold no '\n' (dfa_view): with -z glibc reads all.
  if (options_.null_data) return;
  // Where grep's regex decides the lines (a back-reference, an equivalence class in the
  // list), -w is its loop of shorter and later matches, not the DFA's wrapper that
  // Hyperscan would read; in UTF-8 that is every -w (below, the ASCII lines excepted).
  if (!dfa_supported_ && options_.word && !options_.whole_line && !words_by_regex()) return;
  // Nor where a stray ')' closed that wrapper: the whole list's superset passes lines first.
  if (wrapper_closed_) return;
  // With -i in UTF-8, a letter may fold to a character beyond ASCII (grep's 's' takes
  // U+017F, its 'i' U+0131): the UTF-8 readings spell out each character's counterparts
  // (dfa_view's folded_character()) for Hyperscan to read without folding, where they can
  // (not a bracket with a letter). With -w a word holds multibyte letters. Where some
  // pattern has no such reading, an ASCII pattern reads on a line of ASCII alone as in the
  // C locale, so Hyperscan answers those lines, with the C locale's reading (folding ASCII
  // alone under -i); the others go to glibc. The same where no pattern has a UTF-8 reading
  // Hyperscan takes (\<, \w, most brackets: grep's regex decides them all).
  const auto read_in_utf8 = [&](std::uint32_t i) { return views[i].pcre_ok; };
  const bool none_read = options_.utf8 && !backref_free_.empty() &&
                         std::none_of(backref_free_.begin(), backref_free_.end(), read_in_utf8);
  const bool all_folded = std::all_of(backref_free_.begin(), backref_free_.end(), read_in_utf8);
  ascii_only_ = options_.utf8 && ((options_.ignore_case && !all_folded) || words_by_regex() || none_read);
  const std::vector<DfaView> c_views = ascii_only_ || (options_.utf8 && options_.ignore_case) ? ascii_views(views)
                                                                                              : std::vector<DfaView>();
  std::vector<std::uint32_t> ids;
  std::vector<std::string> expressions = fast_texts(ascii_only_ ? c_views : views, ids);
  fast_expressions_.assign(patterns_.size(), std::string());
  for (std::size_t k = 0; k < ids.size(); ++k) fast_expressions_[ids[k]] = expressions[k];
  if (expressions.empty()) return;
  auto plan = std::make_shared<FastPlan>();
  plan->utf8 = options_.utf8 && !ascii_only_;
  plan->ignore_case = options_.ignore_case && !plan->utf8;  // UTF-8 readings are folded already
  // Every pattern read by Hyperscan and none matching the empty string: one multi-line
  // database serves both lines one at a time and pieces of many (select_lines). Else the
  // one-line database, which takes the patterns that match the empty string too.
  plan->every_pattern = ids.size() == patterns_.size();
  plan->budget_ns = options_.defer_select ? kBuildNsBase + kBuildNsPerExpression * expressions.size() : 0;
  plan->expressions = std::move(expressions);
  // Under -i in UTF-8, the ASCII readings for blocks and lines of ASCII alone (HsSelect's
  // twin), where they read every pattern the folded readings do.
  if (plan->utf8 && options_.ignore_case) {
    std::vector<std::uint32_t> twin_ids;
    std::vector<std::string> twin = fast_texts(c_views, twin_ids);
    if (twin_ids == ids) plan->ascii_expressions = std::move(twin);
  }
  plan->ids = std::move(ids);
  plan_ = std::move(plan);
  adopted_ = false;
  if (plan_->budget_ns == 0) settle_fast();
}

void GnuRegex::settle_fast() {
  FastPlan& p = *plan_;
  {
    const std::lock_guard<std::mutex> lock(p.building);
    if (!p.built.load(std::memory_order_relaxed)) {
      std::unique_ptr<HsSelect> fast;
      if (p.every_pattern) {
        auto lines = std::make_unique<HsSelect>(p.expressions, p.ids, p.ignore_case, p.utf8, true);
        if (!lines->empty() && lines->accepted().size() == p.ids.size()) {
          fast = std::move(lines);
          p.lines = true;
        }
      }
      if (!fast) fast = std::make_unique<HsSelect>(p.expressions, p.ids, p.ignore_case, p.utf8);
      if (!p.ascii_expressions.empty() && !fast->empty()) {
        auto twin = std::make_unique<HsSelect>(p.ascii_expressions, p.ids, true, false, p.lines);
        if (!twin->empty() && twin->accepted() == fast->accepted()) fast->set_ascii_twin(std::move(twin));
      }
      if (!fast->empty()) p.fast = std::move(fast);
      p.built.store(true, std::memory_order_release);
    }
  }
  adopt_fast();
}

void GnuRegex::adopt_fast() {
  const FastPlan& p = *plan_;
  if (p.fast) {
    fast_ = p.fast->clone();
    lines_mode_ = p.lines;
    in_fast_.assign(patterns_.size(), false);
    for (std::uint32_t i : fast_->accepted()) in_fast_[i] = true;
  }
  adopted_ = true;
}

void GnuRegex::before_glibc(std::size_t line_size, std::size_t candidates) {
  FastPlan& p = *plan_;
  if (p.built.load(std::memory_order_acquire)) return adopt_fast();
  const std::uint64_t cost = candidates * (kGlibcNsPerLine + kGlibcNsPerByte * line_size);
  if (p.spent_ns.fetch_add(cost, std::memory_order_relaxed) + cost >= p.budget_ns) settle_fast();
}

// Lines where only these patterns are candidates (those without a factor, asked about
// every line) are scanned with a database of them alone: far less work than all of them.
void GnuRegex::expect_candidates(std::span<const std::uint32_t> ids) {
  if (!adopted_) settle_fast();  // every line is to be asked about these
  expected_.reset();
  expected_ids_.clear();
  if (!fast_ || ids.empty() || ids.size() == fast_->accepted().size()) return;
  std::vector<std::string> expressions;
  for (std::uint32_t i : ids) {
    if (i >= in_fast_.size() || !in_fast_[i]) return;  // glibc answers some of them anyway
    expressions.push_back(fast_expressions_[i]);
  }
  auto subset = std::make_unique<HsSelect>(expressions, std::vector<std::uint32_t>(ids.begin(), ids.end()),
                                           plan_->ignore_case, plan_->utf8);
  if (subset->empty() || subset->accepted().size() != ids.size()) return;
  expected_ = std::move(subset);
  expected_ids_.assign(ids.begin(), ids.end());
}

void GnuRegex::factors_known(std::size_t without_factor) {
  if (!plan_ || without_factor > 0 || plan_->ids.size() < kGroupsFrom) return;
  std::vector<std::string> rest;
  std::vector<std::uint32_t> rest_ids;
  chains_ = std::make_shared<const LiteralChains>(plan_->expressions, plan_->ids, plan_->ignore_case, plan_->utf8,
                                                  rest, rest_ids);
  if (chains_->empty()) chains_.reset();
  groups_ = std::make_unique<HsGroups>(std::move(rest), std::move(rest_ids), kGroupSize, plan_->ignore_case,
                                       plan_->utf8);
}

// Each candidate through its chain of literals (LiteralChains), else its group's database
// once that is built, else glibc (whose estimated time counts toward building it). A
// group scanned once answers for all its patterns on this line.
bool GnuRegex::groups_select(std::string_view line, std::span<const std::uint32_t> candidates,
                             std::vector<std::uint32_t>* ids) {
  const bool readable = hyperscan_reads(line);
  const std::uint64_t glibc_ns = kGlibcNsPerLine + kGlibcNsPerByte * line.size();
  const std::uint64_t build_ns = options_.defer_select ? kBuildNsPerExpression : 0;
  groups_asked_.clear();
  bool any = false;
  bool folded = false;
  for (std::uint32_t i : candidates) {
    const std::uint32_t g = groups_->group_of(i);
    if (readable && chains_ && chains_->has(i)) {
      if (chains_->ignore_case() && !folded) {
        LiteralChains::fold(line, folded_line_);
        folded = true;
      }
      if (!chains_->matches(i, folded ? std::string_view(folded_line_) : line)) continue;
      if (ids != nullptr) ids->push_back(i);
    } else if (readable && g != HsGroups::kNone && groups_->take(g, glibc_ns, build_ns) && groups_->accepted(i)) {
      if (std::find(groups_asked_.begin(), groups_asked_.end(), g) != groups_asked_.end()) continue;
      groups_asked_.push_back(g);
      if (!groups_->scan(g, line, ids)) continue;
    } else if (!decide_alone(i, line)) {
      continue;
    } else if (ids != nullptr) {
      ids->push_back(i);
    }
    if (ids == nullptr) return true;
    any = true;
  }
  if (ids != nullptr) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  return any;
}

// Hyperscan over many lines: when it reads every pattern (nothing is left to glibc) and
// none can match the empty string (it would match every line, at every byte). Not with
// groups: a line is asked about its candidates' groups alone, every group built now.
bool GnuRegex::prepare_lines() {
  if (groups_) {
    groups_->build_all(std::max(1u, std::thread::hardware_concurrency()));
    return false;
  }
  if (!adopted_) settle_fast();  // many lines are to be asked
  return lines_mode_;
}

bool GnuRegex::select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                            std::vector<const char*>& line_ends) {
  if (groups_) {
    // Many lines are to be asked, each about its candidates' groups: every thread that
    // gets here builds groups not taken yet, so they are all built side by side.
    groups_->help_build();
    return false;
  }
  if (!adopted_ && plan_->built.load(std::memory_order_acquire)) adopt_fast();
  if (!lines_mode_ || piece.size() > 0xffffffffu) return false;
  // In a UTF-8 locale the runs of lines Hyperscan reads (hyperscan_reads(): well-formed
  // text, or ASCII alone for the ASCII reading of -i and -w) go to it at once; any other
  // line is asked alone, every pattern a candidate, as line by line.
  const HsSelect::Text text = !options_.utf8 ? HsSelect::Text::kAny
                              : ascii_only_  ? HsSelect::Text::kAscii
                                             : HsSelect::Text::kUtf8;
  if (options_.utf8 && every_id_.size() != patterns_.size()) {
    every_id_.resize(patterns_.size());
    for (std::size_t i = 0; i < every_id_.size(); ++i) every_id_[i] = static_cast<std::uint32_t>(i);
  }
  for (std::size_t at = 0; at < piece.size();) {
    at += fast_->select_lines(piece.substr(at), line_starts, line_ends, text);
    if (at >= piece.size()) break;
    const void* nl = std::memchr(piece.data() + at, '\n', piece.size() - at);
    const std::size_t end =
        nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - piece.data()) : piece.size();
    if (selects_any(piece.substr(at, end - at), every_id_, nullptr)) {
      line_starts.push_back(piece.data() + at);
      line_ends.push_back(piece.data() + end);
    }
    at = end + 1;
  }
  return true;
}

bool GnuRegex::selects_any(std::string_view line, std::span<const std::uint32_t> candidates,
                           std::vector<std::uint32_t>* ids) {
  new_line();  // the candidates below share one gate scan of this line
  if (expected_ && candidates.size() == expected_ids_.size() &&
      std::equal(candidates.begin(), candidates.end(), expected_ids_.begin()) && hyperscan_reads(line)) {
    const bool any = expected_->scan(line, ids);
    if (ids != nullptr) std::sort(ids->begin(), ids->end());
    return any;
  }
  if (joined_walk_ || joined_line(line)) {  // the backref-free candidates together, then each backref one
    bool any = false;
    bool joined = false, asked = false;
    for (std::uint32_t i : candidates) {
      if (!backref_[i]) {
        if (!asked) joined = joined_selects(line);
        asked = true;
        // The walk selects the line; each pattern is listed when its own walk would.
        if (!joined || (ids != nullptr && !own_selects(i, line))) continue;
      } else if (!decide(i, line)) {
        continue;
      }
      if (ids == nullptr) return true;
      any = true;
      ids->push_back(i);
    }
    return any;
  }
  if (groups_) return groups_select(line, candidates, ids);
  if (!adopted_) before_glibc(line.size(), candidates.size());
  // Hyperscan answers for all its patterns at once (a line longer than it takes goes to
  // glibc); glibc for the others among the candidates.
  const bool fast = fast_ && hyperscan_reads(line);
  bool any = false;
  if (fast && fast_->scan(line, ids)) {
    if (ids == nullptr) return true;
    any = true;
  }
  for (std::uint32_t i : candidates) {
    if (fast && in_fast_[i]) continue;
    if (!decide_alone(i, line)) continue;
    if (ids == nullptr) return true;
    any = true;
    ids->push_back(i);
  }
  if (ids != nullptr) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  return any;
}

void GnuRegex::compile_combined() {
  combined_tried_ = true;
  std::string text;
  bool any = false;
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    if (backref_[i]) continue;
    if (any) text += '\n';
    text += patterns_[i];
    any = true;
  }
  if (!any) return;
  auto combined = std::make_unique<GnuPattern>();
  if (combined->compile(text, syntax_bits(options_), false, options_) == nullptr)
    combined_ = std::move(combined);
}

// EGexecute's regex part for a pattern with a back-reference, which grep's DFA cannot
// decide: is the line selected under -w/-x?
bool GnuRegex::selects_by_regex(GnuPattern& p, std::string_view line) {
  const std::size_t n = line.size();
  const regoff_t start = p.search(line, 0, n, ascii_line(line));
  if (start < 0) return false;
  std::size_t match = static_cast<std::size_t>(start);
  std::size_t length = static_cast<std::size_t>(p.match_end() - start);
  if (!options_.whole_line && !options_.word) return true;
  if (options_.whole_line) return length == n;
  return word_walk(p, line, 0, n + 1, match, length);
}

// Shorter lines cost glibc little whatever the pattern: they go to it at once.
constexpr std::size_t kGateLineBytes = 1024;

bool GnuRegex::gate_rejects(std::size_t i, std::string_view line) {
  if (!gate_plan_ || line.size() < kGateLineBytes || line.size() > 0xffffffffu) return false;
  if (!gate_tried_) take_gate();
  if (!gate_ || !gated_[i]) return false;
  if (!gate_fresh_) {  // one scan answers for every candidate pattern of the line
    gate_fresh_ = true;
    gate_ids_.clear();
    // Hyperscan's UTF-8 mode takes well-formed text only.
    gate_scanned_ = !options_.utf8 || well_formed_line(line);
    if (gate_scanned_) gate_->scan(line, &gate_ids_);
  }
  if (!gate_scanned_) return false;
  return std::find(gate_ids_.begin(), gate_ids_.end(), static_cast<std::uint32_t>(i)) == gate_ids_.end();
}

// The patterns Hyperscan cannot read exactly, whose superset it can.
void GnuRegex::plan_gate(const std::vector<DfaView>& views) {
  if (options_.null_data) return;
  auto plan = std::make_shared<GatePlan>();
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    if (views[i].pcre_ok && !words_by_regex()) continue;
    DfaView v =
        superset_view(patterns_[i], options_.syntax, options_.utf8, options_.ignore_case, i + 1 < patterns_.size());
    if (!v.pcre_ok) continue;
    plan->expressions.push_back(std::move(v.pcre));
    plan->ids.push_back(static_cast<std::uint32_t>(i));
  }
  if (plan->ids.empty()) return;
  plan->ignore_case = options_.ignore_case && !options_.utf8;  // UTF-8 readings are folded already
  plan->utf8 = options_.utf8;
  gate_plan_ = std::move(plan);
}

void GnuRegex::take_gate() {
  gate_tried_ = true;
  GatePlan& p = *gate_plan_;
  std::call_once(p.once, [&p] {
    auto gate = std::make_shared<HsSelect>(p.expressions, p.ids, p.ignore_case, p.utf8);
    if (!gate->empty()) p.gate = std::move(gate);
  });
  if (!p.gate) return;
  gate_ = p.gate->clone();
  gated_.assign(patterns_.size(), false);
  for (std::uint32_t id : gate_->accepted()) gated_[id] = true;
}

// Whether the pattern matches the empty string somewhere: alone, at a line's edges, between
// words and at their edges (where \<, \>, \b, ^ and $ match).
bool GnuRegex::matches_empty(GnuPattern& p) {
  for (const std::string_view probe : {"", " ", "a", " a ", "a a", "-"}) {
    for (std::size_t from = 0; from <= probe.size(); ++from) {
      const regoff_t start = p.search(probe, from, probe.size() - from, false);
      if (start < 0) break;
      if (p.match_end() == start) return true;
      from = static_cast<std::size_t>(start);
    }
  }
  return false;
}

// The line as grep's regex matcher selects it for the backref-free patterns under -w
// (joined_walk_): one walk of their joined regex.
bool GnuRegex::joined_selects(std::string_view line) {
  // grep's DFA superset passes a line before its regex decides, the joined one too.
  if (list_superset_text_ && !list_superset_passes(line)) return false;
  if (!combined_tried_) compile_combined();
  return combined_ && selects_by_regex(*combined_, line);
}

// EGexecute's -w loop (Fexecute's with RegexOptions::fixed_matcher): from a match at
// `match`, try shorter matches at the same place, then later ones, until one has no word
// character on either side.
bool GnuRegex::word_walk(GnuPattern& p, std::string_view line, std::size_t from, std::size_t best,
                         std::size_t& match, std::size_t& length) {
  const std::size_t n = line.size();
  // Fexecute's search from `from` does not look before it.
  const bool fixed = options_.fixed_matcher;
  while (match <= best) {
    regoff_t shorter = fixed ? -1 : 0;
    if (!word_after(line, match + length, options_.utf8) &&
        !((!fixed || match > from) && word_before(line, match, options_.utf8)))
      return true;
    if (length > 0) {
      --length;
      p.set_not_eol(true);
      // EGexecute passes the length from `from` (its ptr), not from the line's start;
      // Fexecute searches the match's own first bytes (kwsexec from it, --len of them).
      const std::size_t end = fixed ? match + length : match + length - from;
      shorter = p.match(line.data(), static_cast<regoff_t>(end), static_cast<regoff_t>(match), ascii_line(line));
    }
    if (shorter > 0 || (fixed && shorter == 0)) {  // Fexecute takes the empty pattern's match too
      length = static_cast<std::size_t>(shorter);
      continue;
    }
    if (match == n) return false;
    ++match;
    const regoff_t start = p.search(line, match, n - match, ascii_line(line));
    if (start < 0) return false;
    length = static_cast<std::size_t>(p.match_end() - start);
    match = static_cast<std::size_t>(start);
  }
  return false;
}

// One pattern's part of EGexecute with a start pointer: its match from `from` on, if it
// can beat `best` (leftmost, then longest).
bool GnuRegex::exact_match(GnuPattern& p, std::string_view line, std::size_t from, const Found& best, Found& out) {
  const std::size_t n = line.size();
  const regoff_t start = p.search(line, from, n - from, ascii_line(line));
  if (start < 0) return false;
  std::size_t match = static_cast<std::size_t>(start);
  std::size_t length = static_cast<std::size_t>(p.match_end() - start);
  if (match > best.begin) return false;
  if (!options_.word) {
    out = {match, length, false};
  } else if (options_.whole_line) {
    return whole_line_word(length, n, from, out);
  } else {
    if (!word_walk(p, line, from, best.begin, match, length)) return false;
    out = {match, length, false};
  }
  return true;
}

bool GnuRegex::find(std::string_view line, std::size_t from, std::span<const std::uint32_t> only, Found& out) {
  Found best{line.size() + 1, 0, false};
  auto try_pattern = [&](GnuPattern& p) {
    Found f;
    if (!exact_match(p, line, from, best, f)) return;
    if (better(f, best)) best = f;
  };
  // A walk (-o, --color) asks from 0 and then further on along one line: what is found
  // once for the line (its validity, each pattern's next match) is kept while the walk has
  // not passed it.
  if (from == 0 || line.data() != walk_.line || line.size() != walk_.size || from < walk_.from) {
    walk_.line = line.data();
    walk_.size = line.size();
    walk_.next.assign(patterns_.size(), WalkNext{});
    walk_.joined = joined_line(line);
    ascii_fresh_ = false;
    walk_.ascii = ascii_line(line);
  }
  ascii_line_ = walk_.ascii;  // kept for the walk's line: other lines may have been asked about since
  ascii_fresh_ = true;
  walk_.from = from;
  std::optional<std::pair<std::size_t, std::size_t>> part;  // HsSpans' answer
  if (!options_.whole_line && (options_.word || walk_.joined)) {
    // grep's exact pass: the joined backref-free patterns first, then each backref one.
    if (!combined_tried_) compile_combined();
    if (combined_) try_pattern(*combined_);
    for (std::uint32_t i : backref_ids_) try_pattern(compiled(i).exact);
  } else if (HsSpans* hs = walk_spans(); hs != nullptr && hs->leftmost_longest(line.substr(from), part)) {
    if (part) best = Found{from + part->first, part->second - part->first, false};
  } else {
    // Each pattern's next match is kept while the walk has not passed its start, and a
    // pattern that has none is not asked again, so that "-e '^b' -e a" over a long line of
    // a's costs one scan for '^b', not one per match (80 KB: 1.5 s, grep 0.01 s).
    const auto try_next = [&](std::size_t i) {
      WalkNext& next = walk_.next[i];
      if (next.start == kNotAsked || (next.start >= 0 && static_cast<std::size_t>(next.start) < from)) {
        GnuPattern& p = compiled(i).exact;
        next.start = p.search(line, from, line.size() - from, ascii_line(line));
        next.end = next.start >= 0 ? p.match_end() : 0;
      }
      if (next.start < 0) return;
      Found f{static_cast<std::size_t>(next.start), static_cast<std::size_t>(next.end - next.start), false};
      if (options_.word && !whole_line_word(f.length, line.size(), from, f)) return;  // -w -x
      if (better(f, best)) best = f;
    };
    if (only.empty()) {
      for (std::size_t i = 0; i < patterns_.size(); ++i) try_next(i);
    } else {
      for (std::uint32_t i : only) try_next(i);
    }
  }
  if (best.begin > line.size()) return false;
  out = best;
  return true;
}

}  // namespace

std::unique_ptr<LineRegex> compile_gnu(const std::vector<std::string>& patterns, const RegexOptions& options,
                                       const std::vector<PatternOrigin>& origins) {
  return std::make_unique<GnuRegex>(patterns, options, origins);
}

}  // namespace gpufilter::regex
