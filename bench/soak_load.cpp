// gpufilter-soak-load: the load generator of bench/soak.sh (a soak test of gpufilterd,
// issue 8; not in CI). Two modes:
//
//   gpufilter-soak-load run --corpus DIR --seconds S --rate BYTES[K|M|G] [--file PATH]...
//       [--tcp HOST:PORT --connections M] [--udp HOST:PORT] [--file-share F]
//       [--udp-share F] [--marker-every K] [--marker TEXT] [--rotate-every S]
//     Writes whole lines drawn from the Loghub logs in DIR (*.log) for S seconds at RATE
//     bytes per second in all: the share F of it appended to the followed files (each
//     renamed to PATH.1 and re-created every --rotate-every seconds, as logrotate's
//     rename-and-create does), the UDP share as one line per datagram, the rest over M TCP
//     connections. Every K-th line of each file and connection is a marker line holding
//     TEXT (which no Loghub line holds), so that a rule on TEXT with threshold count 1 and
//     no cooldown must alert exactly once per marker. UDP carries no markers: a datagram
//     may be dropped (and counted) by design. Prints one JSON object at the end: what was
//     written, per kind, and the markers (the alerts expected); progress on stderr.
//
//   gpufilter-soak-load metrics HOST:PORT
//     Prints gpufilterd's /metrics page (GET over plain HTTP/1.0), so that the script
//     needs neither curl nor wget on the machine it runs on.
//
// The rate is held by pacing each writer to its share (sleeping when ahead); a writer
// that the daemon holds back (TCP backpressure) falls behind, and the summary reports the
// rate achieved. K, M and G are powers of 1000 (100M is 100 MB/s).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "gpufilter-soak-load: %s\n", message.c_str());
  std::exit(2);
}

double parse_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  const std::string unit(end);
  if (unit == "K" || unit == "k") v *= 1e3;
  else if (unit == "M") v *= 1e6;
  else if (unit == "G") v *= 1e9;
  else if (!unit.empty()) die("bad size: " + text);
  if (!(v > 0)) die("bad size: " + text);
  return v;
}

struct HostPort {
  std::string host;
  std::string port;
};

HostPort parse_host_port(const std::string& text) {
  std::string t = text;
  for (const char* scheme : {"tcp://", "udp://", "http://"}) {
    if (t.rfind(scheme, 0) == 0) t = t.substr(std::strlen(scheme));
  }
  const std::size_t colon = t.rfind(':');
  if (colon == std::string::npos) die("expected HOST:PORT, not " + text);
  HostPort hp{t.substr(0, colon), t.substr(colon + 1)};
  if (hp.host.size() > 2 && hp.host.front() == '[') hp.host = hp.host.substr(1, hp.host.size() - 2);
  return hp;
}

int connect_to(const HostPort& to, int type) {
  addrinfo hints{};
  hints.ai_socktype = type;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(to.host.c_str(), to.port.c_str(), &hints, &found); rc != 0) {
    die(to.host + ":" + to.port + ": " + ::gai_strerror(rc));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) die("cannot connect to " + to.host + ":" + to.port + ": " + std::strerror(errno));
  return fd;
}

// ---------------------------------------------------------------------------------------
// The lines

// Every non-empty line of DIR/*.log (sorted by name), without '\r', minus any holding the
// marker or a NUL byte.
std::vector<std::string> load_pool(const std::string& dir, const std::string& marker) {
  std::vector<fs::path> logs;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".log") logs.push_back(entry.path());
  }
  std::sort(logs.begin(), logs.end());
  std::vector<std::string> pool;
  for (const fs::path& log : logs) {
    std::ifstream in(log, std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line.find('\0') != std::string::npos || line.find(marker) != std::string::npos) continue;
      pool.push_back(line);
    }
  }
  if (pool.empty()) die("no lines in " + dir + "/*.log");
  return pool;
}

// The lines of one writer: the pool from its own starting point, every K-th a marker.
class Lines {
 public:
  Lines(const std::vector<std::string>& pool, std::size_t start, std::string tag, std::uint64_t marker_every,
        const std::string& marker)
      : pool_(pool), next_(start % pool.size()), tag_(std::move(tag)), every_(marker_every), marker_(marker) {}

