#include "perseus/search/config.hpp"

#include <algorithm>

#include "perseus/util/error.hpp"

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

const ojson& need(const ojson& j, const char* key, const std::string& source) {
  if (!j.contains(key)) throw Error(located(source, 0, key, "missing"));
  return j[key];
}

int int_in(const ojson& v, long long lo, long long hi, const std::string& source,
           const std::string& field) {
  if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > hi) {
    throw Error(located(source, 0, field,
                        "expected an integer in [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "], got " + v.dump()));
  }
  return v.get<int>();
}

// Tensor- and data-parallel degrees are powers of two (the profiles and collective tables are).
int power_of_two_in(const ojson& v, const std::string& source, const std::string& field) {
  int x = int_in(v, 1, 1 << 20, source, field);
  if ((x & (x - 1)) != 0) {
    throw Error(located(source, 0, field, "must be a power of two, got " + std::to_string(x)));
  }
  return x;
}

const ojson& list_of(const ojson& v, std::size_t n, const std::string& source,
                     const std::string& field) {
  if (!v.is_array() || v.size() != n) {
    throw Error(located(source, 0, field, "expected a list of " + std::to_string(n) + " entries"));
  }
  return v;
}

std::string at(const char* key, std::size_t s) {
  return std::string(key) + "[" + std::to_string(s) + "]";
}
std::string at(const char* key, std::size_t s, std::size_t i) {
  return at(key, s) + "[" + std::to_string(i) + "]";
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
  if (!j.is_object()) throw Error(located(source, 0, "", "expected a JSON object"));
  ojson model = ojson::object();
  for (const auto& [key, v] : j.items()) {
    if (!is_config_key(key)) model[key] = v;
  }
  Config c;
  c.model = model_desc_from_json(model, source);
  constexpr long long kMax = 1LL << 30;
  c.global_batch_size =
      int_in(need(j, "global_batch_size", source), 1, kMax, source, "global_batch_size");
  c.micro_batch_size = int_in(need(j, "micro_batch_size", source), 1, c.global_batch_size, source,
                              "micro_batch_size");
  const int num_stages = int_in(need(j, "num_stages", source), 1, 1 << 16, source, "num_stages");
  const auto n = static_cast<std::size_t>(num_stages);
  const auto& gpus = list_of(need(j, "num_gpus", source), n, source, "num_gpus");
  const auto& ops =
      list_of(need(j, "num_ops_in_each_stage", source), n, source, "num_ops_in_each_stage");
  for (const char* key : {"checkpoint_activations", "resharding_stages"}) {
    if (!j.contains(key)) continue;  // derived fields: checked for shape only
    const auto& v = list_of(j[key], n, source, key);
    for (std::size_t s = 0; s < n; ++s) {
      if (!v[s].is_boolean()) throw Error(located(source, 0, at(key, s), "expected true or false"));
    }
  }
  const char* per_op[] = {"model_parallel_size_of_each_op", "data_parallel_size_of_each_op",
                          "recompute_ops", "algo_of_each_op"};
  for (const char* key : per_op) list_of(need(j, key, source), n, source, key);
  for (std::size_t s = 0; s < n; ++s) {
    StageConfig st;
    st.num_gpus = int_in(gpus[s], 1, 1 << 20, source, at("num_gpus", s));
    const int num_ops = int_in(ops[s], 1, 1 << 24, source, at("num_ops_in_each_stage", s));
    const auto m = static_cast<std::size_t>(num_ops);
    const auto& tp = list_of(j[per_op[0]][s], m, source, at(per_op[0], s));
    const auto& dp = list_of(j[per_op[1]][s], m, source, at(per_op[1], s));
    const auto& rc = list_of(j[per_op[2]][s], m, source, at(per_op[2], s));
    const auto& algo = list_of(j[per_op[3]][s], m, source, at(per_op[3], s));
    st.tp.resize(m);
    st.dp.resize(m);
    st.algo.resize(m);
    st.recompute.resize(m);
    for (std::size_t i = 0; i < m; ++i) {
      st.tp[i] = power_of_two_in(tp[i], source, at(per_op[0], s, i));
      st.dp[i] = power_of_two_in(dp[i], source, at(per_op[1], s, i));
      if (rc[i].is_boolean()) {
        st.recompute[i] = rc[i].get<bool>() ? 1 : 0;
      } else {
        st.recompute[i] =
            static_cast<std::uint8_t>(int_in(rc[i], 0, 1, source, at(per_op[2], s, i)));
      }
      st.algo[i] = int_in(algo[i], 0, 255, source, at(per_op[3], s, i));
      if (st.tp[i] * st.dp[i] != st.num_gpus) {
        throw Error(located(source, 0, at("num_gpus", s),
                            "is " + std::to_string(st.num_gpus) + " but operator " +
                                std::to_string(i) + " of the stage has tp " +
                                std::to_string(st.tp[i]) + " x dp " + std::to_string(st.dp[i])));
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
