#include "perseus/wire/json_fields.hpp"

#include <cmath>
#include <limits>

#include "perseus/util/error.hpp"

namespace perseus::wire {

using nlohmann::json;

void bad_field(const std::string& field, const std::string& problem) {
  throw Error("field '" + field + "': " + problem);
}

std::string element(const std::string& field, std::size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

const json& member(const json& body, const std::string& field, const std::string& parent) {
  if (!body.is_object()) {
    if (parent.empty()) throw Error("request body must be a JSON object");
    bad_field(parent, "must be an object");
  }
  auto it = body.find(field);
  if (it == body.end()) bad_field(parent.empty() ? field : parent + "." + field, "missing");
  return *it;
}

int as_int(const json& value, const std::string& field, int min) {
  if (!value.is_number_integer()) bad_field(field, "must be an integer");
  auto v = value.get<long long>();
  if (v < min || v > std::numeric_limits<int>::max()) {
    bad_field(field, "must be an integer >= " + std::to_string(min));
  }
  return static_cast<int>(v);
}

int int_field(const json& body, const std::string& field, int min) {
  return as_int(member(body, field), field, min);
}

double as_number(const json& value, const std::string& field) {
  if (!value.is_number()) bad_field(field, "must be a number");
  double v = value.get<double>();
  if (!std::isfinite(v) || v < 0.0) bad_field(field, "must be a finite number >= 0");
  return v;
}

double number_field(const json& body, const std::string& field) {
  return as_number(member(body, field), field);
}

std::vector<double> numbers(const json& value, const std::string& field) {
  if (!value.is_array()) bad_field(field, "must be a list of numbers");
  std::vector<double> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    out.push_back(as_number(value[i], element(field, i)));
  }
  return out;
}

}  // namespace perseus::wire
