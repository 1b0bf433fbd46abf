#include "perseus/schedule/schedule_file.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "perseus/schedule/dag.hpp"
#include "perseus/util/csv.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/json_fields.hpp"
#include "perseus/util/text.hpp"

namespace perseus::schedule {

namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 7> kBookkeeping = {
    "UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F", "RECV_F", "SEND_B", "RECV_B"};
constexpr int kMaxIndex = 1 << 20;  // stage and microbatch numbers above this are not real

// Digits at the front of `s` as a number (-1 when none or too large); advances `s` past them.
int take_number(std::string_view& s) {
  std::size_t n = 0;
  long value = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9' && value <= kMaxIndex) {
    value = value * 10 + (s[n++] - '0');
  }
  s.remove_prefix(n);
  return n == 0 || value > kMaxIndex ? -1 : static_cast<int>(value);
}

void parse_item(std::string_view item, std::vector<Instruction>& out);

// An overlapped pair "(0F3;3B1)OVERLAP_F_B" (torch's notation; the text after ')' is not read):
// one item of a forward and a backward or backward-input, in the order given.
void parse_pair(std::string_view item, std::vector<Instruction>& out) {
  std::size_t close = item.find(')');
  if (close == std::string_view::npos) throw Error("unclosed '(' in '" + std::string(item) + "'");
  std::string_view inner = item.substr(1, close - 1);
  std::vector<Instruction> parts;
  for (std::size_t start = 0;;) {
    std::size_t semi = inner.find(';', start);
    parse_item(inner.substr(start, semi - start), parts);
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  auto forward = [](const Instruction& a) { return a.type == InstructionType::kForward; };
  auto backward = [](const Instruction& a) {
    return a.type == InstructionType::kBackward || a.type == InstructionType::kBackwardInput;
  };
  if (parts.size() != 2 ||
      !((forward(parts[0]) && backward(parts[1])) || (backward(parts[0]) && forward(parts[1])))) {
    throw Error("'" + std::string(item) +
                "' is not an overlapped pair: a forward and a backward (B or I), as in "
                "(0F3;3B1)OVERLAP_F_B");
  }
  out.push_back(overlapped_pair(parts[0], parts[1]));
}

// Appends the compute item of one cell (nothing for idle and bookkeeping items); throws a bare
// message for the caller to place.
void parse_item(std::string_view item, std::vector<Instruction>& out) {
  item = trim(item);
  if (item.empty()) return;
  if (item.front() == '(') return parse_pair(item, out);
  std::string_view rest = item;
  int stage = take_number(rest);
  std::size_t letters = 0;
  while (letters < rest.size() &&
         ((rest[letters] >= 'A' && rest[letters] <= 'Z') || rest[letters] == '_')) {
    ++letters;
  }
  std::string_view kind = rest.substr(0, letters);
  rest.remove_prefix(letters);
  int microbatch = rest.empty() ? -1 : take_number(rest);
  if (stage >= 0 && rest.empty() &&
      std::find(kBookkeeping.begin(), kBookkeeping.end(), kind) != kBookkeeping.end()) {
    return;
  }
  auto type = kind.size() == 1 ? type_of_letter(kind[0]) : std::nullopt;
  if (stage < 0 || microbatch < 0 || !rest.empty() || !type) {
    throw Error("'" + std::string(item) +
                "' is not an action in PyTorch's notation (stage, F/B/I/W, microbatch: 0F3)");
  }
  out.push_back({*type, microbatch, stage});
}

// A rank's items' actions, a pair's two in order.
std::vector<Instruction> actions_in(const std::vector<Instruction>& items) {
  std::vector<Instruction> out;
  for (const Instruction& item : items) {
    for (const Instruction& a : actions_of(item)) out.push_back(a);
  }
  return out;
}

// The rank of every stage, from where its actions are; throws naming a stage found on two ranks
// or a stage below the highest that has no actions.
std::vector<int> stage_ranks(const std::vector<std::vector<Instruction>>& ranks,
                             const std::string& source) {
  std::vector<int> owner;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    for (const Instruction& a : actions_in(ranks[r])) {
      if (a.stage >= static_cast<int>(owner.size())) owner.resize(a.stage + 1, -1);
      if (owner[a.stage] == -1) owner[a.stage] = r;
      if (owner[a.stage] != r) {
        throw Error(source + ": stage " + std::to_string(a.stage) + " has actions on rank " +
                    std::to_string(owner[a.stage]) + " and on rank " + std::to_string(r) +
                    " (a stage lives on one rank)");
      }
    }
  }
  auto missing = std::find(owner.begin(), owner.end(), -1);
  if (owner.empty()) throw Error(source + ": no actions");
  if (missing != owner.end()) {
    throw Error(source + ": stage " + std::to_string(missing - owner.begin()) +
                " has no actions but stage " + std::to_string(owner.size() - 1) + " has");
  }
  return owner;
}

