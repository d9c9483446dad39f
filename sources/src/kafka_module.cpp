// The entry of the module gpufilter-kafka.so (kafka_module.hpp): KafkaSource behind the
// function table that open_kafka_url() looks up, each call catching what it raises.
#include "gpufilter/sources/kafka_module.hpp"

#include <exception>

#include "gpufilter/core/errors.hpp"

namespace {

using gpufilter::KafkaModuleError;

// Runs `f`, handing what it throws to `error` (kafka_module.hpp: no exception crosses).
template <typename F>
void guarded(KafkaModuleError& error, F&& f) noexcept {
  try {
    f();
  } catch (const gpufilter::SourceError& e) {
    error = {KafkaModuleError::Kind::kSource, e.what(), e.name(), e.error_number()};
  } catch (const gpufilter::ConfigError& e) {
    error = {KafkaModuleError::Kind::kConfig, e.what(), {}, 0};
  } catch (const std::exception& e) {
    error = {KafkaModuleError::Kind::kOther, e.what(), {}, 0};
  } catch (...) {
    error = {KafkaModuleError::Kind::kOther, "unknown error", {}, 0};
  }
}

gpufilter::KafkaReader* open(gpufilter::RecordChannel& channel, const std::string& url, std::size_t max_line_bytes,
                             gpufilter::Notices& notices, KafkaModuleError& error) noexcept {
  gpufilter::KafkaReader* reader = nullptr;
  guarded(error, [&] {
    reader = new gpufilter::KafkaSource(channel, gpufilter::parse_kafka_url(url, max_line_bytes), notices);
  });
  return reader;
}

void start(gpufilter::KafkaReader& reader, KafkaModuleError& error) noexcept {
  guarded(error, [&] { reader.start(); });
}

void on_space(gpufilter::KafkaReader& reader, KafkaModuleError& error) noexcept {
  guarded(error, [&] { reader.on_space(); });
}

void close(gpufilter::KafkaReader& reader, KafkaModuleError& error) noexcept {
  guarded(error, [&] { reader.close(); });
}

const gpufilter::KafkaModule kModule{open, start, on_space, close};

}  // namespace

extern "C" __attribute__((visibility("default"))) const gpufilter::KafkaModule* gpufilter_kafka_module() {
  return &kModule;
}
