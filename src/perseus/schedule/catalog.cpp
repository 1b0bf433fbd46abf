#include "perseus/schedule/catalog.hpp"

#include <algorithm>
#include <limits>

#include "perseus/schedule/generators.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::schedule {

namespace {

const std::string kEnvelope = "envelope";

// How a named schedule maps stages to ranks: fixed one stage per rank, fixed two (V-shaped), or
// any number (looped), and the generator that builds it for (ranks, stages per rank, M).
struct Entry {
  const char* name;
  int min_per_rank;
  int max_per_rank;  // 0: no upper bound
  int default_per_rank;
  Schedule (*make)(int ranks, int per_rank, int microbatches);
};

const Entry kEntries[] = {
    {"1f1b", 1, 1, 1, [](int r, int, int m) { return make_1f1b(r, m); }},
    {"gpipe", 1, 1, 1, [](int r, int, int m) { return make_gpipe(r, m); }},
    {"interleaved-1f1b", 1, 0, 2, make_interleaved_1f1b},
    {"looped-bfs", 1, 0, 2, make_looped_bfs},
    {"interleaved-zero-bubble", 1, 0, 2, make_interleaved_zero_bubble},
    {"zbv", 2, 2, 2, [](int r, int, int m) { return make_zbv(r, m); }},
    {"dualpipev", 2, 2, 2, [](int r, int, int m) { return make_dualpipev(r, m); }},
};

// The counts of "envelope:e0,...,eS-1": S comma-separated non-negative integers.
std::vector<int> parse_envelope_counts(const std::string& name, int num_stages) {
  std::vector<int> counts;
  std::size_t begin = kEnvelope.size() + 1;
  while (true) {
    std::size_t end = std::min(name.find(',', begin), name.size());
    std::string token = name.substr(begin, end - begin);
    bool digits =
        !token.empty() && token.size() <= 9 &&
        std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      throw Error("schedule '" + name + "': warm-up count '" + token +
                  "' is not a non-negative integer");
    }
    counts.push_back(std::stoi(token));
    if (end == name.size()) break;
    begin = end + 1;
  }
  if (counts.size() != static_cast<std::size_t>(num_stages)) {
    throw Error("schedule '" + name + "' has " + std::to_string(counts.size()) +
                " warm-up counts but the pipeline has " + std::to_string(num_stages) + " stages");
  }
  return counts;
}

// The entry's stages per rank for this request; throws when the schedule does not take it.
int stages_per_rank_of(const Entry& e, int num_stages, int requested) {
  int per_rank = requested == 0 ? e.default_per_rank : requested;
  if (per_rank < e.min_per_rank || (e.max_per_rank > 0 && per_rank > e.max_per_rank)) {
    std::string allowed = e.min_per_rank == e.max_per_rank
                              ? "exactly " + std::to_string(e.min_per_rank)
                              : "at least " + std::to_string(e.min_per_rank);
    throw Error("schedule '" + std::string(e.name) + "' runs " + allowed +
                " stage(s) per rank, not " + std::to_string(per_rank) + " (--virtual-stages)");
  }
  if (num_stages % per_rank != 0) {
    throw Error("schedule '" + std::string(e.name) + "': " + std::to_string(num_stages) +
                " stages do not split into ranks of " + std::to_string(per_rank) +
                " stages each (--virtual-stages)");
  }
  return per_rank;
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Entry& e : kEntries) out.emplace_back(e.name);
    out.insert(out.begin() + 2, kEnvelope);
    return out;
  }();
  return names;
}

Schedule make_schedule(const std::string& name, int num_stages, int num_microbatches,
                       int stages_per_rank) {
  check_sizes(num_stages, num_microbatches);
  if (stages_per_rank < 0) {
    throw Error("stages per rank must be positive, got " + std::to_string(stages_per_rank));
  }
  for (const Entry& e : kEntries) {
    if (name != e.name) continue;
    int per_rank = stages_per_rank_of(e, num_stages, stages_per_rank);
    check_schedule_size(num_stages, per_rank, num_microbatches);
    return e.make(num_stages / per_rank, per_rank, num_microbatches);
  }
  if (name == kEnvelope) {
    throw Error(
        "the envelope schedule needs a profile to compute its warm-up counts (use "
        "`perseus plan --schedule envelope`, which resolves it, or name the counts: "
        "envelope:e0,...,eS-1)");
  }
  if (name.rfind(kEnvelope + ":", 0) == 0) {
    if (stages_per_rank > 1) throw Error("the envelope schedule runs one stage per rank");
    check_schedule_size(num_stages, 1, num_microbatches);
    return make_1f1b_warmup(num_stages, num_microbatches, parse_envelope_counts(name, num_stages));
  }
  throw Error("unknown schedule '" + name + "' (expected " + join(schedule_names()) +
              " or envelope:e0,...,eS-1)");
}

Schedule make_schedule_on_ranks(const std::string& name, int num_ranks, int num_microbatches,
                                int stages_per_rank) {
  check_sizes(num_ranks, num_microbatches);
  int per_rank = stages_per_rank;
  for (const Entry& e : kEntries) {
    if (per_rank == 0 && name == e.name) per_rank = e.default_per_rank;
  }
  per_rank = std::max(per_rank, 1);
  if (num_ranks > std::numeric_limits<int>::max() / per_rank) {
    throw Error(std::to_string(num_ranks) + " ranks of " + std::to_string(per_rank) +
                " stages each are too many stages");
  }
  return make_schedule(name, num_ranks * per_rank, num_microbatches, stages_per_rank);
}

}  // namespace perseus::schedule
