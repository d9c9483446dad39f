// Reading --json output (rg's JSON Lines, sinks/json_printer.hpp) in tests: records parsed
// by a real JSON parser, and rg's "arbitrary data" objects back to their exact bytes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gpufilter::test {

// RFC 4648 base64, padding optional.
std::string base64_decode(std::string_view in);
// {"text":"..."} or {"bytes":"BASE64"}: the bytes either stands for.
std::string data_bytes(const nlohmann::json& data);
// One parsed record per line of `out` (nlohmann throws on one that is not JSON).
std::vector<nlohmann::json> json_records(const std::string& out);
// The records of `type` ("match", "context", ...), in order.
std::vector<nlohmann::json> records_of(const std::vector<nlohmann::json>& records, std::string_view type);

}  // namespace gpufilter::test
