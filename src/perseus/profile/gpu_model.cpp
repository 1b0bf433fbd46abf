#include "perseus/profile/gpu_model.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"

namespace perseus::profile {

namespace {

// Parameters and their provenance: see the comment block in gpu_model.hpp.
const std::vector<GpuModel>& builtin_models() {
  static const std::vector<GpuModel> models = {
      {"a100", 1410, 855, 15, 225.0, 278.0, 0.26, 1.0, 83.64, 312.0, 2039.0, 300.0},
      {"h100", 1980, 1005, 15, 280.0, 420.0, 0.30, 1.0, 110.0, 989.0, 3350.0, 450.0},
      {"a40", 1740, 855, 15, 110.0, 205.0, 0.35, 1.0, 70.38, 150.0, 696.0, 32.0},
  };
  return models;
}

void require(bool ok, const std::string& what, double value) {
  if (ok) return;
  std::ostringstream out;
  out << "synthetic model: " << what << ", got " << value;
  throw Error(out.str());
}

void check_gpu(const GpuModel& gpu) {
  require(gpu.min_mhz > 0 && gpu.max_mhz > gpu.min_mhz,
          "GPU " + gpu.name + ": min clock must be positive and below the max clock", gpu.min_mhz);
  require(gpu.step_mhz > 0, "GPU " + gpu.name + ": clock step must be positive", gpu.step_mhz);
  require(gpu.v_max > 0 && gpu.v_min > 0, "GPU " + gpu.name + ": voltages must be positive",
          gpu.v_min);
  require(gpu.static_power_w >= 0 && gpu.dynamic_power_w > 0,
          "GPU " + gpu.name + ": powers must be positive", gpu.dynamic_power_w);
}

void check_model(const ModelDescription& model, double noise) {
  require(model.num_stages >= 1, "the number of stages must be at least 1", model.num_stages);
  require(model.stage_work.size() == static_cast<size_t>(model.num_stages),
          "stage work needs one value per stage (" + std::to_string(model.num_stages) + ")",
          static_cast<double>(model.stage_work.size()));
  for (double w : model.stage_work) {
    require(w > 0 && std::isfinite(w), "stage work must be positive", w);
  }
  require(model.backward_work.empty() ||
              model.backward_work.size() == static_cast<size_t>(model.num_stages),
          "backward work needs one value per stage (" + std::to_string(model.num_stages) + ")",
          static_cast<double>(model.backward_work.size()));
  for (double w : model.backward_work) {
    require(w > 0 && std::isfinite(w), "backward work must be positive", w);
  }
  require(model.forward_time_s > 0 && std::isfinite(model.forward_time_s),
          "forward time must be positive", model.forward_time_s);
  require(model.backward_ratio > 0 && std::isfinite(model.backward_ratio),
          "backward ratio must be positive", model.backward_ratio);
  require(model.memory_bound_fraction >= 0 && model.memory_bound_fraction < 1,
          "memory-bound fraction must be in [0, 1)", model.memory_bound_fraction);
  require(model.forward_activity > 0 && model.forward_activity <= 1,
          "forward activity must be in (0, 1]", model.forward_activity);
  require(model.backward_activity > 0 && model.backward_activity <= 1,
          "backward activity must be in (0, 1]", model.backward_activity);
  require(noise >= 0 && std::isfinite(noise), "noise must be non-negative", noise);
}

// Relative duration at clock `mhz`: 1 at the max clock, growing as the clock drops.
double slowdown(const GpuModel& gpu, const ModelDescription& model, int mhz) {
  double m = model.memory_bound_fraction;
  return m + (1.0 - m) * gpu.max_mhz / static_cast<double>(mhz);
}

}  // namespace

std::vector<int> GpuModel::frequencies() const {
  std::vector<int> out;
  for (int f = max_mhz; f >= min_mhz; f -= step_mhz) out.push_back(f);
  return out;
}

double GpuModel::power(int mhz, double activity) const {
  double x = static_cast<double>(mhz - min_mhz) / (max_mhz - min_mhz);
  double v = (v_min + (v_max - v_min) * x) / v_max;
  return static_power_w + dynamic_power_w * activity * (mhz / static_cast<double>(max_mhz)) * v * v;
}

const GpuModel& gpu_model(const std::string& name) {
  for (const auto& gpu : builtin_models()) {
    if (gpu.name == name) return gpu;
  }
  throw Error("unknown GPU model '" + name + "' (known: " + join(gpu_model_names()) + ")");
}

std::vector<std::string> gpu_model_names() {
  std::vector<std::string> names;
  for (const auto& gpu : builtin_models()) names.push_back(gpu.name);
  return names;
}

ModelDescription default_model(int stages, double first_extra, double last_extra) {
  if (stages < 1) {
    throw Error("synthetic model: the number of stages must be at least 1, got " +
                std::to_string(stages));
  }
  ModelDescription model;
  model.num_stages = stages;
  model.stage_work.assign(static_cast<size_t>(stages), 1.0);
  model.stage_work.front() += first_extra;
  model.stage_work.back() += last_extra;
  return model;
}

Profile synthesize_profile(const GpuModel& gpu, const ModelDescription& model, double noise,
                           std::uint64_t seed) {
  check_gpu(gpu);
  check_model(model, noise);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto jitter = [&] { return noise > 0 ? std::exp(noise * normal(rng)) : 1.0; };

  struct Kind {
    const char* name;
    double time_scale;
    double activity;
  };
  Profile profile("synthetic " + gpu.name + " profile");
  for (int stage = 0; stage < model.num_stages; ++stage) {
    const auto u = static_cast<size_t>(stage);
    const double base = model.stage_work[u] * model.forward_time_s;
    const double backward_scale = model.backward_work.empty()
                                      ? model.backward_ratio
                                      : model.backward_work[u] / model.stage_work[u];
    const Kind kinds[] = {{"forward", 1.0, model.forward_activity},
                          {"backward", backward_scale, model.backward_activity}};
    for (const Kind& kind : kinds) {
      for (int mhz : gpu.frequencies()) {
        Measurement m;
        m.frequency_mhz = mhz;
        m.time_s = base * kind.time_scale * slowdown(gpu, model, mhz) * jitter();
        m.energy_j = gpu.power(mhz, kind.activity) * jitter() * m.time_s;
        profile.add(stage, kind.name, m);
      }
    }
  }
  return profile;
}

}  // namespace perseus::profile
