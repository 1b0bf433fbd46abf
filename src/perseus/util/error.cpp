#include "perseus/util/error.hpp"

#include <cstdio>
#include <new>

namespace perseus {

std::string reason_of(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "out of memory";
  return e.what();
}

std::string located(const std::string& file, long line, const std::string& field,
                    const std::string& problem) {
  std::string out;
  out.append(file);
  if (line > 0) out.append(":").append(std::to_string(line));
  if (!out.empty()) out.append(": ");
  if (!field.empty()) out.append("field '").append(field).append("': ");
  out.append(problem);
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace perseus
