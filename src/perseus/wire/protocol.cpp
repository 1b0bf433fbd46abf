#include "perseus/wire/protocol.hpp"

#include "perseus/util/error.hpp"
#include "perseus/util/json_fields.hpp"

namespace perseus::wire {
namespace {

using nlohmann::json;

const JsonFields fields;  // request bodies: messages name the field only

// An optional object keyed by instruction ({"forward": ..., ...}), each value parse(value,
// "field.name"); empty when absent or null.
template <typename Parse>
auto keyed(const json& body, const std::string& field, const char* of_what, Parse parse)
    -> std::map<std::string, decltype(parse(body, field))> {
  std::map<std::string, decltype(parse(body, field))> out;
  const json* value = fields.optional(body, field);
  if (!value) return out;
  fields.object(*value, field, std::string("an object of ") + of_what);
  for (const auto& [name, v] : value->items()) out[name] = parse(v, JsonFields::child(field, name));
  return out;
}

// [[per occurrence] per iteration] of one instruction.
std::vector<std::vector<double>> iterations(const json& value, const std::string& where) {
  fields.list(value, where, "a list of lists of numbers");
  std::vector<std::vector<double>> rows;
  for (std::size_t i = 0; i < value.size(); ++i)
    rows.push_back(fields.numbers(value[i], JsonFields::element(where, i)));
  return rows;
}

// {"samples": 15, "mean_mhz": 1200.0, "held_down_share": 1.0}
ClockObservation clock_observation(const json& value, const std::string& where) {
  fields.object(value, where, "an object {samples, mean_mhz, held_down_share}");
  ClockObservation c;
  c.samples = fields.int_at(value, where, "samples", 1);
  c.mean_mhz = fields.number_at(value, where, "mean_mhz");
  if (c.mean_mhz > kMaxClockMhz) {
    fields.fail(where + ".mean_mhz", "is " + std::to_string(c.mean_mhz) + ", above " +
                                         std::to_string(kMaxClockMhz) + " MHz (a clock in kHz?)");
  }
  c.held_down_share = fields.number_at(value, where, "held_down_share");
  if (c.held_down_share > 1.0) fields.fail(where + ".held_down_share", "must be a share in [0, 1]");
  return c;
}

std::optional<std::string> optional_string(const json& body, const std::string& field) {
  const json* value = fields.optional(body, field);
  if (!value) return std::nullopt;
  return fields.as_text(*value, field);
}

}  // namespace

json to_json(const JobInfo& info) {
  json j = {{"job_id", info.job_id},
            {"pp_degree", info.pp_degree},
            {"dp_degree", info.dp_degree},
            {"tp_degree", info.tp_degree},
            {"world_size", info.world_size}};
  j["job_metadata"] = info.job_metadata ? json(*info.job_metadata) : json(nullptr);
  if (info.scheduler) j["scheduler"] = *info.scheduler;
  if (info.scheduler_args) j["scheduler_args"] = *info.scheduler_args;
  if (info.pipeline_order) j["pipeline_order"] = *info.pipeline_order;
  if (info.num_microbatches) j["num_microbatches"] = *info.num_microbatches;
  if (info.applies_power_limits) j["applies_power_limits"] = true;
  return j;
}

json to_json(const RankInfo& info) {
  json j = {{"rank", info.rank},
            {"dp_rank", info.dp_rank},
            {"pp_rank", info.pp_rank},
            {"tp_rank", info.tp_rank},
            {"available_frequencies", info.available_frequencies}};
  if (info.simulated_gpu) j["simulated_gpu"] = true;
  return j;
}

json to_json(const FrequencySchedule& schedule) {
  json j = {{"rank", schedule.rank},
            {"frequencies", schedule.frequencies},  // [[name, MHz], ...]
            {"round", schedule.round},
            {"done", schedule.done}};
  if (schedule.power_limit_w) j["power_limit_w"] = *schedule.power_limit_w;
  if (schedule.report_every) j["report_every"] = *schedule.report_every;
  return j;
}

json to_json(const ProfilingResult& result) {
  json j = {{"rank", result.rank},
            {"iter_time", result.iter_time},
            {"iter_energy", result.iter_energy},
            {"time_breakdown", result.time_breakdown},
            {"energy_breakdown", result.energy_breakdown}};
  if (result.round) j["round"] = *result.round;
  if (result.final_window) j["final_window"] = *result.final_window;
  if (!result.energy_stderr.empty()) j["energy_stderr"] = result.energy_stderr;
  if (!result.energy_pooling_error.empty()) {
    j["energy_pooling_error"] = result.energy_pooling_error;
  }
  if (result.attribution) j["attribution"] = *result.attribution;
  if (!result.clocks.empty()) {
    json& clocks = j["clocks"];
    for (const auto& [name, c] : result.clocks) {
      clocks[name] = {
          {"samples", c.samples}, {"mean_mhz", c.mean_mhz}, {"held_down_share", c.held_down_share}};
    }
  }
  if (!result.energy_measured) j["energy_measured"] = false;
  return j;
}

JobInfo parse_job_info(const json& body) {
  JobInfo info;
  if (auto id = optional_string(body, "job_id"); id && !id->empty()) {
    fields.fail("job_id", "must be empty: the server assigns the job id");
  }
  info.pp_degree = fields.int_field(body, "pp_degree", 1);
  info.dp_degree = fields.int_field(body, "dp_degree", 1);
  info.tp_degree = fields.int_field(body, "tp_degree", 1);
  info.world_size = fields.int_field(body, "world_size", 1);
  long long product = 1LL * info.pp_degree * info.dp_degree * info.tp_degree;
  if (product != info.world_size) {
    fields.fail("world_size", "is " + std::to_string(info.world_size) +
                                  " but pp_degree * dp_degree * " + "tp_degree is " +
                                  std::to_string(product));
  }
  info.job_metadata = optional_string(body, "job_metadata");
  info.scheduler = optional_string(body, "scheduler");
  if (const json* args = fields.optional(body, "scheduler_args")) {
    info.scheduler_args = fields.object(*args, "scheduler_args", "a JSON object");
  }
  if (const json* order = fields.optional(body, "pipeline_order")) {
    if (!order->is_array() && !order->is_object()) {
      fields.fail("pipeline_order",
                  "must be per-rank action lists (an array, or an object keyed "
                  "by rank), got " +
                      JsonFields::shown(*order));
    }
    info.pipeline_order = *order;
  }
  if (const json* applies = fields.optional(body, "applies_power_limits")) {
    if (!applies->is_boolean()) {
      fields.fail("applies_power_limits",
                  "must be true or false, got " + JsonFields::shown(*applies));
    }
    info.applies_power_limits = applies->get<bool>();
  }
  if (fields.optional(body, "num_microbatches")) {
    info.num_microbatches = fields.int_field(body, "num_microbatches", 1);
  }
  return info;
}

RankInfo parse_rank_info(const json& body) {
  RankInfo info;
  info.rank = fields.int_field(body, "rank", 0);
  info.dp_rank = fields.int_field(body, "dp_rank", 0);
  info.pp_rank = fields.int_field(body, "pp_rank", 0);
  info.tp_rank = fields.int_field(body, "tp_rank", 0);
  const json& freqs = fields.list(fields.member(body, "available_frequencies"),
                                  "available_frequencies", "a list of integers (MHz)");
  if (freqs.empty()) {
    fields.fail("available_frequencies",
                "is empty; list the SM clocks (MHz) the rank's GPU supports");
  }
  if (freqs.size() > kMaxClocks) {
    fields.fail("available_frequencies", "has " + std::to_string(freqs.size()) +
                                             " values; at most " + std::to_string(kMaxClocks) +
                                             " are accepted");
  }
  for (std::size_t i = 0; i < freqs.size(); ++i) {
    std::string field = JsonFields::element("available_frequencies", i);
    int mhz = fields.as_int(freqs[i], field, 1);
    if (mhz < kMinClockMhz || mhz > kMaxClockMhz) {
      fields.fail(field, "is " + std::to_string(mhz) + " MHz; clocks must be in " +
                             std::to_string(kMinClockMhz) + ".." + std::to_string(kMaxClockMhz) +
                             " MHz");
    }
    info.available_frequencies.push_back(mhz);
  }
  if (body.contains("simulated_gpu")) {
    info.simulated_gpu = fields.as_bool(body["simulated_gpu"], "simulated_gpu");
  }
  return info;
}

FrequencySchedule parse_frequency_schedule(const json& body) {
  FrequencySchedule schedule;
  schedule.rank = fields.int_field(body, "rank", 0);
  const json& freqs = fields.list(fields.member(body, "frequencies"), "frequencies",
                                  "a list of [instruction, MHz] pairs");
  for (std::size_t i = 0; i < freqs.size(); ++i) {
    std::string where = JsonFields::element("frequencies", i);
    const json& pair = freqs[i];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
      fields.fail(where, "must be an [instruction, MHz] pair");
    }
    schedule.frequencies.emplace_back(pair[0].get<std::string>(), fields.as_int(pair[1], where, 1));
  }
  if (body.contains("round")) schedule.round = fields.int_field(body, "round", 0);
  if (body.contains("done")) schedule.done = fields.as_bool(body["done"], "done");
  if (const json* limit = fields.optional(body, "power_limit_w")) {
    schedule.power_limit_w = fields.as_number(*limit, "power_limit_w");
  }
  if (const json* every = fields.optional(body, "report_every")) {
    schedule.report_every = fields.as_int(*every, "report_every", 1, kMaxReportEvery);
  }
  return schedule;
}

