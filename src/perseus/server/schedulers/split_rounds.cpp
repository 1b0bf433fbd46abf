#include "perseus/server/schedulers/split_rounds.hpp"

#include <algorithm>
#include <tuple>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/measurement_error.hpp"

namespace perseus::server::schedulers {

namespace {

// The row's standard error in J; nullopt when it has none.
std::optional<double> stderr_j(const profile::Measurement& row) {
  if (!row.energy_stderr) return std::nullopt;
  return *row.energy_stderr * row.energy_j;
}

// a + n b, unknown when either is.
std::optional<double> plus(std::optional<double> a, double n, std::optional<double> b) {
  if (!a || !b) return std::nullopt;
  return *a + n * *b;
}

// The largest of one error column over a clock's rows; nullopt when a row has none.
std::optional<double> worst(const LabelRows& rows, std::optional<double> profile::Measurement::*e) {
  double most = 0.0;
  for (const auto& [label, row] : rows) {
    if (!(row.*e)) return std::nullopt;
    most = std::max(most, *(row.*e));
  }
  return most;
}

// The clock a rank's rows were measured best at: the least pooling error, then the least
// standard error, then the highest clock; nullopt when no clock's rows all carry a pooling error.
std::optional<int> reference_clock(const std::map<int, LabelRows>& clocks) {
  std::optional<std::tuple<double, double, int>> best;
  for (const auto& [mhz, rows] : clocks) {
    const std::optional<double> pooling = worst(rows, &profile::Measurement::energy_pooling_error);
    if (!pooling) continue;
    const auto key = std::make_tuple(
        *pooling, worst(rows, &profile::Measurement::energy_stderr).value_or(0.0), -mhz);
    if (!best || key < *best) best = key;
  }
  if (!best) return std::nullopt;
  return -std::get<2>(*best);
}

// The labels to split at a clock: those pooled there (pooling error above 0) where one is pooled
// beyond kUnsplitPoolingError and the reference has a row for it; none when fewer than two. The
// one of most energy last: it gets the pooled sum less the others', and with it the sum's error,
// which weighs least on it (the first clock of a simulated 1F1B last stage of 2 ms forwards and
// 4 ms backwards, its sum 3.5 % of a forward off: forward 3.9 % off when last, backward 1.6 %).
std::vector<std::string> pooled_labels(const LabelRows& reference, const LabelRows& at_clock) {
  const bool beyond = std::any_of(at_clock.begin(), at_clock.end(), [](const auto& entry) {
    return entry.second.energy_pooling_error.value_or(0.0) > profile::kUnsplitPoolingError;
  });
  std::vector<std::string> labels;
  if (!beyond) return labels;
  for (const auto& [label, row] : at_clock) {
    if (row.energy_pooling_error.value_or(0.0) > 0.0 && reference.count(label) > 0) {
      labels.push_back(label);
    }
  }
  if (labels.size() < 2) labels.clear();
  std::stable_sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    return at_clock.at(a).energy_j < at_clock.at(b).energy_j;
  });
  return labels;
}

}  // namespace

SplitRounds::SplitRounds(const schedule::Schedule& sched, RankRows rows, bool split)
    : sched_(sched), rows_(std::move(rows)), ranks_(rows_.size()) {
  for (std::size_t s = 0; split && s < rows_.size() && s < sched.ranks.size(); ++s) {
    Rank& rank = ranks_[s];
    for (const auto& inst : sched.ranks[s]) rank.count[instruction_label(sched, inst)] += 1.0;
    const std::optional<int> reference = reference_clock(rows_[s]);
    if (!reference) continue;
    rank.reference_mhz = *reference;
    const LabelRows& at_reference = rows_[s].at(*reference);
    for (auto it = rows_[s].rbegin(); it != rows_[s].rend(); ++it) {  // highest clock first
      if (it->first == *reference) continue;
      std::vector<std::string> labels = pooled_labels(at_reference, it->second);
      if (labels.empty()) continue;
      for (std::size_t j = 0; j + 1 < labels.size(); ++j)
        rank.tasks.push_back({it->first, labels[j], 0.0});
      rank.pooled[it->first] = std::move(labels);
    }
    rounds_ = std::max(rounds_, rank.tasks.size());
  }
}

std::vector<StagePlan> SplitRounds::plans() const {
  return stage_plans(
      sched_, plan::plan_per_instruction(sched_, [&](int r, const auto& inst) {
        const Rank& rank = ranks_[static_cast<std::size_t>(r)];
        if (round_ >= rank.tasks.size())
          return rank.reference_mhz > 0 ? rank.reference_mhz : rows_[r].rbegin()->first;
        const Task& task = rank.tasks[round_];
        return instruction_label(sched_, inst) == task.label ? task.mhz : rank.reference_mhz;
      }));
}

