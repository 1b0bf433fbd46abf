#include "cli/did_you_mean.hpp"

#include <algorithm>
#include <numeric>

#include "perseus/util/text.hpp"

namespace perseus::cli {

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> subcommand_names(CLI::App& app) {
  std::vector<std::string> names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
    for (const auto& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

CLI::App* subcommand_named(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) return sub;
  }
  return nullptr;
}

// "perseus plan export".
std::string command_path(const CLI::App& app) {
  const CLI::App* parent = app.get_parent();
  return parent ? command_path(*parent) + " " + app.get_name() : "perseus";
}

// "unknown option '--profil' of 'perseus plan'; did you mean '--profile'?".
std::string unknown(const std::string& what, const std::string& word, const CLI::App& where,
                    const std::string& guess, const std::string& otherwise = "") {
  std::string line = "unknown " + what + " '" + word + "' of '" + command_path(where) + "'";
  if (!guess.empty()) return line + "; did you mean '" + guess + "'?";
  return otherwise.empty() ? line : line + "; " + otherwise;
}

}  // namespace

std::string closest_name(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = kMaxEdits + 1;
  for (const auto& name : names) {
    const std::size_t d = edit_distance(word, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  if (!best.empty()) return best;
  std::vector<std::string> prefixed;
  for (const auto& name : names) {
    if (word.size() > 2 && name.rfind(word, 0) == 0) prefixed.push_back(name);
  }
  return prefixed.size() == 1 ? prefixed.front() : "";
}

std::string unknown_word(CLI::App& app, int argc, char** argv) {
  CLI::App* current = &app;
  bool chose_subcommand = false;  // of `current`'s subcommands, at this level
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.size() > 1 && word[0] == '-') {
      const std::string name = word.substr(0, word.find('='));
      const CLI::Option* option = current->get_option_no_throw(name);
      if (option == nullptr) {
        return unknown("option", name, *current, closest_name(name, option_names(*current)));
      }
      if (word.find('=') == std::string::npos && option->get_items_expected_max() > 0) ++i;
      continue;
    }
    if (CLI::App* sub = subcommand_named(*current, word)) {
      current = sub;
      chose_subcommand = false;
      continue;
    }
    const std::vector<std::string> subcommands = subcommand_names(*current);
    if (!subcommands.empty() && !chose_subcommand) {
      return unknown("command", word, *current, closest_name(word, subcommands),
                     "the commands are " + join(subcommands));
    }
    chose_subcommand = true;  // a positional argument
  }
  return "";
}

}  // namespace perseus::cli
