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

// Throws what the module handed over, as the type it had there.
void rethrow(const KafkaModuleError& error) {
  switch (error.kind) {
    case KafkaModuleError::Kind::kNone: return;
    case KafkaModuleError::Kind::kConfig: throw ConfigError(error.message);
    case KafkaModuleError::Kind::kSource: throw SourceError(error.name, error.error_number, error.message);
    case KafkaModuleError::Kind::kOther: throw Error(error.message);
  }
}

// The module's reader as the program calls it: its throwing calls through the table.
class ModuleReader final : public KafkaReader {
 public:
  ModuleReader(const KafkaModule& module, KafkaReader* reader) : module_(module), reader_(reader) {}

  const std::string& name() const noexcept override { return reader_->name(); }
  void start() override { call(module_.start); }
  void stop() noexcept override { reader_->stop(); }
  bool stopped() const noexcept override { return reader_->stopped(); }
  void on_space() override { call(module_.on_space); }
  void close() override { call(module_.close); }
  Counters counters() const noexcept override { return reader_->counters(); }

 private:
  void call(void (*f)(KafkaReader&, KafkaModuleError&) noexcept) {
    KafkaModuleError error;
    f(*reader_, error);
    rethrow(error);
  }

  const KafkaModule& module_;
  std::unique_ptr<KafkaReader> reader_;  // deleted by its own (virtual) destructor, in the module
};

}  // namespace

std::unique_ptr<KafkaReader> open_kafka_url(RecordChannel& channel, const std::string& url,
                                            std::size_t max_line_bytes, Notices& notices) {
  const KafkaModule& module = kafka_module();
  KafkaModuleError error;
  KafkaReader* reader = module.open(channel, url, max_line_bytes, notices, error);
  rethrow(error);
  return std::make_unique<ModuleReader>(module, reader);
}

}  // namespace gpufilter
