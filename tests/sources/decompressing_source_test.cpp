// DecompressingSource and open_decompressing() on files made by the Debian tools: the
// decoded bytes whatever the read sizes, magic detection that consumes nothing from a
// regular file and replays a pipe's first bytes, errors that come after the bytes decoded
// before them and name the file and offset, and a decoder that waits for its reader.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/decompressing_source.hpp"
#include "gpufilter/sources/file_source.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

std::string text_of(std::size_t lines) {
  std::string s;
  for (std::size_t i = 0; i < lines; ++i) s += "line " + std::to_string(i) + " of a test log with some words\n";
  return s;
}

std::string pack(const TempDir& dir, const std::string& tool, const std::string& text) {
  const std::string plain = dir.write("plain.tmp", text);
  command_output(tool + " -q -c < " + shell_quote(plain) + " > " + shell_quote(dir.file("packed.tmp")));
  return read_file(dir.file("packed.tmp"));
}

// Reads `source` to its end `step` bytes at a time.
std::string read_all(Source& source, std::size_t step) {
  std::string out;
  std::string buffer(step, '\0');
  for (;;) {
    const std::size_t n = source.read(std::span<char>(buffer.data(), buffer.size()));
    if (n == 0) return out;
    out.append(buffer.data(), n);
  }
}

const std::vector<std::pair<std::string, Compression>> kTools = {{"gzip", Compression::kGzip},
                                                                 {"zstd", Compression::kZstd},
                                                                 {"xz", Compression::kXz},
                                                                 {"bzip2", Compression::kBzip2},
                                                                 {"lz4", Compression::kLz4}};

TEST(DecompressingSource, DecodesEveryFormatWhateverTheReadSize) {
  TempDir dir;
  const std::string text = text_of(100000);  // 4 MB: more than the decoder's blocks
  for (const auto& [tool, format] : kTools) {
    const std::string path = dir.write("f", pack(dir, tool, text));
    EXPECT_EQ(compression_of(read_file(path)), format) << tool;
    for (std::size_t step : {std::size_t{1} << 20, std::size_t{4096}, std::size_t{7}}) {
      if (step == 7 && format != Compression::kGzip) continue;  // slow; one format is enough
      std::unique_ptr<Source> source = open_decompressing(FileSource::open(path));
      ASSERT_NE(dynamic_cast<DecompressingSource*>(source.get()), nullptr) << tool;
      EXPECT_FALSE(source->is_regular_file());
      EXPECT_FALSE(source->unread_size().has_value());
      EXPECT_FALSE(source->file_size().has_value());
      EXPECT_EQ(source->map_unread(1), nullptr);
      EXPECT_EQ(source->name(), path);
      const std::string got = read_all(*source, step);
      EXPECT_EQ(got.size(), text.size()) << tool << " step " << step;
      EXPECT_TRUE(got == text) << tool << " step " << step;
    }
  }
}

TEST(DecompressingSource, PlainRegularFileIsTheFileSourceItselfWithNothingConsumed) {
  TempDir dir;
  const std::string text = text_of(1000);
  const std::string path = dir.write("plain", text);
  std::unique_ptr<FileSource> file = FileSource::open(path);
  FileSource* raw = file.get();
  std::unique_ptr<Source> source = open_decompressing(std::move(file));
  EXPECT_EQ(source.get(), raw);
  EXPECT_TRUE(source->is_regular_file());
  EXPECT_EQ(source->unread_size(), text.size());
  EXPECT_EQ(read_all(*source, 4096), text);
}

TEST(DecompressingSource, PipeFirstBytesAreReplayedOrDecoded) {
  TempDir dir;
  const std::string text = text_of(5000);
  for (const std::string& input : {text, std::string("\x1f"), std::string("BZh9 not bzip2\n"), std::string()}) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const int saved = ::dup(STDIN_FILENO);
    ::dup2(fds[0], STDIN_FILENO);
    ::close(fds[0]);
    std::thread writer([&] {
      const std::string bytes = input;
      std::size_t off = 0;
      while (off < bytes.size()) off += static_cast<std::size_t>(::write(fds[1], bytes.data() + off, bytes.size() - off));
      ::close(fds[1]);
    });
    std::unique_ptr<Source> source = open_decompressing(FileSource::standard_input("(standard input)"));
    EXPECT_EQ(read_all(*source, 1000), input);
    writer.join();
    source.reset();
    ::dup2(saved, STDIN_FILENO);
    ::close(saved);
  }
}

TEST(DecompressingSource, ErrorComesAfterTheBytesBeforeItAndNamesFileAndOffset) {
  TempDir dir;
  const std::string text = text_of(20000);
  for (const auto& [tool, format] : kTools) {
    const std::string whole = pack(dir, tool, text);
    std::string bad = pack(dir, tool, "more\n");
    // After a gzip or bzip2 stream, bytes without the magic are trailing garbage (ignored,
    // as gzip -d ignores them): there the header after the magic (and bzip2's level) is damaged.
    const std::size_t at = std::string(tool) == "gzip" ? 2 : std::string(tool) == "bzip2" ? 4 : 0;
    bad[at] = static_cast<char>(~bad[at]);
    const std::string path = dir.write("f", whole + bad);
    std::unique_ptr<Source> source = open_decompressing(FileSource::open(path));
    std::string got;
    std::string buffer(65536, '\0');
    try {
      for (;;) {
        const std::size_t n = source->read(std::span<char>(buffer.data(), buffer.size()));
        ASSERT_NE(n, 0u) << tool << ": the input ended without the error";
        got.append(buffer.data(), n);
      }
    } catch (const SourceError& e) {
      EXPECT_EQ(e.name(), path);
      EXPECT_NE(std::string(e.what()).find(path + ": corrupt " + tool + " data at byte "), std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(got == text) << tool << ": " << got.size() << " of " << text.size() << " bytes before the error";

    const std::string cut = dir.write("cut", whole.substr(0, whole.size() - 5));
    std::unique_ptr<Source> truncated = open_decompressing(FileSource::open(cut));
    try {
      read_all(*truncated, 65536);
      ADD_FAILURE() << tool << ": a truncated stream read to its end";
    } catch (const SourceError& e) {
      EXPECT_NE(std::string(e.what()).find("truncated " + tool + " data: unexpected end of input at byte " +
                                           std::to_string(whole.size() - 5)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(DecompressingSource, DecoderWaitsForItsReader) {
  TempDir dir;
  const std::string bomb = dir.file("bomb.zst");
  command_output("head -c 1G /dev/zero | zstd -q -1 -c > " + shell_quote(bomb));
  const long before = memory_in_use_kib();
  auto start = std::chrono::steady_clock::now();
  {
    std::unique_ptr<Source> source = open_decompressing(FileSource::open(bomb));
    char byte;
    ASSERT_EQ(source->read(std::span<char>(&byte, 1)), 1u);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_LT(memory_in_use_kib() - before, 64 * 1024) << "the decoder ran ahead of its reader";
  }  // closing stops the decoder at once, not after 1 GiB
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace gpufilter::test