void SplitRounds::observe(const std::vector<StageWindow>& windows) {
  for (std::size_t s = 0; s < ranks_.size(); ++s) {
    if (round_ >= ranks_[s].tasks.size()) continue;
    ranks_[s].tasks[round_].busy_j =
        windows[s].busy_energy_j / static_cast<double>(windows[s].iterations);
  }
  ++round_;
}

std::optional<double> SplitRounds::sum_error(std::size_t rank, int mhz) const {
  std::optional<double> error = 0.0;
  for (const auto& [label, row] : rows_[rank].at(mhz)) {
    error = plus(error, ranks_[rank].count.at(label), stderr_j(row));
  }
  return error;
}

std::pair<double, std::optional<double>> SplitRounds::difference(std::size_t rank,
                                                                 const Task& task) const {
  const Rank& r = ranks_[rank];
  const LabelRows& reference = rows_[rank].at(r.reference_mhz);
  double others = 0.0;
  std::optional<double> error = sum_error(rank, task.mhz);
  for (const auto& [label, n] : r.count) {
    if (label == task.label) continue;
    others += n * reference.at(label).energy_j;
    error = plus(error, n, stderr_j(reference.at(label)));
  }
  const double n = r.count.at(task.label);
  if (error) *error /= n;
  return {(task.busy_j - others) / n, error};
}

std::optional<LabelRows> SplitRounds::split(std::size_t rank, int mhz) const {
  const Rank& r = ranks_[rank];
  const LabelRows& at_clock = rows_[rank].at(mhz);
  const LabelRows& reference = rows_[rank].at(r.reference_mhz);
  const std::vector<std::string>& pooled = r.pooled.at(mhz);
  LabelRows rows = at_clock;
  // The pooled labels' sum at the clock, and its error, less each split one's.
  double rest = 0.0;
  std::optional<double> rest_error = 0.0;
  for (const std::string& label : pooled) {
    const double n = r.count.at(label);
    rest += n * at_clock.at(label).energy_j;
    rest_error = plus(rest_error, n, stderr_j(at_clock.at(label)));
  }
  // The row's split energy; its pooling error is its reference row's, the same joules.
  auto set = [&](const std::string& label, double energy_j, std::optional<double> error_j) {
    profile::Measurement& row = rows.at(label);
    const profile::Measurement& ref = reference.at(label);
    const double offset_j = *ref.energy_pooling_error * ref.energy_j;
    row.energy_j = energy_j;
    row.energy_stderr = error_j ? std::optional(*error_j / energy_j) : std::nullopt;
    row.energy_pooling_error = offset_j / energy_j;
    if (offset_j > 0.0) row.energy_pooling_reference_mhz = r.reference_mhz;
  };
  for (const Task& task : r.tasks) {
    if (task.mhz != mhz) continue;
    const auto [energy_j, error_j] = difference(rank, task);
    if (!(energy_j > 0.0)) return std::nullopt;
    set(task.label, energy_j, error_j);
    const double n = r.count.at(task.label);
    rest -= n * energy_j;
    rest_error = plus(rest_error, n, error_j);
  }
  const double n = r.count.at(pooled.back());
  if (!(rest > 0.0)) return std::nullopt;
  set(pooled.back(), rest / n, rest_error ? std::optional(*rest_error / n) : std::nullopt);
  return rows;
}

RankRows SplitRounds::rows() const {
  RankRows out = rows_;
  for (std::size_t s = 0; s < ranks_.size(); ++s) {
    bool referred = false;
    for (const auto& [mhz, labels] : ranks_[s].pooled) {
      std::optional<LabelRows> rows = split(s, mhz);
      if (!rows) continue;
      out[s][mhz] = std::move(*rows);
      referred = true;
    }
    if (!referred) continue;
    // The reference rows' offsets are the ones the split rows share.
    const int reference = ranks_[s].reference_mhz;
    for (auto& [label, row] : out[s][reference]) {
      if (row.energy_pooling_error.value_or(0.0) > 0.0)
        row.energy_pooling_reference_mhz = reference;
    }
  }
  return out;
}

std::vector<std::pair<int, int>> SplitRounds::failed() const {
  std::vector<std::pair<int, int>> out;
  for (std::size_t s = 0; s < ranks_.size(); ++s) {
    for (const auto& [mhz, labels] : ranks_[s].pooled) {
      if (!split(s, mhz)) out.emplace_back(static_cast<int>(s), mhz);
    }
  }
  return out;
}

}  // namespace perseus::server::schedulers
