#include "perseus/server/schedulers/split_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/measurement_error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::server::schedulers {

namespace {

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

// A rank's clocks whose rows all carry a pooling error, best measured first: the least pooling
// error, then the least standard error, then the highest clock; and how many of them have none
// (the counter told every instruction apart there).
std::pair<std::vector<int>, std::size_t> best_measured(const std::map<int, LabelRows>& clocks) {
  std::vector<std::tuple<double, double, int>> keys;
  for (const auto& [mhz, rows] : clocks) {
    const std::optional<double> pooling = worst(rows, &profile::Measurement::energy_pooling_error);
    if (!pooling) continue;
    keys.emplace_back(*pooling, worst(rows, &profile::Measurement::energy_stderr).value_or(0.0),
                      -mhz);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int> best;
  std::size_t apart = 0;
  for (const auto& [pooling, error, mhz] : keys) {
    best.push_back(-mhz);
    if (pooling == 0.0) ++apart;
  }
  return {best, apart};
}

// The labels of `at_clock` the reference has rows for, least energy first: the one of most
// energy gets the sum less the others', and with it the sum's error, which weighs least on it
// (the first clock of a simulated 1F1B last stage of 2 ms forwards and 4 ms backwards, its sum
// 3.5 % of a forward off: forward 3.9 % off when last, backward 1.6 %).
std::vector<std::string> by_energy(std::vector<std::string> labels, const LabelRows& at_clock) {
  std::stable_sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    return at_clock.at(a).energy_j < at_clock.at(b).energy_j;
  });
  return labels;
}

// The labels of `at_clock` that `reference` has rows for, by energy; `pooled_only`: only those
// pooled there (pooling error above 0).
std::vector<std::string> shared_labels(const LabelRows& reference, const LabelRows& at_clock,
                                       bool pooled_only = false) {
  std::vector<std::string> labels;
  for (const auto& [label, row] : at_clock) {
    const bool pooled = row.energy_pooling_error.value_or(0.0) > 0.0;
    if (reference.count(label) > 0 && (pooled || !pooled_only)) labels.push_back(label);
  }
  return by_energy(std::move(labels), at_clock);
}

// The labels to split at a clock: the pooled ones the reference has rows for, where one is pooled
// beyond kUnsplitPoolingError; none when fewer than two.
std::vector<std::string> pooled_labels(const LabelRows& reference, const LabelRows& at_clock) {
  const bool beyond = std::any_of(at_clock.begin(), at_clock.end(), [](const auto& entry) {
    return entry.second.energy_pooling_error.value_or(0.0) > profile::kUnsplitPoolingError;
  });
  if (!beyond) return {};
  std::vector<std::string> labels = shared_labels(reference, at_clock, true);
  if (labels.size() < 2) labels.clear();
  return labels;
}

// The medoid of `points` under sum |x_l - y_l| (x_l: J per iteration): with three, the middle
// one, whichever one lies away from the other two.
std::size_t medoid(const std::vector<std::map<std::string, double>>& points) {
  std::size_t best = 0;
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < points.size(); ++i) {
    double total = 0.0;
    for (const auto& other : points) {
      for (const auto& [label, x] : points[i]) total += std::abs(x - other.at(label));
    }
    if (total < least) {
      least = total;
      best = i;
    }
  }
  return best;
}

}  // namespace

