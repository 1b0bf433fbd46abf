// Pieces shared by the built-in schedulers: argument readers, instruction order, uniform plans
// and window statistics.
#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "perseus/schedule/catalog.hpp"
#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/text.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::server::schedulers {

using nlohmann::json;

ArgReader::ArgReader(std::string context, const json& args, std::vector<std::string> known)
    : context_(std::move(context)), fields_(context_) {
  args_ = args.is_null() ? json::object() : args;
  if (!args_.is_object()) {
    throw Error(context_ + ": must be a JSON object, got " + JsonFields::shown(args_));
  }
  check_known(std::move(known));
}

ArgReader::ArgReader(const ArgReader& parent, const std::string& name,
                     std::vector<std::string> known)
    : context_(parent.context_), fields_(context_), parent_(parent.path(name)) {
  args_ = parent.fields_.object(parent.at(name), parent.path(name), "a JSON object");
  check_known(std::move(known));
}

void ArgReader::check_known(std::vector<std::string> known) const {
  std::sort(known.begin(), known.end());
  for (const auto& [name, value] : args_.items()) {
    if (!std::binary_search(known.begin(), known.end(), name)) {
      fail(name, "unknown (expected " +
                     (known.empty() ? std::string("none") : "one of " + join(known)) + ")");
    }
  }
}

std::string ArgReader::path(const std::string& name) const {
  return JsonFields::child(parent_, name);
}

std::string ArgReader::alias(const std::string& name, const std::string& zeus_name) const {
  if (!has(zeus_name)) return name;
  if (has(name)) fail(zeus_name, "is Zeus's name for '" + name + "': give one of them");
  return zeus_name;
}

void ArgReader::fail(const std::string& name, const std::string& problem) const {
  fields_.fail(path(name), problem);
}

const json& ArgReader::at(const std::string& name) const {
  return fields_.member(args_, name, parent_);
}

int ArgReader::integer(const std::string& name, int min, std::optional<int> fallback) const {
  if (fallback && !has(name)) return *fallback;
  return fields_.int_at(args_, parent_, name, min);
}

double ArgReader::number(const std::string& name, bool (*ok)(double),
                         const std::string& requirement, std::optional<double> fallback) const {
  if (fallback && !has(name)) return *fallback;
  const json& v = at(name);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !ok(v.get<double>())) {
    fail(name, "must be " + requirement + ", got " + JsonFields::shown(v));
  }
  return v.get<double>();
}

std::string ArgReader::text(const std::string& name, std::optional<std::string> fallback) const {
  if (fallback && !has(name)) return *fallback;
  return fields_.text_at(args_, parent_, name, true);
}

bool ArgReader::boolean(const std::string& name, bool fallback) const {
  if (!has(name)) return fallback;
  return fields_.as_bool(at(name), path(name));
}

ArgReader ArgReader::object(const std::string& name, std::vector<std::string> known) const {
  return ArgReader(*this, name, std::move(known));
}

std::string context_of(const std::string& scheduler) {
  return "scheduler '" + scheduler + "'";
}

const std::vector<std::string> kScheduleArgs = {"microbatches", "schedule", "virtual_stages"};

std::vector<std::string> with_schedule_args(std::vector<std::string> known) {
  known.insert(known.end(), kScheduleArgs.begin(), kScheduleArgs.end());
  return known;
}

schedule::Schedule schedule_arg(const ArgReader& args, const JobSpec& job) {
  bool named = std::any_of(kScheduleArgs.begin(), kScheduleArgs.end(),
                           [&](const std::string& name) { return args.has(name); });
  if (job.pipeline_order && !named) return *job.pipeline_order;
  if (job.num_microbatches && !named) {
    return args.naming("num_microbatches", [&] {
      return schedule::make_schedule_on_ranks("1f1b", job.pp_degree, *job.num_microbatches, 1);
    });
  }
  if (!named) {
    throw ScheduleNotNamed(args.context() +
                           ": field 'microbatches': missing (name the schedule: microbatches, "
                           "schedule, virtual_stages; or let the job register the order it runs, "
                           "pipeline_order, as perseus.torch.attach does, or its num_microbatches, "
                           "as Zeus's Perseus JobInfo does)");
  }
  const int ranks = job.pp_degree;
  int microbatches = args.integer("microbatches", 1);
  std::string name = args.text("schedule", "1f1b");
  int per_rank = args.integer("virtual_stages", 1, 0);
  if (name.rfind("envelope:", 0) == 0) {
    auto counts = std::count(name.begin(), name.end(), ',') + 1;
    if (counts != ranks) {
      throw StageCountMismatch(args.context() + ": argument 'schedule': " + name + " has " +
                               std::to_string(counts) + " warm-up counts but the job has " +
                               std::to_string(ranks) + " stages");
    }
  }
  auto sched = args.naming("schedule", [&] {
    return schedule::make_schedule_on_ranks(name, ranks, microbatches, per_rank);
  });
  require_job_order(sched, job, args.context() + ": its arguments name " + sched.name);
  return sched;
}

