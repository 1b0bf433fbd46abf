// std::pop_heap, as libstdc++ (GCC 12) performs it, element for element, with its hole walked
// down two levels per step. Slack reclamation's greedy (plan/reclaim.hpp) takes equal savings in
// the order its binary heap leaves them, and that order decides where slack goes, so a faster
// heap must keep the same layout; tests/unit/exact_heap_test.cpp checks it against std::pop_heap.
//
// libstdc++ pops by moving the last element out, walking the hole from the root to a leaf
// (always to the larger child; the right one on a tie) and sifting the last element up from
// there (Floyd's variant). Each level's choice waits on the one before it; here both children
// and all four grandchildren are compared at once, so two levels cost one load's latency.
// O(log n) per pop, as std::pop_heap.
#pragma once

#include <cstddef>
#include <utility>

namespace perseus::plan {

// Removes the largest element of the max-heap [first, last) (by `less`, a strict weak order)
// into *(last - 1) and leaves [first, last - 1) a heap laid out exactly as std::pop_heap leaves
// it with the same comparison.
template <typename T, typename Less>
void pop_heap_exact(T* first, T* last, Less less) {
  const std::size_t len = static_cast<std::size_t>(last - first) - 1;  // the heap left
  if (static_cast<std::ptrdiff_t>(len) <= 0) return;
  T value = std::move(first[len]);
  first[len] = std::move(first[0]);
  // Holes below `inner` have two children (libstdc++'s `(len - 1) / 2`).
  const std::size_t inner = (len - 1) / 2;
  std::size_t hole = 0;
  while (2 * hole + 2 < inner) {  // both children have two children too
    const std::size_t left = 2 * hole + 1, right = left + 1;
    // The child taken: right unless right < left; then that child's child, the same way.
    const bool take_left = less(first[right], first[left]);
    const std::size_t under_left = 2 * left + 2 - less(first[2 * left + 2], first[2 * left + 1]);
    const std::size_t under_right =
        2 * right + 2 - less(first[2 * right + 2], first[2 * right + 1]);
    const std::size_t child = take_left ? left : right;
    const std::size_t grandchild = take_left ? under_left : under_right;
    first[hole] = std::move(first[child]);
    first[child] = std::move(first[grandchild]);
    hole = grandchild;
  }
  while (hole < inner) {
    std::size_t child = 2 * hole + 2;
    if (less(first[child], first[child - 1])) --child;
    first[hole] = std::move(first[child]);
    hole = child;
  }
  if ((len & 1) == 0 && hole == (len - 2) / 2) {  // a last node with one child
    first[hole] = std::move(first[2 * hole + 1]);
    hole = 2 * hole + 1;
  }
  // Sift the old last element up from the leaf (libstdc++'s __push_heap).
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / 2;
    if (!less(first[parent], value)) break;
    first[hole] = std::move(first[parent]);
    hole = parent;
  }
  first[hole] = std::move(value);
}

}  // namespace perseus::plan
