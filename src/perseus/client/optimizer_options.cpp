#include <cmath>
#include <string>

#include "perseus/client/http_client.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/util/error.hpp"

namespace perseus::client {

void OptimizerOptions::validate() const {
  const OptimizerOptions& o = *this;
  auto bad = [](const std::string& field, const std::string& problem) {
    return Error("optimizer options: field '" + field + "': " + problem);
  };
  auto positive = [&](const char* field, int v) {
    if (v < 1) throw bad(field, "must be >= 1, got " + std::to_string(v));
  };
  positive("pp_degree", o.pp_degree);
  positive("dp_degree", o.dp_degree);
  positive("tp_degree", o.tp_degree);
  positive("world_size", o.world_size);
  positive("report_every", o.report_every);
  long long product = 1LL * o.pp_degree * o.dp_degree * o.tp_degree;
  if (product != o.world_size) {
    throw bad("world_size", "is " + std::to_string(o.world_size) +
                                " but pp_degree * dp_degree * tp_degree is " +
                                std::to_string(product));
  }
  auto index = [&](const char* field, int v, int bound, const char* bound_name) {
    if (v < 0 || v >= bound) {
      throw bad(field, "must be in 0.." + std::to_string(bound - 1) + " (" + bound_name + " " +
                           std::to_string(bound) + "), got " + std::to_string(v));
    }
  };
  index("rank", o.rank, o.world_size, "world_size");
  index("pp_rank", o.pp_rank, o.pp_degree, "pp_degree");
  index("dp_rank", o.dp_rank, o.dp_degree, "dp_degree");
  index("tp_rank", o.tp_rank, o.tp_degree, "tp_degree");
  auto seconds = [&](const char* field, double v, bool zero_ok) {
    if (!std::isfinite(v) || v < 0.0 || (!zero_ok && v == 0.0)) {
      throw bad(field, std::string("must be a ") + (zero_ok ? "finite number >= 0" : "positive") +
                           " number of seconds, got " + number(v));
    }
  };
  seconds("request_timeout_s", o.request_timeout_s, false);
  seconds("barrier_timeout_s", o.barrier_timeout_s, false);
  seconds("backoff_s", o.backoff_s, true);
  seconds("stall_bound_s", o.stall_bound_s, false);
  seconds("shutdown_bound_s", o.shutdown_bound_s, true);
  if (o.max_skipped_windows < 0) {
    throw bad("max_skipped_windows", "must be >= 0, got " + std::to_string(o.max_skipped_windows));
  }
  seconds("sampler_period_s", o.sampler_period_s, true);
  if (o.retries < 0) throw bad("retries", "must be >= 0, got " + std::to_string(o.retries));
  if (!o.scheduler_args.is_object()) throw bad("scheduler_args", "must be a JSON object");
  if (o.pipeline_order && !o.pipeline_order->is_array() && !o.pipeline_order->is_object()) {
    throw bad("pipeline_order",
              "must be per-rank action lists (an array, or an object keyed by "
              "rank)");
  }
  if (!o.server_url.empty()) {
    try {
      parse_http_url(o.server_url);
    } catch (const Error& e) {
      throw bad("server_url", e.what());
    }
  }
}

}  // namespace perseus::client
