// Reading typed fields out of JSON values with one message style: every problem throws
// perseus::Error "field 'NAME': PROBLEM", NAME being the field's path (spans[3], keys[0].mhz).
// Used by the wire protocol's parsers and by the other JSON formats the client reads (attribution
// traces).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace perseus::wire {

[[noreturn]] void bad_field(const std::string& field, const std::string& problem);

// The path of element i of the list `field`: field[i].
std::string element(const std::string& field, std::size_t i);

// body[field]; throws when `body` is not an object or the field is missing. `parent` is body's
// own path (keys[0]: errors name keys[0].field); empty for a request body ("request body must be
// a JSON object").
const nlohmann::json& member(const nlohmann::json& body, const std::string& field,
                             const std::string& parent = "");

// An integer in [min, INT_MAX].
int as_int(const nlohmann::json& value, const std::string& field, int min);
int int_field(const nlohmann::json& body, const std::string& field, int min);

// A finite number >= 0.
double as_number(const nlohmann::json& value, const std::string& field);
double number_field(const nlohmann::json& body, const std::string& field);

// A list of finite numbers >= 0.
std::vector<double> numbers(const nlohmann::json& value, const std::string& field);

}  // namespace perseus::wire
