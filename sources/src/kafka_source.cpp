// KafkaSource (kafka_source.hpp): a consumer group's partitions as line streams, with
// offsets stored only once what their records produced is settled.
#include "gpufilter/sources/kafka_source.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <string_view>

#include <librdkafka/rdkafkacpp.h>
#include <nlohmann/json.hpp>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

namespace {

using Clock = std::chrono::steady_clock;

// Delivery marks kept per partition while outputs lag: beyond it the newest is replaced
// by a later one (a later mark only waits longer: never too early).
constexpr std::size_t kMaxMarks = 64;
// How long a revoked partition waits for its last records to be acknowledged and settled
// before it commits what is and goes (its new owner re-reads the rest).
constexpr auto kRevokeWait = std::chrono::milliseconds(1000);
// How long the last commit may wait for a rebalance that refuses it.
constexpr auto kCloseWait = std::chrono::milliseconds(5000);
// A record's fields (KafkaConfig::record_fields): its producer chooses their sizes. (headers()
// is not const in librdkafka's C++ API.)
constexpr std::size_t kMaxHeaders = 32;
constexpr std::size_t kMaxFieldBytes = 1024;

std::shared_ptr<const RecordFields> fields_of(RdKafka::Message& m) {
  auto f = std::make_shared<RecordFields>();
  const auto cut = [](const void* data, std::size_t size) {
    return std::string(static_cast<const char*>(data), std::min(size, kMaxFieldBytes));
  };
  f->values.emplace_back("kafka.topic", m.topic_name());
  f->values.emplace_back("kafka.partition", std::to_string(m.partition()));
  f->values.emplace_back("kafka.offset", std::to_string(m.offset()));
  if (m.key_pointer() != nullptr) f->values.emplace_back("kafka.key", cut(m.key_pointer(), m.key_len()));
  if (RdKafka::Headers* headers = m.headers()) {
    std::size_t n = 0;
    for (const RdKafka::Headers::Header& h : headers->get_all()) {
      if (n++ == kMaxHeaders) break;
      std::string name = "kafka.header.";  // appended: GCC 12's -Wrestrict misreads "..." + key
      name += h.key();
      const bool seen = std::any_of(f->values.begin(), f->values.end(), [&](const auto& v) { return v.first == name; });
      if (!seen) f->values.emplace_back(name, h.value() == nullptr ? std::string() : cut(h.value(), h.value_size()));
    }
  }
  return f;
}

void set(RdKafka::Conf& conf, const std::string& key, const std::string& value, const std::string& where) {
  std::string why;
  if (conf.set(key, value, why) != RdKafka::Conf::CONF_OK) throw ConfigError(where + key + ": " + why);
}

// Ours first, then the user's: a user's setting wins over ours.
std::unique_ptr<RdKafka::Conf> consumer_conf(const KafkaConfig& c) {
  if (c.brokers.empty()) throw ConfigError("kafka: brokers: none given");
  if (c.topics.empty()) throw ConfigError("kafka: topics: none given");
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  set(*conf, "bootstrap.servers", c.brokers, "kafka: ");
  set(*conf, "group.id", c.group_id.empty() ? "gpufilter-" + std::to_string(::getpid()) : c.group_id, "kafka: ");
  set(*conf, "enable.auto.commit", c.group_id.empty() ? "false" : "true", "kafka: ");
  set(*conf, "enable.auto.offset.store", "false", "kafka: ");
  set(*conf, "partition.assignment.strategy", "cooperative-sticky", "kafka: ");
  set(*conf, "auto.offset.reset", "earliest", "kafka: ");
  set(*conf, "statistics.interval.ms", "1000", "kafka: ");
  set(*conf, "client.id", "gpufilter", "kafka: ");
  for (const auto& [key, value] : c.settings) {
    if (key == "enable.auto.offset.store")
      throw ConfigError("kafka: settings: enable.auto.offset.store: gpufilter stores offsets itself (at least once)");
    set(*conf, key, value, "kafka: settings: ");
  }
  for (const auto& [key, value] : c.secrets) {
    std::string why;
    if (conf->set(key, value, why) != RdKafka::Conf::CONF_OK)
      throw ConfigError("kafka: secrets_file: " + key + ": refused by librdkafka (an unknown property or a bad value)");
  }
  return conf;
}

std::string joined(const std::vector<std::string>& topics) {
  std::string s;
  for (const std::string& t : topics) s += (s.empty() ? "" : ",") + t;
  return s;
}

// The group is rebalancing (another member joined or left): a commit is refused until
// this member has taken part, and then succeeds.
bool rebalancing(RdKafka::ErrorCode err) {
  return err == RdKafka::ERR_REBALANCE_IN_PROGRESS || err == RdKafka::ERR_ILLEGAL_GENERATION ||
         err == RdKafka::ERR__ASSIGNMENT_LOST;
}

}  // namespace

