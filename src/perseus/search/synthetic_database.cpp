#include "perseus/search/synthetic_database.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "perseus/profile/gpu_model.hpp"
#include "perseus/search/model.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"

namespace perseus::search {
namespace {

constexpr double kBytes = 2.0;  // fp16
constexpr double kMb = 1024.0 * 1024.0;

// One operator at one (microbatch, tp): its work and its tensors, in bytes.
struct OpShape {
  const char* name;
  double flops = 0.0, traffic = 0.0;  // forward; the backward is kBackwardFactor times
  double input = 0.0, output = 0.0, weights = 0.0, activations = 0.0;
};

// The GPT operators at microbatch b, tensor-parallel t, with hidden h, sequence s and heads a.
std::vector<OpShape> gpt_ops(double b, double t, double h, double s, double a) {
  const double x = b * s * h * kBytes;                 // one hidden activation
  const double scores = b * (a / t) * s * s * kBytes;  // attention scores of this GPU's heads
  const double v = kVocabulary;
  const OpShape layernorm{"", 0.0, 3 * x, x, x, 2 * h * kBytes, x};
  const OpShape dropout{"", 0.0, 3 * x, x, x, 0.0, 1.5 * x};
  auto named = [](OpShape op, const char* name) {
    op.name = name;
    return op;
  };
  const double qkv_w = 3 * h * h * kBytes / t, dense_w = h * h * kBytes / t;
  const double mlp_w = 4 * h * h * kBytes / t;
  return {
      {"encoder-embedding", 0.0, 2 * x, b * s * 4, x, (v * h / t + s * h) * kBytes, x},
      named(layernorm, "enc-1st-layernorm"),
      {"enc-attention-qkv", 2 * b * s * h * 3 * h / t, x + 3 * x / t + qkv_w, x, 3 * x / t, qkv_w,
       x},
      {"enc-attention-score", 2 * b * s * s * h / t, 3 * x / t + scores, 3 * x / t, scores, 0.0,
       2 * x / t},
      {"enc-attention-softmax", 0.0, 2 * scores, scores, scores, 0.0, scores},
      {"enc-attention-dropout", 0.0, 2.5 * scores, scores, scores, 0.0, 1.5 * scores},
      {"enc-attention-context", 2 * b * s * s * h / t, scores + 2 * x / t, scores, x / t, 0.0,
       scores + x / t},
      {"enc-attention-dense", 2 * b * s * h * h / t, x / t + x + dense_w, x / t, x, dense_w, x / t},
      named(dropout, "enc-post-attention-dropout"),
      named(layernorm, "enc-2nd-layernorm"),
      {"enc-MLP-GEMM-1", 2 * b * s * h * 4 * h / t, x + 4 * x / t + mlp_w, x, 4 * x / t, mlp_w, x},
      {"enc-MLP-gelu", 0.0, 8 * x / t, 4 * x / t, 4 * x / t, 0.0, 4 * x / t},
      {"enc-MLP-GEMM-2", 2 * b * s * 4 * h * h / t, 4 * x / t + x + mlp_w, 4 * x / t, x, mlp_w,
       4 * x / t},
      named(dropout, "enc-post-MLP-dropout"),
      named(layernorm, "final-layernorm"),
      {"gpt-post-process", 2 * b * s * h * v / t, 3 * b * s * v / t * kBytes, x, 0.0,
       v * h * kBytes / t, 2 * b * s * v / t * kBytes},
  };
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

std::string op_table(const std::vector<OpShape>& ops, const profile::GpuModel& gpu) {
  std::string out =
      "op_name,forward-compute,backward-compute,input_size,output_size,weights,activations,"
      "fwd_reserved,bwd_reserved\n";
  for (const auto& op : ops) {
    const double compute_us = op.flops / (kGemmEfficiency * gpu.peak_tflops * 1e12) * 1e6;
    const double memory_us = op.traffic / (kMemoryEfficiency * gpu.memory_gbps * 1e9) * 1e6;
    const double fwd_us = std::max(compute_us, memory_us) + kLaunchOverheadUs;
    const double bwd_us = kBackwardFactor * (fwd_us - kLaunchOverheadUs) + kLaunchOverheadUs;
    out += std::string(op.name) + "," + number(fwd_us) + "," + number(bwd_us) + "," +
           number(op.input / kMb) + "," + number(op.output / kMb) + "," + number(op.weights / kMb) +
           "," + number(op.activations / kMb) + "," + number(op.output / kMb) + "," +
           number((op.input + op.output) / kMb) + "\n";
  }
  return out;
}

// The ring model: the share of the message each GPU sends, and the ring's steps.
std::string collective_table(const std::string& collective, int gpus, const profile::GpuModel& gpu,
                             int max_mb) {
  const double n = gpus;
  const bool all_reduce = collective == "all_reduce";
  const double share = (all_reduce ? 2.0 : 1.0) * (n - 1) / n;
  const double steps = (all_reduce ? 2.0 : 1.0) * (n - 1);
  std::string out = "data_size(MB),time(ms)\n";
  for (int mb = 0; mb <= max_mb; ++mb) {
    const double ms = mb == 0 ? 0.0
                              : share * mb * kMb / (gpu.link_gbps * 1e9) * 1e3 +
                                    steps * kCollectiveLatencyUs / 1e3;
    out += std::to_string(mb) + "," + number(ms) + "\n";
  }
  return out;
}

// Bandwidth (GB/s) by message size (MB): half the link's usable bandwidth at 1 MB, rising to it.
std::string p2p_table(const profile::GpuModel& gpu) {
  std::string sizes, bandwidths;
  for (int mb = 1; mb <= 1024; mb *= 2) {
    sizes += (sizes.empty() ? "" : ",") + std::to_string(mb);
    bandwidths +=
        (bandwidths.empty() ? "" : ",") + number(kP2pEfficiency * gpu.link_gbps * mb / (mb + 1.0));
  }
  return sizes + "\n" + bandwidths + "\n";
}

void check_counts(const std::vector<int>& values, const std::string& what) {
  if (values.empty()) throw Error("synthetic database: no " + what);
  for (int v : values) {
    if (v < 1 || v > 1024) {
      throw Error("synthetic database: " + what + " " + std::to_string(v) + " is not in 1..1024");
    }
  }
}

}  // namespace

std::vector<std::filesystem::path> write_synthetic_database(const SyntheticDatabaseSpec& spec,
                                                            const std::filesystem::path& dir) {
  const profile::GpuModel& gpu = profile::gpu_model(spec.gpu);
  const auto dims = gpt_dimensions(spec.size);
  if (!dims) throw Error("synthetic database: unknown GPT size '" + spec.size + "'");
  check_counts(spec.micro_batch_sizes, "microbatch size");
  check_counts(spec.tensor_parallel, "tensor-parallel degree");
  check_counts(spec.collective_gpus, "collective GPU count");
  if (spec.max_collective_mb < 1 || spec.max_collective_mb > 1 << 16) {
    throw Error("synthetic database: the collective tables' largest size must be 1..65536 MB");
  }
  const auto [seq, hidden, heads] = *dims;
  ensure_writable_dir(dir);
  const std::string prefix = "gpt_" + spec.size;
  std::vector<std::filesystem::path> written;
  auto write = [&](const std::string& name, const std::string& text) {
    written.push_back(dir / name);
    write_file_atomic(written.back(), text);
  };
  for (int b : spec.micro_batch_sizes) {
    for (int t : spec.tensor_parallel) {
      write(prefix + "_mbs" + std::to_string(b) + "_tp" + std::to_string(t) + "_algo0.csv",
            op_table(gpt_ops(b, t, hidden, seq, heads), gpu));
    }
  }
  for (int n : spec.collective_gpus) {
    for (const char* collective : {"all_gather", "all_reduce", "reduce_scatter", "all_to_all"}) {
      write("prim_" + prefix + "_" + collective + "_" + std::to_string(n) + "gpus.csv",
            collective_table(collective, n, gpu, spec.max_collective_mb));
    }
  }
  write("p2p_intra_node.csv", p2p_table(gpu));
  return written;
}

}  // namespace perseus::search