namespace {

// "4 GPUs, 8 stages, 8 microbatches".
std::string shape_of(const schedule::Schedule& s) {
  return std::to_string(s.num_ranks()) + " GPUs, " + std::to_string(s.num_stages) + " stages, " +
         std::to_string(s.num_microbatches) + " microbatches";
}

}  // namespace

void require_job_order(const schedule::Schedule& sched, const JobSpec& job,
                       const std::string& where) {
  if (!job.pipeline_order) return;
  const schedule::Schedule& order = *job.pipeline_order;
  std::string difference;
  if (sched.num_ranks() != order.num_ranks() || sched.num_stages != order.num_stages ||
      sched.num_microbatches != order.num_microbatches) {
    difference = shape_of(sched) + " against the job's " + shape_of(order);
  } else {
    for (int r = 0; r < order.num_ranks() && difference.empty(); ++r) {
      const auto &mine = sched.ranks[r], &theirs = order.ranks[r];
      for (std::size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
        std::string a = i < mine.size() ? schedule::action_name(mine[i]) : "nothing";
        std::string b = i < theirs.size() ? schedule::action_name(theirs[i]) : "nothing";
        if (a == b) continue;
        difference = "rank " + std::to_string(r) + "'s action " + std::to_string(i + 1) + " is " +
                     a + " there, " + b + " in the job's";
        break;
      }
    }
  }
  if (difference.empty()) return;
  throw Error(where + " (" + difference +
              "), but the job registered the order its framework "
              "runs (pipeline_order); plan for that order (e.g. perseus plan --schedule-file with "
              "the order the adapter wrote) or leave the schedule arguments out");
}

void require_ranks(const schedule::Schedule& sched, int pp_degree, const std::string& where) {
  if (sched.num_ranks() == pp_degree) return;
  const std::string stages = sched.one_stage_per_rank()
                                 ? " stages"
                                 : " GPUs (" + std::to_string(sched.num_stages) + " stages)";
  throw StageCountMismatch(where + " has " + std::to_string(sched.num_ranks()) + stages +
                           " but the job has pp_degree " + std::to_string(pp_degree));
}

std::string instruction_label(const schedule::Schedule& sched, const schedule::Instruction& inst) {
  return wire::instruction_label(schedule::type_name(inst.type),
                                 sched.one_stage_per_rank() ? -1 : inst.stage);
}

std::vector<std::string> instruction_names(const schedule::Schedule& sched, int rank) {
  std::set<std::string> names;
  for (const auto& item : sched.ranks.at(static_cast<std::size_t>(rank))) {
    for (const auto& inst : schedule::actions_of(item))
      names.insert(instruction_label(sched, inst));
  }
  return {names.begin(), names.end()};
}

int max_clock(const std::string& context, const JobSpec& job) {
  if (job.available_frequencies.empty()) {
    throw Error(context + ": the job's ranks report no available frequencies");
  }
  return *std::max_element(job.available_frequencies.begin(), job.available_frequencies.end());
}

void check_clocks(const plan::FrequencyPlan& plan, const std::vector<int>& available,
                  const std::string& where) {
  std::vector<int> sorted = available;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t s = 0; s < plan.size(); ++s) {
    for (std::size_t i = 0; i < plan[s].size(); ++i) {
      if (!std::binary_search(sorted.begin(), sorted.end(), plan[s][i])) {
        throw Error(where + ": stage " + std::to_string(s) + " position " + std::to_string(i) +
                    ": clock " + std::to_string(plan[s][i]) +
                    " MHz is not an available frequency of the job");
      }
    }
  }
}

