// The one JSON field reader (perseus/util/json_fields.hpp): each class of bad value gets one
// message in located()'s style, naming the source and the field's path; integers are checked
// (2.5, true and "8" refused, 1410.0 taken); messages never echo a large part of the input; both
// JSON types read the same.
#include "perseus/util/json_fields.hpp"

#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace {

using nlohmann::json;
using perseus::JsonFields;
using perseus::test::error_of;

const JsonFields file("plan.json");
const JsonFields request;

TEST(JsonFields, MessagesNameTheSourceAndThePath) {
  const json doc = json::parse(R"({"stages": [[{"mhz": 2.5}]], "name": 5})");
  const json& entry = doc["stages"][0][0];
  const std::string at =
      JsonFields::child(JsonFields::element(JsonFields::element("stages", 0), 0), "mhz");
  EXPECT_EQ(at, "stages[0][0].mhz");
  EXPECT_EQ(error_of([&] { file.as_int(entry["mhz"], at, 1); }),
            "plan.json: field 'stages[0][0].mhz': must be an integer >= 1, got 2.5");
  EXPECT_EQ(error_of([&] { request.as_int(entry["mhz"], at, 1); }),
            "field 'stages[0][0].mhz': must be an integer >= 1, got 2.5");
  EXPECT_EQ(error_of([&] { file.member(entry, "hz", "stages[0][0]"); }),
            "plan.json: field 'stages[0][0].hz': missing");
  EXPECT_EQ(error_of([&] { file.int_at(entry, "stages[0][0]", "mhz", 1); }),
            "plan.json: field 'stages[0][0].mhz': must be an integer >= 1, got 2.5");
  EXPECT_EQ(error_of([&] { file.number_at(entry, "stages[0][0]", "hz"); }),
            "plan.json: field 'stages[0][0].hz': missing");
  EXPECT_EQ(error_of([&] { file.text_field(doc, "name"); }),
            "plan.json: field 'name': must be a string, got 5");
  EXPECT_EQ(error_of([&] { file.member(doc["stages"], "x", "stages"); }),
            "plan.json: field 'stages': must be an object");
}

TEST(JsonFields, TheDocumentMustBeAnObject) {
  EXPECT_EQ(error_of([&] { request.int_field(json::array(), "rank", 0); }),
            "request body must be a JSON object");
  EXPECT_EQ(error_of([&] { file.int_field(json(3), "rank", 0); }),
            "plan.json: must be a JSON object");
}

TEST(JsonFields, IntegersAreCheckedNotConverted) {
  EXPECT_EQ(file.as_int(json(1410), "f", 1), 1410);
  EXPECT_EQ(file.as_int(json(1410.0), "f", 1), 1410);
  for (const json& bad : {json(2.5), json(true), json("8"), json(nullptr), json(0), json(1e12),
                          json(-1), json(4294968706LL)}) {
    EXPECT_CONTAINS(error_of([&] { file.as_int(bad, "f", 1); }), "must be an integer >= 1, got ")
        << bad.dump();
  }
  EXPECT_EQ(error_of([&] { file.as_int(json(2), "algo", 0, 1); }),
            "plan.json: field 'algo': must be an integer in [0, 1], got 2");
}

TEST(JsonFields, NumbersAreFiniteAndNotNegative) {
  EXPECT_EQ(file.as_number(json(0.5), "p"), 0.5);
  EXPECT_EQ(error_of([&] { file.as_number(json(-1.5), "p"); }),
            "plan.json: field 'p': must be a finite number >= 0, got -1.5");
  EXPECT_EQ(error_of([&] { file.numbers(json::parse("[1, \"2\"]"), "xs"); }),
            "plan.json: field 'xs[1]': must be a number, got \"2\"");
  EXPECT_EQ(error_of([&] { file.numbers(json(1), "xs"); }),
            "plan.json: field 'xs': must be a list of numbers");
}

TEST(JsonFields, OptionalMembersTreatNullAsAbsent) {
  const json doc = json::parse(R"({"a": null, "b": 1})");
  EXPECT_EQ(file.optional(doc, "a"), nullptr);
  EXPECT_EQ(file.optional(doc, "c"), nullptr);
  ASSERT_NE(file.optional(doc, "b"), nullptr);
  EXPECT_EQ(*file.optional(doc, "b"), 1);
}

TEST(JsonFields, MessagesNeverEchoLargeInput) {
  const std::string long_text(1000, 'x');
  const std::string msg = error_of([&] { file.as_number(json(long_text), "p"); });
  EXPECT_LT(msg.size(), 120u) << msg;
  EXPECT_CONTAINS(msg, "...");
  EXPECT_EQ(error_of([&] {
              file.as_bool(json::array({1, 2, 3}), "done");
            }),
            "plan.json: field 'done': must be true or false, got a list");
  EXPECT_EQ(error_of([&] { file.as_int(json::object(), "n", 0); }),
            "plan.json: field 'n': must be an integer >= 0, got an object");
}

TEST(JsonFields, OrderedJsonReadsTheSame) {
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(R"({"n": 2.5, "s": ""})");
  EXPECT_EQ(error_of([&] { file.int_field(doc, "n", 1); }),
            "plan.json: field 'n': must be an integer >= 1, got 2.5");
  EXPECT_EQ(error_of([&] { file.text_field(doc, "s", true); }),
            "plan.json: field 's': must be a non-empty string, got \"\"");
  EXPECT_EQ(file.text_field(doc, "s"), "");
}

}  // namespace
