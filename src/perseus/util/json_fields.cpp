#include "perseus/util/json_fields.hpp"

#include <algorithm>
#include <cmath>

#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus {

namespace {

// nlohmann's parse message is "[json.exception.parse_error.101] parse error at line 1, column 2:
// REASON; last read: '<raw bytes>'": keep only the reason, never the input.
std::string parse_reason(const std::string& what) {
  std::string reason = what.substr(std::min(what.size(), what.find(']') + 2));
  reason = reason.substr(0, reason.find(';'));
  const auto colon = reason.find(": ");
  return colon == std::string::npos ? reason : reason.substr(colon + 2);
}

}  // namespace

void JsonFields::fail(const std::string& field, const std::string& problem) const {
  throw Error(located(source_, 0, field, problem));
}

template <class J>
std::string JsonFields::shown(const J& value) {
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  constexpr std::size_t kMaxShown = 40;
  std::string text = value.dump();
  return text.size() <= kMaxShown ? text : text.substr(0, kMaxShown) + "...";
}

template <class J>
J JsonFields::parse(const std::string& text) const {
  try {
    return J::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    const long line = source_.empty() ? 0 : line_at(text, e.byte > 0 ? e.byte - 1 : 0);
    throw Error(
        located(source_, line, "",
                "invalid JSON at byte " + std::to_string(e.byte) + ": " + parse_reason(e.what())));
  } catch (const nlohmann::json::out_of_range&) {
    throw Error(located(source_, 0, "", "invalid JSON: a number is beyond double precision"));
  }
}

std::string JsonFields::element(const std::string& field, std::size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

std::string JsonFields::child(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "." + name;
}

template <class J>
const J& JsonFields::document(const J& doc) const {
  if (doc.is_object()) return doc;
  if (source_.empty()) throw Error("request body must be a JSON object");
  fail("", "must be a JSON object");
}

template <class J>
const J* JsonFields::find(const J& obj, const std::string& name, const std::string& parent) const {
  if (parent.empty())
    document(obj);
  else
    object(obj, parent);
  auto it = obj.find(name);
  return it == obj.end() ? nullptr : &*it;
}

template <class J>
const J& JsonFields::member(const J& obj, const std::string& name,
                            const std::string& parent) const {
  const J* value = find(obj, name, parent);
  if (!value) fail(child(parent, name), "missing");
  return *value;
}

template <class J>
const J* JsonFields::optional(const J& obj, const std::string& name,
                              const std::string& parent) const {
  const J* value = find(obj, name, parent);
  return value && !value->is_null() ? value : nullptr;
}

template <class J>
const J& JsonFields::object(const J& value, const std::string& field,
                            const std::string& what) const {
  if (!value.is_object()) fail(field, "must be " + what);
  return value;
}

template <class J>
const J& JsonFields::list(const J& value, const std::string& field, const std::string& what) const {
  if (!value.is_array()) fail(field, "must be " + what);
  return value;
}

template <class J>
int JsonFields::as_int(const J& value, const std::string& field, long long min,
                       long long max) const {
  const bool integral = value.is_number_integer() ||
                        (value.is_number_float() && std::isfinite(value.template get<double>()) &&
                         value.template get<double>() == std::floor(value.template get<double>()));
  const double v = value.is_number() ? value.template get<double>() : 0.0;
  if (!integral || v < static_cast<double>(min) || v > static_cast<double>(max)) {
    fail(field, (max == INT_MAX ? "must be an integer >= " + std::to_string(min)
                                : "must be an integer in [" + std::to_string(min) + ", " +
                                      std::to_string(max) + "]") +
                    ", got " + shown(value));
  }
  return static_cast<int>(v);
}

template <class J>
double JsonFields::as_number(const J& value, const std::string& field) const {
  if (!value.is_number()) fail(field, "must be a number, got " + shown(value));
  const double v = value.template get<double>();
  if (!std::isfinite(v) || v < 0.0)
    fail(field, "must be a finite number >= 0, got " + shown(value));
  return v;
}

template <class J>
std::vector<double> JsonFields::numbers(const J& value, const std::string& field) const {
  list(value, field, "a list of numbers");
  std::vector<double> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i)
    out.push_back(as_number(value[i], element(field, i)));
  return out;
}

template <class J>
std::string JsonFields::as_text(const J& value, const std::string& field, bool non_empty) const {
  if (!value.is_string() || (non_empty && value.template get<std::string>().empty())) {
    fail(field, std::string(non_empty ? "must be a non-empty string" : "must be a string") +
                    ", got " + shown(value));
  }
  return value.template get<std::string>();
}

template <class J>
bool JsonFields::as_bool(const J& value, const std::string& field) const {
  if (!value.is_boolean()) fail(field, "must be true or false, got " + shown(value));
  return value.template get<bool>();
}

// The two JSON types Perseus reads.
#define PERSEUS_JSON_FIELDS(J)                                                                    \
  template std::string JsonFields::shown(const J&);                                               \
  template J JsonFields::parse(const std::string&) const;                                         \
  template const J& JsonFields::document(const J&) const;                                         \
  template const J& JsonFields::member(const J&, const std::string&, const std::string&) const;   \
  template const J* JsonFields::optional(const J&, const std::string&, const std::string&) const; \
  template const J& JsonFields::object(const J&, const std::string&, const std::string&) const;   \
  template const J& JsonFields::list(const J&, const std::string&, const std::string&) const;     \
  template int JsonFields::as_int(const J&, const std::string&, long long, long long) const;      \
  template double JsonFields::as_number(const J&, const std::string&) const;                      \
  template std::vector<double> JsonFields::numbers(const J&, const std::string&) const;           \
  template std::string JsonFields::as_text(const J&, const std::string&, bool) const;             \
  template bool JsonFields::as_bool(const J&, const std::string&) const;
PERSEUS_JSON_FIELDS(nlohmann::json)
PERSEUS_JSON_FIELDS(nlohmann::ordered_json)
#undef PERSEUS_JSON_FIELDS

}  // namespace perseus
