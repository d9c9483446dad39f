// libpcap() (libpcap.hpp): libpcap.so.0.8 (Debian's libpcap0.8) opened once.
#include "gpufilter/core/libpcap.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <string>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {
namespace {

constexpr const char* kLibrary = "libpcap.so.0.8";

struct Loaded {
  Libpcap functions;
  std::string failure;  // why it could not be loaded ("" when it was)
};

Loaded load() {
  Loaded l;
  void* handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    l.failure = why != nullptr ? why : kLibrary;
    return l;
  }
#define GPUFILTER_LIBPCAP_LOOKUP(name)                                                   \
  l.functions.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));        \
  if (l.functions.name == nullptr && l.failure.empty()) l.failure = std::string(kLibrary) + " has no " #name;
  GPUFILTER_LIBPCAP_FUNCTIONS(GPUFILTER_LIBPCAP_LOOKUP)
#undef GPUFILTER_LIBPCAP_LOOKUP
  return l;  // the library stays loaded until the process ends
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
