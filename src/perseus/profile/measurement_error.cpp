#include "perseus/profile/measurement_error.hpp"

#include <algorithm>

#include "perseus/util/text.hpp"

namespace perseus::profile {

namespace {

struct Value {
  double value;
  RowAt at;
};

std::optional<ErrorColumn> summarize(std::vector<Value> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end(),
            [](const Value& a, const Value& b) { return a.value < b.value; });
  const std::size_t n = values.size();
  const double median =
      n % 2 == 1 ? values[n / 2].value : 0.5 * (values[n / 2 - 1].value + values[n / 2].value);
  return ErrorColumn{n, median, values.back().value, values.back().at};
}

std::string percent(double relative) {
  if (relative > 0.0 && relative < 5e-5) return "< 0.01 %";
  return fixed(100.0 * relative, 2) + " %";
}

// "stage 3 backward at 1410 MHz, line 57"
std::string where(const RowAt& at) {
  std::string text = "stage " + std::to_string(at.stage) + " " + at.instruction + " at " +
                     std::to_string(at.frequency_mhz) + " MHz";
  if (at.line > 0) text += ", line " + std::to_string(at.line);
  return text;
}

std::string standard_error_line(const ErrorColumn& c, std::size_t rows) {
  return "energy standard error: median " + percent(c.median) + ", worst " + percent(c.worst) +
         " (" + where(c.worst_at) + "), " + std::to_string(c.rows) + " of " + std::to_string(rows) +
         " rows";
}

// "stage 3 forward (57 of 58 rows, up to 14.57 %), ..."
std::string listed(const std::vector<Unsplit>& instructions) {
  std::string text;
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    const Unsplit& u = instructions[i];
    text += (i > 0 ? ", " : "") + std::string("stage ") + std::to_string(u.stage) + " " +
            u.instruction + " (" + std::to_string(u.rows) + " of " + std::to_string(u.of) +
            " rows, up to " + percent(u.worst) + ")";
  }
  return text;
}

std::string pooling_line(const MeasurementError& e) {
  const ErrorColumn& c = *e.pooling_error;
  const std::string what =
      "energy pooling error (power shared with instructions the counter "
      "could not tell apart): ";
  if (!(c.worst > 0.0)) return what + "none, every instruction's power fitted on its own";
  std::string text = what + "worst " + percent(c.worst) + " (" + where(c.worst_at) + ")";
  if (e.unsplit.empty() && e.offset.empty()) {
    return text + "; every instruction's own energy within " + percent(kUnsplitPoolingError);
  }
  if (!e.unsplit.empty())
    text += "; only the sum is measured, not each energy, of " + listed(e.unsplit);
  if (!e.offset.empty()) {
    text +=
        "; measured as a difference from its row at one clock, whose error in J its rows "
        "share (split-clock rounds: it does not move a plan that runs only such rows), of " +
        listed(e.offset);
  }
  return text;
}

}  // namespace

MeasurementError measurement_error(const Profile& profile) {
  MeasurementError out;
  std::vector<Value> standard, pooling;
  for (const auto& [key, rows] : profile.all()) {
    Unsplit unsplit{key.first, key.second, 0, rows.size(), 0.0}, offset = unsplit;
    for (const Measurement& m : rows) {
      const RowAt at{key.first, key.second, m.frequency_mhz, m.line};
      out.rows += 1;
      if (m.energy_stderr) standard.push_back({*m.energy_stderr, at});
      if (!m.energy_pooling_error) continue;
      pooling.push_back({*m.energy_pooling_error, at});
      if (*m.energy_pooling_error > kUnsplitPoolingError) {
        Unsplit& u = m.energy_pooling_reference_mhz ? offset : unsplit;
        u.rows += 1;
        u.worst = std::max(u.worst, *m.energy_pooling_error);
      }
    }
    if (unsplit.rows > 0) out.unsplit.push_back(unsplit);
    if (offset.rows > 0) out.offset.push_back(offset);
  }
  out.standard_error = summarize(std::move(standard));
  out.pooling_error = summarize(std::move(pooling));
  return out;
}

std::vector<std::string> describe(const MeasurementError& error) {
  std::vector<std::string> lines;
  if (error.standard_error) lines.push_back(standard_error_line(*error.standard_error, error.rows));
  if (auto pooling = describe_pooling(error)) lines.push_back(*pooling);
  return lines;
}

std::optional<std::string> describe_pooling(const MeasurementError& error) {
  if (!error.pooling_error) return std::nullopt;
  return pooling_line(error);
}

}  // namespace perseus::profile
