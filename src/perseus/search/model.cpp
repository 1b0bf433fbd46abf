#include "perseus/search/model.hpp"

#include <algorithm>
#include <array>
#include <map>

#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/json_fields.hpp"

namespace perseus::search {

namespace {

using ojson = nlohmann::ordered_json;

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

std::vector<Segment> family_segments(ModelFamily f) {
  switch (f) {
    case ModelFamily::gpt:  // embedding | 13-op decoder layer x L | final-layernorm, post-process
      return {{1, 1}, {13, -1}, {-1, 1}};
    case ModelFamily::t5:  // encoder head | 13-op layer x L | tail, decoder head | 21 x L | tail
      return {{1, 1}, {13, -1}, {1, 1}, {1, 1}, {21, -1}, {-1, 1}};
    case ModelFamily::resnet:  // every block is profiled
      return {{-1, 1}};
  }
  return {};
}

std::vector<std::string> never_recomputed(ModelFamily f) {
  switch (f) {
    case ModelFamily::gpt:
      return {"encoder-embedding", "gpt-post-process"};
    case ModelFamily::t5:
      return {"encoder-embedding", "decoder-embedding", "t5-post-process"};
    case ModelFamily::resnet:
      return {"conv1"};
  }
  return {};
}

// Operators whose tensor-parallel degree can be tuned on their own (the reference's
// get_tunable_op_list): the embedding and the linear layers, ResNet's convolutions.
bool tunable(ModelFamily f, const std::string& name) {
  static const std::vector<std::string> gpt = {"encoder-embedding", "enc-attention-qkv",
                                               "enc-attention-dense", "enc-MLP-GEMM-1",
                                               "enc-MLP-GEMM-2"};
  static const std::vector<std::string> t5_decoder = {
      "dec-attention-qkv-1",   "dec-attention-dense-1", "dec-attention-qkv-2",
      "dec-attention-dense-2", "dec-MLP-GEMM-1",        "dec-MLP-GEMM-2"};
  auto in = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  switch (f) {
    case ModelFamily::gpt:
      return in(gpt);
    case ModelFamily::t5:
      return in(gpt) || in(t5_decoder);
    case ModelFamily::resnet:
      return contains(name, "conv") || contains(name, "downsample");
  }
  return false;
}

SpecKind spec_of(const std::string& n) {
  if (n == "encoder-embedding") return SpecKind::embedding;
  if (n == "enc-1st-layernorm" || n == "enc-2nd-layernorm") return SpecKind::layernorm;
  if (n == "final-layernorm") return SpecKind::final_layernorm;
  if (n == "enc-attention-qkv" || n == "enc-MLP-GEMM-1") return SpecKind::column_linear;
  if (n == "enc-attention-score") return SpecKind::attention_score;
  if (n == "enc-attention-softmax" || n == "enc-attention-dropout") {
    return SpecKind::attention_probs;
  }
  if (n == "enc-attention-context") return SpecKind::attention_context;
  if (n == "enc-attention-dense" || n == "enc-MLP-GEMM-2") return SpecKind::row_linear;
  if (n == "enc-post-attention-dropout" || n == "enc-post-MLP-dropout") {
    return SpecKind::replicated;
  }
  if (n == "enc-MLP-gelu") return SpecKind::gelu;
  if (n == "gpt-post-process") return SpecKind::post_process;
  if (contains(n, "conv") || contains(n, "downsample") || contains(n, "bn") ||
      contains(n, "relu") || contains(n, "pool") || contains(n, "fc")) {
    return SpecKind::resnet;
  }
  return SpecKind::none;
}

ModelFamily family_of(const std::string& name, const std::string& source) {
  if (name == "gpt") return ModelFamily::gpt;
  if (name == "t5") return ModelFamily::t5;
  if (name == "resnet") return ModelFamily::resnet;
  throw Error(located(source, 0, "model_name",
                      "unknown model '" + name + "' (expected gpt, t5 or resnet)"));
}

// Descriptive fields of the sizes the reference knows (aceso_utils.py's tables).
ojson known_fields(ModelFamily f, const std::string& size) {
  ojson j = ojson::object();
  if (f == ModelFamily::gpt) {
    // size: seq_length, hidden_size, num_attention_heads
    static const std::map<std::string, std::array<int, 3>> gpt = {
        {"350M", {2048, 1024, 16}}, {"1_3B", {2048, 2048, 32}}, {"2_6B", {2048, 2560, 32}},
        {"6_7B", {2048, 4096, 32}}, {"13B", {2048, 5120, 40}},  {"scale-layer", {2048, 512, 8}}};
    if (auto it = gpt.find(size); it != gpt.end()) {
      j["seq_length"] = it->second[0];
      j["max_position_embeddings"] = it->second[0];
      j["num_attention_heads"] = it->second[2];
      j["hidden_size"] = it->second[1];
    }
  } else if (f == ModelFamily::t5) {
    // size: num_attention_heads, kv_channels, ffn_hidden_size (sequence 2048/512, hidden 1024)
    static const std::map<std::string, std::array<int, 3>> t5 = {{"770M", {16, 64, 4096}},
                                                                 {"3B", {32, 128, 16384}},
                                                                 {"6B", {64, 128, 32768}},
                                                                 {"11B", {128, 128, 65536}},
                                                                 {"22B", {128, 128, 65536}}};
    if (auto it = t5.find(size); it != t5.end()) {
      j["encoder_seq_length"] = 2048;
      j["decoder_seq_length"] = 512;
      j["max_position_embeddings"] = 2048;
      j["num_attention_heads"] = it->second[0];
      j["kv_channels"] = it->second[1];
      j["hidden_size"] = 1024;
      j["ffn_hidden_size"] = it->second[2];
    }
  } else {
    // size: in_channels, width_factor (blocks [3, 4, 6, 3], or [3, 4, 23, 3] for 13B)
    static const std::map<std::string, std::array<int, 2>> resnet = {
        {"250M", {160, 2}}, {"500M", {224, 2}},  {"1B", {320, 2}},  {"2B", {448, 2}},
        {"4B", {640, 2}},   {"6_8B", {320, 16}}, {"13B", {320, 16}}};
    if (auto it = resnet.find(size); it != resnet.end()) {
      j["in_channels"] = it->second[0];
      j["width_factor"] = it->second[1];
    }
  }
  return j;
}

int positive_int(const ojson& v, const std::string& source, const std::string& field) {
  if (!v.is_number_integer() || v.get<long long>() <= 0 || v.get<long long>() > 1000000) {
    throw Error(located(source, 0, field, "must be a positive integer, got " + v.dump()));
  }
  return v.get<int>();
}

}  // namespace

const char* family_name(ModelFamily f) {
  switch (f) {
    case ModelFamily::gpt:
      return "gpt";
    case ModelFamily::t5:
      return "t5";
    case ModelFamily::resnet:
      return "resnet";
  }
  return "?";
}

ModelDesc make_model_desc(const std::string& name, const std::string& size, int num_layers) {
  ModelDesc d;
  d.family = family_of(name, "model");
  d.name = name;
  d.size = size;
  d.num_layers = num_layers;
  if (d.family == ModelFamily::resnet) {
    d.main_params_ratio = 0.0;
    d.optimizer_ratio = 2.0;
  }
  d.fields = known_fields(d.family, size);
  return d;
}

ModelDesc model_desc_from_json(const ojson& j, const std::string& source) {
  if (!j.is_object()) throw Error(located(source, 0, "", "expected a JSON object"));
  for (const char* key : {"model_name", "model_size"}) {
    if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty()) {
      throw Error(located(source, 0, key, "missing or not a non-empty string"));
    }
  }
  if (!j.contains("num_layers")) throw Error(located(source, 0, "num_layers", "missing"));
  const auto& layers = j["num_layers"];
  int num_layers = 0;
  if (layers.is_array()) {  // ResNet: blocks per group
    for (const auto& v : layers) num_layers += positive_int(v, source, "num_layers");
    if (num_layers == 0) throw Error(located(source, 0, "num_layers", "empty list"));
  } else {
    num_layers = positive_int(layers, source, "num_layers");
  }
  family_of(j["model_name"].get<std::string>(), source);  // names the file when unknown
  ModelDesc d = make_model_desc(j["model_name"].get<std::string>(),
                                j["model_size"].get<std::string>(), num_layers);
  if (layers.is_array()) d.fields["num_layers"] = layers;
  for (const auto& [key, v] : j.items()) {
    if (key == "model_name" || key == "model_size" || key == "num_layers") continue;
    if (key == "profile_prefix") {
      if (!v.is_string() || v.get<std::string>().empty()) {
        throw Error(located(source, 0, key, "must be a non-empty string"));
      }
      d.profile_prefix = v.get<std::string>();
    } else if (key == "main_params_ratio" || key == "optimizer_ratio") {
      if (!v.is_number() || v.get<double>() < 0.0) {
        throw Error(located(source, 0, key, "must be a number >= 0"));
      }
      (key == "main_params_ratio" ? d.main_params_ratio : d.optimizer_ratio) = v.get<double>();
    } else if (key == "segments") {
      if (!v.is_array() || v.empty()) {
        throw Error(located(source, 0, key, "must be a non-empty list of {\"ops\", \"repeat\"}"));
      }
      d.segments.clear();
      for (std::size_t i = 0; i < v.size(); ++i) {
        const auto& s = v[i];
        const std::string field = "segments[" + std::to_string(i) + "]";
        if (!s.is_object() || !s.contains("ops")) {
          throw Error(
              located(source, 0, field, "expected {\"ops\": N or \"rest\", \"repeat\": ...}"));
        }
        Segment seg;
        if (s["ops"].is_string() && s["ops"].get<std::string>() == "rest") {
          seg.count = -1;
        } else {
          seg.count = positive_int(s["ops"], source, field + ".ops");
        }
        if (s.contains("repeat")) {
          if (s["repeat"].is_string() && s["repeat"].get<std::string>() == "num_layers") {
            seg.repeat = -1;
          } else {
            seg.repeat = positive_int(s["repeat"], source, field + ".repeat");
          }
        }
        d.segments.push_back(seg);
      }
    } else if (v.is_number() || v.is_string() || v.is_boolean()) {
      d.fields[key] = v;
    } else {
      throw Error(located(source, 0, key, "descriptive fields must be numbers or strings"));
    }
  }
  return d;
}