std::vector<StagePlan> stage_plans(const schedule::Schedule& sched, const plan::FrequencyPlan& p) {
  plan::check_plan_shape(p, sched, "");
  std::vector<StagePlan> out(sched.ranks.size());
  for (std::size_t s = 0; s < sched.ranks.size(); ++s) {
    for (std::size_t i = 0; i < sched.ranks[s].size(); ++i) {
      for (const auto& inst : schedule::actions_of(sched.ranks[s][i])) {  // a pair: one clock
        out[s].frequencies.emplace_back(instruction_label(sched, inst), p[s][i]);
      }
    }
  }
  return out;
}

std::vector<StagePlan> uniform_plans(const schedule::Schedule& sched, int mhz) {
  return stage_plans(sched,
                     plan::plan_per_instruction(sched, [&](int, const auto&) { return mhz; }));
}

namespace {

// Whether the canonical path `real` lies under the canonical folder `top`.
bool lies_under(const std::filesystem::path& real, const std::filesystem::path& top) {
  return std::mismatch(top.begin(), top.end(), real.begin(), real.end()).first == top.end();
}

// `path` (relative: to `base`) unless it leads outside `root`, which `option` names; `advice`
// follows the refusal.
std::filesystem::path confined(const ArgReader& args, const char* name, const std::string& path,
                               const std::filesystem::path& base, const std::filesystem::path& root,
                               const char* option, const std::string& advice = "") {
  namespace fs = std::filesystem;
  fs::path p(path);
  for (const auto& part : p) {
    if (part == "..") args.fail(name, "must not contain '..'");
  }
  if (!p.is_absolute()) p = base / p;
  std::error_code ec;
  fs::path real = fs::weakly_canonical(p, ec), top = fs::weakly_canonical(root, ec);
  if (ec || !lies_under(real, top)) {
    args.fail(name, "'" + path + "' is outside " + option + " (" + top.string() + ")" + advice);
  }
  return p;
}

// Refuses (naming the argument) `file`, met under an input path, unless it resolves under
// `top` (the canonical --data-dir) to a regular file of at most kMaxInputFileBytes.
void check_input_file(const ArgReader& args, const char* name, const std::filesystem::path& file,
                      const std::filesystem::path& top) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path real = fs::canonical(file, ec);
  if (ec) args.fail(name, "'" + file.string() + "' cannot be resolved: " + ec.message());
  if (!lies_under(real, top)) {
    args.fail(name, "'" + file.string() + "' leads to '" + real.string() +
                        "', outside the server's --data-dir (" + top.string() + ")");
  }
  const fs::file_status status = fs::status(real, ec);
  if (ec || !fs::is_regular_file(status)) {
    args.fail(name, "'" + file.string() +
                        "' is not a regular file (a FIFO, socket or device is never read)");
  }
  const auto size = fs::file_size(real, ec);
  if (ec || size > kMaxInputFileBytes) {
    args.fail(name, "'" + file.string() + "' has " + std::to_string(size) + " bytes, above the " +
                        std::to_string(kMaxInputFileBytes) + " an input file may have");
  }
}

}  // namespace

std::filesystem::path output_path(const ArgReader& args, const char* name, const JobSpec& job,
                                  const std::string& path) {
  namespace fs = std::filesystem;
  const bool own_folder = job.output_dir != job.output_root;
  fs::path p = confined(args, name, path, job.output_dir, job.output_dir,
                        own_folder ? "this job's own folder in the server's --output-dir"
                                   : "the server's --output-dir");
  std::error_code ec;
  const fs::path file = fs::path(path).filename();
  if (file.empty() || file == "." || fs::is_directory(p, ec)) {
    args.fail(name, "'" + path + "' names a folder; name the file to write");
  }
  return p;
}

