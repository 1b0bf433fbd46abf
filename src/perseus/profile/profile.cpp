#include "perseus/profile/profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "perseus/profile/plausibility.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::profile {

namespace {

using Key = std::pair<int, std::string>;

// How much slower than at its lowest clock an instruction may measure at its highest before the
// profile is refused. A measured instruction whose time barely depends on the clock (memory bound,
// or a GPU whose power limit holds its top clocks at one speed) comes out a little slower at the
// top by noise alone; more than this is a mistake (rows swapped, times in another unit).
constexpr double kTimeNoise = 0.02;

std::string what(int stage, const std::string& instruction) {
  return "stage " + std::to_string(stage) + " instruction '" + instruction + "'";
}

// " (line 12)", or nothing for rows that did not come from a file.
std::string line_note(const char* prefix, long line) {
  return line > 0 ? " (" + std::string(prefix) + "line " + std::to_string(line) + ")" : "";
}

std::string known_list() {
  return join(known_instructions());
}

const Measurement* find(const std::vector<Measurement>& rows, int frequency_mhz) {
  auto it = std::find_if(rows.begin(), rows.end(),
                         [&](const Measurement& m) { return m.frequency_mhz == frequency_mhz; });
  return it == rows.end() ? nullptr : &*it;
}

// Stages must be numbered 0..S-1 without gaps.
void check_stages(const std::string& source, const std::set<int>& stages) {
  int expected = 0;
  for (int stage : stages) {
    if (stage != expected) {
      throw Error(located(source, 0, "stage",
                          "stage " + std::to_string(expected) + " has no rows (stages must be 0.." +
                              std::to_string(*stages.rbegin()) + " without gaps)"));
    }
    ++expected;
  }
}

// Every stage must have every instruction type that some stage has.
void check_instructions(const Profile& profile, const std::set<int>& stages) {
  for (const auto& [key, rows] : profile.all()) {
    for (int stage : stages) {
      if (profile.has(stage, key.second)) continue;
      throw Error(located(profile.source(), 0, "instruction",
                          "stage " + std::to_string(stage) + " has no '" + key.second +
                              "' rows but stage " + std::to_string(key.first) + " has" +
                              line_note("", rows.front().line)));
    }
  }
}

void check_duplicates(const std::string& source, const Key& key,
                      const std::vector<Measurement>& rows) {
  std::vector<const Measurement*> sorted;
  for (const auto& m : rows) sorted.push_back(&m);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Measurement* a, const Measurement* b) {
    return a->frequency_mhz < b->frequency_mhz;
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const Measurement& first = *sorted[i - 1];
    const Measurement& again = *sorted[i];
    if (first.frequency_mhz != again.frequency_mhz) continue;
    throw Error(located(source, again.line, "frequency",
                        "duplicate row for " + what(key.first, key.second) + " at " +
                            std::to_string(again.frequency_mhz) + " MHz" +
                            line_note("also at ", first.line)));
  }
}

// The time at the highest clock must not exceed the time at the lowest clock (by more than
// kTimeNoise).
void check_monotone(const std::string& source, const Key& key,
                    const std::vector<Measurement>& rows) {
  auto [low, high] = std::minmax_element(
      rows.begin(), rows.end(),
      [](const Measurement& a, const Measurement& b) { return a.frequency_mhz < b.frequency_mhz; });
  if (high->time_s <= low->time_s * (1.0 + kTimeNoise)) return;
  throw SlowerAtHighestClock(located(
      source, high->line, "time",
      what(key.first, key.second) + " takes " + number(high->time_s) + " s at its highest clock " +
          std::to_string(high->frequency_mhz) + " MHz but only " + number(low->time_s) +
          " s at its lowest clock " + std::to_string(low->frequency_mhz) + " MHz" +
          line_note("", low->line) + swapped_columns_hint(high->energy_j, high->time_s)));
}

