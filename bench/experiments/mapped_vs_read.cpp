// Experiment behind docs/PERFORMANCE.md "What is next" (reading pages, 2026-12-02): Hyperscan
// over a file mapped in place against pread() into each thread's buffer, 16 threads.
//   g++ -O2 -pthread -o mapped_vs_read bench/experiments/mapped_vs_read.cpp -l:libhs.a
//   ./mapped_vs_read FILE PATTERNFILE THREADS
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <hs/hs.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
static int on_match(unsigned, unsigned long long, unsigned long long, unsigned, void* c) { ++*(size_t*)c; return 0; }
int main(int argc, char** argv) {
  const char* path = argv[1];
  const char* pats = argv[2];
  unsigned threads = atoi(argv[3]);
  std::vector<std::string> p; { std::ifstream f(pats); std::string l; while (std::getline(f, l)) if (!l.empty()) p.push_back(l); }
  std::vector<const char*> e; std::vector<unsigned> fl, ids; std::vector<size_t> lens;
  for (size_t i = 0; i < p.size(); ++i) { e.push_back(p[i].c_str()); fl.push_back(HS_FLAG_SINGLEMATCH); ids.push_back(i); lens.push_back(p[i].size()); }
  hs_database_t* db; hs_compile_error_t* err;
  if (hs_compile_lit_multi(e.data(), fl.data(), ids.data(), lens.data(), e.size(), HS_MODE_BLOCK, nullptr, &db, &err) != HS_SUCCESS) { printf("compile fail\n"); return 1; }
  hs_scratch_t* proto = nullptr; hs_alloc_scratch(db, &proto);
  int fd = open(path, O_RDONLY); struct stat st; fstat(fd, &st); size_t size = st.st_size;
  const int modes[] = {0, 1, 2, 3, 0, 5};
  const size_t pieces[] = {4u << 20, 256u << 10, 1u << 20, 4u << 20, 4u << 20, 1u << 20};
  for (int k = 0; k < 6; ++k) {
    int mode = modes[k] == 0 ? 0 : modes[k] == 5 ? 5 : 1;
    size_t piece = pieces[k];
    auto t0 = clk::now();
    const char* map = nullptr;
    if (mode == 0 || mode == 5) map = (const char*)mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    std::atomic<size_t> next{0}, total{0};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) ts.emplace_back([&] {
      hs_scratch_t* s = nullptr; hs_clone_scratch(proto, &s);
      std::vector<char> buf(piece + 64);
      size_t count = 0;
      for (;;) {
        size_t off = next.fetch_add(piece);
        if (off >= size) break;
        size_t n = std::min(piece, size - off);
        if (mode == 0 || mode == 5) hs_scan(db, map + off, n, 0, s, on_match, &count);
        else { ssize_t r = pread(fd, buf.data(), n, off); hs_scan(db, buf.data(), r, 0, s, on_match, &count); }
      }
      total += count; hs_free_scratch(s);
    });
    for (auto& t : ts) t.join();
    double sec = std::chrono::duration<double>(clk::now() - t0).count();
    if (map) munmap((void*)map, size);
    printf("%-6s piece %7zu KiB: %6.2f GB/s (%zu matches)\n", mode != 1 ? "mmap" : "pread", piece >> 10, size / sec / 1e9, total.load());
  }
}
