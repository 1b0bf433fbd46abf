#include "perseus/plan/plan_io.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/json_fields.hpp"
#include "perseus/util/text.hpp"

namespace perseus::plan {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "perseus.plan/1";

json time_energy(const TimeEnergy& te) {
  return {{"time_s", te.time_s}, {"energy_j", te.energy_j}};
}

std::optional<TimeEnergy> optional_time_energy(const JsonFields& fields, const json& doc,
                                               const char* name) {
  const json* value = fields.optional(doc, name);
  if (!value) return std::nullopt;
  return TimeEnergy{fields.number_at(*value, name, "time_s"),
                    fields.number_at(*value, name, "energy_j")};
}

// One rank's list of {"frequency_mhz": ...} entries at path `where`.
std::vector<int> rank_clocks(const JsonFields& fields, const json& list, const std::string& where) {
  fields.list(list, where, "a list of {\"frequency_mhz\": ...} entries");
  std::vector<int> clocks;
  for (std::size_t i = 0; i < list.size(); ++i) {
    clocks.push_back(fields.int_at(list[i], JsonFields::element(where, i), "frequency_mhz", 1));
  }
  return clocks;
}

Plan plan_from_json(const std::string& text, const std::string& source) {
  const JsonFields fields(source);
  const json doc = fields.parse(text);
  if (fields.text_field(fields.document(doc), "format") != kFormat) {
    fields.fail("format", std::string("not a Perseus plan format (expected ") + kFormat + ")");
  }
  Plan plan;
  plan.schedule = fields.text_field(doc, "schedule");
  plan.num_stages = fields.int_field(doc, "num_stages", 1);
  plan.num_microbatches = fields.int_field(doc, "num_microbatches", 1);
  plan.stages_per_rank =
      doc.contains("stages_per_rank") ? fields.int_field(doc, "stages_per_rank", 1) : 1;
  plan.unit_time_s = doc.contains("unit_time_s") ? fields.number_field(doc, "unit_time_s") : 0.0;
  plan.blocking_power_w =
      doc.contains("blocking_power_w") ? fields.number_field(doc, "blocking_power_w") : 0.0;
  plan.predicted = optional_time_energy(fields, doc, "predicted");
  plan.evaluated = optional_time_energy(fields, doc, "evaluated");
  const json& stages = fields.list(fields.member(doc, "stages"), "stages", "a list of rank lists");
  for (std::size_t s = 0; s < stages.size(); ++s) {
    plan.frequencies.push_back(rank_clocks(fields, stages[s], JsonFields::element("stages", s)));
  }
  if (static_cast<long>(plan.frequencies.size()) * plan.stages_per_rank != plan.num_stages) {
    throw Error(source + ": num_stages is " + std::to_string(plan.num_stages) + " and " +
                "stages_per_rank " + std::to_string(plan.stages_per_rank) + " but 'stages' has " +
                std::to_string(plan.frequencies.size()) + " rank lists");
  }
  return plan;
}

// One entry of a list-literal plan: a bare clock, or Zeus's ("forward", 1410) tuple.
struct ListEntry {
  std::string instruction;  // empty for a bare clock
  int mhz = 0;
};
using ListPlan = std::vector<std::vector<ListEntry>>;

// A tiny parser for `[[int, ...], ...]` and `[[("name", int), ...], ...]` (tuples or lists, either
// quote) with `#` comments; it never evaluates anything. One file uses one kind of entry.
class ListParser {
 public:
  ListParser(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  ListPlan parse() {
    ListPlan plan = sequence<std::vector<ListEntry>>('[', ']', [&] { return parse_stage(); });
    if (peek() != '\0') fail("unexpected text after the closing ']'");
    if (plan.empty()) fail("no stages");
    return plan;
  }

 private:
  // `open` item, item, ... `close` (a trailing comma allowed), each item read by `item`.
  template <typename T, typename F>
  std::vector<T> sequence(char open, char close, F&& item) {
    expect(open);
    std::vector<T> items;
    while (peek() != close) {
      items.push_back(item());
      if (peek() == ',')
        ++pos_;
      else if (peek() != close)
        fail(std::string("expected ',' or '") + close + "'");
    }
    ++pos_;
    return items;
  }

  std::vector<ListEntry> parse_stage() {
    return sequence<ListEntry>('[', ']', [&] { return parse_entry(); });
  }

  ListEntry parse_entry() {
    char c = peek();
    bool tuple = c == '(' || c == '[';
    if (kind_ == Kind::kUnknown) kind_ = tuple ? Kind::kTuples : Kind::kClocks;
    if (tuple != (kind_ == Kind::kTuples)) {
      fail(kind_ == Kind::kTuples ? "expected an (instruction, MHz) pair like the entries before"
                                  : "expected a clock in MHz like the entries before");
    }
    if (!tuple) return {"", parse_int()};
    char close = c == '(' ? ')' : ']';
    ++pos_;
    ListEntry e;
    e.instruction = parse_string();
    expect(',');
    e.mhz = parse_int();
    if (peek() == ',') ++pos_;
    expect(close);
    return e;
  }

  std::string parse_string() {
    char quote = peek();
    if (quote != '"' && quote != '\'') fail("expected a quoted instruction name");
    std::size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote && text_[pos_] != '\n' &&
           text_[pos_] != '\\') {
      ++pos_;
    }
    if (pos_ >= text_.size() || text_[pos_] != quote) fail("unterminated or escaped name");
    return text_.substr(start, pos_++ - start);
  }

