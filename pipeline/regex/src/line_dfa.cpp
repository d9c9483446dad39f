#include "line_dfa.hpp"

#include "regex_internal.hpp"

#include <algorithm>
#include <array>
#include <bitset>
#include <cstring>
#include <map>
#include <optional>

namespace gpufilter::regex {
namespace {

constexpr std::size_t kMaxPositions = 4096;
constexpr std::size_t kMaxFollowEdges = std::size_t{1} << 20;
constexpr std::size_t kMaxBuildWork = std::size_t{1} << 23;  // follow entries visited: a few ms
// A position reads a byte, or one of two symbols of its own: a line's start (`^`) and its
// end (`$`), each read once a line, before its first byte and at its '\n'.
constexpr int kLineStart = 256, kLineEnd = 257;
using Symbols = std::bitset<258>;

struct Node {
  enum Kind : std::uint8_t { kSymbols, kConcat, kAlt, kRepeat };
  Kind kind = kSymbols;
  Symbols symbols;        // kSymbols
  std::vector<int> kids;  // kConcat, kAlt; kRepeat: one
  int min = 0, max = 0;   // kRepeat; max -1: no bound
};

bool ascii_letter(int b) noexcept { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'); }
bool ascii_digit(int b) noexcept { return b >= '0' && b <= '9'; }

// A POSIX class of the C locale by name (Hyperscan's [:word:] too), or nothing.
std::optional<Symbols> posix_class(std::string_view name) {
  Symbols s;
  for (int b = 0; b < 128; ++b) {
    const auto byte = static_cast<unsigned char>(b);
    const bool word = name == "word";
    const std::optional<bool> in = in_c_class(word ? "alnum" : name, byte);
    if (!in) return std::nullopt;
    s[byte] = *in || (word && byte == '_');
  }
  return s;
}

// Hyperscan's text (PCRE syntax, the subset line_dfa.hpp lists) into a tree.
class Parser {
 public:
  Parser(std::string_view text, bool ignore_case, bool utf8, std::vector<Node>& nodes)
      : p_(text), ignore_case_(ignore_case), utf8_(utf8), nodes_(nodes) {}

  std::optional<int> parse() {
    const auto root = alternation();
    if (!root || i_ != p_.size()) return std::nullopt;
    return root;
  }

 private:
  int add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int>(nodes_.size() - 1);
  }
  int symbols(Symbols s) {
    Node node;
    node.symbols = s;
    return add(node);
  }
  int list(Node::Kind kind, std::vector<int> kids) {
    if (kids.size() == 1) return kids[0];
    Node node;
    node.kind = kind;
    node.kids = std::move(kids);
    return add(node);
  }
  void fold(Symbols& s) const {
    if (!ignore_case_) return;
    for (int b = 'a'; b <= 'z'; ++b) {
      const auto lo = static_cast<std::size_t>(b), up = static_cast<std::size_t>(b - 'a' + 'A');
      if (s[lo] || s[up]) s[lo] = s[up] = true;
    }
  }
  // A class of single bytes; none may be '\n' (a match would cross a line).
  std::optional<int> byte_class(Symbols s) {
    fold(s);
    if (s['\n']) return std::nullopt;
    return symbols(s);
  }
  // In UTF-8: one character but '\n' and the ASCII bytes of `excluded` (the line is valid
  // UTF-8, so the lead bytes and continuation bytes need no finer ranges).
  int any_character(const Symbols& excluded) {
    Symbols ascii, lead2, lead3, lead4, tail;
    for (int b = 0; b < 128; ++b) ascii[static_cast<std::size_t>(b)] = !excluded[static_cast<std::size_t>(b)] && b != '\n';
    for (int b = 0xc2; b <= 0xdf; ++b) lead2[static_cast<std::size_t>(b)] = true;
    for (int b = 0xe0; b <= 0xef; ++b) lead3[static_cast<std::size_t>(b)] = true;
    for (int b = 0xf0; b <= 0xf4; ++b) lead4[static_cast<std::size_t>(b)] = true;
    for (int b = 0x80; b <= 0xbf; ++b) tail[static_cast<std::size_t>(b)] = true;
    std::vector<int> ways{symbols(ascii)};
    for (const auto& [lead, tails] : {std::pair{lead2, 1}, std::pair{lead3, 2}, std::pair{lead4, 3}}) {
      std::vector<int> sequence{symbols(lead)};
      for (int k = 0; k < tails; ++k) sequence.push_back(symbols(tail));
      ways.push_back(list(Node::kConcat, std::move(sequence)));
    }
    return list(Node::kAlt, std::move(ways));
  }

  std::optional<int> alternation() {
    std::vector<int> branches;
    for (;;) {
      const auto branch = sequence();
      if (!branch) return std::nullopt;
      branches.push_back(*branch);
      if (i_ >= p_.size() || p_[i_] != '|') break;
      ++i_;
    }
    return list(Node::kAlt, std::move(branches));
  }

  std::optional<int> sequence() {
    std::vector<int> items;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      auto item = atom();
      if (!item) return std::nullopt;
      int min = 0, max = 0;
      while (quantifier(min, max)) {
        Node node;
        node.kind = Node::kRepeat;
        node.kids = {*item};
        node.min = min;
        node.max = max;
        item = add(node);
        if (i_ < p_.size() && p_[i_] == '?') ++i_;  // lazy: the same lines
        else if (i_ < p_.size() && p_[i_] == '+') return std::nullopt;  // possessive
      }
      if (failed_) return std::nullopt;
      items.push_back(*item);
    }
    Node concat;
    concat.kind = Node::kConcat;
    if (items.empty()) return add(concat);  // empty: matches the empty string
    return list(Node::kConcat, std::move(items));
  }

