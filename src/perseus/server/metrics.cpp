#include "perseus/server/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace perseus::server {

namespace {

// A sample value as Prometheus reads it (shortest round-trip form; +Inf, NaN spelled out).
std::string value_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Backslash, double quote and newline escaped, as label values need.
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    out += (i ? "," : "") + labels[i].first + "=\"" + escaped(labels[i].second) + "\"";
  }
  return out + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}

void Histogram::observe(double value) {
  auto first = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  for (auto i = static_cast<std::size_t>(first - bounds_.begin()); i < counts_.size(); ++i) {
    ++counts_[i];
  }
  ++count_;
  sum_ += value;
}

std::vector<double> latency_bounds() {
  std::vector<double> bounds;
  for (double b = 0.001; b < 20.0; b *= 2.0) bounds.push_back(b);
  return bounds;
}

void PrometheusText::family(const std::string& name, const std::string& type,
                            const std::string& help) {
  text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void PrometheusText::sample(const std::string& name, const Labels& labels, double value) {
  text_ += name + label_text(labels) + " " + value_text(value) + "\n";
}

void PrometheusText::histogram(const std::string& name, const Labels& labels, const Histogram& h) {
  for (std::size_t i = 0; i < h.bounds().size(); ++i) {
    Labels with_le = labels;
    with_le.emplace_back("le", value_text(h.bounds()[i]));
    sample(name + "_bucket", with_le, static_cast<double>(h.counts()[i]));
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  sample(name + "_bucket", inf, static_cast<double>(h.count()));
  sample(name + "_sum", labels, h.sum());
  sample(name + "_count", labels, static_cast<double>(h.count()));
}

}  // namespace perseus::server