// A row measured as a difference from the row at its energy_pooling_reference_mhz shares that
// row's pooling error: both carry one, and the reference row refers to no other.
void check_pooling_references(const std::string& source, const Key& key,
                              const std::vector<Measurement>& rows) {
  for (const Measurement& m : rows) {
    if (!m.energy_pooling_reference_mhz) continue;
    const int mhz = *m.energy_pooling_reference_mhz;
    auto reject = [&](const std::string& problem) {
      throw Error(located(source, m.line, "energy_pooling_reference_mhz",
                          std::to_string(mhz) + " MHz: " + problem));
    };
    if (!m.energy_pooling_error) reject("the row has no energy_pooling_error to share");
    const Measurement* reference = find(rows, mhz);
    if (reference == nullptr)
      reject("no row for " + what(key.first, key.second) + " at that clock");
    if (!reference->energy_pooling_error) {
      reject("its row has no energy_pooling_error" + line_note("", reference->line));
    }
    if (reference->energy_pooling_reference_mhz.value_or(mhz) != mhz) {
      reject("its row refers to another clock" + line_note("", reference->line));
    }
  }
}

}  // namespace

const std::vector<std::string>& known_instructions() {
  static const std::vector<std::string> names = {"forward", "backward", "recompute",
                                                 "backward_input", "backward_weight"};
  return names;
}

bool is_known_instruction(const std::string& name) {
  const auto& names = known_instructions();
  return std::find(names.begin(), names.end(), name) != names.end();
}

void Profile::add(int stage, const std::string& instruction, const Measurement& m) {
  auto reject = [&](const char* field, const std::string& problem) {
    throw Error(located(source_, m.line, field, problem));
  };
  if (stage < 0) reject("stage", "must not be negative, got " + std::to_string(stage));
  if (!is_known_instruction(instruction)) {
    reject("instruction",
           "unknown instruction '" + instruction + "' (known: " + known_list() + ")");
  }
  if (m.frequency_mhz <= 0) {
    reject("frequency", "must be positive, got " + std::to_string(m.frequency_mhz));
  }
  if (!(std::isfinite(m.time_s) && m.time_s > 0)) {
    reject("time", "must be a positive number of seconds, got " + number(m.time_s));
  }
  if (!(std::isfinite(m.energy_j) && m.energy_j >= 0)) {
    reject("energy", "must be a non-negative number of joules, got " + number(m.energy_j));
  }
  rows_[{stage, instruction}].push_back(m);
}

void Profile::validate() const {
  if (rows_.empty()) throw Error(located(source_, 0, "", "profile has no rows"));
  std::set<int> stages;
  for (const auto& entry : rows_) stages.insert(entry.first.first);
  check_stages(source_, stages);
  check_instructions(*this, stages);
  for (const auto& [key, rows] : rows_) {
    check_duplicates(source_, key, rows);
    check_pooling_references(source_, key, rows);
  }
  for (const auto& [key, rows] : rows_) check_monotone(source_, key, rows);
}

int Profile::num_stages() const {
  return rows_.empty() ? 0 : rows_.rbegin()->first.first + 1;
}

bool Profile::has(int stage, const std::string& instruction) const {
  return rows_.count({stage, instruction}) > 0;
}

const std::vector<Measurement>& Profile::rows(int stage, const std::string& instruction) const {
  auto it = rows_.find({stage, instruction});
  if (it == rows_.end()) {
    throw Error(located(source_, 0, "", "no rows for " + what(stage, instruction)));
  }
  return it->second;
}

std::vector<std::string> Profile::instructions(int stage) const {
  std::vector<std::string> out;
  for (const auto& name : known_instructions()) {
    if (has(stage, name)) out.push_back(name);
  }
  return out;
}

const Measurement& Profile::at(int stage, const std::string& instruction, int frequency_mhz) const {
  const Measurement* m = find(rows(stage, instruction), frequency_mhz);
  if (m == nullptr) {
    throw Error(located(source_, 0, "",
                        "no row for " + what(stage, instruction) + " at " +
                            std::to_string(frequency_mhz) + " MHz"));
  }
  return *m;
}

int Profile::max_frequency(int stage, const std::string& instruction) const {
  const auto& r = rows(stage, instruction);
  return std::max_element(r.begin(), r.end(),
                          [](const Measurement& a, const Measurement& b) {
                            return a.frequency_mhz < b.frequency_mhz;
                          })
      ->frequency_mhz;
}

}  // namespace perseus::profile
