// pop_heap_exact (plan/exact_heap.hpp) against std::pop_heap: after every pop of random heaps
// with many equal keys, the two arrays hold the same elements in the same places (elements
// carry their insertion number, so a tie placed differently shows).
#include "perseus/plan/exact_heap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace perseus::plan {
namespace {

struct Item {
  int key;
  int id;
  bool operator==(const Item&) const = default;
};

bool key_less(const Item& a, const Item& b) {
  return a.key < b.key;
}

// Pushes and pops at random (pops as often as pushes once the heap holds `size` items), keys in
// 0..distinct-1, checking both heaps after every pop; returns how many pops were compared.
int compare_random_run(std::mt19937& rng, int size, int distinct, int operations) {
  std::vector<Item> mine, theirs;
  std::uniform_int_distribution<int> key(0, distinct - 1);
  int pops = 0;
  for (int op = 0; op < operations; ++op) {
    const bool push = mine.empty() || (static_cast<int>(mine.size()) < size && rng() % 3 != 0);
    if (push) {
      const Item item{key(rng), op};
      mine.push_back(item);
      theirs.push_back(item);
      std::push_heap(mine.begin(), mine.end(), key_less);
      std::push_heap(theirs.begin(), theirs.end(), key_less);
      continue;
    }
    pop_heap_exact(mine.data(), mine.data() + mine.size(), key_less);
    std::pop_heap(theirs.begin(), theirs.end(), key_less);
    EXPECT_EQ(mine, theirs) << "after pop " << pops << " of a heap of " << theirs.size();
    if (mine != theirs) return pops;
    mine.pop_back();
    theirs.pop_back();
    ++pops;
  }
  return pops;
}

TEST(ExactHeap, PopsLikeStdPopHeapOnEveryLayout) {
  std::mt19937 rng(5);
  int pops = 0;
  // Every heap size from 1 to 70 is popped many times (each parity and depth of the last level),
  // with few distinct keys (ties everywhere) and with many.
  for (int size = 1; size <= 70; ++size) {
    for (int distinct : {1, 2, 3, 8, 1000}) pops += compare_random_run(rng, size, distinct, 400);
  }
  // Heaps as large as slack reclamation's (thousands of candidates, a few hundred savings).
  for (int distinct : {4, 300, 100000}) pops += compare_random_run(rng, 6000, distinct, 40000);
  EXPECT_GT(pops, 100000);
}

TEST(ExactHeap, DrainsInStdOrder) {
  std::mt19937 rng(11);
  std::vector<Item> mine, theirs;
  for (int id = 0; id < 1000; ++id) mine.push_back({static_cast<int>(rng() % 7), id});
  std::make_heap(mine.begin(), mine.end(), key_less);
  theirs = mine;
  for (std::size_t n = mine.size(); n > 0; --n) {
    pop_heap_exact(mine.data(), mine.data() + n, key_less);
    std::pop_heap(theirs.begin(), theirs.begin() + static_cast<std::ptrdiff_t>(n), key_less);
  }
  EXPECT_EQ(mine, theirs);
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end(), key_less));
}

}  // namespace
}  // namespace perseus::plan
