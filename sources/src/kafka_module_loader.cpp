// open_kafka_url(): the module gpufilter-kafka.so loaded on first use (kafka_module.hpp).
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/kafka_module.hpp"

namespace gpufilter {
namespace {

// The folder of the running executable ("" when /proc is not there).
std::string executable_folder() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return {};
  const std::string exe(path, static_cast<std::size_t>(n));
  const std::size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string() : exe.substr(0, slash);
}

// The module's table, loaded once; throws SourceError with what dlopen said of each place.
const KafkaModule& kafka_module() {
  static std::once_flag once;
  static const KafkaModule* module = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    const std::string folder = executable_folder();
    const std::vector<std::string> places = {folder + "/" + kKafkaModuleFile,
                                             folder + "/../lib/gpufilter/" + kKafkaModuleFile};
    for (const std::string& place : places) {
      void* handle = ::dlopen(place.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = ::dlerror();
        failure += (failure.empty() ? "" : "; ") + std::string(why != nullptr ? why : place);
        continue;
      }
      using Entry = const KafkaModule* (*)();
      const auto entry = reinterpret_cast<Entry>(::dlsym(handle, kKafkaModuleEntry));
      if (entry == nullptr) {
        failure += (failure.empty() ? "" : "; ") + place + ": no " + kKafkaModuleEntry;
        continue;
      }
      module = entry();  // the module stays loaded: its consumers run until the process ends
      return;
    }
  });
  if (module == nullptr)
    throw SourceError("--kafka", ENOENT,
                      std::string("--kafka: Kafka support is missing: gpufilter loads it from ") + kKafkaModuleFile +
                          ", which could not be loaded (" + failure + ")");
  return *module;
}

}  // namespace

std::unique_ptr<KafkaReader> open_kafka_url(RecordChannel& channel, const std::string& url,
                                            std::size_t max_line_bytes, Notices& notices) {
  return kafka_module().open(channel, url, max_line_bytes, notices);
}

}  // namespace gpufilter
