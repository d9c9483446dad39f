#include "gpufilter/sinks/json.hpp"

#include <charconv>
#include <cstdint>

namespace gpufilter::json {

// Length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF).
std::size_t utf8_length(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  const std::size_t left = s.size() - i;
  auto cont = [&](std::size_t k) { return (byte(i + k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    const unsigned char c1 = byte(i + 1);
    if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
    if (c == 0xED && c1 > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    const unsigned char c1 = byte(i + 1);
    if (c == 0xF0 && c1 < 0x90) return 0;  // overlong
    if (c == 0xF4 && c1 > 0x8F) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}


bool append_escaped(std::string& out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  bool valid = true;
  for (std::size_t i = 0; i < bytes.size();) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_length(bytes, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD
        valid = false;
        ++i;
      } else {
        out.append(bytes.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return valid;
}

void append_base64(std::string& out, std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::size_t i = 0;
  auto at = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == bytes.size()) {
    const std::uint32_t v = at(i) << 16;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const std::uint32_t v = at(i) << 16 | at(i + 1) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
}

void append_quoted(std::string& out, std::string_view bytes) {
  out += '"';
  append_escaped(out, bytes);
  out += '"';
}

void append_data(std::string& out, std::string_view bytes) {
  const std::size_t start = out.size();
  out += "{\"text\":\"";
  if (append_escaped(out, bytes)) {
    out += "\"}";
    return;
  }
  out.resize(start);  // not UTF-8: the escaped text would have U+FFFD in it
  out += "{\"bytes\":\"";
  append_base64(out, bytes);
  out += "\"}";
}

void append_pattern(std::string& out, std::uint64_t id, std::string_view text) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, id);
  out += "{\"id\":";
  out.append(digits, static_cast<std::size_t>(r.ptr - digits));
  out += ",\"text\":\"";
  const bool valid = append_escaped(out, text);
  out += '"';
  if (!valid) {
    out += ",\"text_base64\":\"";
    append_base64(out, text);
    out += '"';
  }
  out += '}';
}

}  // namespace gpufilter::json
