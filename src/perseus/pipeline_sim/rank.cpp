#include "perseus/pipeline_sim/rank.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "perseus/client/sim_gpu.hpp"
#include "perseus/measure/attribution_trace.hpp"
#include "perseus/util/files.hpp"

namespace perseus::pipeline_sim {

namespace {

using schedule::InstructionType;

// A stage's output to a neighbour: its forward goes to the next stage, its backward (or
// backward-input: the gradient the previous stage waits for) to the previous one.
bool sends_forward(InstructionType type) {
  return type == InstructionType::kForward;
}
bool sends_gradient(InstructionType type) {
  return type == InstructionType::kBackward || type == InstructionType::kBackwardInput;
}

// "F 3 m" / "B 3 m": what stage 3 sends after its forward / backward of microbatch m.
std::string message_key(bool forward, int stage, int microbatch) {
  return std::string(forward ? "F " : "B ") + std::to_string(stage) + " " +
         std::to_string(microbatch);
}

// Messages from the neighbouring GPUs, kept until the instruction that needs them: a GPU that
// runs several stages may receive one stage's message before another's it needs first.
class Inbox {
 public:
  // The virtual time carried by message `key` from `peer` (waiting for it if needed).
  double take(Channel& peer, const std::string& key) {
    auto& kept = kept_[peer.peer()];
    for (;;) {
      auto it = kept.find(key);
      if (it != kept.end()) {
        double t = it->second;
        kept.erase(it);
        return t;
      }
      const std::string line = peer.receive();
      auto w = words(line, 4);
      if (w.size() != 4 || (w[0] != "F" && w[0] != "B")) {
        throw Error("protocol error: expected 'F|B stage microbatch time' from " + peer.peer() +
                    ", got '" + line + "'");
      }
      const std::string where = "message '" + line + "' from " + peer.peer();
      const std::string got = message_key(w[0] == "F", static_cast<int>(parse_long(w[1], where)),
                                          static_cast<int>(parse_long(w[2], where)));
      if (!kept.emplace(got, parse_double(w[3], where)).second) {
        throw Error("protocol error: " + where + " repeats '" + got + "'");
      }
    }
  }

 private:
  std::map<std::string, std::map<std::string, double>> kept_;  // peer -> key -> time
};

// The stage whose output `inst` needs (-1: none, the first or last stage).
int input_stage(const schedule::Instruction& inst, int num_stages) {
  if (inst.type == InstructionType::kForward) return inst.stage - 1;
  if (sends_gradient(inst.type) && inst.stage + 1 < num_stages) return inst.stage + 1;
  return -1;
}

// The stage that waits for the output of `inst` (-1: none).
int output_stage(const schedule::Instruction& inst, int num_stages) {
  if (sends_forward(inst.type)) return inst.stage + 1 < num_stages ? inst.stage + 1 : -1;
  if (sends_gradient(inst.type)) return inst.stage - 1;
  return -1;
}

// The channel to the GPU of `stage`, or null when this GPU runs it (or there is none).
Channel* link_to(const RankSpec& spec, RankLinks& links, int stage) {
  if (stage < 0) return nullptr;
  const int rank = spec.stage_rank.at(static_cast<std::size_t>(stage));
  if (rank == spec.pp_rank) return nullptr;
  auto it = links.peers.find(rank);
  if (it == links.peers.end()) {
    throw Error("no link from GPU " + std::to_string(spec.pp_rank) + " to GPU " +
                std::to_string(rank) + " (stage " + std::to_string(stage) + ")");
  }
  return &it->second;
}

// The pp_rank pairs (a < b) of GPUs holding neighbouring stages.
std::set<std::pair<int, int>> neighbour_ranks(const schedule::Schedule& schedule) {
  std::set<std::pair<int, int>> pairs;
  for (int s = 0; s + 1 < schedule.num_stages; ++s) {
    int a = schedule.stage_rank[static_cast<std::size_t>(s)];
    int b = schedule.stage_rank[static_cast<std::size_t>(s + 1)];
    if (a != b) pairs.emplace(std::min(a, b), std::max(a, b));
  }
  return pairs;
}

// The actions this GPU ran in the iteration (PyTorch's notation, schedule::action_name), to
// catch an order that runs an action before the action on the same GPU it depends on.
class LocalOrder {
 public:
  void check(const schedule::Instruction& inst, int input, bool input_here) {
    const int m = inst.microbatch, s = inst.stage;
    if (inst.type == InstructionType::kBackwardWeight) {
      need(inst, {{InstructionType::kBackwardInput, m, s}}, "its backward-input");
    } else if (inst.type != InstructionType::kForward) {
      need(inst, {{InstructionType::kForward, m, s}}, "its forward");
    }
    if (input < 0 || !input_here) return;
    const std::string what = "its input from stage " + std::to_string(input);
    if (inst.type == InstructionType::kForward) {
      need(inst, {{InstructionType::kForward, m, input}}, what);
    } else {
      need(inst,
           {{InstructionType::kBackward, m, input}, {InstructionType::kBackwardInput, m, input}},
           what);
    }
  }
  void ran(const schedule::Instruction& inst) { ran_.insert(schedule::action_name(inst)); }
  void clear() { ran_.clear(); }