std::vector<std::vector<std::string>> csv_items(const std::string& text) {
  std::vector<std::vector<std::string>> ranks;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ranks.emplace_back();
    for (auto field : csv::split_fields(line)) ranks.back().emplace_back(field);
  }
  while (!ranks.empty() &&
         std::all_of(ranks.back().begin(), ranks.back().end(), [](auto& s) { return s.empty(); })) {
    ranks.pop_back();  // trailing blank lines
  }
  return ranks;
}

// One rank's actions at path `where` of the document.
std::vector<std::string> json_rank(const JsonFields& fields, const json& list,
                                   const std::string& where) {
  fields.list(list, where, "a list of actions");
  std::vector<std::string> items;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i].is_null()) {
      items.emplace_back();
    } else if (list[i].is_string()) {
      items.push_back(list[i].get<std::string>());
    } else {
      fields.fail(JsonFields::element(where, i), "must be an action string or null");
    }
  }
  return items;
}

std::vector<std::vector<std::string>> json_items(const JsonFields& fields, const json& doc,
                                                 const std::string& source) {
  std::vector<std::vector<std::string>> ranks;
  if (doc.is_array()) {
    for (std::size_t r = 0; r < doc.size(); ++r) {
      ranks.push_back(json_rank(fields, doc[r], JsonFields::element("", r)));
    }
    return ranks;
  }
  if (!doc.is_object()) throw Error(source + ": expected an array of ranks or an object by rank");
  for (std::size_t r = 0; r < doc.size(); ++r) {
    const std::string key = std::to_string(r);
    if (!doc.contains(key)) {
      throw Error(source + ": ranks must be keyed \"0\"..\"" + std::to_string(doc.size() - 1) +
                  "\"; \"" + key + "\" is missing");
    }
    ranks.push_back(json_rank(fields, doc[key], key));
  }
  return ranks;
}

}  // namespace

Schedule schedule_from_actions(const std::string& name,
                               const std::vector<std::vector<std::string>>& items,
                               const std::string& source) {
  std::vector<std::vector<Instruction>> ranks(items.size());
  for (std::size_t r = 0; r < items.size(); ++r) {
    for (std::size_t i = 0; i < items[r].size(); ++i) {
      try {
        parse_item(items[r][i], ranks[r]);
      } catch (const Error& e) {
        throw Error(source + ": rank " + std::to_string(r) + " item " + std::to_string(i + 1) +
                    ": " + e.what());
      }
    }
  }
  std::vector<int> owner = stage_ranks(ranks, source);
  int microbatches = 0;
  for (const auto& list : ranks) {
    for (const Instruction& a : actions_in(list)) {
      microbatches = std::max(microbatches, a.microbatch + 1);
    }
  }
  Schedule s = empty_schedule(name, microbatches, std::move(owner), static_cast<int>(ranks.size()));
  s.ranks = std::move(ranks);
  try {
    Dag check(s);
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
  return s;
}

Schedule parse_schedule_text(const std::string& text, const std::string& source) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  bool is_json = first != std::string::npos && (text[first] == '[' || text[first] == '{');
  std::vector<std::vector<std::string>> items;
  if (is_json) {
    const JsonFields fields(source);
    items = json_items(fields, fields.parse(text), source);
  } else {
    items = csv_items(text);
  }
  std::string name = std::filesystem::path(source).filename().string();
  return schedule_from_actions(name.empty() ? source : name, items, source);
}

Schedule schedule_from_json(const std::string& name, const json& ranks, const std::string& source) {
  return schedule_from_actions(name, json_items(JsonFields(source), ranks, source), source);
}

Schedule read_schedule_file(const std::string& path) {
  return parse_schedule_text(read_file(path), path);
}

std::vector<std::vector<std::string>> action_texts(const Schedule& schedule) {
  std::vector<std::vector<std::string>> out;
  for (const auto& list : schedule.ranks) {
    out.emplace_back();
    for (const Instruction& a : list) out.back().push_back(action_name(a));
  }
  return out;
}

std::string schedule_to_csv(const Schedule& schedule) {
  std::string out;
  for (const auto& list : action_texts(schedule)) {
    for (std::size_t i = 0; i < list.size(); ++i) out += (i ? "," : "") + list[i];
    out += "\n";
  }
  return out;
}

}  // namespace perseus::schedule