void check_kafka(const KafkaConfig& config) { (void)consumer_conf(config); }

namespace {

std::vector<std::string> split(std::string_view text, char at) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = text.find(at, begin);
    parts.emplace_back(text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

}  // namespace

bool kafka_secret_property(const std::string& key) {
  for (const char* word : {"password", "secret", "token", "ssl.key", "keystore", "sasl.oauthbearer", "keytab", "jaas"})
    if (key.find(word) != std::string::npos) return true;
  return false;
}

KafkaConfig parse_kafka_url(const std::string& url, std::size_t max_line_bytes) {
  const auto fail = [&](const std::string& why) -> ConfigError {
    return ConfigError("--kafka " + url.substr(0, url.find('?')) + ": " + why);
  };
  constexpr std::string_view scheme = "kafka://";
  if (!url.starts_with(scheme)) throw fail("expected kafka://HOST:PORT/TOPIC[?group=NAME]");
  const std::string_view rest = std::string_view(url).substr(scheme.size());
  const std::size_t slash = rest.find('/');
  const std::size_t query = rest.find('?');
  if (slash == std::string_view::npos || slash == 0 || (query != std::string_view::npos && query < slash))
    throw fail("expected kafka://HOST:PORT/TOPIC[?group=NAME]");
  KafkaConfig c;
  c.max_line_bytes = max_line_bytes;
  c.brokers = std::string(rest.substr(0, slash));
  const std::string_view topics = rest.substr(slash + 1, query == std::string_view::npos ? query : query - slash - 1);
  for (const std::string& t : split(topics, ','))
    if (t.empty()) throw fail("names an empty topic");
    else c.topics.push_back(t);
  if (query != std::string_view::npos) {
    for (const std::string& pair : split(rest.substr(query + 1), '&')) {
      const std::size_t eq = pair.find('=');
      if (eq == std::string::npos || eq == 0) throw fail("expected KEY=VALUE in the query, not \"" + pair + "\"");
      const std::string key = pair.substr(0, eq);
      if (kafka_secret_property(key)) throw fail(key + ": secrets do not belong on a command line");
      if (key == "group") c.group_id = pair.substr(eq + 1);
      else c.settings.emplace_back(key, pair.substr(eq + 1));
    }
  }
  try {
    check_kafka(c);
  } catch (const ConfigError& e) {
    std::string why = e.what();
    if (why.starts_with("kafka: ")) why.erase(0, 7);
    throw fail(why);
  }
  return c;
}

// One assigned partition: its stream, where its next line goes, and what waits to be stored.
struct Partition {
  StreamId stream = kNoStream;
  std::uint64_t bytes = 0;  // the stream offset after the last line handed on
  std::uint64_t skipped = 0;  // over-long lines not yet told to the channel (with the next line)
  // Per record handed on: (stream offset after its lines, Kafka offset after it).
  std::deque<std::pair<std::uint64_t, std::int64_t>> ends;
  std::uint64_t marked = 0;  // the acknowledgement last marked
  // (acknowledged stream offset, the gate's mark taken after it was read)
  std::deque<std::pair<std::uint64_t, DeliveryGate::Mark>> marks;
  std::int64_t settled = -1;  // the Kafka offset settled (to store), -1 none yet
  std::int64_t stored = -1;   // the Kafka offset stored
  bool closed = false;        // its stream is closed (the source ended before the revocation)
};

struct KafkaSource::Impl final : RdKafka::RebalanceCb, RdKafka::EventCb, RdKafka::OffsetCommitCb {
  KafkaSource& self;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
  std::map<std::pair<std::string, std::int32_t>, Partition> partitions;
  std::mutex mutex;
  std::condition_variable space_cv;
  bool space = false;
  Clock::time_point next_store = Clock::now();
  std::atomic<std::uint64_t> records{0}, bytes{0}, too_long{0}, rebalances{0}, commits{0}, commit_failures{0};
  std::atomic<std::int64_t> lag{0};
  std::atomic<std::uint64_t> assigned{0};
  bool fatal = false;
  std::atomic<bool> abandon{false};  // the destructor: hand nothing more on
  bool closing = false;              // close(): partitions assigned now are not read
  std::string terminated;            // a record's value with the '\n' it lacked
  RdKafka::ErrorCode last_commit_error = RdKafka::ERR_NO_ERROR;
  // close(): the settled offsets of partitions a rebalance revoked while their commit was
  // refused (librdkafka forgets what was stored for them), committed by name once the
  // group lets this member commit again.
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> unsaved;