  bool quantifier(int& min, int& max) {
    if (i_ >= p_.size()) return false;
    const char c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
      return true;
    }
    if (c != '{') return false;
    std::size_t j = i_ + 1;
    auto number = [&](int& out) {
      const std::size_t from = j;
      long value = 0;
      while (j < p_.size() && ascii_digit(p_[j]) && value <= 100000) value = value * 10 + (p_[j++] - '0');
      out = static_cast<int>(value);
      return j > from && value <= 100000;
    };
    if (!number(min)) return failed_ = true, false;  // "{,n}" or a literal '{': not read
    max = min;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      max = -1;
      if (j < p_.size() && p_[j] != '}' && !number(max)) return failed_ = true, false;
    }
    if (j >= p_.size() || p_[j] != '}' || (max >= 0 && max < min)) return failed_ = true, false;
    i_ = j + 1;
    return true;
  }

  std::optional<int> atom() {
    const auto c = static_cast<unsigned char>(p_[i_]);
    if (c == '(') {
      ++i_;
      if (p_.compare(i_, 2, "?:") == 0) i_ += 2;
      else if (i_ < p_.size() && p_[i_] == '?') return std::nullopt;
      const auto inner = alternation();
      if (!inner || i_ >= p_.size() || p_[i_] != ')') return std::nullopt;
      ++i_;
      return inner;
    }
    ++i_;
    if (c == '[') return bracket();
    if (c == '\\') return escape();
    if (c == '^' || c == '$') {
      Symbols s;
      s[c == '^' ? kLineStart : kLineEnd] = true;
      return symbols(s);
    }
    if (c == '.') {
      Symbols s;
      if (utf8_) return any_character(s);
      s.set();
      s[kLineStart] = s[kLineEnd] = s['\n'] = false;
      return symbols(s);
    }
    if (std::strchr("*+?{}|)", c) != nullptr) return std::nullopt;
    if (utf8_ && c >= 0x80) return character(c);
    Symbols s;
    s[c] = true;
    return byte_class(s);
  }

  // In UTF-8, a multibyte character of the text (its lead byte read): its bytes in turn.
  std::optional<int> character(unsigned char lead) {
    const int tails = lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : lead >= 0xc0 ? 1 : -1;
    if (tails < 0 || ignore_case_) return std::nullopt;
    std::vector<int> bytes;
    Symbols s;
    s[lead] = true;
    bytes.push_back(symbols(s));
    for (int k = 0; k < tails; ++k, ++i_) {
      if (i_ >= p_.size() || (static_cast<unsigned char>(p_[i_]) & 0xc0) != 0x80) return std::nullopt;
      Symbols t;
      t[static_cast<unsigned char>(p_[i_])] = true;
      bytes.push_back(symbols(t));
    }
    return list(Node::kConcat, std::move(bytes));
  }

  // After a '\\' (outside brackets or in them): the bytes it stands for, or nothing.
  std::optional<Symbols> escaped() {
    if (i_ >= p_.size()) return std::nullopt;
    const char n = p_[i_++];
    Symbols s;
    if (n == 'x') {
      if (i_ + 1 >= p_.size() || hex_digit(p_[i_]) < 0 || hex_digit(p_[i_ + 1]) < 0) return std::nullopt;
      const int value = hex_digit(p_[i_]) * 16 + hex_digit(p_[i_ + 1]);
      i_ += 2;
      if (utf8_ && value >= 0x80) return std::nullopt;  // a code point there, not a byte
      s[static_cast<std::size_t>(value)] = true;
      return s;
    }
    if (n == 'w' || n == 'd') {
      if (utf8_) return std::nullopt;
      return posix_class(n == 'w' ? "word" : "digit");
    }
    const char* controls = "t\tn\nr\rf\f";
    for (const char* k = controls; *k != '\0'; k += 2)
      if (n == k[0]) return s.set(static_cast<unsigned char>(k[1]));
    const auto b = static_cast<unsigned char>(n);
    if (b >= 0x80 || ascii_letter(b) || ascii_digit(b) || b < ' ') return std::nullopt;
    return s.set(b);
  }
  std::optional<int> escape() {
    const auto s = escaped();
    if (!s) return std::nullopt;
    return byte_class(*s);
  }

  // After a '[': the bracket expression up to its ']'.
  std::optional<int> bracket() {
    const bool negated = i_ < p_.size() && p_[i_] == '^';
    if (negated) ++i_;
    Symbols members;
    for (bool first = true;; first = false) {
      if (i_ >= p_.size()) return std::nullopt;
      if (p_[i_] == ']' && !first) break;
      const auto low = member(members);
      if (!low) return std::nullopt;
      if (*low >= 0 && p_.compare(i_, 1, "-") == 0 && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        const auto high = member(members);
        if (!high || *high < *low) return std::nullopt;
        for (int b = *low; b <= *high; ++b) members[static_cast<std::size_t>(b)] = true;
      }
    }
    ++i_;
    fold(members);
    if (!negated) return byte_class(members);
    if (utf8_) return any_character(members);
    Symbols s;
    for (int b = 0; b < 256; ++b) s[static_cast<std::size_t>(b)] = !members[static_cast<std::size_t>(b)] && b != '\n';
    return symbols(s);
  }
  // A bracket's member: a byte (returned, not yet added, as it may start a range), or a
  // class (added; -1), or nothing where it is not read.
  std::optional<int> member(Symbols& members) {
    const auto c = static_cast<unsigned char>(p_[i_]);
    if (c == '[' && p_.compare(i_, 2, "[:") == 0) {
      const std::size_t close = p_.find(":]", i_ + 2);
      if (close == std::string_view::npos || utf8_) return std::nullopt;
      const auto s = posix_class(p_.substr(i_ + 2, close - i_ - 2));
      if (!s) return std::nullopt;
      members |= *s;
      i_ = close + 2;
      return -1;
    }
    if (c == '[' && i_ + 1 < p_.size() && (p_[i_ + 1] == '=' || p_[i_ + 1] == '.')) return std::nullopt;
    ++i_;
    if (c == '\\') {
      const auto s = escaped();
      if (!s) return std::nullopt;
      if (s->count() != 1) {
        members |= *s;
        return -1;
      }
      members |= *s;
      for (int b = 0; b < 256; ++b)
        if ((*s)[static_cast<std::size_t>(b)]) return b;
    }
    if (utf8_ && c >= 0x80) return std::nullopt;
    members[c] = true;
    return static_cast<int>(c);
  }

  std::string_view p_;
  std::size_t i_ = 0;
  bool ignore_case_, utf8_;
  bool failed_ = false;  // a quantifier not read
  std::vector<Node>& nodes_;
};

