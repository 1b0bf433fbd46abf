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

}  // namespace

std::optional<std::array<int, 3>> gpt_dimensions(const std::string& size) {
  static const std::map<std::string, std::array<int, 3>> gpt = {
      {"350M", {2048, 1024, 16}}, {"1_3B", {2048, 2048, 32}}, {"2_6B", {2048, 2560, 32}},
      {"6_7B", {2048, 4096, 32}}, {"13B", {2048, 5120, 40}},  {"scale-layer", {2048, 512, 8}}};
  if (auto it = gpt.find(size); it != gpt.end()) return it->second;
  return std::nullopt;
}

namespace {

// Descriptive fields of the sizes the reference knows (aceso_utils.py's tables).
ojson known_fields(ModelFamily f, const std::string& size) {
  ojson j = ojson::object();
  if (f == ModelFamily::gpt) {
    if (const auto dims = gpt_dimensions(size)) {
      j["seq_length"] = (*dims)[0];
      j["max_position_embeddings"] = (*dims)[0];
      j["num_attention_heads"] = (*dims)[2];
      j["hidden_size"] = (*dims)[1];
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

constexpr long long kMaxCount = 1000000;  // layers, operators or repeats of a model file

// A segment's "ops" (a count, or "rest") or "repeat" (a count, or `word`): -1 for the word.
int count_or(const JsonFields& fields, const ojson& v, const std::string& field, const char* word) {
  if (v.is_string() && v.get<std::string>() == word) return -1;
  return fields.as_int(v, field, 1, kMaxCount);
}

std::vector<Segment> segments_from_json(const JsonFields& fields, const ojson& v) {
  fields.list(v, "segments", "a non-empty list of {\"ops\", \"repeat\"}");
  if (v.empty()) fields.fail("segments", "must be a non-empty list of {\"ops\", \"repeat\"}");
  std::vector<Segment> segments;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string field = JsonFields::element("segments", i);
    fields.object(v[i], field, "an object {\"ops\": N or \"rest\", \"repeat\": ...}");
    Segment seg;
    seg.count = count_or(fields, fields.member(v[i], "ops", field), field + ".ops", "rest");
    if (v[i].contains("repeat")) {
      seg.repeat = count_or(fields, v[i]["repeat"], field + ".repeat", "num_layers");
    }
    segments.push_back(seg);
  }
  return segments;
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
  const JsonFields fields(source);
  const std::string name = fields.text_field(j, "model_name", true);
  const std::string size = fields.text_field(j, "model_size", true);
  const auto& layers = fields.member(j, "num_layers");
  int num_layers = 0;
  if (layers.is_array()) {  // ResNet: blocks per group
    for (std::size_t i = 0; i < layers.size(); ++i) {
      num_layers += fields.as_int(layers[i], JsonFields::element("num_layers", i), 1, kMaxCount);
    }
    if (num_layers == 0) fields.fail("num_layers", "empty list");
  } else {
    num_layers = fields.as_int(layers, "num_layers", 1, kMaxCount);
  }
  family_of(name, source);  // names the file when unknown
  ModelDesc d = make_model_desc(name, size, num_layers);
  if (layers.is_array()) d.fields["num_layers"] = layers;
  for (const auto& [key, v] : j.items()) {
    if (key == "model_name" || key == "model_size" || key == "num_layers") continue;
    if (key == "profile_prefix") {
      d.profile_prefix = fields.as_text(v, key, true);
    } else if (key == "main_params_ratio" || key == "optimizer_ratio") {
      (key == "main_params_ratio" ? d.main_params_ratio : d.optimizer_ratio) =
          fields.as_number(v, key);
    } else if (key == "segments") {
      d.segments = segments_from_json(fields, v);
    } else if (v.is_number() || v.is_string() || v.is_boolean()) {
      d.fields[key] = v;
    } else {
      fields.fail(key, "descriptive fields must be numbers or strings");
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