 private:
  // Throws unless one of `any` ran.
  void need(const schedule::Instruction& inst, std::initializer_list<schedule::Instruction> any,
            const std::string& what) const {
    for (const auto& action : any) {
      if (ran_.count(schedule::action_name(action)) != 0) return;
    }
    throw Error("schedule error: " + schedule::action_name(inst) + " runs before " + what +
                " on the same GPU");
  }
  std::set<std::string> ran_;
};

std::string gpu_label(int pp_rank) {
  return "GPU " + std::to_string(pp_rank);
}

}  // namespace

// ---- one rank ----

RankSpec rank_spec(int rank, const schedule::Schedule& schedule, int num_pipelines,
                   const profile::Profile& profile, double blocking_power_w,
                   const client::OptimizerOptions& optimizer) {
  RankSpec spec;
  spec.num_ranks = schedule.num_ranks();
  spec.pp_rank = rank % spec.num_ranks;
  spec.pipeline = rank / spec.num_ranks;
  spec.num_pipelines = num_pipelines;
  spec.stage_rank = schedule.stage_rank;
  spec.stages = schedule.stages_of(spec.pp_rank);
  spec.instructions = schedule.ranks[static_cast<std::size_t>(spec.pp_rank)];
  spec.profile = profile;
  spec.blocking_power_w = blocking_power_w;
  spec.optimizer = optimizer;
  return spec;
}

std::vector<RankLinks> make_links(const schedule::Schedule& schedule, int num_pipelines,
                                  const std::function<std::string(int)>& rank_label,
                                  const std::string& coordinator,
                                  std::vector<Channel>& coordinator_ends) {
  const int R = schedule.num_ranks();
  std::vector<RankLinks> links(static_cast<std::size_t>(R * num_pipelines));
  for (std::size_t r = 0; r < links.size(); ++r) {
    auto [mine, theirs] = channel_pair(rank_label(static_cast<int>(r)), coordinator);
    coordinator_ends.push_back(std::move(mine));
    links[r].coordinator = std::move(theirs);
  }
  for (int p = 0; p < num_pipelines; ++p) {
    for (auto [a, b] : neighbour_ranks(schedule)) {
      auto [a_end, b_end] = channel_pair(gpu_label(b), gpu_label(a));
      links[static_cast<std::size_t>(p * R + a)].peers[b] = std::move(a_end);
      links[static_cast<std::size_t>(p * R + b)].peers[a] = std::move(b_end);
    }
  }
  return links;
}

namespace {

std::unique_ptr<client::SimGpu> rank_gpu(const RankSpec& spec) {
  client::SimGpuOptions options;
  options.stages = spec.stages;
  options.blocking_power_w = spec.blocking_power_w;
  options.counter = spec.counter;
  options.counter.seed += static_cast<std::uint64_t>(spec.rank());  // independent counters
  return std::make_unique<client::SimGpu>(spec.profile, options);
}

// The client options of a rank: its place in the job, and the job id shared through the
// coordinator unless the spec says how.
client::OptimizerOptions rank_options(const RankSpec& spec, RankLinks& links) {
  client::OptimizerOptions o = spec.optimizer;
  o.rank = spec.rank();
  o.pp_rank = spec.pp_rank;
  o.dp_rank = spec.pipeline;
  o.tp_rank = 0;
  o.pp_degree = spec.num_ranks;
  o.dp_degree = spec.num_pipelines;
  o.tp_degree = 1;
  o.world_size = spec.num_ranks * spec.num_pipelines;
  if (!o.share_job_id) {
    o.share_job_id = [&links](const std::string& id) {
      links.coordinator.send("JOB " + id);
      return payload(links.coordinator.receive(), "JOB", links.coordinator.peer());
    };
  }
  return o;
}

// One iteration's instructions of the rank, in order: each waits for its input from the
// neighbouring GPU, runs under the client's hooks, and sends its output on. An overlapped pair
// (torch's OVERLAP_F_B) waits for both inputs, runs its actions one after the other, then sends.
void run_instructions(const RankSpec& spec, RankLinks& links, client::SimGpu& gpu,
                      client::PipelineFrequencyOptimizer& optimizer, Inbox& inbox,
                      LocalOrder& order) {
  const int S = static_cast<int>(spec.stage_rank.size());
  order.clear();
  for (const auto& item : spec.instructions) {
    const std::vector<schedule::Instruction> actions = schedule::actions_of(item);
    for (const auto& inst : actions) {
      const int from = input_stage(inst, S);
      Channel* input = link_to(spec, links, from);
      order.check(inst, from, input == nullptr);
      if (input != nullptr) {
        gpu.wait_until(inbox.take(
            *input, message_key(inst.type == InstructionType::kForward, from, inst.microbatch)));
      }
    }
    for (const auto& inst : actions) {
      const std::string& kind = schedule::type_name(inst.type);
      optimizer.on_instruction_begin(kind, inst.stage);
      optimizer.on_instruction_end(kind, inst.stage);
      order.ran(inst);
    }
    for (const auto& inst : actions) {
      if (Channel* output = link_to(spec, links, output_stage(inst, S))) {
        output->send(message_key(sends_forward(inst.type), inst.stage, inst.microbatch) + " " +
                     exact(gpu.now_s()));
      }
    }
  }
}

// When a reporting window closed since the client had measured `seen_iterations` iterations (it
// measures a window's when it closes): tells the coordinator what the client's counter measured
// for each of them ("MEASURED <first iteration> <J>...", "-" where the counter did not change),
// and writes the window's attribution trace as window number `windows`.
void report_window(const RankSpec& spec, const client::PipelineFrequencyOptimizer& optimizer,
                   Channel& coordinator, std::size_t& seen_iterations, std::size_t& windows) {
  const auto& iterations = optimizer.iterations();
  if (iterations.size() == seen_iterations) return;
  const bool measured = optimizer.last_window().measured;
  std::string line = "MEASURED " + std::to_string(seen_iterations);
  for (std::size_t i = seen_iterations; i < iterations.size(); ++i) {
    line += " " + (measured ? exact(iterations[i].energy_j) : std::string("-"));
  }
  coordinator.send(line);
  seen_iterations = iterations.size();
  if (spec.trace_dir.empty()) return;
  const std::string name =
      "rank-" + std::to_string(spec.rank()) + "-window-" + std::to_string(windows++) + ".json";
  write_file_atomic(std::filesystem::path(spec.trace_dir) / name,
                    measure::to_json(optimizer.last_window().trace).dump() + "\n");
}

}  // namespace

void run_rank(const RankSpec& spec, RankLinks& links) {
  auto owned_gpu = rank_gpu(spec);
  client::SimGpu& gpu = *owned_gpu;
  client::PipelineFrequencyOptimizer optimizer(rank_options(spec, links), std::move(owned_gpu));
  links.coordinator.send("READY " + optimizer.job_id());

  Inbox inbox;
  LocalOrder order;
  std::size_t seen_iterations = 0, windows = 0;
  for (long i = 0;; ++i) {
    const bool final = optimizer.done();
    const int round = optimizer.round();
    const double t0 = gpu.now_s(), e0 = gpu.true_energy_j();
    optimizer.on_step_begin();
    run_instructions(spec, links, gpu, optimizer, inbox, order);
    links.coordinator.send("END " + std::to_string(i) + " " + exact(gpu.now_s()));
    const std::string go = payload(links.coordinator.receive(), "GO", links.coordinator.peer());
    gpu.wait_until(parse_double(go, "GO from " + links.coordinator.peer()));
    optimizer.on_step_end();
    report_window(spec, optimizer, links.coordinator, seen_iterations, windows);
    // The simulated GPU's true time and energy (what the client measured went to the server
    // and, as MEASURED, to the coordinator).
    links.coordinator.send("ITER " + std::to_string(i) + " " + exact(gpu.now_s() - t0) + " " +
                           exact(gpu.true_energy_j() - e0) + " " + std::to_string(round) + " " +
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