// Glushkov's automaton of a tree: a state per symbol-reading leaf (a position; a repeat
// gives each copy positions of its own), the positions that can come first and last, and
// which can follow which.
struct Fragment {
  std::vector<int> first, last;
  bool nullable = true;
};

class Positions {
 public:
  explicit Positions(const std::vector<Node>& nodes) : nodes_(nodes) {}

  std::optional<Fragment> build(int node) {
    Fragment f = fragment(node);
    if (too_large_) return std::nullopt;
    for (auto& list : follow) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
    return f;
  }

  std::vector<Symbols> symbols;          // by position
  std::vector<std::vector<int>> follow;  // by position

 private:
  Fragment fragment(int index) {
    const Node& node = nodes_[static_cast<std::size_t>(index)];
    if (too_large_) return {};
    switch (node.kind) {
      case Node::kSymbols: {
        if (symbols.size() >= kMaxPositions) return too_large_ = true, Fragment{};
        const int p = static_cast<int>(symbols.size());
        symbols.push_back(node.symbols);
        follow.emplace_back();
        return {{p}, {p}, false};
      }
      case Node::kConcat: {
        Fragment f;
        for (int kid : node.kids) f = then(std::move(f), fragment(kid));
        return f;
      }
      case Node::kAlt: {
        Fragment f;
        f.nullable = false;
        for (int kid : node.kids) {
          Fragment k = fragment(kid);
          f.first.insert(f.first.end(), k.first.begin(), k.first.end());
          f.last.insert(f.last.end(), k.last.begin(), k.last.end());
          f.nullable = f.nullable || k.nullable;
        }
        return f;
      }
      case Node::kRepeat:
        return repeat(node.kids[0], node.min, node.max);
    }
    return {};
  }

