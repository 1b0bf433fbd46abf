// Model descriptions of the parallelization search (architecture section 8). A ModelDesc names the
// model family (GPT-, T5- or Wide-ResNet-style), the database prefix of its profiles, the layer
// count and the descriptive fields written into configurations; it comes from the command line
// (make_model_desc) or a small JSON model file (read_model_file). A Model is the operator list
// expanded from one profiled layer template to L layers, with the per-operator traits the
// performance model needs (memory-sharing quirks, recompute eligibility, sharding specs).
#pragma once

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "perseus/search/database.hpp"

namespace perseus::search {

enum class ModelFamily { gpt, t5, resnet };

// A run of `count` profiled operators (the one after the previous segment first; count < 0: all
// the remaining ones) repeated `repeat` times (repeat < 0: num_layers times).
struct Segment {
  int count = 1;
  int repeat = 1;
};

struct ModelDesc {
  std::string name = "gpt";  // model_name: gpt, t5 or resnet (sets the family)
  std::string size;          // model_size, e.g. "1_3B"
  int num_layers = 0;
  ModelFamily family = ModelFamily::gpt;
  std::string profile_prefix;      // database file prefix; empty: "<name>_<size>"
  std::vector<Segment> segments;   // empty: the family's layout
  double main_params_ratio = 2.0;  // fp32 master weights per weight byte (fp16 models)
  double optimizer_ratio = 4.0;    // optimizer state per weight byte
  // Descriptive fields written into configurations after num_layers, in this order (for example
  // seq_length, hidden_size); num_layers itself when it is not a plain number (ResNet's list).
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();

  std::string prefix() const { return profile_prefix.empty() ? name + "_" + size : profile_prefix; }
};

// A GPT size the reference knows ("350M", "1_3B", ...): {seq_length, hidden_size,
// num_attention_heads}; nullopt for another.
std::optional<std::array<int, 3>> gpt_dimensions(const std::string& size);

// The description of a named model; the family's defaults and, for the sizes the reference knows
// (gpt 350M..13B, t5 770M..22B, resnet 250M..13B), its descriptive fields. Unknown names: Error.
ModelDesc make_model_desc(const std::string& name, const std::string& size, int num_layers);

// {"model_name", "model_size", "num_layers", optional "profile_prefix", "segments" ([{"ops": N
// or "rest", "repeat": N or "num_layers"}]), "main_params_ratio", "optimizer_ratio", any other
// descriptive field}. `source` names the file in errors.
ModelDesc model_desc_from_json(const nlohmann::ordered_json& j, const std::string& source);
ModelDesc read_model_file(const std::filesystem::path& path);

// How an operator's input/output tensors are sharded (the reference's get_op_spec), by name.
enum class SpecKind : std::uint8_t {
  none,             // unknown: never resharded
  embedding,        // encoder-embedding
  layernorm,        // enc-1st/2nd-layernorm
  final_layernorm,  // final-layernorm
  column_linear,    // enc-attention-qkv, enc-MLP-GEMM-1 (algo 0 column, 1 row)
  attention_score,  // enc-attention-score
  attention_probs,  // enc-attention-softmax, enc-attention-dropout
  attention_context,
  row_linear,  // enc-attention-dense, enc-MLP-GEMM-2 (algo 0 row, 1 column)
  replicated,  // enc-post-attention-dropout, enc-post-MLP-dropout
  gelu,        // enc-MLP-gelu
  post_process,
  resnet,  // conv/bn/relu/pool/fc/downsample
};

struct OpTraits {
  bool activation_x1_5 = false;       // enc-attention-dropout: activations count 1.5x
  bool activation_shared = false;     // softmax, bn1, -bn3, -downsample: activations count 0
  bool layer_start = false;           // enc-1st-layernorm / -conv1: starts a layer
  bool never_recompute_head = false;  // never chosen to start a recompute group
  bool tunable = false;               // its tp/dp/algo may differ from its neighbours'
  SpecKind spec = SpecKind::none;
};

class Model {
 public:
  // Expands the profiled operators of `db` along `desc`'s segments. Error when the layout needs
  // more operators than were profiled or leaves some out.
  static Model build(const ModelDesc& desc, const Database& db);

  const ModelDesc& desc() const { return desc_; }
  int num_ops() const { return static_cast<int>(ops_.size()); }
  const std::vector<int>& ops() const { return ops_; }  // database operator index of each op
  int op(int i) const { return ops_[static_cast<std::size_t>(i)]; }
  const std::string& op_name(int i) const { return names_[static_cast<std::size_t>(op(i))]; }
  // Traits by database operator index.
  const OpTraits& traits(int db_op) const { return traits_[static_cast<std::size_t>(db_op)]; }
  // Whether intra-stage resharding between differently sharded neighbours is costed (all but T5).
  bool resharding() const { return desc_.family != ModelFamily::t5; }
  // The number of operators of one layer (largest repeated segment); 1 when none repeats.
  int ops_per_layer() const { return ops_per_layer_; }
  // The first operator of a range with the same operators as [first, first + len): the range
  // shifted back by whole layers while it stays inside one repeated segment (for caching).
  int canonical_start(int first, int len) const {
    for (const auto& r : regions_) {
      if (first >= r.begin && first + len <= r.end) return r.begin + (first - r.begin) % r.period;
    }
    return first;
  }

 private:
  ModelDesc desc_;
  std::vector<int> ops_;
  std::vector<std::string> names_;
  std::vector<OpTraits> traits_;
  int ops_per_layer_ = 1;
  struct Region {
    int begin, period, end;  // [begin, end) repeats every `period` operators
  };
  std::vector<Region> regions_;
};

const char* family_name(ModelFamily f);

// Reads a JSON file keeping member order; throws perseus::Error naming the file when it cannot
// be read or is not valid JSON.
nlohmann::ordered_json read_json_file(const std::filesystem::path& path);

}  // namespace perseus::search
