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
    : out_(out), patterns_(std::move(patterns)), options_(options) {}

// The start of both header lines: [NAME:]KIND TIME SRC ARROW DST.
void PacketTextPrinter::head(char kind, std::int64_t seconds, std::uint32_t nanoseconds, const PacketInfo& info,
                             std::string_view arrow) {
  if (options_.with_filename) {
    out_.write(input_.name);
    out_.put(':');
  }
  out_.put(kind);
  out_.put(' ');
  out_.write(timestamp(seconds, nanoseconds, input_.nanosecond));
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
  if (!p.patterns.empty()) pattern_list(p.patterns);
  out_.end_line();
  if (options_.hexdump) {
    hexdump(p.record);
  } else {
    payload(p.record);
  }
  out_.end_line();
}

void PacketTextPrinter::payload(std::string_view bytes) {
  out_.write("  ");
  for (const char c : bytes) out_.put(printable(c));
  out_.end_line();
}

// Rows of 16 bytes: "  OFFS  hh hh ...  text".
void PacketTextPrinter::hexdump(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t row = 0; row < bytes.size(); row += 16) {
    char line[80];
    std::snprintf(line, sizeof line, "  %04zx ", row);
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
  out_.write_number(f.flow);
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

void PacketJsonPrinter::emit() {
  out_.write(buffer_);
  out_.end_line();
}

void PacketJsonPrinter::packet(const PacketRecord& p) {
  const PacketInfo& info = p.info;
  std::string& s = buffer_;
  s = "{\"type\":\"packet\",\"data\":{\"source\":\"";
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
  s += "\",\"flow\":" + std::to_string(f.flow) + ",\"proto\":\"TCP\",\"start\":\"" +
       timestamp(f.seconds, f.nanoseconds, input_.nanosecond) + "\",\"client\":\"" + endpoint(f.first, true) +
       "\",\"server\":\"" + endpoint(f.first, false) + "\",\"packets\":" + std::to_string(f.packets) +
       ",\"bytes_client\":" + std::to_string(f.bytes_client) + ",\"bytes_server\":" + std::to_string(f.bytes_server) +
       ",";
  pattern_list(f.patterns);
  if (f.matched) {
    s += ",\"first_match\":{\"direction\":\"" + std::string(f.match_from_server ? "server" : "client") +
         "\",\"offset\":" + std::to_string(f.match_offset) + "}";
  }
  s += "}}";
  emit();
}

void PacketCountPrinter::finish(const CaptureSummary& summary) {
  if (with_filename_) {
    out_.write(summary.name);
    out_.put(':');
  }
  out_.write_number(summary.selected);
  out_.end_line();
}

}  // namespace gpufilter
