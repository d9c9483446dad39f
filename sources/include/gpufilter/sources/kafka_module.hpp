// Kafka support as gpufilter loads it: only when --kafka asks for it. librdkafka brings
// OpenSSL, SASL and their libraries, whose loading cost every start of the program about
// 2 ms (of 5) on a machine where grep starts in 1; so gpufilter is not linked with them.
// KafkaSource (kafka_source.cpp) is built twice: into gpufilter::kafka, which gpufilterd
// and the tests link, and into the module gpufilter-kafka.so, which open_kafka_url()
// loads (dlopen) from beside the gpufilter executable (the build tree) or from
// ../lib/gpufilter/ (an installation). The module takes what it needs of the program
// (RecordChannel, the errors) from the program itself, which exports its symbols.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/sources/kafka_source.hpp"

namespace gpufilter {

// An error as it crosses between the module and the program. gpufilter links the C++
// runtime statically (cli/CMakeLists.txt) and the module takes the shared one, so each has
// its own: no exception may cross, and each call below catches what it raised and hands it
// over as this, for the program to throw again.
struct KafkaModuleError {
  enum class Kind { kNone, kConfig, kSource, kOther } kind = Kind::kNone;
  std::string message;  // what()
  std::string name;     // SourceError's input name
  int error_number = 0; // SourceError's errno
};

// What the module hands out (kafka_module.cpp), under the C name kKafkaModuleEntry. Each
// function sets `error` instead of throwing.
struct KafkaModule {
  // parse_kafka_url(url, max_line_bytes), then a KafkaSource on `channel`; null on error.
  KafkaReader* (*open)(RecordChannel& channel, const std::string& url, std::size_t max_line_bytes, Notices& notices,
                       KafkaModuleError& error) noexcept;
  // The reader's start(), on_space() and close().
  void (*start)(KafkaReader& reader, KafkaModuleError& error) noexcept;
  void (*on_space)(KafkaReader& reader, KafkaModuleError& error) noexcept;
  void (*close)(KafkaReader& reader, KafkaModuleError& error) noexcept;
};
inline constexpr const char* kKafkaModuleEntry = "gpufilter_kafka_module";
inline constexpr const char* kKafkaModuleFile = "gpufilter-kafka.so";

// gpufilter --kafka URL: the module's open(). Throws ConfigError for a bad URL (as
// parse_kafka_url), SourceError naming the module when it cannot be loaded.
std::unique_ptr<KafkaReader> open_kafka_url(RecordChannel& channel, const std::string& url,
                                            std::size_t max_line_bytes, Notices& notices);

}  // namespace gpufilter
