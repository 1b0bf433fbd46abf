// Reading and writing profile CSV files (`stage,instruction,frequency,time,energy`, extra
// columns ignored), with full validation: every malformed input is rejected with a one-line
// perseus::Error that names the file, line and field.
#pragma once

#include <iosfwd>
#include <string>

#include "perseus/profile/profile.hpp"

namespace perseus::profile {

// Reads and validates a profile file.
Profile read_profile_csv(const std::string& path);
// Parses and validates CSV text; `source` names it in error messages.
Profile parse_profile_csv(std::istream& in, const std::string& source);
// Writes the profile in the canonical column order, sorted by stage, instruction, clock.
void write_profile_csv(const Profile& profile, std::ostream& out);

}  // namespace perseus::profile
