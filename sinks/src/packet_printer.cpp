// The packet printers: ngrep's text layout (with --hexdump), JSON lines and -c counts.
#include "gpufilter/sinks/packet_printer.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "gpufilter/sinks/json.hpp"

namespace gpufilter {
namespace {

// ISO 8601 in UTC, with microseconds, or nanoseconds for a capture that has them.
std::string timestamp(std::int64_t seconds, std::uint32_t nanoseconds, bool nano) {
  std::tm tm{};
  const std::time_t t = static_cast<std::time_t>(seconds);
  gmtime_r(&t, &tm);
  char text[64];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[24];
  if (nano) std::snprintf(frac, sizeof frac, ".%09uZ", nanoseconds);
  else std::snprintf(frac, sizeof frac, ".%06uZ", nanoseconds / 1000);
  return std::string(text, n) + frac;
}

bool has_ports(const PacketInfo& info) {
  return info.transport == PacketInfo::Transport::kTcp || info.transport == PacketInfo::Transport::kUdp;
}

// "192.0.2.1:80", "[2001:db8::1]:80", an address alone without ports, "-" when not IP.
std::string endpoint(const PacketInfo& info, bool source) {
  if (info.ip_version == 0) return "-";
  const std::string address = address_text(info, source);
  const std::uint16_t port = source ? info.sport : info.dport;
  if (!has_ports(info)) return address;
  return (info.ip_version == 6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

const char* protocol_name(const PacketInfo& info) {
  switch (info.transport) {
    case PacketInfo::Transport::kTcp: return "TCP";
    case PacketInfo::Transport::kUdp: return "UDP";
    default: return info.ip_version != 0 ? "IP" : "FRAME";
  }
}

std::string tcp_flags(std::uint8_t f) {
  std::string s;
  if (f & 0x02) s += 'S';
  if (f & 0x10) s += 'A';
  if (f & 0x08) s += 'P';
  if (f & 0x01) s += 'F';
  if (f & 0x04) s += 'R';
  if (f & 0x20) s += 'U';
  return s;
}

char printable(char c) { return c >= 0x20 && c < 0x7f ? c : '.'; }

}  // namespace

PacketTextPrinter::PacketTextPrinter(Output& out, std::vector<PacketPattern> patterns, PacketTextOptions options)
    : out_(out), patterns_(std::move(patterns)), options_(std::move(options)) {}

// ISO 8601 (absolute), seconds since 1970 (epoch), or "+S.FFFFFF" since the first packet
// printed (relative) or the last one (delta), as ngrep's -t, -TT and -T.
void PacketTextPrinter::time(std::int64_t seconds, std::uint32_t nanoseconds) {
  if (!printed_) {
    first_seconds_ = last_seconds_ = seconds;
    first_nanoseconds_ = last_nanoseconds_ = nanoseconds;
    printed_ = true;
  }
  const auto since = [&](std::int64_t s0, std::uint32_t n0) {
    std::int64_t ns = (seconds - s0) * 1000000000 + (static_cast<std::int64_t>(nanoseconds) - n0);
    const char sign = ns < 0 ? '-' : '+';
    if (ns < 0) ns = -ns;
    char text[48];
    if (input_.nanosecond)
      std::snprintf(text, sizeof text, "%c%lld.%09lld", sign, static_cast<long long>(ns / 1000000000),
                    static_cast<long long>(ns % 1000000000));
    else
      std::snprintf(text, sizeof text, "%c%lld.%06lld", sign, static_cast<long long>(ns / 1000000000),
                    static_cast<long long>(ns % 1000000000 / 1000));
    return std::string(text);
  };
  switch (options_.time) {
    case PacketTime::kAbsolute: out_.write(timestamp(seconds, nanoseconds, input_.nanosecond)); break;
    case PacketTime::kRelative: out_.write(since(first_seconds_, first_nanoseconds_)); break;
    case PacketTime::kDelta: out_.write(since(last_seconds_, last_nanoseconds_)); break;
    case PacketTime::kEpoch: {
      char text[48];
      if (input_.nanosecond) std::snprintf(text, sizeof text, "%lld.%09u", static_cast<long long>(seconds), nanoseconds);
      else std::snprintf(text, sizeof text, "%lld.%06u", static_cast<long long>(seconds), nanoseconds / 1000);
      out_.write(text);
      break;
    }
  }
  last_seconds_ = seconds;
  last_nanoseconds_ = nanoseconds;
}

// The start of both header lines: [NAME:]KIND TIME SRC ARROW DST.
void PacketTextPrinter::head(char kind, std::int64_t seconds, std::uint32_t nanoseconds, const PacketInfo& info,
                             std::string_view arrow) {
  if (options_.with_filename) {
    out_.write(input_.name);
    out_.put(':');
  }
  out_.put(kind);
  out_.put(' ');
  time(seconds, nanoseconds);
  out_.put(' ');
  out_.write(endpoint(info, true));
  out_.write(arrow);
  out_.write(endpoint(info, false));
}

void PacketTextPrinter::pattern_list(std::span<const std::uint32_t> ids) {
  out_.write(" matched: ");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out_.write(", ");
    for (const char c : patterns_[ids[i]].text) out_.put(printable(c));
  }
}

void PacketTextPrinter::packet(const PacketRecord& p) {
  if (p.after_gap && printed_ && options_.group_separator) {
    if (options_.colors) colored(options_.colors->separator, *options_.group_separator);
    else out_.write(*options_.group_separator);
    out_.end_line();
  }
  const PacketInfo& info = p.info;
  const char kind = info.transport == PacketInfo::Transport::kTcp   ? 'T'
                    : info.transport == PacketInfo::Transport::kUdp ? 'U'
                    : info.ip_version != 0                          ? 'I'
                                                                    : '-';
  head(kind, p.raw.seconds, p.raw.nanoseconds, info, " -> ");
  if (info.transport == PacketInfo::Transport::kTcp) {
    out_.write(" [");
    out_.write(tcp_flags(info.tcp_flags));
    out_.put(']');
  }
  out_.write(" #");
  out_.write_number(p.raw.index);
  if (p.context) out_.write(" (context)");
  else if (!p.patterns.empty()) pattern_list(p.patterns);
  out_.end_line();
  body(p.record, 0, p.matches, "  ");
  out_.end_line();
}

void PacketTextPrinter::colored(std::string_view sgr, std::string_view text) {
  out_.write(options_.colors->start(sgr));
  for (const char c : text) out_.put(printable(c));
  out_.write(options_.colors->end(sgr));
}

void PacketTextPrinter::offset(std::uint64_t at) {
  if (!options_.byte_offset) return;
  if (options_.colors && !options_.colors->byte_offset.empty()) {
    out_.write(options_.colors->start(options_.colors->byte_offset));
    out_.write_number(at);
    out_.write(options_.colors->end(options_.colors->byte_offset));
  } else {
    out_.write_number(at);
  }
  out_.put(':');
}

void PacketTextPrinter::body(std::string_view bytes, std::uint64_t base, std::span<const PacketMatch> matches,
                             std::string_view prefix) {
  if (options_.only_matching) {
    for (const PacketMatch& m : matches) {
      out_.write(prefix);
      offset(base + m.offset);
      const std::string_view text = bytes.substr(std::min<std::size_t>(m.offset, bytes.size()), m.length);
      if (options_.colors) colored(options_.colors->selected_match, text);
      else for (const char c : text) out_.put(printable(c));
      out_.end_line();
    }
    return;
  }
  if (options_.hexdump) {
    hexdump(bytes, base, prefix);
    return;
  }
  if (!options_.byline) {
    text_line(bytes, 0, base, matches, prefix);
    return;
  }
  // --byline: each '\n' ends a line (an empty payload is one empty line).
  std::size_t from = 0;
  do {
    const std::size_t nl = bytes.find('\n', from);
    const std::size_t end = nl == std::string_view::npos ? bytes.size() : nl;
    text_line(bytes.substr(0, end), from, base, matches, prefix);
    from = end + 1;
  } while (from < bytes.size());
}

// One printed line: bytes[from, end) with non-printables as dots and the matches coloured.
void PacketTextPrinter::text_line(std::string_view bytes, std::size_t from, std::uint64_t base,
                                  std::span<const PacketMatch> matches, std::string_view prefix) {
  out_.write(prefix);
  offset(base + from);
  std::size_t at = from;
  if (options_.colors) {
    for (const PacketMatch& m : matches) {
      const std::size_t b = std::max<std::size_t>(m.offset, at);
      const std::size_t e = std::min<std::size_t>(m.offset + m.length, bytes.size());
      if (b >= e) continue;
      for (; at < b; ++at) out_.put(printable(bytes[at]));
      colored(options_.colors->selected_match, bytes.substr(b, e - b));
      at = e;
    }
  }
  for (; at < bytes.size(); ++at) out_.put(printable(bytes[at]));
  out_.end_line();
}

// Rows of 16 bytes: "  OFFS  hh hh ...  text".
void PacketTextPrinter::hexdump(std::string_view bytes, std::uint64_t base, std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t row = 0; row < bytes.size(); row += 16) {
    char line[48];
    std::snprintf(line, sizeof line, "%04llx ", static_cast<unsigned long long>(base + row));
    out_.write(prefix);
    out_.write(line);
    for (std::size_t i = 0; i < 16; ++i) {
      out_.put(' ');
      if (row + i < bytes.size()) {
        const auto c = static_cast<unsigned char>(bytes[row + i]);
        out_.put(kHex[c >> 4]);
        out_.put(kHex[c & 15]);
      } else {
        out_.write("  ");
      }
    }
    out_.write("  ");
    for (std::size_t i = row; i < std::min(bytes.size(), row + 16); ++i) out_.put(printable(bytes[i]));
    out_.end_line();
  }
}

void PacketTextPrinter::flow(const FlowRecord& f) {
  head('T', f.seconds, f.nanoseconds, f.first, " <-> ");
  out_.write(" flow #");
  if (f.place_number) f.place_number();
  else out_.write_number(f.flow);
  out_.write(" packets ");
  out_.write_number(f.packets);
  out_.write(" bytes ");
  out_.write_number(f.bytes_client);
  out_.put('/');
  out_.write_number(f.bytes_server);
  if (f.matched) {
    pattern_list(f.patterns);
    out_.write(f.match_from_server ? " (server, offset " : " (client, offset ");
    out_.write_number(f.match_offset);
    out_.put(')');
  }
  out_.end_line();
  if (options_.only_matching) {
    for (const FlowMatch& m : f.matches) {
      const PacketMatch whole{0, m.bytes.size(), m.pattern};
      body(m.bytes, m.offset, std::span<const PacketMatch>(&whole, 1), m.from_server ? "  server " : "  client ");
    }
  } else {
    for (const FlowRegion& r : f.regions) {
      // The region's matches, at offsets within it.
      region_matches_.clear();
      for (const FlowMatch& m : f.matches) {
        if (m.from_server != r.from_server || m.offset + m.length <= r.offset || m.offset >= r.offset + r.bytes.size())
          continue;
        const std::uint64_t b = std::max(m.offset, r.offset) - r.offset;
        region_matches_.push_back(PacketMatch{b, std::min(m.offset + m.length, r.offset + r.bytes.size()) - r.offset - b,
                                              m.pattern});
      }
      std::sort(region_matches_.begin(), region_matches_.end(),
                [](const PacketMatch& a, const PacketMatch& b) { return a.offset < b.offset; });
      body(r.bytes, r.offset, region_matches_, r.from_server ? "  server " : "  client ");
    }
  }
  if (f.matches_left_out > 0) {
    out_.write("  (");
    out_.write_number(f.matches_left_out);
    out_.write(" more matches not shown)");
    out_.end_line();
  }
  out_.end_line();
}

PacketJsonPrinter::PacketJsonPrinter(Output& out, const std::vector<PacketPattern>& patterns) : out_(out) {
  pattern_json_.reserve(patterns.size());
  for (const PacketPattern& p : patterns) {
    std::string object;
    json::append_pattern(object, p.id, p.text);
    pattern_json_.push_back(std::move(object));
  }
}

void PacketJsonPrinter::pattern_list(std::span<const std::uint32_t> ids) {
  buffer_ += "\"patterns\":[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) buffer_ += ',';
    buffer_ += pattern_json_[ids[i]];
  }
  buffer_ += ']';
}