  Fragment repeat(int kid, int min, int max) {
    if (static_cast<std::size_t>(std::max(min, max)) > kMaxPositions) return too_large_ = true, Fragment{};
    Fragment f;
    for (int k = 0; k < min && !too_large_; ++k) f = then(std::move(f), fragment(kid));
    if (max < 0) {
      Fragment loop = fragment(kid);
      link(loop.last, loop.first);
      loop.nullable = true;
      return then(std::move(f), std::move(loop));
    }
    for (int k = min; k < max && !too_large_; ++k) {  // x{0,2} as x?x?: the same language
      Fragment optional = fragment(kid);
      optional.nullable = true;
      f = then(std::move(f), std::move(optional));
    }
    return f;
  }

  void link(const std::vector<int>& from, const std::vector<int>& to) {
    edges_ += from.size() * to.size();
    if (edges_ > kMaxFollowEdges) {
      too_large_ = true;
      return;
    }
    for (int p : from) {
      auto& list = follow[static_cast<std::size_t>(p)];
      list.insert(list.end(), to.begin(), to.end());
    }
  }

  Fragment then(Fragment a, Fragment b) {
    link(a.last, b.first);
    Fragment f;
    f.first = a.first;
    if (a.nullable) f.first.insert(f.first.end(), b.first.begin(), b.first.end());
    f.last = b.last;
    if (b.nullable) f.last.insert(f.last.end(), a.last.begin(), a.last.end());
    f.nullable = a.nullable && b.nullable;
    return f;
  }

  const std::vector<Node>& nodes_;
  std::size_t edges_ = 0;
  bool too_large_ = false;
};

