// Stage profiles: measured time and energy of each (stage, instruction type, SM clock). This is
// the input of planning and evaluation (architecture section 3).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/util/error.hpp"

namespace perseus::profile {

// One measured option: running an instruction at `frequency_mhz` takes `time_s` and `energy_j`.
struct Measurement {
  int frequency_mhz = 0;
  double time_s = 0.0;
  double energy_j = 0.0;
  long line = 0;  // line in the source file (0 when synthesized)
  // How well energy_j is known, relative to it, where the profile says: a measured profile's
  // `energy_stderr` and `energy_pooling_error` columns (perseus/profile/measurement_error.hpp).
  std::optional<double> energy_stderr{}, energy_pooling_error{};
  // `energy_pooling_reference_mhz`: energy_j was measured as a difference from the same
  // instruction's row at this clock (the instruction profiler's split-clock rounds), so its
  // pooling error is that row's, the same joules: one offset shared by the instruction's rows at
  // every clock that refer to it (plan::saving_error).
  std::optional<int> energy_pooling_reference_mhz{};

  // The relative errors above in J; nullopt where the row has none.
  std::optional<double> energy_stderr_j() const { return in_joules(energy_stderr); }
  std::optional<double> energy_pooling_error_j() const { return in_joules(energy_pooling_error); }

 private:
  std::optional<double> in_joules(const std::optional<double>& relative) const {
    return relative ? std::optional(*relative * energy_j) : std::nullopt;
  }
};

// Instruction type names a profile may contain.
const std::vector<std::string>& known_instructions();
bool is_known_instruction(const std::string& name);

// A profile sound in every other way whose times say an instruction runs more than 2 % slower at
// its highest clock than at its lowest: measurement noise larger than the clocks' difference (or
// a GPU that did not run the clocks asked for). A measuring tool may keep such a profile, saying
// so; a planner refuses it.
class SlowerAtHighestClock : public Error {
 public:
  using Error::Error;
};

class Profile {
 public:
  Profile() = default;
  explicit Profile(std::string source) : source_(std::move(source)) {}

  // Where the profile came from (file path or a description); used in error messages.
  const std::string& source() const { return source_; }

  // Adds one row (kept in insertion order). Throws perseus::Error naming the source, the row's
  // line and the field when a value is out of range: negative stage, unknown instruction,
  // non-positive clock or time, negative or non-finite energy.
  void add(int stage, const std::string& instruction, const Measurement& m);

  // Checks the profile as a whole: at least one row, stages 0..S-1 without gaps, every stage
  // has the same instruction types, no (stage, instruction, clock) twice, and no instruction
  // more than 2 % slower at its highest clock than at its lowest (measurement noise allowed).
  // Throws perseus::Error naming source, line and field; SlowerAtHighestClock for the last
  // check, made after all the others passed.
  void validate() const;

  // Number of stages: one past the highest stage index.
  int num_stages() const;
  bool has(int stage, const std::string& instruction) const;
  // Rows of one (stage, instruction); throws perseus::Error naming the profile if there are none.
  const std::vector<Measurement>& rows(int stage, const std::string& instruction) const;
  // Instruction types present for `stage`, in known_instructions() order.
  std::vector<std::string> instructions(int stage) const;
  // The row of one (stage, instruction, frequency); throws perseus::Error when absent.
  const Measurement& at(int stage, const std::string& instruction, int frequency_mhz) const;
  // Highest profiled clock of one (stage, instruction).
  int max_frequency(int stage, const std::string& instruction) const;

  const std::map<std::pair<int, std::string>, std::vector<Measurement>>& all() const {
    return rows_;
  }

 private:
  std::string source_;
  std::map<std::pair<int, std::string>, std::vector<Measurement>> rows_;
};

}  // namespace perseus::profile
