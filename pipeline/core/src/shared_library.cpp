#include "gpufilter/core/shared_library.hpp"

#include <dlfcn.h>

namespace gpufilter {

SharedLibrary open_shared_library(const char* soname) {
  SharedLibrary library;
  library.soname = soname;
  library.handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (library.handle == nullptr) {
    const char* why = ::dlerror();
    library.failure = why != nullptr ? why : soname;
  }
  return library;
}

void* shared_symbol(SharedLibrary& library, const char* name) {
  void* address = ::dlsym(library.handle, name);
  if (address == nullptr && library.failure.empty()) library.failure = std::string(library.soname) + " has no " + name;
  return address;
}

}  // namespace gpufilter
