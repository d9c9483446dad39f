// FileSource's mapping of a regular file (map_unread) and the Chunker that cuts chunks
// out of it in place: the same bytes as reads, reads that go on after the mapping, and a
// file truncated under the mapping, which must read as zeros rather than kill the process
// with SIGBUS (sources/src/mapped_file.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <fstream>
#include <string>
#include <vector>

#include "gpufilter/core/workers.hpp"
#include "gpufilter/scan/chunker.hpp"
#include "gpufilter/sources/file_source.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}


std::string lines(std::size_t n, const std::string& prefix) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += prefix + std::to_string(i) + " some payload to fill the line\n";
  return s;
}

// Mapped only if faster (the host engine's default): a file too short for the measure
// (2 MiB whole) is read and keeps its place; a longer one is mapped or read as measured,
// and either way its bytes are the same. Asked without the measure, both are mapped.
TEST(FileSourceMapping, IfFasterMeasuresOnlyFilesLongEnough) {
  TempDir dir;
  const std::string small = lines(2000, "line ");  // under 2 MiB
  const std::string path = dir.write("small.log", small);
  auto source = FileSource::open(path);
  EXPECT_EQ(source->map_unread(1000, /*if_faster=*/true), nullptr);
  EXPECT_NE(source->map_unread(1000), nullptr);
  const std::string big = lines(200000, "row ");  // about 8 MiB
  ASSERT_GT(big.size(), std::size_t{6} << 20);
  const std::string big_path = dir.write("big.log", big);
  auto big_source = FileSource::open(big_path);
  std::unique_ptr<MappedBytes> mapped = big_source->map_unread(1000, /*if_faster=*/true);
  if (mapped) {
    EXPECT_EQ(std::string_view(mapped->data(), mapped->size()), big);
  } else {
    std::string back(big.size() + 1, '\0');
    std::size_t got = 0;
    while (std::size_t n = big_source->read(std::span<char>(back.data() + got, back.size() - got))) got += n;
    EXPECT_EQ(back.substr(0, got), big);
  }
}

TEST(FileSourceMapping, MapsTheRestAndReadsGoOnAfterIt) {
  TempDir dir;
  const std::string text = lines(2000, "line ");
  const std::string path = dir.write("a.log", text);
  auto source = FileSource::open(path);
  char head[100];
  ASSERT_EQ(source->read(std::span<char>(head, sizeof head)), sizeof head);
  EXPECT_EQ(source->map_unread(text.size()), nullptr);  // fewer bytes left than asked for
  std::unique_ptr<MappedBytes> rest = source->map_unread(1000);
  ASSERT_NE(rest, nullptr);
  ASSERT_EQ(rest->size(), text.size() - sizeof head);
  EXPECT_EQ(std::string(rest->data(), rest->size()), text.substr(sizeof head));
  EXPECT_EQ(rest->still_backed(), rest->size());
  rest->data()[0] = '#';  // copy-on-write: the file keeps its byte
  EXPECT_EQ(read_file(path)[sizeof head], text[sizeof head]);
  char more[64];
  EXPECT_EQ(source->read(std::span<char>(more, sizeof more)), 0u);
  std::ofstream(path, std::ios::app) << "appended\n";
  ASSERT_EQ(source->read(std::span<char>(more, sizeof more)), 9u);
  EXPECT_EQ(std::string(more, 9), "appended\n");
  // The first half given back (unmapped, whole pages only): the rest reads as before.
  const std::size_t half = rest->size() / 2;
  rest->drop_before(half);
  EXPECT_EQ(std::string(rest->data() + half, rest->size() - half), text.substr(sizeof head + half));
}