ojson read_json_file(const std::filesystem::path& path) {
  return JsonFields(path.string()).parse<ojson>(read_file(path));
}

ModelDesc read_model_file(const std::filesystem::path& path) {
  return model_desc_from_json(read_json_file(path), path.string());
}

Model Model::build(const ModelDesc& desc, const Database& db) {
  Model m;
  m.desc_ = desc;
  std::vector<Segment> segments =
      desc.segments.empty() ? family_segments(desc.family) : desc.segments;
  const int n = db.num_ops();
  const std::string where = db.dir().string();
  int cursor = 0;
  for (const auto& seg : segments) {
    int count = seg.count < 0 ? n - cursor : seg.count;
    if (cursor + count > n || count <= 0) {
      throw Error(located(where, 0, "",
                          "model layout of " + desc.name + " needs more than the " +
                              std::to_string(n) + " operators profiled for " + db.prefix()));
    }
    int repeat = seg.repeat < 0 ? desc.num_layers : seg.repeat;
    if (repeat <= 0) {
      throw Error(located(where, 0, "num_layers", "must be positive for " + desc.name));
    }
    if (seg.repeat < 0) m.ops_per_layer_ = std::max(m.ops_per_layer_, count);
    if (repeat > 1) {
      const int begin = static_cast<int>(m.ops_.size());
      m.regions_.push_back({begin, count, begin + count * repeat});
    }
    for (int r = 0; r < repeat; ++r) {
      for (int k = 0; k < count; ++k) m.ops_.push_back(cursor + k);
    }
    cursor += count;
  }
  if (cursor != n) {
    throw Error(located(where, 0, "",
                        "model layout of " + desc.name + " uses " + std::to_string(cursor) +
                            " of the " + std::to_string(n) + " operators profiled for " +
                            db.prefix()));
  }
  m.names_ = db.op_names();
  const auto excluded = never_recomputed(desc.family);
  for (const auto& name : m.names_) {
    OpTraits t;
    t.activation_x1_5 = name == "enc-attention-dropout";
    t.activation_shared = name == "enc-attention-softmax" || name == "bn1" ||
                          contains(name, "-bn3") ||
                          (contains(name, "-downsample") && !contains(name, "0-0"));
    t.layer_start = name == "enc-1st-layernorm" || contains(name, "-conv1");
    t.never_recompute_head = name == "enc-1st-layernorm" || contains(name, "-conv1") ||
                             contains(name, "-relu") ||
                             std::find(excluded.begin(), excluded.end(), name) != excluded.end();
    t.spec = spec_of(name);
    t.tunable = tunable(desc.family, name);
    m.traits_.push_back(t);
  }
  return m;
}

}  // namespace perseus::search