// "pattern":{"id":..,"text":..}, before a match's other fields; none for a regex's match.
void PacketJsonPrinter::pattern_field(std::uint32_t pattern) {
  if (pattern == kAnyPattern || pattern >= pattern_json_.size()) return;
  buffer_ += "\"pattern\":" + pattern_json_[pattern] + ",";
}

void PacketJsonPrinter::emit() {
  out_.write(buffer_);
  out_.end_line();
}

void PacketJsonPrinter::packet(const PacketRecord& p) {
  const PacketInfo& info = p.info;
  std::string& s = buffer_;
  s = p.context ? "{\"type\":\"packet_context\",\"data\":{\"source\":\"" : "{\"type\":\"packet\",\"data\":{\"source\":\"";
  json::append_escaped(s, input_.name);
  s += "\",\"frame\":" + std::to_string(p.raw.index) + ",\"time\":\"" +
       timestamp(p.raw.seconds, p.raw.nanoseconds, input_.nanosecond) + "\",\"proto\":\"" + protocol_name(info) + "\"";
  if (info.ip_version != 0) {
    s += ",\"src\":\"" + address_text(info, true) + "\",\"dst\":\"" + address_text(info, false) + "\"";
    if (has_ports(info)) s += ",\"sport\":" + std::to_string(info.sport) + ",\"dport\":" + std::to_string(info.dport);
    if (info.transport == PacketInfo::Transport::kTcp) s += ",\"tcp_flags\":\"" + tcp_flags(info.tcp_flags) + "\"";
  }
  s += ",\"length\":" + std::to_string(p.raw.len) + ",\"captured\":" + std::to_string(p.raw.caplen) +
       ",\"record_length\":" + std::to_string(p.record.size()) + ",";
  pattern_list(p.patterns);
  s += ",\"matches\":[";
  for (std::size_t i = 0; i < p.matches.size(); ++i) {
    const PacketMatch& m = p.matches[i];
    s += i > 0 ? ",{" : "{";
    pattern_field(m.pattern);
    s += "\"offset\":" + std::to_string(m.offset) + ",\"length\":" + std::to_string(m.length) + ",\"match\":";
    json::append_data(s, p.record.substr(std::min<std::size_t>(m.offset, p.record.size()), m.length));
    s += "}";
  }
  s += "]";
  s += ",\"payload\":\"";
  json::append_escaped(s, p.record);
  s += "\",\"payload_base64\":\"";
  json::append_base64(s, p.record);
  s += "\"}}";
  emit();
}

