#include "perseus/util/error.hpp"

namespace perseus {

std::string located(const std::string& file, long line, const std::string& field,
                    const std::string& problem) {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
  if (!out.empty()) out += ": ";
  if (!field.empty()) out += "field '" + field + "': ";
  return out + problem;
}

}  // namespace perseus
