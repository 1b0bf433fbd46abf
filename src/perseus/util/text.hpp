// Text helpers shared by everything that writes HTML, SVG or tables (XML escaping, compact,
// locale-independent number formatting, joining, trimming, line numbers).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace perseus {

// Escapes the five XML special characters (& < > " ') for text and attribute values.
std::string escape(std::string_view text);

// A number with at most `decimals` decimals and no trailing zeros ("1.5", "-3", "0.25").
std::string num(double value, int decimals = 2);
// A number with exactly `decimals` decimals ("1.50"); never "-0".
std::string fixed(double value, int decimals);

// The items with `separator` between them ("a, b, c").
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");
// The 1-based line of byte offset `pos` in `text` (for messages about a file's text).
long line_at(std::string_view text, std::size_t pos);
// Whitespace (spaces, tabs) removed from both ends.
std::string_view trim(std::string_view s);

}  // namespace perseus
