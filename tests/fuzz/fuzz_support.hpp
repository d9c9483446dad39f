// Small pieces the fuzz targets share: bytes shown readably in a failure report, and the
// scratch directory of the targets whose inputs name files.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufilter::fuzz {

// Printable ASCII as is, every other byte (and '\') as \xNN.
inline std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && u != '\\') {
      out.push_back(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return out;
}

// A directory of the target's own under /tmp holding `files` (name, contents), made in
// LLVMFuzzerInitialize and removed at exit. run() calls f with it as the working
// directory, so that the names an input gives resolve there, and changes back afterwards,
// also when f throws: libFuzzer's own relative paths (where it writes a crash input) keep
// their meaning. Standard input becomes /dev/null (for "-f -"). Any setup failure aborts.
class ScratchDir {
 public:
  ScratchDir(const char* tag, std::vector<std::pair<std::string, std::string>> files) : files_(std::move(files)) {
    path_ = "/tmp/gpufilter-" + std::string(tag) + "-fuzz-XXXXXX";
    if (::mkdtemp(path_.data()) == nullptr) std::abort();
    work_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    home_ = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (work_ < 0 || home_ < 0) std::abort();
    for (const auto& [name, contents] : files_) {
      FILE* f = std::fopen((path_ + "/" + name).c_str(), "w");
      if (f == nullptr) std::abort();
      std::fwrite(contents.data(), 1, contents.size(), f);
      std::fclose(f);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null < 0 || ::dup2(null, STDIN_FILENO) < 0) std::abort();
    ::close(null);
  }
  ~ScratchDir() {
    for (const auto& file : files_) ::unlink((path_ + "/" + file.first).c_str());
    ::rmdir(path_.c_str());
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  template <typename F>
  decltype(auto) run(F&& f) const {
    struct Back {
      int home;
      ~Back() {
        if (::fchdir(home) != 0) std::abort();
      }
    };
    if (::fchdir(work_) != 0) std::abort();
    const Back back{home_};
    return f();
  }

 private:
  std::string path_;
  std::vector<std::pair<std::string, std::string>> files_;
  int work_ = -1;  // path_
  int home_ = -1;  // the working directory libFuzzer was started in
};

}  // namespace gpufilter::fuzz
