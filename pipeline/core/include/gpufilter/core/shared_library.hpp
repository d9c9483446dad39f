// A library the programs do not link but open (dlopen) the first time a run needs it:
// libpcap (libpcap.hpp) and the decompressors (sources/src/decoders.cpp), whose loading
// would cost every start, when most runs use none of them.
#pragma once

#include <string>

namespace gpufilter {

struct SharedLibrary {
  const char* soname = nullptr;
  void* handle = nullptr;  // null where it could not be opened
  std::string failure;     // why it cannot be used ("" when it can)
};

// Opens `soname` (RTLD_NOW | RTLD_LOCAL); it stays loaded until the process ends.
SharedLibrary open_shared_library(const char* soname);

// `name` from an opened `library`; null where it has none, the first such name noted in
// library.failure.
void* shared_symbol(SharedLibrary& library, const char* name);

template <typename Function>
Function shared_function(SharedLibrary& library, const char* name) {
  return reinterpret_cast<Function>(shared_symbol(library, name));
}

}  // namespace gpufilter