  int parse_int() {
    skip();
    std::size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (start == pos_ || pos_ - start > 6) fail("expected a clock in MHz");
    int v = std::stoi(text_.substr(start, pos_ - start));
    if (v <= 0) fail("clock must be positive");
    return v;
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  // Next significant character ('\0' at the end), skipping spaces and comments.
  char peek() {
    skip();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  void skip() {
    while (pos_ < text_.size()) {
      if (std::isspace(static_cast<unsigned char>(text_[pos_])))
        ++pos_;
      else if (text_[pos_] == '#')
        pos_ = std::min(text_.find('\n', pos_), text_.size());
      else
        break;
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    std::string where = pos_ < text_.size() ? "" : " (at the end of the file)";
    throw Error(source_ + ":" + std::to_string(line_at(text_, pos_)) + ": " + what + where);
  }

  enum class Kind { kUnknown, kClocks, kTuples };
  const std::string& text_;
  const std::string& source_;
  std::size_t pos_ = 0;
  Kind kind_ = Kind::kUnknown;
};

bool same_list(const std::vector<ListEntry>& a, const std::vector<ListEntry>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.instruction == y.instruction && x.mhz == y.mhz;
  });
}

// One list per stage from one list per rank; `stage_of_rank` has one entry per list.
ListPlan fold_copies(const ListPlan& list, const std::vector<int>& stage_of_rank,
                     const std::string& source) {
  const int stages = *std::max_element(stage_of_rank.begin(), stage_of_rank.end()) + 1;
  ListPlan folded(static_cast<std::size_t>(stages));
  std::vector<int> first(folded.size(), -1);  // the rank each stage's list came from
  for (std::size_t rank = 0; rank < list.size(); ++rank) {
    const auto stage = static_cast<std::size_t>(stage_of_rank[rank]);
    if (first[stage] < 0) {
      first[stage] = static_cast<int>(rank);
      folded[stage] = list[rank];
    } else if (!same_list(folded[stage], list[rank])) {
      throw Error(source + ": ranks " + std::to_string(first[stage]) + " and " +
                  std::to_string(rank) + " both run stage " + std::to_string(stage) +
                  " but their lists differ; Perseus serves one plan per stage: give every " +
                  "data- and tensor-parallel copy of a stage the same list");
    }
  }
  return folded;
}

// The schedule Zeus's pairs name, stage by stage.
schedule::Schedule identify_list(const ListPlan& list, const std::string& source) {
  std::vector<std::vector<schedule::InstructionType>> types(list.size());
  for (std::size_t s = 0; s < list.size(); ++s) {
    for (const auto& e : list[s]) {
      try {
        types[s].push_back(schedule::parse_type(e.instruction));
      } catch (const Error& err) {
        throw Error(source + ": stage " + std::to_string(s) + ": " + err.what());
      }
    }
  }
  try {
    return schedule::identify_schedule(types);
  } catch (const Error& err) {
    throw Error(source + ": " + err.what());
  }
}

// Zeus's pairs: the lists folded into stages (parse_plan says how) and their schedule.
std::pair<ListPlan, schedule::Schedule> zeus_stages(ListPlan list,
                                                    const std::vector<int>& stage_of_rank,
                                                    const std::string& source) {
  const bool known = stage_of_rank.size() == list.size();
  if (known) list = fold_copies(list, stage_of_rank, source);
  try {
    auto sched = identify_list(list, source);
    return {std::move(list), std::move(sched)};
  } catch (const Error&) {
    if (known) throw;
    for (std::size_t copies = 2; copies <= list.size() / 2; ++copies) {
      if (list.size() % copies != 0) continue;
      std::vector<int> blocks(list.size());
      for (std::size_t rank = 0; rank < list.size(); ++rank) {
        blocks[rank] = static_cast<int>(rank / copies);
      }
      try {
        ListPlan folded = fold_copies(list, blocks, source);
        auto sched = identify_list(folded, source);
        return {std::move(folded), std::move(sched)};
      } catch (const Error&) {  // not copies in blocks of this size
      }
    }
    throw;
  }
}

// A list-literal plan. Zeus's pairs name every instruction, which identifies the schedule; bare
// clocks give the microbatch count (every stage runs 2M instructions) and no schedule.
Plan plan_from_list(const std::string& text, const std::string& source,
                    const std::vector<int>& stage_of_rank) {
  ListPlan list = ListParser(text, source).parse();
  std::optional<schedule::Schedule> named;
  if (!list[0].empty() && !list[0][0].instruction.empty()) {
    auto [stages, sched] = zeus_stages(std::move(list), stage_of_rank, source);
    list = std::move(stages);
    named = std::move(sched);
  }
  Plan plan;
  plan.schedule.clear();
  plan.num_stages = static_cast<int>(list.size());
  for (const auto& stage : list) {
    std::vector<int> clocks;
    for (const auto& e : stage) clocks.push_back(e.mhz);
    plan.frequencies.push_back(std::move(clocks));
  }
  if (named) {
    plan.schedule = named->name;
    plan.num_microbatches = named->num_microbatches;
    return plan;
  }
  std::size_t size = plan.frequencies[0].size();
  bool uniform = std::all_of(plan.frequencies.begin(), plan.frequencies.end(),
                             [&](const auto& st) { return st.size() == size; });
  if (uniform && size % 2 == 0 && size > 0) plan.num_microbatches = static_cast<int>(size / 2);
  return plan;
}

// The list literal shared by the clock and Zeus formats: `[\n[e, e, ...],\n...\n]\n`, one list
// per rank, entry(rank, position) the text of one element; then `# comment` when not empty.
template <typename Entry>
std::string list_literal(const FrequencyPlan& frequencies, const std::string& comment,
                         Entry entry) {
  std::string out = "[\n";
  for (std::size_t s = 0; s < frequencies.size(); ++s) {
    out += "[";
    for (std::size_t i = 0; i < frequencies[s].size(); ++i) {
      if (i) out += ", ";
      out += entry(s, i);
    }
    out += "],\n";
  }
  out += "]\n";
  if (!comment.empty()) out += "# " + comment + "\n";
  return out;
}

}  // namespace

std::optional<double> blocking_power_for(const Plan& plan, std::optional<double> given) {
  if (given) return given;
  if (plan.blocking_power_w > 0.0) return plan.blocking_power_w;
  return std::nullopt;
}

std::string plan_to_json(const Plan& plan, const schedule::Schedule& schedule) {
  json stages = json::array();
  for (std::size_t r = 0; r < plan.frequencies.size(); ++r) {
    json list = json::array();
    for (std::size_t i = 0; i < plan.frequencies[r].size(); ++i) {
      const auto& inst = schedule.ranks[r][i];
      json entry = {{"stage", inst.stage},
                    {"type", schedule::type_name(inst.type)},
                    {"microbatch", inst.microbatch},
                    {"frequency_mhz", plan.frequencies[r][i]}};
      if (inst.overlapped()) {  // run with it under the same clock
        entry["overlapped"] = {{"stage", inst.overlapped_stage},
                               {"type", schedule::type_name(inst.overlapped_type)},
                               {"microbatch", inst.overlapped_microbatch}};
      }
      list.push_back(std::move(entry));
    }
    stages.push_back(std::move(list));
  }
  json doc = {{"format", kFormat},
              {"schedule", plan.schedule},
              {"num_stages", plan.num_stages},
              {"num_microbatches", plan.num_microbatches},
              {"stages_per_rank", schedule.stages_per_rank()},
              {"unit_time_s", plan.unit_time_s},
              {"blocking_power_w", plan.blocking_power_w}};
  if (plan.predicted) doc["predicted"] = time_energy(*plan.predicted);
  if (plan.evaluated) doc["evaluated"] = time_energy(*plan.evaluated);
  doc["stages"] = std::move(stages);
  return doc.dump(1) + "\n";
}

std::string plan_to_python_list(const FrequencyPlan& frequencies, const std::string& comment) {
  return list_literal(frequencies, comment, [&](std::size_t s, std::size_t i) {
    return std::to_string(frequencies[s][i]);
  });
}

std::string plan_to_zeus_list(const FrequencyPlan& frequencies, const schedule::Schedule& schedule,
                              const std::string& comment) {
  return list_literal(frequencies, comment, [&](std::size_t s, std::size_t i) {
    return "(\"" + schedule::type_name(schedule.ranks[s][i].type) + "\", " +
           std::to_string(frequencies[s][i]) + ")";
  });
}

ScheduleChoice plan_schedule(const Plan& plan, const ScheduleChoice& given,
                             const std::string& source) {
  ScheduleChoice choice = given;
  if (!plan.schedule.empty()) {
    if (!given.name.empty() && given.name != plan.schedule) {
      throw Error(source + ": the plan is for the " + plan.schedule + " schedule, not " +
                  given.name);
    }
    choice.name = plan.schedule;
  }
  if (choice.name.empty()) choice.name = "1f1b";
  if (plan.stages_per_rank > 0) {
    if (given.stages_per_rank > 0 && given.stages_per_rank != plan.stages_per_rank) {
      throw Error(source + ": the plan runs " + std::to_string(plan.stages_per_rank) +
                  " stages per rank, not " + std::to_string(given.stages_per_rank));
    }
    choice.stages_per_rank = plan.stages_per_rank;
  }
  if (plan.num_microbatches > 0) {
    if (given.microbatches > 0 && given.microbatches != plan.num_microbatches) {
      throw Error(source + ": the plan is for " + std::to_string(plan.num_microbatches) +
                  " microbatches, not " + std::to_string(given.microbatches));
    }
    choice.microbatches = plan.num_microbatches;
  }
  if (choice.microbatches <= 0) {
    throw Error(source + ": the plan does not say its microbatch count (its stages differ in " +
                "length); give the microbatch count");
  }
  return choice;
}

Plan parse_plan(const std::string& text, const std::string& source,
                const std::vector<int>& stage_of_rank) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return plan_from_json(text, source);
  if (first != std::string::npos && (text[first] == '[' || text[first] == '#')) {
    return plan_from_list(text, source, stage_of_rank);
  }
  std::string line = first == std::string::npos ? "" : ":" + std::to_string(line_at(text, first));
  throw Error(source + line + ": unknown plan format (expected a perseus.plan/1 JSON object or a " +
              "freqs_pipeline list literal)");
}

Plan read_plan_file(const std::string& path, const std::vector<int>& stage_of_rank) {
  return parse_plan(read_file(path), path, stage_of_rank);
}

}  // namespace perseus::plan
