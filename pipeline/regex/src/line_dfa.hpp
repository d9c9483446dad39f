// LineDfa: which lines of a block hold a match of some expression of a lines database
// (HsSelect's Hyperscan texts, as dfa_view writes them), decided as grep's dfa.c decides
// it: a table look-up a byte from a line's start, and the rest of the line skipped at its
// first match. Hyperscan in one pass reports every match ("[0-9]{4}" reports each window
// of four digits, many a line of a log) and, one scan a line, pays a scan's set-up on
// every line; a regex without a factor that matches most lines ran at half grep's speed
// either way. HsSelect times this against its one pass, block by block, as it timed its
// scan per line.
//
// Read: literals (`\xHH`, escaped signs, `\t` `\n` `\r` `\f`), `.`, brackets (ranges,
// `[:name:]`, `\w` `\d`), `(?:` `(` `|` `)`, `*` `+` `?` `{m}` `{m,}` `{m,n}` (a lazy
// `?` after them changes nothing for a yes or no), `^` where an expression starts and
// `$` where it ends. Not read (no automaton: Hyperscan decides): `\b` `\B`, anchors
// elsewhere, any other escape, a class that may match '\n', -i in UTF-8, `\w` and
// `[:name:]` in UTF-8 (the C library's classes there), an automaton of over kMaxStates.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter::regex {

class LineDfa {
 public:
  static constexpr std::size_t kMaxStates = 1024;

  // The automaton of the union of `expressions`, or null (above). `ignore_case`: ASCII
  // letters fold, as Hyperscan's caseless reading outside UTF-8 mode. `utf8`: the texts
  // are UTF-8 (a multibyte character is one atom, `.` one character) and so is every
  // line given to select_lines() (the caller checks them, as for Hyperscan).
  static std::unique_ptr<const LineDfa> build(const std::vector<std::string>& expressions, bool ignore_case,
                                              bool utf8);

  // As HsSelect::select_lines(): appends the first byte of every line of `block` (whole
  // lines, the last one maybe without its '\n') that some expression matches in, in order,
  // and its end (its '\n' or the block's end) to `line_ends`.
  void select_lines(std::string_view block, std::vector<const char*>& line_starts,
                    std::vector<const char*>& line_ends) const;

  std::size_t states() const noexcept { return eol_accepts_.size(); }

  // Built by build() only (public for std::make_unique).
  LineDfa(std::vector<std::uint16_t> table, std::vector<bool> eol_accepts, std::uint16_t line_start,
          std::uint16_t idle);

 private:
  static constexpr std::uint16_t kAccept = 0xffff;
  // table_[s * 256 + byte]: the next state, or kAccept where a match ends at that byte;
  // after '\n', line_start_ (or kAccept where the line ends a match: a `$`).
  std::vector<std::uint16_t> table_;
  std::vector<bool> eol_accepts_;  // by state: whether a line ending here ends a match
  std::uint16_t line_start_;       // the state after a line's start (a `^` read)
  // The state where no position has been read (kAccept: none), and the bytes that leave it
  // there, skipped eight at a time without the table's chain of look-ups.
  std::uint16_t idle_;
  std::array<bool, 256> idle_stays_{};
  std::size_t skip_idle(const unsigned char* bytes, std::size_t i, std::size_t size) const noexcept;
};

}  // namespace gpufilter::regex
