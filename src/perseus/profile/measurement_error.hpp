// How well a measured profile's energies are known: the instruction profiler's error columns
// (`energy_stderr`, `energy_pooling_error`, relative; perseus/profile/csv.hpp) summed up for
// whoever plans on the profile, so that a plan's saving is read beside the error of the rows it
// rests on. `perseus plan` and `perseus profile check` print it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "perseus/profile/profile.hpp"

namespace perseus::profile {

// A pooling error above this and an instruction's own energy counts as not measured: the counter
// could not tell it from the instructions it ran with, only their sum (the accuracy the real-GPU
// check aims at, docs/measuring-energy.md).
inline constexpr double kUnsplitPoolingError = 0.05;

// Where a row is, for messages.
struct RowAt {
  int stage = 0;
  std::string instruction;
  int frequency_mhz = 0;
  long line = 0;
};

// One error column over the rows that carry a value.
struct ErrorColumn {
  std::size_t rows = 0;  // rows with a value
  double median = 0.0, worst = 0.0;
  RowAt worst_at;
};

// A (stage, instruction) with rows pooled beyond kUnsplitPoolingError.
struct Unsplit {
  int stage = 0;
  std::string instruction;
  std::size_t rows = 0, of = 0;  // rows beyond the bound, of all its rows
  double worst = 0.0;
};

struct MeasurementError {
  std::size_t rows = 0;                                      // all rows
  std::optional<ErrorColumn> standard_error, pooling_error;  // absent: no row carries the column
  // By stage, then instruction: rows whose own energy is not measured, only their sum with the
  // instructions pooled with them.
  std::vector<Unsplit> unsplit;
  // The same of rows measured as differences from a reference row (energy_pooling_reference_mhz):
  // their pooling error is one offset in J shared by the instruction's rows at every clock.
  std::vector<Unsplit> offset;
};

// O(rows log rows).
MeasurementError measurement_error(const Profile& profile);

// One line per column the profile carries (none for a profile without them): the standard
// error's, then the pooling error's.
std::vector<std::string> describe(const MeasurementError& error);
// The pooling error's line alone; nullopt for a profile without the column.
std::optional<std::string> describe_pooling(const MeasurementError& error);

}  // namespace perseus::profile