SplitRounds::SplitRounds(const schedule::Schedule& sched, RankRows rows, bool split)
    : sched_(sched), rows_(std::move(rows)), ranks_(rows_.size()) {
  for (std::size_t s = 0; split && s < rows_.size() && s < sched.ranks.size(); ++s) {
    Rank& rank = ranks_[s];
    for (const auto& item : sched.ranks[s]) {
      for (const auto& inst : schedule::actions_of(item)) {
        rank.count[instruction_label(sched, inst)] += 1.0;
      }
    }
    const auto [best, apart] = best_measured(rows_[s]);
    if (best.empty()) continue;
    rank.reference_mhz = best[0];
    const LabelRows& at_reference = rows_[s].at(best[0]);
    auto add = [&](int mhz, std::vector<std::string> labels) {
      for (std::size_t j = 0; j + 1 < labels.size(); ++j)
        rank.tasks.push_back({mhz, labels[j], 0.0});
      rank.pooled[mhz] = std::move(labels);
    };
    for (auto it = rows_[s].rbegin(); it != rows_[s].rend(); ++it) {  // highest clock first
      if (it->first == best[0]) continue;
      std::vector<std::string> labels = pooled_labels(at_reference, it->second);
      if (!labels.empty()) add(it->first, std::move(labels));
    }
    if (rank.pooled.empty()) continue;
    for (std::size_t a = 1; a < std::min(apart, kAnchors); ++a) {
      rank.anchors.push_back(best[a]);
      add(best[a], shared_labels(at_reference, rows_[s].at(best[a])));
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

std::size_t SplitRounds::observed() const {
  return round_;
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
    error = plus(error, ranks_[rank].count.at(label), row.energy_stderr_j());
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
    error = plus(error, n, reference.at(label).energy_stderr_j());
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
    rest_error = plus(rest_error, n, at_clock.at(label).energy_stderr_j());
  }
  // The row's split energy; its pooling error is its reference row's, the same joules.
  auto set = [&](const std::string& label, double energy_j, std::optional<double> error_j) {
    profile::Measurement& row = rows.at(label);
    const profile::Measurement& ref = reference.at(label);
    const double offset_j = *ref.energy_pooling_error_j();
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

SplitRounds::Correction SplitRounds::correction(std::size_t rank) const {
  const Rank& r = ranks_[rank];
  const LabelRows& reference = rows_[rank].at(r.reference_mhz);
  // Per anchor, reference first: what its rows measured less what the split puts there (J per
  // iteration), and the most that is in standard errors.
  std::vector<int> clocks = {r.reference_mhz};
  std::vector<std::map<std::string, double>> offsets(1);
  for (const auto& [label, row] : reference) offsets[0][label] = 0.0;
  double worst_z = 0.0, worst_share = 0.0;
  for (int mhz : r.anchors) {
    const std::optional<LabelRows> split_rows = split(rank, mhz);
    if (!split_rows) continue;
    std::map<std::string, double> offset;
    for (const auto& [label, row] : rows_[rank].at(mhz)) {
      const profile::Measurement& split_row = split_rows->at(label);
      const double d = row.energy_j - split_row.energy_j;
      offset[label] = r.count.at(label) * d;
      const double error = std::hypot(row.energy_stderr_j().value_or(0.0),
                                      split_row.energy_stderr_j().value_or(0.0));
      if (error > 0.0) worst_z = std::max(worst_z, std::abs(d) / error);
      worst_share = std::max(worst_share, std::abs(d) / row.energy_j);
    }
    clocks.push_back(mhz);
    offsets.push_back(std::move(offset));
  }
  const std::size_t chosen = medoid(offsets);
  Correction c;
  for (const auto& [label, per_iteration] : offsets[chosen]) {
    c.energy_j[label] = per_iteration / r.count.at(label);
  }
  if (worst_z > kAnchorAgreement) {
    std::string listed;
    for (int mhz : clocks) listed += (listed.empty() ? "" : ", ") + std::to_string(mhz);
    c.note = "the clocks where the counter told its instructions apart (" + listed +
             " MHz) disagree beyond " + fixed(kAnchorAgreement, 0) + " standard errors (up to " +
             fixed(100.0 * worst_share, 1) + " % of a row): one was told apart wrongly; the " +
             "split rows rest on " + std::to_string(clocks[chosen]) + " MHz's, the median";
  }
  return c;
}

SplitRounds::Result SplitRounds::result() const {
  Result out{rows_, {}};
  for (std::size_t s = 0; s < ranks_.size(); ++s) {
    const Rank& r = ranks_[s];
    if (r.pooled.empty()) continue;
    const std::string gpu = "GPU " + std::to_string(s) + "'s split-clock rounds";
    const Correction c = correction(s);
    auto corrected = [&](profile::Measurement row, const std::string& label) {
      row.energy_j += c.energy_j.count(label) > 0 ? c.energy_j.at(label) : 0.0;
      return row;
    };
    bool referred = false;
    for (const auto& [mhz, labels] : r.pooled) {
      std::optional<LabelRows> rows = split(s, mhz);
      if (!rows) {
        out.warnings.push_back(gpu + " at " + std::to_string(mhz) +
                               " MHz gave an energy at or below 0 (noise beyond the "
                               "measurement's); its rows there are kept as they were measured");
        continue;
      }
      if (std::find(r.anchors.begin(), r.anchors.end(), mhz) != r.anchors.end()) continue;
      for (auto& [label, row] : *rows) row = corrected(row, label);
      out.rows[s][mhz] = std::move(*rows);
      referred = true;
    }
    if (!c.note.empty()) out.warnings.push_back(gpu + ": " + c.note);
    if (!referred) continue;
    // The reference rows' offsets are the ones the split rows share.
    for (auto& [label, row] : out.rows[s][r.reference_mhz]) {
      row = corrected(row, label);
      if (row.energy_pooling_error.value_or(0.0) > 0.0) {
        row.energy_pooling_reference_mhz = r.reference_mhz;
      }
    }
  }
  return out;
}

}  // namespace perseus::server::schedulers
