#include "json_records.hpp"

#include <cstdint>

namespace gpufilter::test {

std::string base64_decode(std::string_view in) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (const char c : in) {
    if (c == '=') break;
    buffer = buffer << 6 | static_cast<std::uint32_t>(kAlphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return out;
}

std::string data_bytes(const nlohmann::json& data) {
  if (data.contains("bytes")) return base64_decode(data.at("bytes").get<std::string>());
  return data.at("text").get<std::string>();
}

std::vector<nlohmann::json> json_records(const std::string& out) {
  std::vector<nlohmann::json> records;
  for (std::size_t begin = 0; begin < out.size();) {
    std::size_t end = out.find('\n', begin);
    if (end == std::string::npos) end = out.size();
    records.push_back(nlohmann::json::parse(out.substr(begin, end - begin)));
    begin = end + 1;
  }
  return records;
}

std::vector<nlohmann::json> records_of(const std::vector<nlohmann::json>& records, std::string_view type) {
  std::vector<nlohmann::json> of;
  for (const nlohmann::json& r : records)
    if (r.at("type") == type) of.push_back(r);
  return of;
}

}  // namespace gpufilter::test
