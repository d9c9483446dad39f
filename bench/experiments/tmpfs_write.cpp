// Experiment behind docs/PERFORMANCE.md "Dense output against one writer's ceiling" (2026-12-02):
// how fast can one file on tmpfs be written: write(2) alone, write(2) with threads populating
// the pages ahead through a shared mapping, and the mapping filled by several threads.
//   g++ -O2 -pthread -o tmpfs_write bench/experiments/tmpfs_write.cpp
//   ./tmpfs_write MIB HELPERS [PATH=/dev/shm/wb.out]
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <thread>
#include <vector>
#include <atomic>
using clk = std::chrono::steady_clock;
static double secs(clk::time_point a) { return std::chrono::duration<double>(clk::now() - a).count(); }
int main(int argc, char** argv) {
  size_t total = std::strtoull(argv[1], nullptr, 10) << 20;
  int helpers = argc > 2 ? atoi(argv[2]) : 2;
  const char* path = argc > 3 ? argv[3] : "/dev/shm/wb.out";
  size_t buf = 4 << 20;
  std::vector<char> b(buf, 'x');
  for (size_t i = 0; i < buf; i += 100) b[i] = '\n';
  {  // 1. plain write
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    auto t = clk::now();
    for (size_t off = 0; off < total; off += buf) (void)!write(fd, b.data(), buf);
    double s = secs(t);
    printf("write cold: %.2f GB/s\n", total / s / 1e9);
    close(fd);
    unlink(path);
  }
  {  // 2. write with helpers populating ahead via mmap MADV_POPULATE_WRITE
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    auto t = clk::now();
    ftruncate(fd, total);
    char* m = (char*)mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    std::atomic<size_t> written{0};
    size_t step = 16 << 20;
    std::atomic<size_t> next{0};
    std::vector<std::thread> ts;
    for (int h = 0; h < helpers; ++h) ts.emplace_back([&] {
      for (;;) {
        size_t s = next.fetch_add(step);
        if (s >= total) return;
        while (s > written.load() + (512u << 20)) std::this_thread::yield();
        madvise(m + s, std::min(step, total - s), 23 /*MADV_POPULATE_WRITE*/);
      }
    });
    for (size_t off = 0; off < total; off += buf) { (void)!write(fd, b.data(), buf); written = off + buf; }
    for (auto& th : ts) th.join();
    double s = secs(t);
    printf("write with %d populating helpers: %.2f GB/s\n", helpers, total / s / 1e9);
    munmap(m, total);
    close(fd);
    unlink(path);
  }
  {  // 3. parallel memcpy into mapping
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    auto t = clk::now();
    ftruncate(fd, total);
    char* m = (char*)mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    std::atomic<size_t> next{0};
    std::vector<std::thread> ts;
    for (int h = 0; h < helpers + 1; ++h) ts.emplace_back([&] {
      for (;;) {
        size_t s = next.fetch_add(buf);
        if (s >= total) return;
        memcpy(m + s, b.data(), std::min(buf, total - s));
      }
    });
    for (auto& th : ts) th.join();
    double s = secs(t);
    printf("memcpy into mmap, %d threads: %.2f GB/s\n", helpers + 1, total / s / 1e9);
    munmap(m, total);
    close(fd);
    unlink(path);
  }
}