  explicit Impl(KafkaSource& s) : self(s) {}

  // ---- librdkafka's callbacks, on the consumer thread (inside consume() and commits)
  void rebalance_cb(RdKafka::KafkaConsumer* c, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& list) override;
  void event_cb(RdKafka::Event& event) override;
  void offset_commit_cb(RdKafka::ErrorCode err, std::vector<RdKafka::TopicPartition*>& offsets) override;

  void assign(std::vector<RdKafka::TopicPartition*>& list);
  void revoke(std::vector<RdKafka::TopicPartition*>& list);
  void record(RdKafka::Message& m);
  void hand_on(Partition& p, std::string_view lines, const std::shared_ptr<const RecordFields>& fields);
  void wait_while_congested();
  void mark_and_settle(Partition& p);
  void store(bool all);
  bool commit();
  bool commit_unsaved();
  void close_streams() noexcept;
  void statistics(const std::string& json);
};

void KafkaSource::Impl::rebalance_cb(RdKafka::KafkaConsumer* c, RdKafka::ErrorCode err,
                                     std::vector<RdKafka::TopicPartition*>& list) {
  const bool cooperative = c->rebalance_protocol() == "COOPERATIVE";
  ++rebalances;
  if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
    assign(list);
    std::unique_ptr<RdKafka::Error> e(cooperative ? c->incremental_assign(list) : nullptr);
    if (!cooperative) c->assign(list);
    if (e) self.notices_.notice(self.name_ + ": assign: " + e->str());
  } else {
    revoke(list);
    std::unique_ptr<RdKafka::Error> e(cooperative ? c->incremental_unassign(list) : nullptr);
    if (!cooperative) c->unassign();
    if (e) self.notices_.notice(self.name_ + ": unassign: " + e->str());
  }
  assigned = partitions.size();
}

void KafkaSource::Impl::assign(std::vector<RdKafka::TopicPartition*>& list) {
  if (closing) return;
  for (RdKafka::TopicPartition* tp : list) {
    Partition& p = partitions[{tp->topic(), tp->partition()}];
    if (p.stream != kNoStream) continue;
    p.stream = self.channel_.new_stream_id();
    self.channel_.open(p.stream, "kafka:" + tp->topic() + "/" + std::to_string(tp->partition()), kNoStream,
                       self.config_.origin);
  }
}