ProfilingResult parse_profiling_result(const json& body) {
  ProfilingResult result;
  result.rank = fields.int_field(body, "rank", 0);
  result.iter_time = fields.numbers(fields.member(body, "iter_time"), "iter_time");
  result.iter_energy = fields.numbers(fields.member(body, "iter_energy"), "iter_energy");
  result.time_breakdown = keyed(body, "time_breakdown", "lists of lists of numbers", iterations);
  result.energy_breakdown =
      keyed(body, "energy_breakdown", "lists of lists of numbers", iterations);
  if (const json* round = fields.optional(body, "round")) {
    result.round = fields.as_int(*round, "round", 0);
  }
  if (const json* window = fields.optional(body, "final_window")) {
    result.final_window = fields.as_int(*window, "final_window", 1);
    if (!result.round) throw Error("field 'final_window': given without field 'round'");
  }
  auto number = [](const json& v, const std::string& field) { return fields.as_number(v, field); };
  result.energy_stderr = keyed(body, "energy_stderr", "numbers", number);
  result.energy_pooling_error = keyed(body, "energy_pooling_error", "numbers", number);
  result.attribution = optional_string(body, "attribution");
  result.clocks = keyed(body, "clocks", "clock observations", clock_observation);
  if (const json* measured = fields.optional(body, "energy_measured")) {
    result.energy_measured = fields.as_bool(*measured, "energy_measured");
  }
  return result;
}

namespace {

// Refuses nesting deeper than kMaxJsonDepth before the recursive parts (parsing into a value,
// copying, destroying) ever see it. Brackets inside strings do not count.
void check_depth(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw MalformedJson("invalid JSON at byte " + std::to_string(i + 1) +
                            ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

json parse_json(const std::string& text) {
  check_depth(text);
  try {
    return fields.parse(text);
  } catch (const Error& e) {
    throw MalformedJson(e.what());
  }
}

std::string instruction_label(const std::string& kind, int stage) {
  return stage < 0 ? kind : kind + kStageSeparator + std::to_string(stage);
}

InstructionLabel parse_instruction_label(const std::string& label) {
  const auto at = label.rfind(kStageSeparator);
  if (at == std::string::npos) return {label, -1};
  const std::string stage = label.substr(at + 1);
  const bool digits = !stage.empty() && stage.size() <= 6 &&
                      stage.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || at == 0) {
    throw Error("instruction '" + label + "': expected KIND@STAGE with a stage index >= 0");
  }
  return {label.substr(0, at), std::stoi(stage)};
}

}  // namespace perseus::wire
