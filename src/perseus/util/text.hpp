// Text helpers shared by everything that writes HTML, SVG or tables: XML escaping and compact,
// locale-independent number formatting.
#pragma once

#include <string>
#include <string_view>

namespace perseus {

// Escapes the five XML special characters (& < > " ') for text and attribute values.
std::string escape(std::string_view text);

// A number with at most `decimals` decimals and no trailing zeros ("1.5", "-3", "0.25").
std::string num(double value, int decimals = 2);
// A number with exactly `decimals` decimals ("1.50"); never "-0".
std::string fixed(double value, int decimals);

}  // namespace perseus