// What is settled is committed now (waiting a little for the scan and the outputs); the
// rest is its new owner's to read again.
void KafkaSource::Impl::revoke(std::vector<RdKafka::TopicPartition*>& list) {
  const Clock::time_point until = Clock::now() + kRevokeWait;
  for (;;) {
    bool all = true;
    for (RdKafka::TopicPartition* tp : list) {
      auto it = partitions.find({tp->topic(), tp->partition()});
      if (it == partitions.end()) continue;
      mark_and_settle(it->second);
      all = all && it->second.ends.empty();
    }
    if (all || Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  store(true);
  const bool committed = commit();
  for (RdKafka::TopicPartition* tp : list) {
    auto it = partitions.find({tp->topic(), tp->partition()});
    if (it == partitions.end()) continue;
    if (closing && !committed && it->second.settled >= 0) unsaved[it->first] = it->second.settled;
    if (!it->second.closed) self.channel_.close(it->second.stream);
    self.channel_.forget(it->second.stream);
    partitions.erase(it);
  }
}

void KafkaSource::Impl::event_cb(RdKafka::Event& event) {
  switch (event.type()) {
    case RdKafka::Event::EVENT_STATS: statistics(event.str()); break;
    case RdKafka::Event::EVENT_ERROR:
      // Brokers going away and coming back are retried by librdkafka: only a fatal error
      // ends the source.
      if (event.fatal()) fatal = true;
      if (event.fatal() || event.err() == RdKafka::ERR__ALL_BROKERS_DOWN)
        self.notices_.notice(self.name_ + ": " + RdKafka::err2str(event.err()) + ": " + event.str());
      break;
    default: break;
  }
}

void KafkaSource::Impl::offset_commit_cb(RdKafka::ErrorCode err, std::vector<RdKafka::TopicPartition*>&) {
  // Nothing to commit is not a failure.
  if (err == RdKafka::ERR_NO_ERROR || err == RdKafka::ERR__NO_OFFSET) {
    if (err == RdKafka::ERR_NO_ERROR) ++commits;
    return;
  }
  ++commit_failures;
  self.notices_.notice(self.name_ + ": offset commit failed: " + RdKafka::err2str(err));
}

// Lag: the sum over the assigned partitions of consumer_lag from librdkafka's statistics.
void KafkaSource::Impl::statistics(const std::string& json) {
  try {
    const nlohmann::json stats = nlohmann::json::parse(json);
    std::int64_t sum = 0;
    // value() returns a copy: kept in named objects, as items() only refers to its json.
    const nlohmann::json topics = stats.value("topics", nlohmann::json::object());
    for (const auto& [topic, t] : topics.items()) {
      const nlohmann::json parts = t.value("partitions", nlohmann::json::object());
      for (const auto& [id, part] : parts.items()) {
        if (id == "-1" || part.value("fetch_state", "") == "none") continue;
        // consumer_lag counts from the committed offset (none before the first commit):
        // from what was read instead, the partition's start when nothing was.
        const std::int64_t end = part.value("hi_offset", std::int64_t{-1});
        const std::int64_t read = std::max({part.value("app_offset", std::int64_t{-1}),
                                            part.value("committed_offset", std::int64_t{-1}),
                                            part.value("lo_offset", std::int64_t{0})});
        if (end >= 0) sum += std::max<std::int64_t>(end - read, 0);
      }
    }
    lag = sum;
  } catch (const std::exception&) {
    // A statistics document we cannot read changes nothing.
  }
}

void KafkaSource::Impl::record(RdKafka::Message& m) {
  auto it = partitions.find({m.topic_name(), m.partition()});
  // Revoked meanwhile, or read while closing: left to the partition's next owner.
  if (it == partitions.end() || closing) return;
  Partition& p = it->second;
  wait_while_congested();
  ++records;
  if (m.payload() != nullptr) {
    const std::shared_ptr<const RecordFields> fields = self.config_.record_fields ? fields_of(m) : nullptr;
    std::string_view value(static_cast<const char*>(m.payload()), m.len());
    bytes += value.size();
    if (value.empty() || value.back() != '\n') {
      terminated.assign(value).push_back('\n');  // reused: no allocation per record
      value = terminated;
    }
    // Whole lines only; one over the bound is skipped and counted, as the readers do.
    std::size_t begin = 0;
    while (begin < value.size()) {
      const std::size_t end = value.find('\n', begin) + 1;
      if (end - begin > self.config_.max_line_bytes) {
        ++p.skipped;
        ++too_long;
      } else {
        hand_on(p, value.substr(begin, end - begin), fields);
      }
      begin = end;
    }
  }
  p.ends.emplace_back(p.bytes, m.offset() + 1);
}

// Waits for room as long as it takes, unless stopping (then what is held still goes).
void KafkaSource::Impl::hand_on(Partition& p, std::string_view lines, const std::shared_ptr<const RecordFields>& fields) {
  for (;;) {
    {
      std::lock_guard lock(mutex);
      space = false;
    }
    const std::size_t n = self.channel_.append(p.stream, p.bytes, lines, p.skipped, fields);
    p.bytes += n;
    lines.remove_prefix(n);
    if (n > 0) p.skipped = 0;
    if (lines.empty() || abandon.load()) return;
    std::unique_lock lock(mutex);
    space_cv.wait_for(lock, std::chrono::milliseconds(100), [this] { return space; });
  }
}

// The outputs are behind: wait for them (storing what settles meanwhile), unless stopping.
void KafkaSource::Impl::wait_while_congested() {
  const DeliveryGate* gate = self.config_.gate.get();
  while (gate != nullptr && gate->congested() && !self.stopping_.load() && !abandon.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store(false);
  }
}

// Marks the latest acknowledgement with the gate's mark, then settles every mark the gate
// says is delivered: the partition's settled offset is the Kafka offset after the last
// record wholly acknowledged by then.
void KafkaSource::Impl::mark_and_settle(Partition& p) {
  const std::uint64_t acked = self.channel_.acknowledged(p.stream).value_or(0);
  if (acked > p.marked) {
    DeliveryGate::Mark mark = self.config_.gate ? self.config_.gate->mark() : DeliveryGate::Mark{};
    if (p.marks.size() >= kMaxMarks) p.marks.pop_back();
    p.marks.emplace_back(acked, std::move(mark));
    p.marked = acked;
  }
  while (!p.marks.empty() && (!self.config_.gate || self.config_.gate->settled(p.marks.front().second))) {
    const std::uint64_t through = p.marks.front().first;
    p.marks.pop_front();
    while (!p.ends.empty() && p.ends.front().first <= through) {
      p.settled = p.ends.front().second;
      p.ends.pop_front();
    }
  }
}

// offsets_store() for every partition whose settled offset moved; librdkafka commits them.
void KafkaSource::Impl::store(bool all) {
  const Clock::time_point now = Clock::now();
  if (!all && now < next_store) return;
  next_store = now + std::chrono::milliseconds(100);
  std::vector<RdKafka::TopicPartition*> list;
  for (auto& [key, p] : partitions) {
    mark_and_settle(p);
    if (p.settled > p.stored) list.push_back(RdKafka::TopicPartition::create(key.first, key.second, p.settled));
  }
  if (list.empty()) return;
  const RdKafka::ErrorCode err = consumer->offsets_store(list);
  for (RdKafka::TopicPartition* tp : list) {
    auto it = partitions.find({tp->topic(), tp->partition()});
    if (err == RdKafka::ERR_NO_ERROR && it != partitions.end()) it->second.stored = tp->offset();
  }
  RdKafka::TopicPartition::destroy(list);
  if (err != RdKafka::ERR_NO_ERROR) self.notices_.notice(self.name_ + ": offsets not stored: " + RdKafka::err2str(err));
}

// The stored offsets, committed now (a revocation, the close); a failure is counted and told.
bool KafkaSource::Impl::commit() {
  if (self.config_.group_id.empty()) return true;
  const RdKafka::ErrorCode err = consumer->commitSync();
  if (err == RdKafka::ERR_NO_ERROR || err == RdKafka::ERR__NO_OFFSET) return true;
  ++commit_failures;
  // A rebalance at the close is waited out (close()): not worth a notice yet.
  if (!closing || !rebalancing(err))
    self.notices_.notice(self.name_ + ": offset commit failed: " + RdKafka::err2str(err));
  last_commit_error = err;
  return false;
}

// unsaved, committed by name (their partitions may be another member's now: its commits
// then follow ours).
bool KafkaSource::Impl::commit_unsaved() {
  if (unsaved.empty()) return true;
  std::vector<RdKafka::TopicPartition*> list;
  for (const auto& [key, offset] : unsaved) list.push_back(RdKafka::TopicPartition::create(key.first, key.second, offset));
  RdKafka::ErrorCode err = consumer->commitSync(list);
  for (const RdKafka::TopicPartition* tp : list)
    if (err == RdKafka::ERR_NO_ERROR && tp->err() != RdKafka::ERR_NO_ERROR) err = tp->err();
  RdKafka::TopicPartition::destroy(list);
  if (err == RdKafka::ERR_NO_ERROR) {
    unsaved.clear();
    return true;
  }
  ++commit_failures;
  last_commit_error = err;
  return false;
}

void KafkaSource::Impl::close_streams() noexcept {
  for (auto& [key, p] : partitions) {
    if (p.closed) continue;
    self.channel_.close(p.stream);
    p.closed = true;
  }
}

KafkaSource::KafkaSource(RecordChannel& channel, KafkaConfig config, Notices& notices)
    : channel_(channel), config_(std::move(config)), notices_(notices),
      name_("kafka:" + joined(config_.topics)), impl_(std::make_unique<Impl>(*this)) {
  std::unique_ptr<RdKafka::Conf> conf = consumer_conf(config_);
  std::string why;
  if (conf->set("rebalance_cb", static_cast<RdKafka::RebalanceCb*>(impl_.get()), why) != RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", static_cast<RdKafka::EventCb*>(impl_.get()), why) != RdKafka::Conf::CONF_OK ||
      conf->set("offset_commit_cb", static_cast<RdKafka::OffsetCommitCb*>(impl_.get()), why) != RdKafka::Conf::CONF_OK)
    throw SourceError(name_, EINVAL, name_ + ": " + why);
  impl_->consumer.reset(RdKafka::KafkaConsumer::create(conf.get(), why));
  if (!impl_->consumer) throw SourceError(name_, EINVAL, name_ + ": " + why);
}

KafkaSource::~KafkaSource() {
  impl_->abandon = true;
  stop();
  if (thread_.joinable()) thread_.join();
  // Without close(): leave without committing more (the group notices at session timeout,
  // or now, as librdkafka's destructor leaves it).
  if (impl_->consumer) impl_->consumer->close();
}

void KafkaSource::start() {
  const RdKafka::ErrorCode err = impl_->consumer->subscribe(config_.topics);
  if (err != RdKafka::ERR_NO_ERROR) throw SourceError(name_, EINVAL, name_ + ": subscribe: " + RdKafka::err2str(err));
  done_ = false;
  thread_ = std::thread([this] { run(); });
}

void KafkaSource::stop() noexcept {
  stopping_ = true;
  on_space();
}

void KafkaSource::on_space() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->space = true;
  }
  impl_->space_cv.notify_all();
}

