// The OpenCL C sources of kernels/*.cl, embedded into the binary at build time
// (cmake/EmbedKernels.cmake). Setting GPUFILTER_KERNEL_DIR reads them from that
// folder instead, for kernel work without a rebuild.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace gpufilter::kernels {

struct EmbeddedKernel {
  std::string_view name;    // file name, e.g. "scan.cl"
  std::string_view source;  // OpenCL C text
};

// The source of kernel file `name`. Throws Error if no such kernel is embedded,
// ConfigError if GPUFILTER_KERNEL_DIR is set and the file cannot be read (core/errors.hpp).
std::string kernel_source(std::string_view name);
// The same lookup in another table of embedded kernels (a program's own, such as the
// permutations example's), with the same GPUFILTER_KERNEL_DIR override.
std::string kernel_source(std::string_view name, std::span<const EmbeddedKernel> embedded);

namespace detail {
extern const EmbeddedKernel k_embedded[];
extern const std::size_t k_embedded_count;
}  // namespace detail

}  // namespace gpufilter::kernels
