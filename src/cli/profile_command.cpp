// `perseus profile synth|split|check`: write a synthetic profile, derive virtual-stage and
// split-backward rows from one, or validate and summarize one.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/text.hpp"

namespace perseus::cli {

namespace {

using profile::Measurement;
using profile::Profile;

struct SynthArgs {
  std::string gpu;
  int stages = 0;
  std::vector<double> stage_work;
  double forward_time_s = profile::ModelDescription{}.forward_time_s;
  double noise = 0.0;
  std::uint64_t seed = 1;
  profile::SplitOptions split;
  std::string out;
};

struct SplitArgs {
  std::string path, out;
  profile::SplitOptions split;
  bool allow_implausible = false;
};

void write_profile(const Profile& prof, const std::string& out) {
  std::ostringstream csv;
  profile::write_profile_csv(prof, csv);
  write_file_atomic(out, csv.str());
}

void run_synth(const SynthArgs& a) {
  const profile::GpuModel& gpu = profile::gpu_model(a.gpu);
  profile::ModelDescription model = profile::default_model(a.stages);
  if (!a.stage_work.empty()) model.stage_work = a.stage_work;
  model.forward_time_s = a.forward_time_s;
  Profile prof =
      profile::split_profile(profile::synthesize_profile(gpu, model, a.noise, a.seed), a.split);
  write_profile(prof, a.out);
  std::fprintf(
      summary_stream(a.out),
      "wrote %s: synthetic %s profile, %d stages x %s x %s; plan with --blocking-power %g\n",
      a.out.c_str(), gpu.name.c_str(), prof.num_stages(), join(prof.instructions(0), "/").c_str(),
      clocks_text(profile_ranges(prof)).c_str(), gpu.blocking_power_w);
}

void run_split(const SplitArgs& a) {
  Profile prof = profile::split_profile(read_profile(a.path, a.allow_implausible), a.split);
  write_profile(prof, a.out);
  std::fprintf(summary_stream(a.out), "wrote %s: %d stages x %s x %s\n", a.out.c_str(),
               prof.num_stages(), join(prof.instructions(0), "/").c_str(),
               clocks_text(profile_ranges(prof)).c_str());
}

void add_split_options(CLI::App* cmd, profile::SplitOptions& o) {
  cmd->add_option("--virtual-stages", o.virtual_stages,
                  "Cut every stage into this many equal virtual stages (time and energy / V)")
      ->capture_default_str();
  cmd->add_flag("--split-backward", o.split_backward,
                "Add backward_input and backward_weight rows (for zero-bubble schedules)");
  cmd->add_option("--input-fraction", o.input_fraction,
                  "Share of a backward that is its input-gradient part")
      ->capture_default_str();
}

struct CheckArgs {
  std::string path;
  double blocking_power = std::nan("");  // not given
  bool allow_implausible = false, json = false;
};

void run_check(const CheckArgs& a) {
  const std::string& path = a.path;
  Profile prof = read_profile(path, a.allow_implausible);
  if (!std::isnan(a.blocking_power)) {
    require(a.blocking_power >= 0.0, "--blocking-power must be >= 0 watts");
    check_blocking_power(prof, a.blocking_power, a.allow_implausible);
  }
  ProfileRanges r = profile_ranges(prof);
  if (a.json) {
    return print_json({{"profile", path}, {"valid", true}, {"profile_shape", profile_json(prof)}});
  }
  std::printf("%s: valid profile\n", path.c_str());
  std::printf("  stages: %d\n", prof.num_stages());
  std::printf("  instructions: %s\n", join(prof.instructions(0), ", ").c_str());
  std::printf("  per stage and instruction: %s\n", clocks_text(r).c_str());
  if (const std::string note = uneven_clocks_note(prof); !note.empty()) {
    std::printf("  note: %s\n", note.c_str());
  }
  std::printf("  time: %g..%g s, energy: %g..%g J\n", r.time.lo, r.time.hi, r.energy.lo,
              r.energy.hi);
  print_measurement_error(prof, "  ");
}

void add_synth(CLI::App& parent) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "synth", "Write a synthetic profile from a built-in GPU model (docs/synthetic-profiles.md)");
  cmd->add_option("--gpu", a->gpu,
                  "GPU model: " + join(profile::gpu_model_names(), ", ") + " (required)")
      ->required();
  cmd->add_option("--stages", a->stages, "Number of pipeline stages (required)")->required();
  cmd->add_option("--stage-work", a->stage_work,
                  "Relative work per stage, comma-separated (default: 1.0 each, first stage "
                  "+0.08, last stage +0.15)")
      ->delimiter(',');
  cmd->add_option("--forward-time", a->forward_time_s,
                  "Forward time (s) of a stage with work 1.0 at the max clock")
      ->capture_default_str();
  cmd->add_option("--noise", a->noise, "Relative standard deviation of measurement noise")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the noise generator")->capture_default_str();
  add_split_options(cmd, a->split);
  cmd->add_option("--out", a->out, "Output CSV file (required)")->required();
  cmd->callback([a] { run_synth(*a); });
}

void add_split(CLI::App& parent) {
  auto a = std::make_shared<SplitArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "split", "Derive virtual stages and split-backward rows from a profile (docs/formats.md)");
  cmd->add_option("--profile", a->path, "Profile CSV to split (required)")->required();
  add_split_options(cmd, a->split);
  cmd->add_option("--out", a->out, "Output CSV file (required)")->required();
  cmd->add_flag("--allow-implausible", a->allow_implausible, kAllowImplausibleHelp);
  cmd->callback([a] { run_split(*a); });
}

void add_check(CLI::App& parent) {
  auto a = std::make_shared<CheckArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "check", "Validate a profile CSV (format, and plausibility for one GPU) and print a summary");
  cmd->add_option("--profile", a->path,
                  "Profile CSV (stage,instruction,frequency,time,energy) (required)")
      ->required();
  cmd->add_option("--blocking-power", a->blocking_power,
                  "Also check this blocking power (W) against the profile");
  cmd->add_flag("--allow-implausible", a->allow_implausible, kAllowImplausibleHelp);
  add_json_flag(cmd, a->json);
  cmd->callback([a] { run_check(*a); });
}

}  // namespace

void add_profile_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "profile", "Synthesize or validate stage profiles (time and energy per SM clock)");
  cmd->require_subcommand(1);
  add_synth(*cmd);
  add_split(*cmd);
  add_check(*cmd);
}

}  // namespace perseus::cli
