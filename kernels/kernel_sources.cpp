#include "gpufilter/kernels/kernel_sources.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gpufilter::kernels {

std::string kernel_source(std::string_view name) {
  if (const char* dir = std::getenv("GPUFILTER_KERNEL_DIR"); dir != nullptr && *dir != '\0') {
    std::string path = std::string(dir) + "/" + std::string(name);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("GPUFILTER_KERNEL_DIR: cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  for (std::size_t i = 0; i < detail::k_embedded_count; ++i) {
    if (detail::k_embedded[i].name == name) return std::string(detail::k_embedded[i].source);
  }
  throw std::out_of_range("no embedded kernel named " + std::string(name));
}

}  // namespace gpufilter::kernels
