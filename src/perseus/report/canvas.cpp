#include "perseus/report/canvas.hpp"

#include <cmath>

namespace perseus::report {

namespace {

constexpr double kTickLength = 5.0;
constexpr double kLegendRow = 20.0;
constexpr double kSwatchWidth = 26.0;

Element line(double x1, double y1, double x2, double y2, std::string_view colour, double width) {
  return Element("line")
      .attr("x1", x1)
      .attr("y1", y1)
      .attr("x2", x2)
      .attr("y2", y2)
      .attr("stroke", colour)
      .attr("stroke-width", width);
}

Element polygon(const std::vector<std::pair<double, double>>& points, std::string_view colour) {
  return Element("path")
      .attr("d", path_through(points) + " Z")
      .attr("fill", colour)
      .attr("stroke", "#ffffff")
      .attr("stroke-width", 0.8);
}

Element swatch(const LegendEntry& e, double x, double y) {
  Element g("g");
  const bool has_line =
      e.swatch == LegendEntry::Swatch::kLine || e.swatch == LegendEntry::Swatch::kLineMarker;
  if (has_line) {
    Element l = line(x, y, x + kSwatchWidth, y, e.colour, 2.0);
    if (!e.dash.empty()) l.attr("stroke-dasharray", e.dash);
    g.add(l);
  }
  if (e.swatch == LegendEntry::Swatch::kBox) {
    g.add(Element("rect")
              .attr("x", x + 4)
              .attr("y", y - 6)
              .attr("width", kSwatchWidth - 8)
              .attr("height", 12)
              .attr("fill", e.colour)
              .attr("stroke", palette::kGrey)
              .attr("stroke-width", 0.6));
  } else if (e.swatch != LegendEntry::Swatch::kLine) {
    g.add(marker(e.shape, x + kSwatchWidth / 2, y, 4.5, e.colour));
  }
  return g;
}

}  // namespace

Element marker(Marker shape, double x, double y, double size, std::string_view colour) {
  const double s = size;
  switch (shape) {
    case Marker::kSquare:
      return polygon({{x - s, y - s}, {x + s, y - s}, {x + s, y + s}, {x - s, y + s}}, colour);
    case Marker::kDiamond:
      return polygon({{x, y - 1.3 * s}, {x + 1.3 * s, y}, {x, y + 1.3 * s}, {x - 1.3 * s, y}},
                     colour);
    case Marker::kTriangleUp:
      return polygon({{x, y - 1.3 * s}, {x + 1.2 * s, y + s}, {x - 1.2 * s, y + s}}, colour);
    case Marker::kTriangleDown:
      return polygon({{x, y + 1.3 * s}, {x + 1.2 * s, y - s}, {x - 1.2 * s, y - s}}, colour);
    case Marker::kRing:
      return Element("circle")
          .attr("cx", x)
          .attr("cy", y)
          .attr("r", 1.4 * s)
          .attr("fill", "none")
          .attr("stroke", colour)
          .attr("stroke-width", 2.5);
    case Marker::kCircle:
      break;
  }
  return Element("circle")
      .attr("cx", x)
      .attr("cy", y)
      .attr("r", s)
      .attr("fill", colour)
      .attr("stroke", "#ffffff")
      .attr("stroke-width", 0.6);
}

std::string path_through(const std::vector<std::pair<double, double>>& points) {
  std::string d;
  for (const auto& [x, y] : points) {
    d += (d.empty() ? "M" : " L") + num(x) + " " + num(y);
  }
  return d;
}

Canvas::Canvas(double width, double height, Margins margins, std::string_view kind,
               std::string_view label)
    : width_(width), height_(height), margins_(margins), kind_(kind), label_(label) {}

void Canvas::x_axis(const LinearScale& x, const Ticks& ticks, std::string_view text, bool grid) {
  for (double v : ticks.values) {
    double px = x(v);
    if (grid) add(line(px, top(), px, bottom(), palette::kGrid, 1.0));
    add(line(px, bottom(), px, bottom() + kTickLength, palette::kAxis, 1.0));
    label(px, bottom() + kTickLength + 13, tick_label(v, ticks.step), "middle", 11.5);
  }
  add(line(left(), bottom(), right(), bottom(), palette::kAxis, 1.0));
  label((left() + right()) / 2, bottom() + kTickLength + 34, text, "middle", 13, "#222222");
}

void Canvas::y_axis(const LinearScale& y, const Ticks& ticks, std::string_view text, bool grid) {
  for (double v : ticks.values) {
    double py = y(v);
    if (grid) add(line(left(), py, right(), py, palette::kGrid, 1.0));
    add(line(left() - kTickLength, py, left(), py, palette::kAxis, 1.0));
    label(left() - kTickLength - 3, py + 4, tick_label(v, ticks.step), "end", 11.5);
  }
  add(line(left(), top(), left(), bottom(), palette::kAxis, 1.0));
  double cx = 16, cy = (top() + bottom()) / 2;
  add(Element("text")
          .attr("transform", "translate(" + num(cx) + "," + num(cy) + ") rotate(-90)")
          .attr("text-anchor", "middle")
          .attr("font-size", 13)
          .attr("fill", "#222222")
          .text(text));
}

void Canvas::legend(const std::vector<LegendEntry>& entries, double x, double y) {
  Element g("g");
  g.attr("class", "legend");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    double row = y + kLegendRow * static_cast<double>(i);
    g.add(swatch(entries[i], x, row));
    g.add(Element("text")
              .attr("x", x + kSwatchWidth + 6)
              .attr("y", row + 4)
              .attr("font-size", 12)
              .attr("fill", "#222222")
              .text(entries[i].label));
  }
  add(g);
}

void Canvas::label(double x, double y, std::string_view text, std::string_view anchor, double size,
                   std::string_view colour) {
  Element t("text");
  t.attr("x", x).attr("y", y).attr("font-size", size).attr("fill", colour);
  if (anchor != "start") t.attr("text-anchor", anchor);
  add(t.text(text));
}

std::string Canvas::str() const {
  Element svg("svg");
  svg.attr("xmlns", "http://www.w3.org/2000/svg")
      .attr("class", "chart " + kind_)
      .attr("width", width_)
      .attr("height", height_)
      .attr("viewBox", "0 0 " + num(width_) + " " + num(height_))
      .attr("role", "img")
      .attr("aria-label", label_)
      .attr("font-family", "DejaVu Sans, Helvetica, Arial, sans-serif")
      .attr("font-size", 12);
  svg.add(Element("rect")
              .attr("class", "background")
              .attr("width", width_)
              .attr("height", height_)
              .attr("fill", "#ffffff"));
  return svg.raw(body_).str();
}

}  // namespace perseus::report