// The subset construction over Glushkov's positions, searching from every byte: a state
// is the set of positions just read; each symbol also starts the expression afresh.
class Subsets {
 public:
  Subsets(const Positions& positions, const Fragment& root) : positions_(positions) {
    is_last_.assign(positions.symbols.size(), false);
    for (int p : root.last) is_last_[static_cast<std::size_t>(p)] = true;
    for (int p : root.first)
      for (int sym = 0; sym < 258; ++sym)
        if (positions.symbols[static_cast<std::size_t>(p)][static_cast<std::size_t>(sym)])
          starts_[static_cast<std::size_t>(sym)].push_back(p);
  }

  // The positions after reading `sym` in state `from`; true where one of them ends a match.
  bool step(const std::vector<int>& from, int sym, std::vector<int>& to) const {
    to = starts_[static_cast<std::size_t>(sym)];
    for (int p : from) {
      work_ += positions_.follow[static_cast<std::size_t>(p)].size();
      for (int q : positions_.follow[static_cast<std::size_t>(p)])
        if (positions_.symbols[static_cast<std::size_t>(q)][static_cast<std::size_t>(sym)]) to.push_back(q);
    }
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
    return std::any_of(to.begin(), to.end(), [&](int q) { return is_last_[static_cast<std::size_t>(q)]; });
  }

  std::size_t work() const noexcept { return work_; }

 private:
  const Positions& positions_;
  mutable std::size_t work_ = 0;  // follow entries visited
  std::vector<bool> is_last_;
  std::array<std::vector<int>, 258> starts_;
};

