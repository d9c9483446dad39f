// libpcap() (libpcap.hpp): libpcap.so.0.8 (Debian's libpcap0.8) opened once.
#include "gpufilter/core/libpcap.hpp"

#include <cerrno>
#include <string>
#include <utility>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/shared_library.hpp"

namespace gpufilter {
namespace {

constexpr const char* kLibrary = "libpcap.so.0.8";

struct Loaded {
  Libpcap functions;
  std::string failure;  // why it could not be loaded ("" when it was)
};

Loaded load() {
  Loaded l;
  SharedLibrary library = open_shared_library(kLibrary);
  if (library.handle != nullptr) {
#define GPUFILTER_LIBPCAP_LOOKUP(name) l.functions.name = shared_function<decltype(&::name)>(library, #name);
    GPUFILTER_LIBPCAP_FUNCTIONS(GPUFILTER_LIBPCAP_LOOKUP)
#undef GPUFILTER_LIBPCAP_LOOKUP
  }
  l.failure = std::move(library.failure);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Libpcap* try_libpcap() noexcept {
  try {
    return loaded().failure.empty() ? &loaded().functions : nullptr;
  } catch (...) {
    return nullptr;
  }
}

const Libpcap& libpcap() {
  const Loaded& l = loaded();
  if (!l.failure.empty())
    throw SourceError("libpcap", ENOENT, "captures need libpcap (Debian: libpcap0.8), which could not be loaded: " + l.failure);
  return l.functions;
}

}  // namespace gpufilter