// The consumer thread: records into the streams until stop() or a fatal error.
void KafkaSource::run() noexcept {
  Impl& s = *impl_;
  try {
    while (!stopping_.load() && !s.fatal) {
      std::unique_ptr<RdKafka::Message> m(s.consumer->consume(100));
      if (m->err() == RdKafka::ERR_NO_ERROR) {
        s.record(*m);
      } else if (m->err() != RdKafka::ERR__TIMED_OUT && m->err() != RdKafka::ERR__PARTITION_EOF) {
        notices_.notice(name_ + ": " + m->errstr());
      }
      s.store(false);
    }
  } catch (const std::exception& e) {
    try {
      notices_.notice(name_ + ": " + e.what());
    } catch (...) {
    }
  }
  s.close_streams();
  done_.store(true, std::memory_order_release);
}

// The last commit. When another member's leaving is rebalancing the group, the commit is
// refused (rebalance in progress, or an old generation) until this member has taken part:
// consume() serves the rebalance (its records are left to the group) and the commit is
// tried again, for up to kCloseWait. What that rebalance revoked before it could be
// committed (unsaved) is committed by name then.
void KafkaSource::close() {
  if (thread_.joinable()) thread_.join();
  Impl& s = *impl_;
  if (!s.consumer) return;
  s.closing = true;
  stopping_ = true;
  s.store(true);
  const Clock::time_point until = Clock::now() + kCloseWait;
  const auto commit_all = [&s] { return s.commit() && s.commit_unsaved(); };
  bool committed = commit_all();
  while (!committed && rebalancing(s.last_commit_error) && Clock::now() < until) {
    std::unique_ptr<RdKafka::Message> m(s.consumer->consume(100));
    committed = commit_all();
  }
  s.consumer->close();
  s.consumer.reset();
  if (committed) return;
  const std::string why = name_ + ": the last offset commit failed (" + RdKafka::err2str(s.last_commit_error) +
                          "); the records after the previous one will be read again";
  // The whole group stopping at once keeps rebalancing: the group re-reads (at least once),
  // which is worth a notice, not a failed stop.
  if (rebalancing(s.last_commit_error)) {
    notices_.notice(why);
    return;
  }
  throw SourceError(name_, EIO, why);
}

KafkaSource::Counters KafkaSource::counters() const noexcept {
  const Impl& s = *impl_;
  Counters c;
  c.records = s.records;
  c.bytes = s.bytes;
  c.lines_too_long = s.too_long;
  c.rebalances = s.rebalances;
  c.commits = s.commits;
  c.commit_failures = s.commit_failures;
  c.lag = s.lag;
  c.partitions = s.assigned;
  return c;
}

}  // namespace gpufilter
