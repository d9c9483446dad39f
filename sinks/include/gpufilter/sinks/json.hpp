// JSON strings, the one place every JSON writer of the project escapes text (--json, the
// capture output, gpufilterd's alerts and logs, --stats): '"', '\\' and control bytes
// escaped; a byte that is not part of valid UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF) becomes U+FFFD, so every parser takes the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpufilter::json {

// Length of the valid UTF-8 sequence at text[i] (1 for ASCII), or 0.
std::size_t utf8_length(std::string_view text, std::size_t i) noexcept;
// Appends `bytes` as the body of a JSON string (no quotes). False when some byte was
// not valid UTF-8 (written as U+FFFD).
bool append_escaped(std::string& out, std::string_view bytes);
// Appends `bytes` as a JSON string literal, quotes included.
void append_quoted(std::string& out, std::string_view bytes);
// RFC 4648 base64 of `bytes` (the exact bytes beside an escaped text).
void append_base64(std::string& out, std::string_view bytes);
// rg's "arbitrary data" object (grep_printer's JSON): {"text":"TEXT"} when `bytes` are
// valid UTF-8, else {"bytes":"BASE64"}, so that the exact bytes always come back.
void append_data(std::string& out, std::string_view bytes);
// A given pattern as every JSON output names it: {"id":ID,"text":"TEXT"}, with
// "text_base64" after the text when the text is not valid UTF-8.
void append_pattern(std::string& out, std::uint64_t id, std::string_view text);

}  // namespace gpufilter::json