// The Chunker in mapped mode hands out the same chunks as when it reads, the file's growth
// during the scan included.
// Also where the first chunks are small (ChunkerConfig::first_capacity): they are read,
// and the mapping, taken after them, begins where they end, a line's start or in a line.
TEST(FileSourceMapping, ChunksOfTheMappingEqualChunksOfReads) {
  TempDir dir;
  std::string text = lines(3000, "x") + std::string(5000, 'L') + "\n" + lines(100, "y") + "no final newline";
  const std::string path = dir.write("b.log", text);
  for (const std::size_t capacity : {64u, 4096u, 10000u}) {
    for (const std::size_t first : {std::size_t{0}, capacity / 16, std::size_t{1}}) {
      auto collect = [&](bool map, bool grow) {
        auto source = FileSource::open(path);
        ChunkerConfig config;
        config.capacity = capacity;
        config.overlap = 7;
        config.first_capacity = first;
        config.mapping = map ? FileMapping::kAlways : FileMapping::kNever;
        Chunker chunker(*source, config);
        std::string staging(capacity, '\0'), all;
        Chunk chunk;
        int n = 0;
        while (chunker.fill(staging.data(), chunk, std::chrono::milliseconds(-1)) == Chunker::Status::kChunk) {
          all += std::to_string(chunk.offset) + "+" + std::to_string(chunk.overlap) + ":" +
                 std::string(chunk.data, chunk.size) + (chunk.last ? "|last" : "") + (chunk.line_open ? "|open" : "") +
                 (chunk.flush_after ? "|flush" : "") + "\n";
          if (grow && ++n == 3) std::ofstream(path, std::ios::app) << "grown line\n";
        }
        EXPECT_EQ(chunker.in_place(), map) << "capacity " << capacity << ", first " << first;
        return all;
      };
      const std::string copied = collect(false, false);
      EXPECT_EQ(collect(true, false), copied) << "capacity " << capacity << ", first " << first;
      const std::string grown_copied = collect(false, true);  // the file now ends with the line
      write_file(path, text);
      EXPECT_EQ(collect(true, true), grown_copied) << "capacity " << capacity << ", first " << first;
      write_file(path, text);
    }
  }
}

// A file cut short while its mapping is being scanned: no SIGBUS, every byte past the cut
// reads as zero, and the chunker ends at the file's new end.
TEST(FileSourceMapping, TruncatedUnderTheMappingReadsZeros) {
  TempDir dir;
  const std::string text = lines(40000, "t");  // about 1.5 MB
  const std::string path = dir.write("c.log", text);
  auto source = FileSource::open(path);
  std::unique_ptr<MappedBytes> mapped = source->map_unread(1);
  ASSERT_NE(mapped, nullptr);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  EXPECT_EQ(mapped->still_backed(), 4096u);
  std::size_t nonzero = 0;
  for (std::size_t i = 4096; i < mapped->size(); i += 512) nonzero += mapped->data()[i] != '\0';
  EXPECT_EQ(nonzero, 0u);
  EXPECT_EQ(std::string(mapped->data(), 100), text.substr(0, 100));

  write_file(path, text);
  auto again = FileSource::open(path);
  ChunkerConfig config;
  config.capacity = 64 << 10;
  config.mapping = FileMapping::kAlways;
  Chunker chunker(*again, config);
  std::string staging(config.capacity, '\0');
  Chunk chunk;
  std::uint64_t end = 0;
  int chunks = 0;
  while (chunker.fill(staging.data(), chunk, std::chrono::milliseconds(-1)) == Chunker::Status::kChunk) {
    if (++chunks == 2) {
      ASSERT_EQ(::truncate(path.c_str(), 200000), 0);
    }
    end = chunk.offset + chunk.size;
  }
  EXPECT_LE(end, 200000u + config.capacity);  // the chunk cut before the truncation may hold zeros
  EXPECT_GE(end, 131072u);
}


