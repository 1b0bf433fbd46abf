// The server's HTML status page (GET /): one table row per job with its state, ranks, round and
// last measured results. Self-contained (inline CSS, no scripts); refreshes itself every 5 s.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace perseus::server {

// `jobs` are JobSummary::to_json objects, oldest first. `query` ("" or "?token=...", URL-encoded)
// is appended to the page's links to the server's other pages, so that a browser that opened
// the page with the token in its address can follow them.
std::string render_status_page(const std::vector<nlohmann::json>& jobs, double uptime_s,
                               const std::string& query = "");

}  // namespace perseus::server
