#pragma once
// fail2ban's Utils.Cache (fail2ban/server/utils.py), which holds a filter's multi-line
// failures by connection id (<F-MLFID>): at most `max_count` entries, each living
// `max_time` seconds from when it was set. An OrderedDict there, so a full cache drops its
// entries in the order they were first set: from the front, every expired one, and the
// first one still alive that leaves room. Found by hash (an id is a log line's prefix).
// The clock is the caller's (fail2ban reads time.time()).
#include <cstddef>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace gpufilter::fail2ban {

template <typename V>
class MlfidCache {
 public:
  explicit MlfidCache(std::size_t max_count = 100, double max_time = 300) : max_count_(max_count), max_time_(max_time) {}

  // get(k): the value where it has not expired; an expired entry is removed.
  const V* get(std::string_view id, double now) {
    const auto it = index_.find(id);
    if (it == index_.end()) return nullptr;
    if (it->second->expires > now) return &it->second->value;
    erase(it);
    return nullptr;
  }
  // set(k, v): a full cache first drops entries from its front, every one up to and with
  // the first that has not expired (all of them, if none has); a new id goes to the back,
  // an existing one keeps its place.
  void set(std::string_view id, V value, double now) {
    if (index_.size() >= max_count_) {
      while (!order_.empty()) {
        const bool alive = order_.front().expires > now;
        index_.erase(std::string_view(order_.front().id));
        order_.pop_front();
        if (alive && index_.size() < max_count_) break;
      }
    }
    if (const auto it = index_.find(id); it != index_.end()) {
      it->second->value = std::move(value);
      it->second->expires = now + max_time_;
      return;
    }
    order_.push_back(Entry{std::string(id), std::move(value), now + max_time_});
    index_.emplace(std::string_view(order_.back().id), std::prev(order_.end()));
  }
  void unset(std::string_view id) {
    if (const auto it = index_.find(id); it != index_.end()) erase(it);
  }
  std::size_t size() const { return index_.size(); }

 private:
  struct Entry {
    std::string id;  // the index's key points into it: a list node does not move
    V value;
    double expires;
  };
  using Index = std::unordered_map<std::string_view, typename std::list<Entry>::iterator>;
  void erase(typename Index::iterator it) {
    const auto entry = it->second;
    index_.erase(it);
    order_.erase(entry);
  }

  std::size_t max_count_;
  double max_time_;
  std::list<Entry> order_;  // in the order first set
  Index index_;
};

}  // namespace gpufilter::fail2ban