// Reads split over a pool (large ones) and plain reads (small ones, or near the end) take
// turns on one file: each goes on where the last stopped, and unread_size() follows.
TEST(FileSourceReads, SplitAndPlainReadsTakeTurns) {
  TempDir dir;
  std::string text;
  for (int i = 0; text.size() < (5u << 20) + 12345; ++i) text += "line " + std::to_string(i) + "\n";
  const std::string path = dir.write("c.log", text);
  WorkerPool pool(3);
  auto source = FileSource::open(path);
  source->set_workers(&pool);
  ASSERT_EQ(source->unread_size(), text.size());
  std::string got;
  for (const std::size_t want : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{100}, std::size_t{4} << 20}) {
    std::string buffer(want, '\0');
    const std::size_t n = source->read(std::span<char>(buffer.data(), buffer.size()));
    got.append(buffer, 0, n);
    EXPECT_EQ(source->unread_size(), text.size() - got.size());
  }
  std::string rest(1u << 20, '\0');
  while (const std::size_t n = source->read(std::span<char>(rest.data(), rest.size()))) got.append(rest, 0, n);
  EXPECT_EQ(got, text);
  EXPECT_EQ(source->unread_size(), 0u);
  auto pipe_like = FileSource::standard_input("(standard input)");
  EXPECT_EQ(pipe_like->unread_size().has_value(), pipe_like->is_regular_file());
}

// read_finding() names the first byte sought among what it read, wherever the split read's
// threads met it: in the first piece, a later one, at a 256 KiB step's edge, at the read's
// last byte, twice, or not at all; the bytes read are read()'s.
TEST(FileSourceReads, SplitReadsFindTheFirstNulWhereverItLies) {
  TempDir dir;
  std::string text;
  for (int i = 0; text.size() < (6u << 20); ++i) text += "line " + std::to_string(i) + "\n";
  constexpr std::size_t kWant = 5u << 20;  // one read of 5 pieces over 3 threads
  const std::size_t none = Source::kNotFound;
  const std::vector<std::vector<std::size_t>> cases = {
      {}, {0}, {17}, {(256u << 10) - 1}, {256u << 10}, {(1u << 20) + 5}, {(3u << 20) + 99, (1u << 20) + 5},
      {kWant - 1}, {kWant}, {(4u << 20) + 1, (4u << 20) + 2}};
  WorkerPool pool(3);
  for (const std::vector<std::size_t>& nuls : cases) {
    std::string bytes = text;
    for (const std::size_t at : nuls) bytes[at] = '\0';
    const std::string path = dir.write("n.log", bytes);
    auto source = FileSource::open(path);
    source->set_workers(&pool);
    std::string buffer(kWant, 'x');
    std::size_t first = 0;
    const std::size_t n = source->read_finding(std::span<char>(buffer.data(), buffer.size()), '\0', first);
    ASSERT_EQ(n, kWant);
    EXPECT_EQ(buffer, bytes.substr(0, kWant));
    const std::size_t at = bytes.find('\0');
    EXPECT_EQ(first, at < kWant ? at : none) << (nuls.empty() ? 0 : nuls[0]);
  }
}

// A pipe it reads grows to 1 MiB (a writer as fast as the reads wakes the reader once a
// megabyte, not once a block), while each read still takes at most what the pipe held
// before: binary mode starts at the read that brings a NUL, as grep's reads bring it.
TEST(FileSourceReads, APipeGrowsButEachReadTakesAtMostItsFormerSize) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int before = ::fcntl(fds[0], F_GETPIPE_SZ);
  auto source = FileSource::adopt(fds[0], "pipe");  // owns the read end from here
  const int after = ::fcntl(fds[0], F_GETPIPE_SZ);
  if (after <= before) {
    ::close(fds[1]);
    GTEST_SKIP() << "the system's limit keeps pipes at " << before << " bytes";
  }
  EXPECT_EQ(after, 1 << 20);
  const std::string text = lines(4000, "p");  // more than the old pipe, less than the new
  ASSERT_GT(text.size(), 2u * static_cast<std::size_t>(before));
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  std::string buffer(4 * static_cast<std::size_t>(before), '\0'), got;
  while (const std::size_t n = source->read(std::span<char>(buffer.data(), buffer.size()))) {
    EXPECT_LE(n, static_cast<std::size_t>(before));
    got.append(buffer, 0, n);
  }
  EXPECT_EQ(got, text);
}

}  // namespace
}  // namespace gpufilter::test