  // Appends one line and its '\n' to `out`; true when it was a marker line.
  bool append(std::string& out) {
    ++count_;
    if (every_ > 0 && count_ % every_ == 0) {
      out += "soak ";
      out += marker_;
      out += " writer=" + tag_ + " n=" + std::to_string(count_) + '\n';
      return true;
    }
    out += pool_[next_];
    out += '\n';
    next_ = next_ + 1 == pool_.size() ? 0 : next_ + 1;
    return false;
  }
  // Takes back the last append() (a datagram that could not be sent).
  void undo() { --count_; }

 private:
  const std::vector<std::string>& pool_;
  std::size_t next_;
  std::string tag_;
  std::uint64_t every_;
  std::string marker_;
  std::uint64_t count_ = 0;
};

// Counts of one writer, read by the progress report while it runs.
struct Counts {
  std::atomic<std::uint64_t> bytes{0}, lines{0}, markers{0}, rotations{0};
};

// Sleeps while `sent` bytes are ahead of `rate` bytes/s since `start`; false at `end`.
bool pace(Clock::time_point start, Clock::time_point end, double rate, std::uint64_t sent) {
  const auto due = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(static_cast<double>(sent) / rate));
  if (due > Clock::now()) std::this_thread::sleep_until(std::min(due, end));
  return Clock::now() < end;
}

void write_all(int fd, const std::string& data, const std::string& what) {
  std::size_t at = 0;
  while (at < data.size()) {
    const ssize_t n = ::write(fd, data.data() + at, data.size() - at);
    if (n < 0) {
      if (errno == EINTR) continue;
      die(what + ": " + std::strerror(errno));
    }
    at += static_cast<std::size_t>(n);
  }
}

// A block size that keeps each writer at about 100 writes a second or more.
std::size_t block_for(double rate) {
  return std::clamp<std::size_t>(static_cast<std::size_t>(rate / 100), 4096, 256u << 10);
}

// Appends to `path`; renames it to PATH.1 and creates it anew every `rotate` seconds.
void file_writer(const std::string& path, Lines lines, double rate, double rotate, Clock::time_point start,
                 Clock::time_point end, Counts& counts) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) die(path + ": " + std::strerror(errno));
  const std::size_t block = block_for(rate);
  std::string out;
  std::uint64_t sent = 0;
  auto next_rotation = rotate > 0 ? start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rotate))
                                  : Clock::time_point::max();
  while (pace(start, end, rate, sent)) {
    if (Clock::now() >= next_rotation) {
      // rename-and-create: the follower reads what the old file holds, then the new one.
      if (::rename(path.c_str(), (path + ".1").c_str()) != 0) die("rename " + path + ": " + std::strerror(errno));
      ::close(fd);
      fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) die(path + ": " + std::strerror(errno));
      counts.rotations.fetch_add(1);
      next_rotation += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rotate));
    }
    out.clear();
    std::uint64_t n = 0, markers = 0;
    while (out.size() < block) {
      markers += lines.append(out) ? 1 : 0;
      ++n;
    }
    write_all(fd, out, path);
    sent += out.size();
    counts.bytes.fetch_add(out.size());
    counts.lines.fetch_add(n);
    counts.markers.fetch_add(markers);
  }
  ::close(fd);
}

