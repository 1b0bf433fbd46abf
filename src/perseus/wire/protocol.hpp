// The control plane's wire types (architecture section 7), shared by the server and the client: the
// JSON bodies of the Zeus pipeline-frequency-optimizer protocol (same paths, same field names)
// plus Perseus's optional extensions, which a Zeus client ignores. Parsing checks every field and
// throws perseus::Error naming it ("field 'pp_degree': must be an integer >= 1").
//
//   POST /register_job            JobInfo            -> "job id" (a JSON string)
//   POST /register_rank/{job_id}   RankInfo           -> null
//   GET  /schedule/{job_id}?rank=R[&round=K]           -> FrequencySchedule (barrier over ranks)
//   POST /result/{job_id}          ProfilingResult    -> null
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/util/clock_observation.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/gpu_limits.hpp"

namespace perseus::wire {

inline constexpr const char* kRegisterJobPath = "/register_job";
// Authentication (extension, docs/control-plane.md, "Security model"): with a cluster token the server answers
// register_job with the job's secret in this header, and the job's own endpoints require it.
// Clients pass a job on as "<job id>#<secret>" (the credential).
inline constexpr const char* kJobSecretHeader = "X-Perseus-Job-Secret";
// On every answer about a job that failed for good (a 500: its scheduler failed, or its stored
// rows cannot be read); a restarted server fails it again, so clients stop asking.
inline constexpr const char* kJobFailedHeader = "X-Perseus-Job-Failed";
inline constexpr char kCredentialSeparator = '#';
// The Server header of every answer of Perseus's server; an answer without it comes from another
// server (Zeus's), whose barrier counts every schedule request (client/server_session.hpp).
inline constexpr const char* kServerName = "perseus";
inline constexpr const char* kRegisterRankPath = "/register_rank/";  // + job id
inline constexpr const char* kSchedulePath = "/schedule/";           // + job id
inline constexpr const char* kResultPath = "/result/";               // + job id

struct JobInfo {
  std::string job_id;  // empty when sent to the server
  int pp_degree = 1;
  int dp_degree = 1;
  int tp_degree = 1;
  int world_size = 1;  // pp * dp * tp
  std::optional<std::string> job_metadata;
  // Extensions: a per-job scheduler instead of the server's default.
  std::optional<std::string> scheduler;
  std::optional<nlohmann::json> scheduler_args;
  // The order every pipeline rank runs, as the training framework holds it (torch's
  // schedule.pipeline_order): per-rank lists of actions in PyTorch's notation ("0F3", "1I0", null
  // for idle), as an array or an object keyed by rank. The server plans for this order; it parses
  // and checks it (schedule/schedule_file.hpp), the wire only checks its shape.
  std::optional<nlohmann::json> pipeline_order;
  // Microbatches per iteration, as Zeus's Perseus JobInfo sends them: a 1F1B job that names no
  // schedule otherwise (scheduler arguments, pipeline_order).
  std::optional<int> num_microbatches;
  // Extension: the job's client sets the power limits a round may carry (power_limit_w), as
  // Perseus's does; Zeus's client only locks clocks.
  bool applies_power_limits = false;
};

struct RankInfo {
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
  std::vector<int> available_frequencies;  // MHz, as the GPU reports them
  // Extension: the rank runs on a simulated GPU (its energies are a simulator's, not a real
  // counter's); sent only when true.
  bool simulated_gpu = false;
};

// One iteration's clocks for one rank: (instruction name, MHz) in execution order.
struct FrequencySchedule {
  int rank = 0;
  std::vector<std::pair<std::string, int>> frequencies;
  // Extensions.
  int round = 0;                        // which schedule of the job this is (0, 1, ...)
  bool done = false;                    // the last schedule: keep it, report it once, stop
  std::optional<double> power_limit_w;  // set the power limit instead of locking clocks
  // Iterations per reporting window from this schedule on (none: the client's own report_every);
  // 1..kMaxReportEvery. The profiler asks for more when windows are too short for the counter.
  std::optional<int> report_every;
};

// A window of 10000 iterations lasts 0.5 s even at 50 us per iteration; more would let a server
// make a client keep millions of spans.
inline constexpr int kMaxReportEvery = 10000;

// Instruction names on the wire (FrequencySchedule entries, breakdown keys). A GPU that runs one
// pipeline stage names an instruction by its kind alone ("forward", "backward", "backward_input",
// "backward_weight"), as Zeus does; a GPU that runs several stages (interleaved and V-shaped
// schedules) names the stage too: "<kind>@<stage>", e.g. "backward_input@5".
inline constexpr char kStageSeparator = '@';
// The label of `kind` on `stage`; the kind alone when stage < 0.
std::string instruction_label(const std::string& kind, int stage);
struct InstructionLabel {
  std::string kind;
  int stage = -1;  // -1: the label names no stage
};
// Splits a label; throws perseus::Error when the part after '@' is not a stage index >= 0.
InstructionLabel parse_instruction_label(const std::string& label);

// Measurements of one rank over one reporting window (several iterations).
struct ProfilingResult {
  int rank = 0;
  std::vector<double> iter_time;    // seconds, one per iteration
  std::vector<double> iter_energy;  // joules, one per iteration
  // breakdown[instruction][iteration][occurrence]
  std::map<std::string, std::vector<std::vector<double>>> time_breakdown;
  std::map<std::string, std::vector<std::vector<double>>> energy_breakdown;
  std::optional<int> round;  // extension: the schedule these iterations ran
  // Extension: k >= 1 for the k-th window of the job's final round after its first (clients
  // keep reporting them to Perseus's server so a done job's saving keeps counting); with round.
  std::optional<int> final_window;
  // Extensions: per instruction, the standard error (J) of the window's mean energy of one
  // occurrence (absent when unknown), and how energy was attributed ("busy-overlap", "fit", ...).
  std::map<std::string, double> energy_stderr;
  // Extension: per instruction, how far (J) that mean may be from its own where the attribution
  // pooled its power with other instructions' (0: a power of its own; absent when unknown).
  std::map<std::string, double> energy_pooling_error;
  std::optional<std::string> attribution;
  // Extension: per instruction, the SM clock the GPU ran it at in the window (absent when the
  // client cannot read clocks, e.g. a simulated GPU or a Zeus client).
  std::map<std::string, ClockObservation> clocks;
  // Extension: false when the GPU's energy counter did not change during the window (it is
  // stuck, or the client's reads of it fail), so its energies (sent as 0) are unknown, not zero.
  // Sent only when false.
  bool energy_measured = true;
};

nlohmann::json to_json(const JobInfo& info);
nlohmann::json to_json(const RankInfo& info);
nlohmann::json to_json(const FrequencySchedule& schedule);
nlohmann::json to_json(const ProfilingResult& result);

// Each throws perseus::Error naming the first bad field (missing, wrong type, out of range).
JobInfo parse_job_info(const nlohmann::json& body);
RankInfo parse_rank_info(const nlohmann::json& body);
FrequencySchedule parse_frequency_schedule(const nlohmann::json& body);
ProfilingResult parse_profiling_result(const nlohmann::json& body);

// Text that is not acceptable JSON: a syntax error, a number out of range (1e400) or nesting
// deeper than kMaxJsonDepth. A request carrying it is a bad request (400), unlike a JSON value
// whose fields are wrong (perseus::Error, 422).
class MalformedJson : public Error {
 public:
  using Error::Error;
};
inline constexpr int kMaxJsonDepth = 64;
// Clock lists (available_frequencies) hold at most this many values, each within
// kMinClockMhz..kMaxClockMhz (util/gpu_limits.hpp).
inline constexpr std::size_t kMaxClocks = 1024;

// Parses JSON text; throws MalformedJson "invalid JSON at byte N: ..." (the reason never
// quotes the text itself).
nlohmann::json parse_json(const std::string& text);

}  // namespace perseus::wire
