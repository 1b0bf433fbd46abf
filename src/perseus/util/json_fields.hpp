// The one reader of typed fields in JSON documents: wire requests, scheduler arguments and
// straggler reports, plan files, frontier metadata, schedule files, search model and
// configuration files, attribution traces, measured-run files. Every problem
// throws perseus::Error in one message style, located(): "SOURCE: field 'PATH': PROBLEM", PATH
// being the field's path in the document (stages[3].frequency_mhz, keys[0].mhz) and SOURCE the
// file; a request body has no source ("field 'rank': must be an integer >= 0, got -1").
//
// nlohmann's own conversions are never applied to input: get<int>() truncates 2.5, wraps large
// values and turns true into 1, and its exceptions name no field. Integers may be written 1410 or
// 1410.0; numbers must be finite and >= 0 unless a reader checks more.
//
// Works on nlohmann::json and nlohmann::ordered_json (the search files keep their key order).
#pragma once

#include <climits>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace perseus {

class JsonFields {
 public:
  // `source`: the file the document came from; empty for a request body.
  explicit JsonFields(std::string source = "") : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const;

  // The document in `text`. Invalid JSON fails saying where it broke and why:
  // "SOURCE:LINE: invalid JSON at byte N: REASON" (no source and line for a request body).
  template <class J = nlohmann::json>
  J parse(const std::string& text) const;

  // A value as messages show it: scalars as written (long strings cut), a list or an object by
  // its kind, so that a message never echoes a large part of the input.
  template <class J>
  static std::string shown(const J& value);

  // The path of element i of the list `field` (field[i]) and of member `name` of `parent`
  // (parent.name, or name at the top).
  static std::string element(const std::string& field, std::size_t i);
  static std::string child(const std::string& parent, const std::string& name);

  // Fails unless the whole document is a JSON object ("request body must be a JSON object").
  template <class J>
  const J& document(const J& doc) const;
  // obj[name]; fails when `obj` (at path `parent`, empty for the document) is not an object or
  // has no such member.
  template <class J>
  const J& member(const J& obj, const std::string& name, const std::string& parent = "") const;
  // obj[name], or nullptr when it is absent or null.
  template <class J>
  const J* optional(const J& obj, const std::string& name, const std::string& parent = "") const;

  // `value` itself, failing with "must be PROBLEM" unless it is an object / a list.
  template <class J>
  const J& object(const J& value, const std::string& field,
                  const std::string& what = "an object") const;
  template <class J>
  const J& list(const J& value, const std::string& field, const std::string& what = "a list") const;

  // An integer in [min, max] (1410 or 1410.0; not 2.5, true or "8").
  template <class J>
  int as_int(const J& value, const std::string& field, long long min,
             long long max = INT_MAX) const;
  // A finite number >= 0.
  template <class J>
  double as_number(const J& value, const std::string& field) const;
  // A list of finite numbers >= 0.
  template <class J>
  std::vector<double> numbers(const J& value, const std::string& field) const;
  // A string; `non_empty` also refuses "".
  template <class J>
  std::string as_text(const J& value, const std::string& field, bool non_empty = false) const;
  template <class J>
  bool as_bool(const J& value, const std::string& field) const;

  // member() then the conversion: obj[name] at path parent.name (name at the top, parent "").
  template <class J>
  int int_at(const J& obj, const std::string& parent, const std::string& name, long long min,
             long long max = INT_MAX) const {
    return as_int(member(obj, name, parent), child(parent, name), min, max);
  }
  template <class J>
  double number_at(const J& obj, const std::string& parent, const std::string& name) const {
    return as_number(member(obj, name, parent), child(parent, name));
  }
  template <class J>
  std::string text_at(const J& obj, const std::string& parent, const std::string& name,
                      bool non_empty = false) const {
    return as_text(member(obj, name, parent), child(parent, name), non_empty);
  }
  // The same at the top of the document.
  template <class J>
  int int_field(const J& obj, const std::string& name, long long min,
                long long max = INT_MAX) const {
    return int_at(obj, "", name, min, max);
  }
  template <class J>
  double number_field(const J& obj, const std::string& name) const {
    return number_at(obj, "", name);
  }
  template <class J>
  std::string text_field(const J& obj, const std::string& name, bool non_empty = false) const {
    return text_at(obj, "", name, non_empty);
  }

 private:
  // obj[name] or nullptr, after checking `obj` is the document or an object.
  template <class J>
  const J* find(const J& obj, const std::string& name, const std::string& parent) const;

  std::string source_;
};

}  // namespace perseus
