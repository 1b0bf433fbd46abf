#include "perseus/search/config.hpp"

#include <algorithm>

#include "perseus/util/error.hpp"
#include "perseus/util/json_fields.hpp"

namespace perseus::search {

namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kConfigKeys[] = {"global_batch_size",
                                       "micro_batch_size",
                                       "num_stages",
                                       "num_gpus",
                                       "checkpoint_activations",
                                       "resharding_stages",
                                       "num_ops_in_each_stage",
                                       "model_parallel_size_of_each_op",
                                       "data_parallel_size_of_each_op",
                                       "recompute_ops",
                                       "algo_of_each_op"};

bool is_config_key(const std::string& k) {
  return std::any_of(std::begin(kConfigKeys), std::end(kConfigKeys),
                     [&](const char* c) { return k == c; });
}

// Tensor- and data-parallel degrees are powers of two (the profiles and collective tables are).
int power_of_two(const JsonFields& fields, const ojson& v, const std::string& field) {
  const int x = fields.as_int(v, field, 1, 1 << 20);
  if ((x & (x - 1)) != 0) fields.fail(field, "must be a power of two, got " + std::to_string(x));
  return x;
}

const ojson& list_of(const JsonFields& fields, const ojson& v, std::size_t n,
                     const std::string& field) {
  const std::string what = "a list of " + std::to_string(n) + " entries";
  if (fields.list(v, field, what).size() != n) fields.fail(field, "must be " + what);
  return v;
}

std::string at(const char* key, std::size_t s) {
  return JsonFields::element(key, s);
}
std::string at(const char* key, std::size_t s, std::size_t i) {
  return JsonFields::element(at(key, s), i);
}

}  // namespace

StageConfig StageConfig::uniform(int num_ops, int tp, int dp, int algo) {
  StageConfig s;
  s.num_gpus = tp * dp;
  auto n = static_cast<std::size_t>(num_ops);
  s.tp.assign(n, tp);
  s.dp.assign(n, dp);
  s.algo.assign(n, algo);
  s.recompute.assign(n, 0);
  return s;
}

int Config::num_gpus() const {
  int n = 0;
  for (const auto& s : stages) n += s.num_gpus;
  return n;
}

int Config::num_ops() const {
  int n = 0;
  for (const auto& s : stages) n += s.num_ops();
  return n;
}

