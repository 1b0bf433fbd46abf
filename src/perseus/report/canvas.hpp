// The frame shared by every chart: an SVG canvas of fixed size with a plot area inside margins,
// axes with ticks, grid lines and labels, marker shapes and a legend drawn outside the data.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perseus/report/svg.hpp"

namespace perseus::report {

struct Margins {
  double top = 0.0, right = 0.0, bottom = 0.0, left = 0.0;
};

enum class Marker { kCircle, kSquare, kDiamond, kTriangleUp, kTriangleDown, kRing };

// A marker of `shape` centred at (x, y); `size` is about its radius.
Element marker(Marker shape, double x, double y, double size, std::string_view colour);

// "M x0 y0 L x1 y1 ..." through the points (empty for no points).
std::string path_through(const std::vector<std::pair<double, double>>& points);

struct LegendEntry {
  enum class Swatch { kLine, kMarker, kLineMarker, kBox };
  std::string label;
  std::string colour;
  Swatch swatch = Swatch::kMarker;
  Marker shape = Marker::kCircle;
  std::string dash;  // stroke-dasharray of a line swatch, empty for solid
};

class Canvas {
 public:
  // `label` describes the chart for screen readers; `kind` becomes the class "chart <kind>".
  Canvas(double width, double height, Margins margins, std::string_view kind,
         std::string_view label);

  double left() const { return margins_.left; }
  double right() const { return width_ - margins_.right; }
  double top() const { return margins_.top; }
  double bottom() const { return height_ - margins_.bottom; }

  // Scales from a data domain onto the plot area (y grows upward).
  LinearScale x_scale(double lo, double hi) const { return {lo, hi, left(), right()}; }
  LinearScale y_scale(double lo, double hi) const { return {lo, hi, bottom(), top()}; }

  void add(const Element& element) { body_ += element.str(); }
  // Bottom axis with tick labels and `label` centred below; vertical grid lines if `grid`.
  void x_axis(const LinearScale& x, const Ticks& ticks, std::string_view label, bool grid);
  // Left axis with tick labels and `label` rotated along it; horizontal grid lines if `grid`.
  void y_axis(const LinearScale& y, const Ticks& ticks, std::string_view label, bool grid);
  // One entry per row, starting at (x, y).
  void legend(const std::vector<LegendEntry>& entries, double x, double y);
  // Text at (x, y); `anchor` is start, middle or end.
  void label(double x, double y, std::string_view text, std::string_view anchor = "start",
             double size = 12.0, std::string_view colour = palette::kAxis);

  std::string str() const;

 private:
  double width_, height_;
  Margins margins_;
  std::string kind_, label_, body_;
};

}  // namespace perseus::report
