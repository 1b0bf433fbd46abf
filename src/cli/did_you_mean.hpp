// What a user probably meant by a command line that did not parse: the subcommand or option
// closest to an unknown word, by edit distance (Levenshtein, at most kMaxEdits, or a unique
// prefix), as git and cargo suggest it. Linear in the names times the word lengths.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace perseus::cli {

inline constexpr std::size_t kMaxEdits = 2;

// The known name closest to `word` ("" when none is within kMaxEdits or a unique prefix).
std::string closest_name(const std::string& word, const std::vector<std::string>& names);

// The first word of `argv` that names no subcommand or option where it stands (options after
// the subcommand they belong to), as one line: "unknown command 'plna'; did you mean 'plan'?",
// "unknown option '--profil' of 'perseus plan'; did you mean '--profile'?" (without a close
// name: the choices, for a command). "" when every word is known.
std::string unknown_word(CLI::App& app, int argc, char** argv);

}  // namespace perseus::cli
