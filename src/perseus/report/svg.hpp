// Building blocks of hand-written SVG: XML escaping, compact number formatting, a small element
// writer, linear scales with "nice" ticks (1, 2 or 5 x 10^k), the chart palette and the
// sequential colour scale used for power. No JavaScript and no external resources.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perseus/util/text.hpp"

namespace perseus::report {

using perseus::escape;
using perseus::fixed;
using perseus::num;

// One XML element with attributes and content, written as text by str():
//   Element("rect").attr("x", 1.5).attr("fill", "#000").str() == "<rect x=\"1.5\" fill=\"#000\"/>"
// Attribute values and text are escaped; add() appends a child element, raw() trusted markup.
// An element is written self-closing ("<x/>") only when none of text/add/raw was called, so
// that empty HTML containers such as <td></td> stay paired.
class Element {
 public:
  explicit Element(std::string_view name) : name_(name) {}

  Element& attr(std::string_view key, std::string_view value);
  Element& attr(std::string_view key, double value);
  Element& text(std::string_view content);
  Element& add(const Element& child);
  Element& raw(std::string_view markup);
  // A <title> child: the browser shows it as a tooltip.
  Element& tooltip(std::string_view content);
  std::string str() const;

 private:
  std::string name_, attrs_, content_;
  bool container_ = false;
};

// Maps [d0, d1] linearly onto [r0, r1] (a reversed range flips the axis, as for SVG's y).
struct LinearScale {
  double d0 = 0.0, d1 = 1.0, r0 = 0.0, r1 = 1.0;
  double operator()(double value) const;
};

struct Ticks {
  double step = 1.0;
  std::vector<double> values;  // multiples of step inside the range, ascending
};

// The 1, 2 or 5 x 10^k step closest to span / target (target = wanted number of intervals).
double nice_step(double span, int target);
// Ticks at multiples of a nice step inside [lo, hi] (a degenerate range is widened first).
Ticks nice_ticks(double lo, double hi, int target = 6);
// [lo, hi] widened outward to multiples of its nice step, so the axis starts and ends on a tick.
std::pair<double, double> nice_domain(double lo, double hi, int target = 6);
// Label of a tick value with as many decimals as the step needs.
std::string tick_label(double value, double step);

// Colour-blind-safe categorical palette (Okabe and Ito), as "#rrggbb".
namespace palette {
inline constexpr const char* kBlack = "#000000";
inline constexpr const char* kOrange = "#e69f00";
inline constexpr const char* kSky = "#56b4e9";
inline constexpr const char* kGreen = "#009e73";
inline constexpr const char* kBlue = "#0072b2";
inline constexpr const char* kVermillion = "#d55e00";
inline constexpr const char* kPurple = "#cc79a7";
inline constexpr const char* kGrey = "#7f7f7f";
inline constexpr const char* kGrid = "#e3e3e3";
inline constexpr const char* kAxis = "#444444";
inline constexpr const char* kIdle = "#eeeeee";
inline constexpr const char* kCritical = "#e3001b";
}  // namespace palette

// Sequential colour (viridis: dark blue-purple at 0, yellow at 1) of `t` clamped to [0, 1].
std::string viridis(double t);

}  // namespace perseus::report
