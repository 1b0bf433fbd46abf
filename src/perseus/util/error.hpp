// Error types for bad input and failed operations. Every message is one line that names what is
// wrong and where (file, line, field), so the CLI can print it as is and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace perseus {

// A user-facing error: bad input, unusable arguments, unwritable output.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds "file:line: field 'name': problem" (parts that are empty or zero are left out).
std::string located(const std::string& file, long line, const std::string& field,
                    const std::string& problem);

// What an exception says, for a message: "out of memory" for std::bad_alloc (whose what() is
// the bare "std::bad_alloc"), e.what() for any other.
std::string reason_of(const std::exception& e);

// A number as error messages show it (the shortest of %g's forms: "0.1", "1e+06").
std::string number(double v);

}  // namespace perseus
