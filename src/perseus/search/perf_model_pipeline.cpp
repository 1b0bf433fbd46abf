// The pipeline level of the performance model: stage views of a configuration, the iteration
// time over the stages (1F1B: t_i x (M-1) + sum_j t_j), the memory limit, and why a
// configuration is illegal.
#include <cstdio>

#include "perseus/search/perf_model.hpp"
#include "perseus/util/error.hpp"

namespace perseus::search {

std::vector<StageView> PerfModel::views(const Config& c) const {
  std::vector<StageView> out;
  const int total = c.num_gpus();
  const int per_node = options_.gpus_per_node > 0 ? options_.gpus_per_node : total;
  int first = 0, gpus = 0;
  for (int i = 0; i < c.num_stages(); ++i) {
    const StageConfig& s = c.stages[static_cast<std::size_t>(i)];
    StageView v;
    v.first_op = first;
    v.num_ops = s.num_ops();
    v.tp = s.tp.data();
    v.dp = s.dp.data();
    v.algo = s.algo.data();
    v.recompute = s.recompute.data();
    v.num_stages_behind = c.num_stages() - 1 - i;
    v.in_cross_node = gpus % per_node == 0 && gpus > 0;
    gpus += s.num_gpus;
    v.out_cross_node = gpus % per_node == 0;
    first += s.num_ops();
    out.push_back(v);
  }
  return out;
}

std::string PerfModel::describe(const Illegal& ill, const StageView& v, int stage) const {
  std::string where = "stage " + std::to_string(stage);
  if (ill.op >= 0) {
    where +=
        " operator " + std::to_string(ill.op) + " (" + model_->op_name(v.first_op + ill.op) + ")";
  }
  char buf[256];
  switch (ill.problem) {
    case Problem::none:
      return "";
    case Problem::empty_stage:
      return where + ": no operators";
    case Problem::batch_not_divisible:
      std::snprintf(buf, sizeof buf, ": microbatch size %d is not divisible by dp %d", ill.mbs,
                    v.dp[ill.op]);
      return where + buf;
    case Problem::missing_profile:
      std::snprintf(buf, sizeof buf,
                    ": no profile for mbs %d, tp %d, algo %d in %s_mbs%d_tp%d_algo%d.csv", ill.mbs,
                    ill.tp, ill.algo, db_->prefix().c_str(), ill.mbs, ill.tp, ill.algo);
      return where + buf;
    case Problem::unsupported_reshard:
      return where + ": no resharding primitive from the previous operator's sharding";
    case Problem::missing_collective:
      std::snprintf(buf, sizeof buf, ": no %s time for %.0f MB on %d GPUs (prim_%s_%s_%dgpus.csv)",
                    collective_name(ill.collective), ill.size_mb, ill.tp, db_->prefix().c_str(),
                    collective_name(ill.collective), ill.tp);
      return where + buf;
  }
  return where;
}

void pipeline_stage_times(const double* stage_ms, int num_stages, int num_microbatches,
                          double* out) {
  double sum = 0.0;
  for (int i = 0; i < num_stages; ++i) sum += stage_ms[i];
  for (int i = 0; i < num_stages; ++i) out[i] = stage_ms[i] * (num_microbatches - 1) + sum;
}

PipelineCost PerfModel::evaluate(const Config& c) const {
  if (c.num_ops() != model_->num_ops()) {
    throw Error("configuration has " + std::to_string(c.num_ops()) + " operators but model " +
                model_->desc().name + " " + model_->desc().size + " with " +
                std::to_string(model_->desc().num_layers) + " layers has " +
                std::to_string(model_->num_ops()));
  }
  PipelineCost out;
  out.num_microbatches = c.num_microbatches();
  const auto vs = views(c);
  std::vector<double> times;
  for (std::size_t i = 0; i < vs.size(); ++i) {
    out.stages.push_back(stage(vs[i], c.micro_batch_size));
    const StageCost& s = out.stages.back();
    if (!s.legal() && out.legal) {
      out.legal = false;
      out.reason = describe(s.illegal, vs[i], static_cast<int>(i));
    }
    times.push_back(s.time_ms);
  }
  out.stage_time_ms.resize(times.size());
  pipeline_stage_times(times.data(), static_cast<int>(times.size()), out.num_microbatches,
                       out.stage_time_ms.data());
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (out.stage_time_ms[i] > out.iteration_ms) {
      out.iteration_ms = out.stage_time_ms[i];
      out.bottleneck = static_cast<int>(i);
    }
  }
  if (out.legal) {
    for (std::size_t i = 0; i < out.stages.size(); ++i) {
      if (out.stages[i].memory_mb > options_.memory_limit_mb) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "stage %zu needs %.2f MB, over the memory limit of %.2f MB",
                      i, out.stages[i].memory_mb, options_.memory_limit_mb);
        out.legal = false;
        out.reason = buf;
        break;
      }
    }
  }
  return out;
}

std::string stage_table_csv(const PipelineCost& cost, const char* line_end) {
  std::string out = "stage-index,time,memory(total),memory(normal),memory(reserved)";
  out += line_end;
  char buf[200];
  for (std::size_t i = 0; i < cost.stages.size(); ++i) {
    const StageCost& s = cost.stages[i];
    std::snprintf(buf, sizeof buf, "stage-%zu,%.2f,%.2f,%.2f,%.2f", i, cost.stage_time_ms[i],
                  s.memory_mb, s.normal_mb(), s.reserved_mb);
    out += buf;
    out += line_end;
  }
  return out;
}

}  // namespace perseus::search