// `^` only where the expression starts, `$` only where it ends: a line's start or end is
// read once, so an anchor after another symbol (or before one) is not this reading's.
bool anchors_at_ends(const Positions& positions) {
  for (std::size_t p = 0; p < positions.symbols.size(); ++p) {
    if (positions.symbols[p][kLineEnd] && !positions.follow[p].empty()) return false;
    for (int q : positions.follow[p])
      if (positions.symbols[static_cast<std::size_t>(q)][kLineStart]) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<const LineDfa> LineDfa::build(const std::vector<std::string>& expressions, bool ignore_case,
                                              bool utf8) {
  if (expressions.empty() || (utf8 && ignore_case)) return nullptr;
  std::vector<Node> nodes;
  Node root;
  root.kind = Node::kAlt;
  for (const std::string& e : expressions) {
    const auto tree = Parser(e, ignore_case, utf8, nodes).parse();
    if (!tree) return nullptr;
    root.kids.push_back(*tree);
  }
  nodes.push_back(root);
  Positions positions(nodes);
  const auto whole = positions.build(static_cast<int>(nodes.size() - 1));
  if (!whole || whole->nullable || !anchors_at_ends(positions)) return nullptr;
  const Subsets subsets(positions, *whole);

  // Bytes that every position reads alike share their steps.
  std::map<std::vector<bool>, int> class_of_members;
  std::vector<int> representative, class_of(256);
  for (int b = 0; b < 256; ++b) {
    std::vector<bool> members(positions.symbols.size());
    for (std::size_t p = 0; p < members.size(); ++p) members[p] = positions.symbols[p][static_cast<std::size_t>(b)];
    const auto [it, added] = class_of_members.emplace(std::move(members), static_cast<int>(representative.size()));
    if (added) representative.push_back(b);
    class_of[static_cast<std::size_t>(b)] = it->second;
  }

  std::map<std::vector<int>, std::uint16_t> ids;
  std::vector<std::vector<int>> states(1);
  if (subsets.step({}, kLineStart, states[0])) return nullptr;  // "^" alone: every line
  ids.emplace(states[0], 0);
  std::vector<std::uint16_t> table, by_class(representative.size());
  std::vector<bool> eol_accepts;
  std::vector<int> next;
  for (std::size_t s = 0; s < states.size(); ++s) {
    const bool ends = subsets.step(states[s], kLineEnd, next);
    eol_accepts.push_back(ends);
    for (std::size_t k = 0; k < representative.size(); ++k) {
      if (subsets.step(states[s], representative[k], next)) {
        by_class[k] = kAccept;
        continue;
      }
      const auto [it, added] = ids.emplace(next, static_cast<std::uint16_t>(states.size()));
      if (added) {
        if (states.size() >= kMaxStates || subsets.work() > kMaxBuildWork) return nullptr;
        states.push_back(next);
      }
      by_class[k] = it->second;
    }
    table.resize((s + 1) * 256);
    for (int b = 0; b < 256; ++b)
      table[s * 256 + static_cast<std::size_t>(b)] = by_class[static_cast<std::size_t>(class_of[static_cast<std::size_t>(b)])];
    table[s * 256 + '\n'] = ends ? kAccept : 0;  // the line's end: its '\n' reads no position
  }
  const auto idle = ids.find(std::vector<int>());  // no position read: only a fresh start
  return std::make_unique<const LineDfa>(std::move(table), std::move(eol_accepts), 0,
                                         idle != ids.end() ? idle->second : kAccept);
}

LineDfa::LineDfa(std::vector<std::uint16_t> table, std::vector<bool> eol_accepts, std::uint16_t line_start,
                 std::uint16_t idle)
    : table_(std::move(table)), eol_accepts_(std::move(eol_accepts)), line_start_(line_start), idle_(idle) {
  if (idle_ == kAccept) return;
  for (std::size_t b = 0; b < 256; ++b) idle_stays_[b] = table_[idle_ * 256u + b] == idle_;
}

std::size_t LineDfa::skip_idle(const unsigned char* bytes, std::size_t i, std::size_t size) const noexcept {
  const bool* stays = idle_stays_.data();
  for (; i + 8 <= size; i += 8)
    if (!(stays[bytes[i]] & stays[bytes[i + 1]] & stays[bytes[i + 2]] & stays[bytes[i + 3]] & stays[bytes[i + 4]] &
          stays[bytes[i + 5]] & stays[bytes[i + 6]] & stays[bytes[i + 7]]))
      break;
  while (i < size && stays[bytes[i]]) ++i;
  return i;
}

void LineDfa::select_lines(std::string_view block, std::vector<const char*>& line_starts,
                           std::vector<const char*>& line_ends) const {
  const auto* bytes = reinterpret_cast<const unsigned char*>(block.data());
  const std::size_t size = block.size();
  const std::uint16_t* table = table_.data();
  // The line being read starts at or after `floor` (just after the last line selected).
  auto line_begin = [&](std::size_t floor, std::size_t at) {
    const void* nl = memrchr(bytes + floor, '\n', at - floor);
    return nl != nullptr ? static_cast<std::size_t>(static_cast<const unsigned char*>(nl) - bytes) + 1 : floor;
  };
  std::size_t floor = 0, i = 0;
  std::uint32_t state = line_start_;
  while (i < size) {
    if (state == idle_) {
      i = skip_idle(bytes, i, size);
      if (i == size) break;
    }
    state = table[state * 256 + bytes[i]];
    if (state != kAccept) {
      ++i;
      continue;
    }
    line_starts.push_back(block.data() + line_begin(floor, i));
    std::size_t line_end = i;  // a '\n' that ended a match (`$`) ends its line too
    if (bytes[i] != '\n') {
      const void* nl = std::memchr(bytes + i + 1, '\n', size - i - 1);
      line_end = nl != nullptr ? static_cast<std::size_t>(static_cast<const unsigned char*>(nl) - bytes) : size;
    }
    line_ends.push_back(block.data() + line_end);
    floor = i = std::min(line_end + 1, size);
    state = line_start_;
  }
  // A last line without its '\n' ends at the block's end.
  if (floor < size && bytes[size - 1] != '\n' && eol_accepts_[state]) {
    line_starts.push_back(block.data() + line_begin(floor, size));
    line_ends.push_back(block.data() + size);
  }
}

}  // namespace gpufilter::regex
