// Prometheus metrics of the control plane: a histogram type and a writer of the text exposition
// format (version 0.0.4: `# HELP`, `# TYPE`, then `name{label="value"} number` lines). What the
// server exports is listed in docs/control-plane.md ("Metrics").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace perseus::server {

// Cumulative histogram with fixed upper bounds (seconds); observe() is O(number of buckets).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  // counts()[i]: observations <= bounds()[i] (cumulative); count(): all of them.
  const std::vector<std::uint64_t>& counts() const { return counts_; }
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
};

// Bounds from 1 ms to about 16 s, doubling: latencies of store writes and barrier releases.
std::vector<double> latency_bounds();

using Labels = std::vector<std::pair<std::string, std::string>>;

// Builds the exposition text. Each metric family is declared once (help and type), then its
// samples follow; label values are escaped as the format requires.
class PrometheusText {
 public:
  void family(const std::string& name, const std::string& type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double value);
  void histogram(const std::string& name, const Labels& labels, const Histogram& h);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace perseus::server