void tcp_writer(const HostPort& to, Lines lines, double rate, Clock::time_point start, Clock::time_point end,
                Counts& counts) {
  const int fd = connect_to(to, SOCK_STREAM);
  const std::size_t block = block_for(rate);
  std::string out;
  std::uint64_t sent = 0;
  while (pace(start, end, rate, sent)) {
    out.clear();
    std::uint64_t n = 0, markers = 0;
    while (out.size() < block) {
      markers += lines.append(out) ? 1 : 0;
      ++n;
    }
    std::size_t at = 0;
    while (at < out.size()) {
      const ssize_t w = ::send(fd, out.data() + at, out.size() - at, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        die("tcp " + to.host + ":" + to.port + ": " + std::strerror(errno));
      }
      at += static_cast<std::size_t>(w);
    }
    sent += out.size();
    counts.bytes.fetch_add(out.size());
    counts.lines.fetch_add(n);
    counts.markers.fetch_add(markers);
  }
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

// One line per datagram; a datagram the kernel refuses (ENOBUFS) is not counted.
void udp_writer(const HostPort& to, Lines lines, double rate, Clock::time_point start, Clock::time_point end,
                Counts& counts) {
  const int fd = connect_to(to, SOCK_DGRAM);
  std::string out;
  std::uint64_t sent = 0;
  while (pace(start, end, rate, sent)) {
    for (int burst = 0; burst < 64; ++burst) {
      out.clear();
      lines.append(out);
      const ssize_t w = ::send(fd, out.data(), out.size(), 0);
      if (w != static_cast<ssize_t>(out.size())) {
        lines.undo();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        break;
      }
      sent += out.size();
      counts.bytes.fetch_add(out.size());
      counts.lines.fetch_add(1);
    }
  }
  ::close(fd);
}

// "f3": a writer's name in its marker lines. (Not "f" + to_string(i): GCC 12 warns about
// that expression with a false -Wrestrict.)
std::string tag(char kind, std::size_t i) {
  std::string t(1, kind);
  t += std::to_string(i);
  return t;
}

int run(int argc, char** argv) {
  std::string corpus, marker = "GPUFSOAKMARK", tcp, udp;
  std::vector<std::string> files;
  double seconds = 3600, rate = 100e6, file_share = 0.5, udp_share = 0.02, rotate = 30;
  std::uint64_t marker_every = 10000;
  int connections = 4;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) die("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--corpus") corpus = v;
    else if (a == "--seconds") seconds = std::stod(v);
    else if (a == "--rate") rate = parse_size(v);
    else if (a == "--file") files.push_back(v);
    else if (a == "--tcp") tcp = v;
    else if (a == "--connections") connections = std::stoi(v);
    else if (a == "--udp") udp = v;
    else if (a == "--file-share") file_share = std::stod(v);
    else if (a == "--udp-share") udp_share = std::stod(v);
    else if (a == "--marker-every") marker_every = std::stoull(v);
    else if (a == "--marker") marker = v;
    else if (a == "--rotate-every") rotate = std::stod(v);
    else die("unknown option " + a);
  }
  if (corpus.empty()) die("--corpus DIR is required");
  if (files.empty()) file_share = 0;
  if (udp.empty()) udp_share = 0;
  if (udp_share <= 0) udp.clear();  // no share, no writer (pacing at rate 0 means never)
  if (tcp.empty() || connections <= 0) {
    connections = 0;
    if (files.empty() && udp.empty()) die("nothing to write to (--file, --tcp, --udp)");
  }
  double tcp_share = 1 - file_share - udp_share;
  if (connections == 0) {
    // No TCP: its share goes to the files (or UDP alone).
    if (!files.empty()) file_share += tcp_share;
    else udp_share = 1;
    tcp_share = 0;
  }
  if (file_share < 0 || udp_share < 0 || tcp_share < -1e-9) die("the shares exceed 1");
  const std::vector<std::string> pool = load_pool(corpus, marker);
  const std::size_t writers = files.size() + static_cast<std::size_t>(connections) + (udp.empty() ? 0 : 1);
  std::vector<std::unique_ptr<Counts>> file_counts, tcp_counts;
  Counts udp_counts;
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::size_t w = 0;
  const auto start_of = [&](std::size_t writer) { return writer * pool.size() / std::max<std::size_t>(writers, 1); };
  for (std::size_t i = 0; i < files.size(); ++i, ++w) {
    file_counts.push_back(std::make_unique<Counts>());
    threads.emplace_back(file_writer, files[i], Lines(pool, start_of(w), tag('f', i), marker_every, marker),
                         rate * file_share / static_cast<double>(files.size()), rotate, start, end,
                         std::ref(*file_counts.back()));
  }
  for (int i = 0; i < connections; ++i, ++w) {
    tcp_counts.push_back(std::make_unique<Counts>());
    threads.emplace_back(tcp_writer, parse_host_port(tcp),
                         Lines(pool, start_of(w), tag('t', static_cast<std::size_t>(i)), marker_every, marker),
                         rate * tcp_share / connections, start, end, std::ref(*tcp_counts.back()));
  }
  if (!udp.empty()) {
    threads.emplace_back(udp_writer, parse_host_port(udp), Lines(pool, start_of(w), "u", 0, marker), rate * udp_share,
                         start, end, std::ref(udp_counts));
  }
  const auto total = [](const std::vector<std::unique_ptr<Counts>>& v, std::atomic<std::uint64_t> Counts::*field) {
    std::uint64_t sum = 0;
    for (const auto& c : v) sum += (c.get()->*field).load();
    return sum;
  };
  const auto all_bytes = [&] {
    return total(file_counts, &Counts::bytes) + total(tcp_counts, &Counts::bytes) + udp_counts.bytes.load();
  };
  // Progress every 10 s, on stderr.
  auto next_report = start + std::chrono::seconds(10);
  std::uint64_t last_bytes = 0;
  auto last_time = start;
  while (Clock::now() < end) {
    std::this_thread::sleep_until(std::min(next_report, end));
    if (Clock::now() < next_report) break;
    const std::uint64_t bytes = all_bytes();
    const double dt = std::chrono::duration<double>(Clock::now() - last_time).count();
    std::fprintf(stderr, "soak-load: %6.0f s  %12llu bytes  %8.2f MB/s now\n",
                 std::chrono::duration<double>(Clock::now() - start).count(), static_cast<unsigned long long>(bytes),
                 static_cast<double>(bytes - last_bytes) / dt / 1e6);
    last_bytes = bytes;
    last_time = Clock::now();
    next_report += std::chrono::seconds(10);
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const std::uint64_t bytes = all_bytes();
  const std::uint64_t file_lines = total(file_counts, &Counts::lines), tcp_lines = total(tcp_counts, &Counts::lines);
  const std::uint64_t markers = total(file_counts, &Counts::markers) + total(tcp_counts, &Counts::markers);
  std::printf(
      "{\"seconds\":%.3f,\"bytes\":%llu,\"mb_per_s\":%.3f,\"lines\":%llu,\"file_lines\":%llu,\"tcp_lines\":%llu,"
      "\"udp_lines\":%llu,\"file_bytes\":%llu,\"tcp_bytes\":%llu,\"udp_bytes\":%llu,\"markers\":%llu,\"rotations\":%llu,"
      "\"files\":%zu,\"connections\":%d,\"pool_lines\":%zu}\n",
      elapsed, static_cast<unsigned long long>(bytes), static_cast<double>(bytes) / elapsed / 1e6,
      static_cast<unsigned long long>(file_lines + tcp_lines + udp_counts.lines.load()),
      static_cast<unsigned long long>(file_lines), static_cast<unsigned long long>(tcp_lines),
      static_cast<unsigned long long>(udp_counts.lines.load()),
      static_cast<unsigned long long>(total(file_counts, &Counts::bytes)),
      static_cast<unsigned long long>(total(tcp_counts, &Counts::bytes)),
      static_cast<unsigned long long>(udp_counts.bytes.load()), static_cast<unsigned long long>(markers),
      static_cast<unsigned long long>(total(file_counts, &Counts::rotations)), files.size(), connections, pool.size());
  return 0;
}

// GET /metrics over HTTP/1.0; the body on stdout.
int metrics(const std::string& address) {
  const int fd = connect_to(parse_host_port(address), SOCK_STREAM);
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: " + address + "\r\n\r\n";
  write_all(fd, request, address);
  std::string response;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    response.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const std::size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos || response.find(" 200 ") > body) {
    die(address + "/metrics: no 200 answer");
  }
  std::fwrite(response.data() + body + 4, 1, response.size() - body - 4, stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "run") return run(argc, argv);
    if (mode == "metrics" && argc == 3) return metrics(argv[2]);
  } catch (const std::exception& e) {
    die(e.what());
  }
  std::fprintf(stderr,
               "usage: gpufilter-soak-load run --corpus DIR --seconds S --rate BYTES[K|M|G] [--file PATH]...\n"
               "           [--tcp HOST:PORT --connections M] [--udp HOST:PORT] [--file-share F] [--udp-share F]\n"
               "           [--marker-every K] [--marker TEXT] [--rotate-every S]\n"
               "       gpufilter-soak-load metrics HOST:PORT\n");
  return 2;
}