void PacketJsonPrinter::flow(const FlowRecord& f) {
  std::string& s = buffer_;
  s = "{\"type\":\"flow\",\"data\":{\"source\":\"";
  json::append_escaped(s, input_.name);
  s += "\",\"flow\":";
  if (f.place_number) {
    out_.write(s);
    s.clear();
    f.place_number();
  } else {
    s += std::to_string(f.flow);
  }
  s += ",\"proto\":\"TCP\",\"start\":\"" +
       timestamp(f.seconds, f.nanoseconds, input_.nanosecond) + "\",\"end\":\"" +
       timestamp(f.last_seconds, f.last_nanoseconds, input_.nanosecond) + "\",\"client\":\"" + endpoint(f.first, true) +
       "\",\"server\":\"" + endpoint(f.first, false) + "\",\"packets\":" + std::to_string(f.packets) +
       ",\"bytes_client\":" + std::to_string(f.bytes_client) + ",\"bytes_server\":" + std::to_string(f.bytes_server) +
       ",";
  pattern_list(f.patterns);
  if (f.matched) {
    s += ",\"first_match\":{\"direction\":\"" + std::string(f.match_from_server ? "server" : "client") +
         "\",\"offset\":" + std::to_string(f.match_offset) + "}";
  }
  s += ",\"matches\":[";
  for (std::size_t i = 0; i < f.matches.size(); ++i) {
    const FlowMatch& m = f.matches[i];
    s += i > 0 ? ",{" : "{";
    pattern_field(m.pattern);
    s += std::string("\"direction\":\"") + (m.from_server ? "server" : "client") + "\",\"offset\":" +
         std::to_string(m.offset) + ",\"length\":" + std::to_string(m.length) + ",\"match\":";
    json::append_data(s, m.bytes);
    s += "}";
  }
  s += "],\"regions\":[";
  for (std::size_t i = 0; i < f.regions.size(); ++i) {
    const FlowRegion& r = f.regions[i];
    s += std::string(i > 0 ? ",{" : "{") + "\"direction\":\"" + (r.from_server ? "server" : "client") +
         "\",\"offset\":" + std::to_string(r.offset) + ",\"payload\":\"";
    json::append_escaped(s, r.bytes);
    s += "\",\"payload_base64\":\"";
    json::append_base64(s, r.bytes);
    s += "\"}";
  }
  s += "],\"matches_left_out\":" + std::to_string(f.matches_left_out);
  s += "}}";
  emit();
}

void PacketCountPrinter::finish(const CaptureSummary& summary) {
  if (with_filename_) {
    out_.write(summary.name);
    if (null_after_name_) out_.put('\0');
    else out_.put(':');
  }
  out_.write_number(summary.selected);
  out_.end_line();
}

void PacketListPrinter::finish(const CaptureSummary& summary) {
  if ((summary.selected > 0) != with_selection_) return;
  out_.write(summary.name);
  if (null_after_name_) out_.put('\0');
  else out_.end_line();
}

}  // namespace gpufilter
