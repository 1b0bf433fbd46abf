// Reading and writing profile CSV files (`stage,instruction,frequency,time,energy`; a measured
// profile's `energy_stderr`, `energy_pooling_error` and `energy_pooling_reference_mhz` are read
// into each Measurement, other extra columns ignored), with full validation: every malformed input
// is rejected with a one-line perseus::Error that names the file, line and field.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "perseus/profile/profile.hpp"

namespace perseus::profile {

// Reads and validates a profile file.
Profile read_profile_csv(const std::string& path);
// Parses and validates CSV text; `source` names it in error messages.
Profile parse_profile_csv(std::istream& in, const std::string& source);
// Parses CSV text, checking each row but not the profile as a whole (Profile::validate): for a
// caller that validated the same profile already and wants its rows with their lines.
Profile parse_profile_rows(std::istream& in, const std::string& source);
// An extra column written after the required ones: its value for a row (stage, instruction,
// clock), empty when it has none.
struct ExtraColumn {
  std::string name;
  std::function<std::optional<double>(int stage, const std::string& instruction, int mhz)> value;
};
// Writes the profile in the canonical column order, sorted by stage, instruction, clock, then
// energy_stderr, energy_pooling_error and energy_pooling_reference_mhz where some row has one,
// then the extra columns (readers ignore columns they do not know).
void write_profile_csv(const Profile& profile, std::ostream& out,
                       const std::vector<ExtraColumn>& extra = {});

}  // namespace perseus::profile
