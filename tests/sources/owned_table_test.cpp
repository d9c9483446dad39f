// OwnedTable (sources/src/owned_table.hpp, TcpReassembler's flows) against
// std::unordered_map: random insertions, lookups and erasures, with a hash whose values
// collide and cluster, so that probes wrap around the table and erasures move runs of
// slots back across its end.
#include "../../sources/src/owned_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

namespace gpufilter {
namespace {

struct Item {
  std::uint64_t key = 0;
  int value = 0;
};

// Few distinct values, and high ones (which land near the table's end): long runs.
struct Clumped {
  std::uint64_t operator()(std::uint64_t key) const noexcept { return 0xfffffffffffffff0ull + key % 23; }
};
struct Spread {
  std::uint64_t operator()(std::uint64_t key) const noexcept { return key * 0x9e3779b97f4a7c15ull; }
};

template <class Hash>
void random_operations(unsigned seed, std::uint64_t keys, int steps) {
  std::mt19937_64 rng(seed);
  OwnedTable<Item, std::uint64_t, Hash> table;
  std::unordered_map<std::uint64_t, int> model;
  std::unordered_map<std::uint64_t, const Item*> where;  // pointers stay valid until erased
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t key = rng() % keys;
    const Item* found = table.find(key);
    ASSERT_EQ(found != nullptr, model.count(key) == 1) << "step " << step << " key " << key;
    if (found != nullptr) {
      ASSERT_EQ(found->value, model[key]);
      ASSERT_EQ(found, where[key]);
    }
    if (rng() % 3 != 0 && found == nullptr) {
      const int value = static_cast<int>(rng() % 1000);
      where[key] = table.insert(std::make_unique<Item>(Item{key, value}));
      model[key] = value;
    } else if (found != nullptr) {
      table.erase(found->key);  // the object's own key, as TcpReassembler erases
      model.erase(key);
      where.erase(key);
    }
    ASSERT_EQ(table.size(), model.size());
  }
  for (const auto& [key, value] : model) {
    ASSERT_NE(table.find(key), nullptr) << key;
    EXPECT_EQ(table.find(key)->value, value);
  }
}

TEST(OwnedTable, AgreesWithUnorderedMapUnderCollisions) {
  for (unsigned seed = 1; seed <= 6; ++seed) random_operations<Clumped>(seed, 40 + seed * 30, 20000);
}

TEST(OwnedTable, AgreesWithUnorderedMapWhileGrowingAndShrinking) {
  for (unsigned seed = 1; seed <= 3; ++seed) random_operations<Spread>(seed, 5000, 200000);
}

}  // namespace
}  // namespace gpufilter
