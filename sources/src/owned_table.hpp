// OwnedTable: objects owned and found by their `key` member, in an open-addressing hash
// table with linear probing over a power of two of slots, at most half of them full, each
// slot holding its object's hash. A lookup is the hash and, mostly, one slot. Erasing
// moves the slots after it back to where a probe from their home finds them (no
// tombstones). Pointers to the objects stay valid until they are erased. TcpReassembler's
// flows (tests/sources/owned_table_test.cpp checks it against std::unordered_map).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace gpufilter {

template <class T, class Key, class Hash>
class OwnedTable {
 public:
  T* find(const Key& key) const noexcept {
    if (slots_.empty()) return nullptr;
    const std::uint64_t hash = Hash{}(key);
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (!slot.object) return nullptr;
      if (slot.hash == hash && slot.object->key == key) return slot.object.get();
    }
  }

  // Asks for the slot where a lookup of `key` starts (and, `deep`, the object it holds,
  // which reads the slot) to be fetched into the cache.
  void prefetch(const Key& key, bool deep) const noexcept {
    if (slots_.empty()) return;
    const Slot& slot = slots_[Hash{}(key) & mask_];
    __builtin_prefetch(&slot);
    if (deep && slot.object) __builtin_prefetch(slot.object.get());
  }

  // `object`'s key is not in the table. Returns the object.
  T* insert(std::unique_ptr<T> object) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    T* raw = object.get();
    place(Slot{Hash{}(object->key), std::move(object)});
    ++count_;
    return raw;
  }

  // Deletes the object of `key`, which is in the table (`key` may be that object's own).
  void erase(const Key& key) {
    const std::uint64_t hash = Hash{}(key);
    std::size_t i = hash & mask_;
    while (!(slots_[i].hash == hash && slots_[i].object->key == key)) i = (i + 1) & mask_;
    slots_[i] = Slot{};
    --count_;
    for (std::size_t j = (i + 1) & mask_; slots_[j].object; j = (j + 1) & mask_) {
      const std::size_t home = slots_[j].hash & mask_;
      // The object in slot j stays unless its home lies cyclically outside (i, j].
      if (i <= j ? (home > i && home <= j) : (home > i || home <= j)) continue;
      slots_[i] = std::move(slots_[j]);
      i = j;
    }
  }

  std::size_t size() const noexcept { return count_; }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::unique_ptr<T> object;  // null: free
  };

  void place(Slot slot) {
    std::size_t i = slot.hash & mask_;
    while (slots_[i].object) i = (i + 1) & mask_;
    slots_[i] = std::move(slot);
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_ = std::vector<Slot>(std::max<std::size_t>(64, 2 * old.size()));
    mask_ = slots_.size() - 1;
    for (Slot& slot : old)
      if (slot.object) place(std::move(slot));
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
};

}  // namespace gpufilter
