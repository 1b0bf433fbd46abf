// Private to slack reclamation (plan/reclaim.cpp): the bookkeeping of its lazily kept windows.
// PositionSet holds the positions whose new start (finish) has not yet reached their successors
// (predecessors) and hands them out in topological order; Staleness bounds how far a stale window
// can be from the exact one, so that a candidate with that much to spare needs no update.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace perseus::plan::detail {

// A set of positions 0..n-1 drained in one direction: from the lowest member up to a limit, or
// from the highest down to one (a 64-bit word per 64 positions, scanned from the lowest or
// highest word that may be non-empty). Within a word, the members it has when it is taken are
// visited together, so the next member is known without waiting for the visit before it.
class PositionSet {
 public:
  void reset(int n) {
    words_.assign(static_cast<std::size_t>(n + 63) / 64, 0);
    low_ = static_cast<long>(words_.size());
    high_ = -1;
  }
  void insert(int i) {
    insert_ahead(i);
    low_ = std::min(low_, static_cast<long>(i / 64));
    high_ = std::max(high_, static_cast<long>(i / 64));
  }
  // Inserts i from inside a drain's visit, ahead of the drain (above the visited member in
  // drain_below, below it in drain_above): the word the drain starts from cannot move.
  void insert_ahead(int i) {
    const auto u = static_cast<unsigned>(i);
    words_[u / 64] |= std::uint64_t{1} << (u % 64);
  }
  // Removes every member below `limit` and visits it once, in ascending order within each word
  // (the members a word has when it is taken, then those `visit` added to it meanwhile; each is
  // removed as it is visited, so one added again before its visit is visited once); `visit(i)`
  // may insert_ahead members above i.
  template <typename Visit>
  void drain_below(int limit, Visit visit) {
    for (; low_ < static_cast<long>(words_.size()); ++low_) {
      const long base = low_ * 64;
      if (base >= limit) return;
      const std::uint64_t below =
          limit - base >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << (limit - base)) - 1;
      std::uint64_t& word = words_[static_cast<std::size_t>(low_)];
      for (std::uint64_t todo; (todo = word & below) != 0;) {
        for (; todo != 0; todo &= todo - 1) {
          const int bit = std::countr_zero(todo);
          word &= ~(std::uint64_t{1} << bit);
          visit(static_cast<int>(base) + bit);
        }
      }
      if (word != 0) return;  // members at or above the limit
    }
  }
  // The same from the top: removes every member above `limit` and visits it once, in descending
  // order within each word; `visit(i)` may insert_ahead members below i.
  template <typename Visit>
  void drain_above(int limit, Visit visit) {
    for (; high_ >= 0; --high_) {
      const long base = high_ * 64;
      if (base + 63 <= limit) return;
      const std::uint64_t above =
          limit < base ? ~std::uint64_t{0} : ~((std::uint64_t{2} << (limit - base)) - 1);
      std::uint64_t& word = words_[static_cast<std::size_t>(high_)];
      for (std::uint64_t todo; (todo = word & above) != 0;) {
        while (todo != 0) {
          const int bit = 63 - std::countl_zero(todo);
          todo &= ~(std::uint64_t{1} << bit);
          word &= ~(std::uint64_t{1} << bit);
          visit(static_cast<int>(base) + bit);
        }
      }
      if (word != 0) return;  // members at or below the limit
    }
  }

 private:
  std::vector<std::uint64_t> words_;
  long low_ = 0, high_ = -1;
};

// How far the stale windows of one reclamation can be from the exact ones. A start (earliest
// start) at position i is exact once the starts are settled up to a limit >= i, and can since
// have grown by at most the time added by the moves at positions below i (its ancestors are
// among them); a finish (latest finish) likewise from above. A bound sums those moves, or, when
// there are more than kScan of them, every move since the settle (looser, in constant time).
class Staleness {
 public:
  void reset() {
    moves_.clear();
    added_before_.assign(1, 0.0);
    starts_.clear();
    finishes_.clear();
  }
  void moved(int position, double added) {
    moves_.push_back({position, added});
    added_before_.push_back(added_before_.back() + added);
  }
  // Starts at positions <= limit (finishes at positions >= limit) are now exact.
  void settled_starts(int limit) { settled(starts_, limit, std::less_equal<int>()); }
  void settled_finishes(int limit) { settled(finishes_, limit, std::greater_equal<int>()); }
  // How much the start (finish) at position i may yet grow (shrink); `all` counts every move
  // since the settle (in constant time), otherwise only those on i's side.
  double start_bound(int i, bool all) const {
    return added_since(last_covering(starts_, i, std::greater_equal<int>()), i, all,
                       std::less<int>());
  }
  double finish_bound(int i, bool all) const {
    return added_since(last_covering(finishes_, i, std::less_equal<int>()), i, all,
                       std::greater<int>());
  }

 private:
  static constexpr std::size_t kScan = 64;
  struct Move {
    int position;
    double added;
  };
  struct Settle {
    int limit;
    std::size_t moves;  // made before it
  };
  // A settle supersedes the earlier ones whose positions it covers too, so each list is ordered
  // by limit.
  template <typename Within>
  void settled(std::vector<Settle>& list, int limit, Within within) {
    while (!list.empty() && within(list.back().limit, limit)) list.pop_back();
    list.push_back({limit, moves_.size()});
  }
  // The moves made before the latest settle that covers position i (0 when none does).
  template <typename Covers>
  static std::size_t last_covering(const std::vector<Settle>& list, int i, Covers covers) {
    const auto end = std::partition_point(list.begin(), list.end(),
                                          [&](const Settle& s) { return covers(s.limit, i); });
    return end == list.begin() ? 0 : (end - 1)->moves;
  }
  template <typename Side>
  double added_since(std::size_t first, int i, bool all, Side on_side) const {
    if (all || moves_.size() - first > kScan) return added_before_.back() - added_before_[first];
    double added = 0.0;
    for (std::size_t m = first; m < moves_.size(); ++m) {
      if (on_side(moves_[m].position, i)) added += moves_[m].added;
    }
    return added;
  }

  std::vector<Move> moves_;
  std::vector<double> added_before_;  // of the first m moves, at m
  std::vector<Settle> starts_, finishes_;
};

}  // namespace perseus::plan::detail
