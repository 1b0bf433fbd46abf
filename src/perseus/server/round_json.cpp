// Rounds as the store keeps them and GET /jobs/{id} shows them (round_to_json, round_from_json),
// and which plan of a round one rank runs (plan_for).
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "perseus/server/job.hpp"

namespace perseus::server {

namespace {

using nlohmann::json;

json stage_plan_to_json(const StagePlan& plan) {
  json j = {{"frequencies", plan.frequencies}};  // [[name, MHz], ...]
  if (plan.power_limit_w) j["power_limit_w"] = *plan.power_limit_w;
  return j;
}

StagePlan stage_plan_from_json(const json& j) {
  StagePlan plan;
  j.at("frequencies").get_to(plan.frequencies);
  if (j.contains("power_limit_w")) plan.power_limit_w = j["power_limit_w"].get<double>();
  return plan;
}

json stages_to_json(const std::vector<StagePlan>& stages) {
  json out = json::array();
  for (const auto& stage : stages) out.push_back(stage_plan_to_json(stage));
  return out;
}

std::vector<StagePlan> stages_from_json(const json& j) {
  std::vector<StagePlan> out;
  for (const auto& stage : j) out.push_back(stage_plan_from_json(stage));
  return out;
}

}  // namespace

MadeRound made_round(Round plans) {
  std::string text = round_to_json(plans).dump();
  return {std::move(plans), std::move(text)};
}

json round_to_json(const Round& round) {
  json pipelines = json::object(), variants = json::array();
  std::map<const StagePlans*, std::size_t> index;  // a shared plan set -> its place in variants
  for (const auto& [dp, stages] : round.pipelines) {
    auto [it, added] = index.try_emplace(stages.get(), variants.size());
    if (added) variants.push_back(stages_to_json(*stages));
    pipelines[std::to_string(dp)] = it->second;
  }
  json j = {{"stages", stages_to_json(round.stages)},
            {"pipelines", std::move(pipelines)},
            {"variants", std::move(variants)},
            {"done", round.done}};
  if (round.report_every) j["report_every"] = *round.report_every;
  return j;
}

Round round_from_json(const json& j) {
  Round round;
  round.stages = stages_from_json(j.at("stages"));
  std::vector<std::shared_ptr<const StagePlans>> variants;
  for (const auto& stages : j.value("variants", json::array())) {
    variants.push_back(std::make_shared<const StagePlans>(stages_from_json(stages)));
  }
  for (const auto& [dp, stages] : j.at("pipelines").items()) {
    // A plan set's index in "variants"; in rounds stored before plan sets were shared, the set.
    round.pipelines[std::stoi(dp)] =
        stages.is_number() ? variants.at(stages.get<std::size_t>())
                           : std::make_shared<const StagePlans>(stages_from_json(stages));
  }
  round.done = j.at("done").get<bool>();
  if (j.contains("report_every")) round.report_every = j["report_every"].get<int>();
  return round;
}

std::size_t round_instructions(const Round& round) {
  std::size_t n = 0;
  for (const auto& stage : round.stages) n += stage.frequencies.size();
  std::set<const StagePlans*> counted;
  for (const auto& [dp, stages] : round.pipelines) {
    if (!counted.insert(stages.get()).second) continue;
    for (const auto& stage : *stages) n += stage.frequencies.size();
  }
  return n;
}

bool sets_power_limits(const Round& round) {
  auto any = [](const StagePlans& stages) {
    return std::any_of(stages.begin(), stages.end(),
                       [](const StagePlan& stage) { return stage.power_limit_w.has_value(); });
  };
  return any(round.stages) || std::any_of(round.pipelines.begin(), round.pipelines.end(),
                                          [&](const auto& p) { return any(*p.second); });
}

const StagePlan& plan_for(const Round& round, int dp_rank, int pp_rank) {
  auto it = round.pipelines.find(dp_rank);
  const auto& stages = it == round.pipelines.end() ? round.stages : *it->second;
  return stages.at(static_cast<std::size_t>(pp_rank));
}

}  // namespace perseus::server
