#include "gpufilter/kernels/kernel_sources.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gpufilter/core/errors.hpp"

namespace gpufilter::kernels {

std::string kernel_source(std::string_view name) {
  return kernel_source(name, std::span<const EmbeddedKernel>(detail::k_embedded, detail::k_embedded_count));
}

std::string kernel_source(std::string_view name, std::span<const EmbeddedKernel> embedded) {
  if (const char* dir = std::getenv("GPUFILTER_KERNEL_DIR"); dir != nullptr && *dir != '\0') {
    std::string path = std::string(dir) + "/" + std::string(name);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError("GPUFILTER_KERNEL_DIR: cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  for (const EmbeddedKernel& kernel : embedded) {
    if (kernel.name == name) return std::string(kernel.source);
  }
  throw Error("no embedded kernel named " + std::string(name));
}

}  // namespace gpufilter::kernels