Config config_from_json(const ojson& j, const std::string& source) {
  const JsonFields fields(source);
  ojson model = ojson::object();
  for (const auto& [key, v] : fields.document(j).items()) {
    if (!is_config_key(key)) model[key] = v;
  }
  Config c;
  c.model = model_desc_from_json(model, source);
  constexpr long long kMax = 1LL << 30;
  c.global_batch_size = fields.int_field(j, "global_batch_size", 1, kMax);
  c.micro_batch_size = fields.int_field(j, "micro_batch_size", 1, c.global_batch_size);
  const int num_stages = fields.int_field(j, "num_stages", 1, 1 << 16);
  const auto n = static_cast<std::size_t>(num_stages);
  const auto& gpus = list_of(fields, fields.member(j, "num_gpus"), n, "num_gpus");
  const auto& ops =
      list_of(fields, fields.member(j, "num_ops_in_each_stage"), n, "num_ops_in_each_stage");
  for (const char* key : {"checkpoint_activations", "resharding_stages"}) {
    if (!j.contains(key)) continue;  // derived fields: checked for shape only
    const auto& v = list_of(fields, j[key], n, key);
    for (std::size_t s = 0; s < n; ++s) fields.as_bool(v[s], at(key, s));
  }
  const char* per_op[] = {"model_parallel_size_of_each_op", "data_parallel_size_of_each_op",
                          "recompute_ops", "algo_of_each_op"};
  for (const char* key : per_op) list_of(fields, fields.member(j, key), n, key);
  for (std::size_t s = 0; s < n; ++s) {
    StageConfig st;
    st.num_gpus = fields.as_int(gpus[s], at("num_gpus", s), 1, 1 << 20);
    const int num_ops = fields.as_int(ops[s], at("num_ops_in_each_stage", s), 1, 1 << 24);
    const auto m = static_cast<std::size_t>(num_ops);
    const auto& tp = list_of(fields, j[per_op[0]][s], m, at(per_op[0], s));
    const auto& dp = list_of(fields, j[per_op[1]][s], m, at(per_op[1], s));
    const auto& rc = list_of(fields, j[per_op[2]][s], m, at(per_op[2], s));
    const auto& algo = list_of(fields, j[per_op[3]][s], m, at(per_op[3], s));
    st.tp.resize(m);
    st.dp.resize(m);
    st.algo.resize(m);
    st.recompute.resize(m);
    for (std::size_t i = 0; i < m; ++i) {
      st.tp[i] = power_of_two(fields, tp[i], at(per_op[0], s, i));
      st.dp[i] = power_of_two(fields, dp[i], at(per_op[1], s, i));
      st.recompute[i] = static_cast<std::uint8_t>(
          rc[i].is_boolean() ? rc[i].get<bool>() : fields.as_int(rc[i], at(per_op[2], s, i), 0, 1));
      st.algo[i] = fields.as_int(algo[i], at(per_op[3], s, i), 0, 255);
      if (st.tp[i] * st.dp[i] != st.num_gpus) {
        fields.fail(at("num_gpus", s), "is " + std::to_string(st.num_gpus) + " but operator " +
                                           std::to_string(i) + " of the stage has tp " +
                                           std::to_string(st.tp[i]) + " x dp " +
                                           std::to_string(st.dp[i]));
      }
    }
    c.stages.push_back(std::move(st));
  }
  return c;
}

Config read_config(const std::filesystem::path& path) {
  return config_from_json(read_json_file(path), path.string());
}

ojson config_to_json(const Config& c) {
  ojson j = ojson::object();
  j["model_name"] = c.model.name;
  j["model_size"] = c.model.size;
  j["num_layers"] = c.model.num_layers;
  for (const auto& [key, v] : c.model.fields.items()) j[key] = v;  // may replace num_layers
  if (!c.model.profile_prefix.empty()) j["profile_prefix"] = c.model.profile_prefix;
  j["global_batch_size"] = c.global_batch_size;
  j["micro_batch_size"] = c.micro_batch_size;
  j["num_stages"] = c.num_stages();
  ojson gpus = ojson::array(), ckpt = ojson::array(), reshard = ojson::array(),
        ops = ojson::array(), tp = ojson::array(), dp = ojson::array(), rc = ojson::array(),
        algo = ojson::array();
  for (const auto& s : c.stages) {
    gpus.push_back(s.num_gpus);
    ckpt.push_back(
        std::any_of(s.recompute.begin(), s.recompute.end(), [](std::uint8_t r) { return r != 0; }));
    auto varies = [](const std::vector<int>& v) {
      return !v.empty() &&
             *std::max_element(v.begin(), v.end()) != *std::min_element(v.begin(), v.end());
    };
    reshard.push_back(varies(s.tp) || varies(s.dp) || varies(s.algo));
    ops.push_back(s.num_ops());
    tp.push_back(s.tp);
    dp.push_back(s.dp);
    ojson r = ojson::array();
    for (auto x : s.recompute) r.push_back(static_cast<int>(x));
    rc.push_back(std::move(r));
    algo.push_back(s.algo);
  }
  j["num_gpus"] = std::move(gpus);
  j["checkpoint_activations"] = std::move(ckpt);
  j["resharding_stages"] = std::move(reshard);
  j["num_ops_in_each_stage"] = std::move(ops);
  j["model_parallel_size_of_each_op"] = std::move(tp);
  j["data_parallel_size_of_each_op"] = std::move(dp);
  j["recompute_ops"] = std::move(rc);
  j["algo_of_each_op"] = std::move(algo);
  return j;
}

std::string config_to_string(const Config& c) {
  return config_to_json(c).dump(4);
}

}  // namespace perseus::search
