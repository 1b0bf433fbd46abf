// The server's HTML status page (GET /): one table row per job with its state, ranks, round and
// last measured results. Self-contained (inline CSS, no scripts); refreshes itself every 5 s.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace perseus::server {

// `jobs` are Job::status(true) objects, oldest first.
std::string render_status_page(const std::vector<nlohmann::json>& jobs, double uptime_s);

}  // namespace perseus::server
