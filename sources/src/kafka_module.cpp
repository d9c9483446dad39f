// The entry of the module gpufilter-kafka.so (kafka_module.hpp): KafkaSource behind the
// function table that open_kafka_url() looks up.
#include "gpufilter/sources/kafka_module.hpp"

namespace {

std::unique_ptr<gpufilter::KafkaReader> open(gpufilter::RecordChannel& channel, const std::string& url,
                                             std::size_t max_line_bytes, gpufilter::Notices& notices) {
  return std::make_unique<gpufilter::KafkaSource>(channel, gpufilter::parse_kafka_url(url, max_line_bytes), notices);
}

const gpufilter::KafkaModule kModule{open};

}  // namespace

extern "C" __attribute__((visibility("default"))) const gpufilter::KafkaModule* gpufilter_kafka_module() {
  return &kModule;
}
