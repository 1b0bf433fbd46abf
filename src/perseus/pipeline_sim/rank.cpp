#include "perseus/pipeline_sim/rank.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "perseus/client/sim_gpu.hpp"

namespace perseus::pipeline_sim {

namespace {

const char* name_of(schedule::InstructionType type) {
  return type == schedule::InstructionType::kForward ? "forward" : "backward";
}

// The virtual time at which the input of `inst` (from the neighbour on `input`) arrived.
double receive_input(Channel& input, const schedule::Instruction& inst) {
  const bool forward = inst.type == schedule::InstructionType::kForward;
  const std::string line = input.receive();
  auto w = words(line, 3);
  const std::string where = "message '" + line + "' from " + input.peer();
  if (w.size() != 3 || w[0] != (forward ? "F" : "B")) {
    throw Error("protocol error: expected the " + std::string(name_of(inst.type)) +
                " of microbatch " + std::to_string(inst.microbatch) + " from " + input.peer() +
                ", got '" + line + "'");
  }
  if (parse_long(w[1], where) != inst.microbatch) {
    throw Error("protocol error: expected microbatch " + std::to_string(inst.microbatch) +
                " from " + input.peer() + ", got '" + line + "'");
  }
  return parse_double(w[2], where);
}

}  // namespace

// ---- one rank ----

RankSpec rank_spec(int rank, const schedule::Schedule& schedule, int num_pipelines,
                   const profile::Profile& profile, double blocking_power_w,
                   const client::OptimizerOptions& optimizer) {
  RankSpec spec;
  spec.stage = rank % schedule.num_stages;
  spec.pipeline = rank / schedule.num_stages;
  spec.num_stages = schedule.num_stages;
  spec.num_pipelines = num_pipelines;
  spec.instructions = schedule.ranks[static_cast<std::size_t>(spec.stage)];
  spec.profile = profile;
  spec.blocking_power_w = blocking_power_w;
  spec.optimizer = optimizer;
  return spec;
}

void run_rank(const RankSpec& spec, RankLinks& links) {
  const int S = spec.num_stages;
  client::SimGpuOptions gpu_options;
  gpu_options.stage = spec.stage;
  gpu_options.blocking_power_w = spec.blocking_power_w;
  gpu_options.counter = spec.counter;
  gpu_options.counter.seed += static_cast<std::uint64_t>(spec.rank());  // independent counters
  auto owned_gpu = std::make_unique<client::SimGpu>(spec.profile, gpu_options);
  client::SimGpu* gpu = owned_gpu.get();

  client::OptimizerOptions o = spec.optimizer;
  o.rank = spec.rank();
  o.pp_rank = spec.stage;
  o.dp_rank = spec.pipeline;
  o.tp_rank = 0;
  o.pp_degree = S;
  o.dp_degree = spec.num_pipelines;
  o.tp_degree = 1;
  o.world_size = S * spec.num_pipelines;
  if (!o.share_job_id) {
    o.share_job_id = [&links](const std::string& id) {
      links.coordinator.send("JOB " + id);
      return payload(links.coordinator.receive(), "JOB", links.coordinator.peer());
    };
  }
  client::PipelineFrequencyOptimizer optimizer(std::move(o), std::move(owned_gpu));
  links.coordinator.send("READY " + optimizer.job_id());

  for (long i = 0;; ++i) {
    const bool final = optimizer.done();
    const int round = optimizer.round();
    const double t0 = gpu->now_s(), e0 = gpu->true_energy_j();
    optimizer.on_step_begin();
    for (const auto& inst : spec.instructions) {
      const bool forward = inst.type == schedule::InstructionType::kForward;
      Channel* input = forward ? (spec.stage > 0 ? &links.prev : nullptr)
                               : (spec.stage < S - 1 ? &links.next : nullptr);
      if (input != nullptr) gpu->wait_until(receive_input(*input, inst));
      optimizer.on_instruction_begin(name_of(inst.type));
      optimizer.on_instruction_end(name_of(inst.type));
      Channel* output = forward ? (spec.stage < S - 1 ? &links.next : nullptr)
                                : (spec.stage > 0 ? &links.prev : nullptr);
      if (output != nullptr) {
        output->send(std::string(forward ? "F " : "B ") + std::to_string(inst.microbatch) + " " +
                     exact(gpu->now_s()));
      }
    }
    links.coordinator.send("END " + std::to_string(i) + " " + exact(gpu->now_s()));
    const std::string go = payload(links.coordinator.receive(), "GO", links.coordinator.peer());
    gpu->wait_until(parse_double(go, "GO from " + links.coordinator.peer()));
    optimizer.on_step_end();
    // The simulated GPU's true time and energy; what the client measured goes to the server.
    links.coordinator.send("ITER " + std::to_string(i) + " " + exact(gpu->now_s() - t0) + " " +
                           exact(gpu->true_energy_j() - e0) + " " + std::to_string(round) + " " +
                           (final ? "1" : "0") + " " + (optimizer.degraded() ? "1" : "0") + " " +
                           optimizer.job_id());
    const std::string next = payload(links.coordinator.receive(), "NEXT", links.coordinator.peer());
    if (next == "0") break;
    if (next != "1") throw Error("protocol error: bad NEXT '" + next + "'");
  }
}

std::string run_rank_reporting(const RankSpec& spec, RankLinks& links) {
  std::string error;
  bool consequence = false;
  try {
    run_rank(spec, links);
    return "";
  } catch (const PeerClosed& e) {
    error = e.what();
    consequence = true;
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::replace(error.begin(), error.end(), '\n', ' ');
  if (error.empty()) error = "unknown error";
  try {
    if (links.coordinator.open()) {
      links.coordinator.send(std::string("ERR ") + (consequence ? "peer-closed " : "") + error);
    }
  } catch (const Error&) {  // the coordinator is gone too; nothing more to tell
  }
  return error;
}

}  // namespace perseus::pipeline_sim