std::filesystem::path data_path(const ArgReader& args, const char* name, const JobSpec& job) {
  namespace fs = std::filesystem;
  const std::string given = args.text(name);
  const fs::path path = confined(
      args, name, given, job.data_dir, job.data_dir, "the server's --data-dir",
      "; Zeus's server reads any path, Perseus's only those under --data-dir: start perseus serve "
      "with --data-dir " +
          fs::path(given).parent_path().string() + " (or a folder above it) to run this unchanged");
  std::error_code ec;
  const fs::path top = fs::weakly_canonical(job.data_dir, ec);
  if (!fs::is_directory(path, ec)) {
    if (fs::exists(fs::symlink_status(path, ec))) check_input_file(args, name, path, top);
    return path;
  }
  // Every member, as the readers will open it (the folder itself is under --data-dir: confined
  // resolved it): a link out, a FIFO or a huge file is refused here rather than read (or waited
  // on) later.
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) continue;
    check_input_file(args, name, it->path(), top);
  }
  if (ec) args.fail(name, "cannot list '" + path.string() + "': " + ec.message());
  return path;
}

void check_results(const std::string& context, const std::vector<StageResult>& results,
                   int stages) {
  if (results.size() != static_cast<std::size_t>(stages)) {
    throw Error(context + ": got results for " + std::to_string(results.size()) +
                " stages, expected " + std::to_string(stages));
  }
}

namespace {

using Breakdown = std::map<std::string, std::vector<std::vector<double>>>;

const std::vector<std::vector<double>>& breakdown_of(const std::string& where,
                                                     const Breakdown& breakdown, const char* kind,
                                                     const std::string& instruction,
                                                     std::size_t iterations) {
  auto it = breakdown.find(instruction);
  if (it == breakdown.end()) {
    throw Error(where + ": no " + kind + " for instruction '" + instruction + "'");
  }
  if (it->second.size() != iterations) {
    throw Error(where + ": " + kind + " of instruction '" + instruction + "' has " +
                std::to_string(it->second.size()) + " iterations, expected " +
                std::to_string(iterations));
  }
  return it->second;
}

// Adds one instruction's occurrences over iterations [first, end) to `window`.
void add_instruction(const std::string& where, const StageResult& r, const std::string& instruction,
                     std::size_t first, StageWindow& window) {
  std::size_t n = r.iter_time.size();
  const auto& times = breakdown_of(where, r.time_breakdown, "time_breakdown", instruction, n);
  const auto& energies =
      breakdown_of(where, r.energy_breakdown, "energy_breakdown", instruction, n);
  double time = 0.0, energy = 0.0;
  std::size_t count = 0;
  for (std::size_t k = first; k < n; ++k) {
    if (times[k].size() != energies[k].size()) {
      throw Error(where + ": instruction '" + instruction + "' iteration " + std::to_string(k) +
                  " has " + std::to_string(times[k].size()) + " times but " +
                  std::to_string(energies[k].size()) + " energies");
    }
    for (double t : times[k]) time += t;
    for (double e : energies[k]) energy += e;
    count += times[k].size();
  }
  if (count == 0) throw Error(where + ": no measurements of instruction '" + instruction + "'");
  window.busy_time_s += time;
  window.busy_energy_j += energy;
  window.instructions[instruction] = {time / static_cast<double>(count),
                                      energy / static_cast<double>(count)};
}

}  // namespace

StageWindow summarize(const std::string& context, const StageResult& result, int stage,
                      const std::vector<std::string>& instructions, std::size_t skip) {
  const std::string where = context + ": stage " + std::to_string(stage);
  std::size_t n = result.iter_time.size();
  if (n == 0) throw Error(where + ": no iterations reported");
  if (result.iter_energy.size() != n) {
    throw Error(where + ": " + std::to_string(n) + " iteration times but " +
                std::to_string(result.iter_energy.size()) + " iteration energies");
  }
  std::size_t first = std::min(skip, n - 1);
  StageWindow window;
  window.iterations = n - first;
  for (std::size_t k = first; k < n; ++k) {
    window.iter_time_s += result.iter_time[k];
    window.iter_energy_j += result.iter_energy[k];
  }
  for (const auto& name : instructions) add_instruction(where, result, name, first, window);
  return window;
}

std::vector<StageWindow> summarize_all(const std::string& context,
                                       const std::vector<StageResult>& results,
                                       const schedule::Schedule& sched, std::size_t skip) {
  check_results(context, results, sched.num_ranks());
  std::vector<StageWindow> out;
  for (int s = 0; s < sched.num_ranks(); ++s) {
    out.push_back(summarize(context, results[static_cast<std::size_t>(s)], s,
                            instruction_names(sched, s), skip));
  }
  return out;
}

}  // namespace perseus::server::schedulers
