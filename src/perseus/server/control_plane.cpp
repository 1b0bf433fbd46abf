#include "perseus/server/control_plane.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>
#include <utility>

#include "perseus/server/auth.hpp"
#include "perseus/server/status_page.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/log.hpp"

namespace perseus::server {
namespace {

using nlohmann::json;

struct Target {
  std::string path;
  std::map<std::string, std::string> query;
};

std::string percent_decode(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int value = 0;
      auto [p, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
      if (ec == std::errc() && p == text.data() + i + 3) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

// `text` with every byte but A-Z a-z 0-9 - . _ ~ as %XX (RFC 3986's unreserved characters).
std::string percent_encode(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// The pages a person reads in a browser, which cannot send the token header: they may carry
// it as ?token= instead.
bool browsable(const std::string& path) {
  return path == "/" || path == "/jobs" || path == "/metrics" || path.rfind("/jobs/", 0) == 0;
}

Target parse_target(const std::string& target) {
  Target t;
  auto q = target.find('?');
  t.path = percent_decode(target.substr(0, q));
  if (q == std::string::npos) return t;
  std::string rest = target.substr(q + 1);
  std::size_t start = 0;
  while (start <= rest.size()) {
    auto end = rest.find('&', start);
    std::string pair =
        rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    auto eq = pair.find('=');
    if (!pair.empty()) {
      t.query[percent_decode(pair.substr(0, eq))] =
          eq == std::string::npos ? "" : percent_decode(pair.substr(eq + 1));
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return t;
}

// The query parameter as a non-negative integer; nullopt when absent. Throws perseus::Error.
std::optional<int> query_int(const Target& t, const std::string& name) {
  auto it = t.query.find(name);
  if (it == t.query.end()) return std::nullopt;
  int value = -1;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
  if (ec != std::errc() || p != it->second.data() + it->second.size() || value < 0) {
    throw RequestError(422, "query '" + name + "': '" + it->second + "' is not an integer >= 0");
  }
  return value;
}

// "/prefix/{id}" -> id (empty when the path does not have that shape).
std::string id_after(const std::string& path, const std::string& prefix) {
  if (path.rfind(prefix, 0) != 0) return "";
  std::string id = path.substr(prefix.size());
  return id.find('/') == std::string::npos ? id : "";
}

// The endpoints addressed as "<prefix><job id>": the method they take and their name in
// GET /metrics.
struct JobRoute {
  const char* prefix;
  bool post;
  const char* endpoint;
};
constexpr JobRoute kJobRoutes[] = {{"/jobs/", false, "job"},
                                   {wire::kRegisterRankPath, true, "register_rank"},
                                   {wire::kSchedulePath, false, "schedule"},
                                   {wire::kResultPath, true, "result"},
                                   {"/straggler/", true, "straggler"}};

// The job route `path` names, with its job id in `id`; nullptr when it names none.
const JobRoute* job_route(const std::string& path, std::string& id) {
  for (const auto& route : kJobRoutes) {
    id = id_after(path, route.prefix);
    if (!id.empty()) return &route;
  }
  return nullptr;
}

// The endpoint a request target names, as GET /metrics labels it ("other" for unknown paths).
std::string endpoint_of(const std::string& target) {
  std::string path = percent_decode(target.substr(0, target.find('?')));
  for (const char* exact : {"/healthz", "/metrics", "/jobs", "/register_job"}) {
    if (path == exact) return exact + 1;
  }
  if (path == "/") return "status_page";
  std::string id;
  const JobRoute* route = job_route(path, id);
  return route ? route->endpoint : "other";
}

// A free-text part of a job id (its scheduler, its metadata) at most this long: the id is a
// label of every job metric and part of every answer about the job.
constexpr std::size_t kMaxIdPart = 64;

// `text` as a job id part: its first kMaxIdPart characters, each other than [A-Za-z0-9._-] as _.
std::string sanitized(const std::string& text) {
  std::string out = text.substr(0, kMaxIdPart);
  for (char& c : out) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

// How long a deleted job's id is not given to a new job: more than a clock set back by an hour
// (daylight saving time) repeats.
constexpr std::chrono::hours kRetiredIdMemory{25};

// "66.0 KiB", "12.5 MiB", "4.0 GiB".
std::string memory_text(std::uint64_t bytes) {
  const char* unit = "KiB";
  double value = static_cast<double>(bytes) / 1024;
  if (bytes >= 1ull << 30) {
    unit = "GiB";
    value /= 1 << 20;
  } else if (bytes >= 1ull << 20) {
    unit = "MiB";
    value /= 1 << 10;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, unit);
  return text;
}

}  // namespace

ControlPlane::ControlPlane(ServerSettings settings)
    : settings_(std::move(settings)), store_(settings_.store_path) {
  if (!settings_.scheduler.empty()) {
    if (!known_scheduler(settings_.scheduler)) {
      throw Error(settings_.scheduler_from + ": unknown scheduler '" + settings_.scheduler + "' (" +
                  scheduler_choices() + ")");
    }
    wire::JobInfo any;
    any.scheduler_args = settings_.scheduler_args;
    try {
      check_scheduler(settings_.scheduler, job_spec("", any, job_settings()), false);
    } catch (const Error& e) {
      throw Error("default scheduler arguments (" + settings_.scheduler_args_from +
                  "): " + e.what());
    }
  }
  for (const auto& stored : store_.load()) add(restore(stored));
}

void ControlPlane::add(std::unique_ptr<Job> job) {
  job->on_release([this](double ms) { release_seconds_.observe(ms / 1000.0); });
  memory_bytes_ += job->memory_bytes();
  order_.push_back(job->id());
  jobs_[job->id()] = std::move(job);
}

std::unique_ptr<Job> ControlPlane::restore(const StoredJob& stored) {
  try {
    if (!stored.unreadable.empty()) throw Error(stored.unreadable);
    auto world = stored.info.at("world_size").get<long long>();
    if (world > settings_.max_ranks) {
      throw Error("world_size " + std::to_string(world) + " is above this server's --max-ranks " +
                  std::to_string(settings_.max_ranks));
    }
    const std::uint64_t bytes = Job::stored_memory_bytes(stored.info);
    if (memory_bytes_ + bytes > settings_.max_memory_bytes) {
      throw Error("its " + memory_text(bytes) +
                  " would take the jobs restored before it above this server's --max-memory " +
                  memory_text(settings_.max_memory_bytes));
    }
    auto job = std::make_unique<Job>(store_, stored, job_settings());
    const std::string state = job->state();
    if (!settings_.token.empty() && !job->has_secret() &&
        (state == "registering" || state == "running")) {
      throw Error(
          "it was registered before the cluster token was turned on, so it has no job secret "
          "and any token holder could act for it; register the job again");
    }
    log::info("job " + stored.job_id + " restored (" + state + ", round " +
              std::to_string(static_cast<long>(job->rounds()) - 1) + ", " +
              std::to_string(stored.rounds.size()) + " rounds replayed)");
    return job;
  } catch (const std::exception& e) {
    std::string reason = "stored job cannot be restored: " + printable(reason_of(e));
    log::error("job " + stored.job_id + ": " + reason);
    return Job::unusable(store_, stored, reason);
  }
}

JobSettings ControlPlane::job_settings() const {
  return {settings_.output_dir, settings_.data_dir, settings_.store_retry_s};
}

Job* ControlPlane::find(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::string ControlPlane::new_job_id(const wire::JobInfo& info) const {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%F-%H-%M-%S", &local);
  std::string id = std::string(stamp) + "+dp" + std::to_string(info.dp_degree) + "+pp" +
                   std::to_string(info.pp_degree) + "+tp" + std::to_string(info.tp_degree) + "+" +
                   sanitized(info.scheduler.value_or(""));
  if (info.job_metadata && !info.job_metadata->empty()) id += "+" + sanitized(*info.job_metadata);
  std::string unique = id;
  for (int n = 2; jobs_.count(unique) || retired_.count(unique) || registering_.count(unique) ||
                  store_.has_job(unique);
       ++n) {
    unique = id + "+" + std::to_string(n);
  }
  return unique;
}

std::optional<Reply> ControlPlane::refuse_registration(const wire::JobInfo& info,
                                                       std::size_t instructions) {
  const std::uint64_t bytes = job_memory_bytes(info.world_size, instructions);
  const auto memory_full = [&] { return memory_bytes_ + bytes > settings_.max_memory_bytes; };
  const auto jobs_full = [&] {
    return jobs_.size() >= static_cast<std::size_t>(settings_.max_jobs);
  };
  if (memory_full() || jobs_full()) {
    next_expiry_ = {};
    expire_jobs();
  }
  if (memory_full()) {
    return too_many_requests(
        "the job needs " + memory_text(bytes) + " of server memory (" +
        std::to_string(info.world_size) + " ranks" +
        (instructions ? ", " + std::to_string(instructions) + " instructions a round" : "") +
        ") and the jobs held take " + memory_text(memory_bytes_) + " of its --max-memory " +
        memory_text(settings_.max_memory_bytes) +
        "; delete finished jobs (DELETE /jobs/{id}), or start another server or store");
  }
  if (jobs_full()) {
    return too_many_requests("the server holds " + std::to_string(jobs_.size()) +
                             " jobs, its --max-jobs; delete finished ones (DELETE /jobs/{id}) "
                             "or start another server or store");
  }
  return std::nullopt;
}

void ControlPlane::register_job(const json& body, const Responder& respond) {
  auto info = wire::parse_job_info(body);
  if (info.world_size > settings_.max_ranks) {
    return respond(unprocessable("field 'world_size': " + std::to_string(info.world_size) +
                                 " is above this server's --max-ranks " +
                                 std::to_string(settings_.max_ranks)));
  }
  if (auto refused = refuse_registration(info, 0)) return respond(*refused);
  if (!info.scheduler) {
    if (settings_.scheduler.empty()) {
      return respond(
          unprocessable("field 'scheduler': missing, and the server has no default "
                        "scheduler (perseus serve --scheduler)"));
    }
    info.scheduler = settings_.scheduler;
    if (!info.scheduler_args) info.scheduler_args = settings_.scheduler_args;
  } else if (!known_scheduler(*info.scheduler)) {
    return respond(unprocessable("field 'scheduler': unknown scheduler '" + *info.scheduler +
                                 "' (" + scheduler_choices() + ")"));
  }
  std::string id = new_job_id(info);
  JobSpec spec;
  try {
    spec = job_spec(id, info, job_settings());  // parses the job's pipeline_order
  } catch (const Error& e) {
    return respond(unprocessable(e.what()));
  }
  // The scheduler's check reads its files (plans, a frontier: up to 64 MiB each) and makes a
  // first round, whose size is what the job's plans will cost: off the loop.
  registering_.insert(id);
  auto instructions = std::make_shared<std::size_t>(0);
  off_loop(
      [name = *info.scheduler, spec = std::move(spec), instructions,
       applies = info.applies_power_limits]() mutable {
        Round first;
        try {
          first = check_scheduler(name, std::move(spec), true)->next();
        } catch (const Error& e) {
          return unprocessable(std::string("field 'scheduler_args': ") + e.what());
        }
        if (!applies && sets_power_limits(first)) {
          return unprocessable(
              "field 'scheduler': '" + name +
              "' sets GPU power limits, which this job's client does not say it applies (Zeus's "
              "client locks clocks only: the job would train at its default clocks while the "
              "server reports a limit); run the job with Perseus's client (perseus.Client, a "
              "framework adapter, simulate-training), or choose a clock scheduler");
        }
        *instructions = round_instructions(first);
        return Reply{200};
      },
      [this, id, info, respond, instructions](const Reply& checked) {
        registering_.erase(id);
        if (checked.status != 200) return respond(checked);
        Reply answer;
        try {
          answer = admit(id, info, *instructions);
        } catch (const std::exception& e) {
          log::error("internal error registering job " + id + ": " + printable(reason_of(e)));
          answer = internal_error(std::string("internal error: ") + reason_of(e));
        }
        respond(answer);
      });
}

Reply ControlPlane::admit(const std::string& id, const wire::JobInfo& info,
                          std::size_t instructions) {
  if (auto refused = refuse_registration(info, instructions)) return *refused;
  std::string secret = settings_.token.empty() ? "" : new_secret();
  try {
    add(std::make_unique<Job>(store_, id, info, job_settings(),
                              secret.empty() ? "" : sha256_hex(secret), instructions));
  } catch (const StoreError& e) {
    log::error(printable(e.what()));
    return service_unavailable(std::string(e.what()) + "; nothing was recorded, retry");
  }
  log::info("job " + id + " registered: " + std::to_string(info.world_size) + " ranks, scheduler " +
            *info.scheduler);
  Reply answer{200, id};
  if (!secret.empty()) answer.headers.emplace_back(kJobSecretHeader, secret);
  return answer;
}

std::vector<JobSummary> ControlPlane::summaries() const {
  std::vector<JobSummary> out;
  out.reserve(order_.size());
  for (const auto& id : order_) {
    out.push_back(jobs_.at(id)->summary());
    out.back().stale = stale(*jobs_.at(id));
  }
  return out;
}

void ControlPlane::off_loop(std::function<Reply()> render, const Responder& respond) {
  if (offload_) return offload_(std::move(render), respond);
  respond(render());
}

bool ControlPlane::stale(const Job& job) const {
  return !job.finished() && job.idle_s() > settings_.stale_after_s;
}

std::string ControlPlane::expired(const Job& job) const {
  const bool finished = job.finished();
  const double after =
      finished ? settings_.expire_finished_after_s : settings_.expire_abandoned_after_s;
  if (after <= 0 || job.idle_s() <= after) return "";
  return "expired: " + job.state() + " and no request for " + number(job.idle_s()) + " s (" +
         (finished ? "--expire-finished-after " : "--expire-abandoned-after ") + number(after) +
         " s)";
}

void ControlPlane::tick() {
  for (auto& [id, job] : jobs_) job->retry_store();
  // The starts the renderer was too busy to take (a job deleted meanwhile is gone).
  for (const std::string& id : std::exchange(deferred_starts_, {})) {
    Job* job = find(id);
    if (job && job->ready_to_start()) start(*job);
  }
  expire_jobs();
}

void ControlPlane::start(Job& job) {
  std::pair<std::string, JobSpec> spec;
  try {
    spec = job.start_spec();
  } catch (const Error& e) {
    return job.start(nullptr, std::nullopt, e.what());
  }
  struct Made {
    std::unique_ptr<Scheduler> scheduler;
    std::optional<MadeRound> first;
    std::string error;
  };
  auto made = std::make_shared<Made>();
  off_loop(
      [made, spec = std::move(spec)] {
        try {
          made->scheduler = make_scheduler(spec.first, spec.second);
          made->first = made_round(made->scheduler->next());
        } catch (const std::exception& e) {
          made->scheduler.reset();
          made->error = reason_of(e);
        }
        return Reply{200};
      },
      [this, id = job.id(), made](const Reply&) {
        Job* job = find(id);  // deleted meanwhile: nothing to start
        if (!job) return;
        if (!made->scheduler && made->error.empty()) {  // the renderer was busy: tick() retries
          job->stop_starting();
          deferred_starts_.insert(id);
          return;
        }
        job->start(std::move(made->scheduler), std::move(made->first), made->error);
      });
}

void ControlPlane::expire_jobs() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_expiry_) return;
  next_expiry_ = now + std::chrono::seconds(1);
  std::erase_if(retired_, [&](const auto& id) { return now - id.second > kRetiredIdMemory; });
  std::vector<std::pair<std::string, std::string>> due;  // (id, why)
  for (const auto& [id, job] : jobs_) {
    if (auto why = expired(*job); !why.empty()) due.emplace_back(id, why);
  }
  for (const auto& [id, why] : due) {
    try {
      remove(id, why);
      ++expired_;
    } catch (const StoreError& e) {  // kept, and tried again at the next expiry
      log::error("job " + id + " " + why + ", but cannot be deleted: " + e.what());
    }
  }
}

Reply ControlPlane::delete_job(const std::string& id, bool force) {
  const Job* job = find(id);
  if (!job) return not_found("unknown job '" + id + "'");
  const std::string state = job->state();
  if (!job->finished() && !force) {
    return conflict("job '" + id + "' is " + state + " (its ranks' last request " +
                    number(job->idle_s()) +
                    " s ago): force the deletion (DELETE /jobs/{id}?force=true, perseus serve "
                    "delete-job --force), and its ranks get 404 from then on");
  }
  try {
    remove(id, "deleted by an operator (" + state + ")");
  } catch (const StoreError& e) {
    log::error(printable(e.what()));
    return service_unavailable(std::string(e.what()) + "; nothing was deleted, retry");
  }
  ++deleted_;
  return {200, json{{"deleted", id}, {"state", state}}};
}

void ControlPlane::remove(const std::string& id, const std::string& why) {
  store_.delete_job(id);
  auto it = jobs_.find(id);
  std::unique_ptr<Job> job = std::move(it->second);
  jobs_.erase(it);
  order_.erase(std::find(order_.begin(), order_.end(), id));
  memory_bytes_ -= job->memory_bytes();
  retired_[id] = std::chrono::steady_clock::now();
  log::info("job " + id + " " + why + "; deleted from the store");
  job->release_waiters(not_found("job '" + id + "' was deleted: " + why));
}

void ControlPlane::handle(const Request& request, Responder answer) {
  // Every answer is counted by endpoint and status (GET /metrics), deferred ones when they go.
  Responder respond = [this, endpoint = endpoint_of(request.target),
                       answer = std::move(answer)](const Reply& reply) {
    ++requests_[{endpoint, reply.status}];
    answer(reply);
  };
  try {
    route(request, respond);
  } catch (const RequestError& e) {
    respond(error_reply(e.status(), e.what()));
  } catch (const StoreError& e) {
    log::error(printable(e.what()));
    respond(service_unavailable(std::string(e.what()) + "; nothing was recorded, retry"));
  } catch (const wire::MalformedJson& e) {
    respond(bad_request(e.what()));
  } catch (const Error& e) {
    respond(unprocessable(e.what()));
  } catch (const std::exception& e) {
    log::error("internal error answering " + printable(request.method) + " " +
               printable(request.target) + ": " + printable(reason_of(e)));
    respond(internal_error(std::string("internal error: ") + reason_of(e)));
  }
}

std::optional<Reply> ControlPlane::refuse_unauthenticated(const Request& request,
                                                          const std::string& path,
                                                          std::string_view query_token) const {
  if (settings_.token.empty()) return std::nullopt;
  std::string_view offered = bearer_token(request.authorization);
  if (offered.empty()) offered = query_token;
  if (same_secret(offered, settings_.token)) return std::nullopt;
  log::warn("auth failure: " + printable(request.method) + " " + printable(path) +
            (offered.empty() ? ": no cluster token" : ": wrong cluster token"));
  return unauthorized("missing or wrong cluster token: send 'Authorization: Bearer <token>'");
}

std::optional<Reply> ControlPlane::refuse_on_header(const Request& request) {
  try {
    const Target t = parse_target(request.target);
    auto token = t.query.find("token");
    auto refused = authenticate(request, t.path, token == t.query.end() ? "" : token->second);
    if (refused) ++requests_[{endpoint_of(request.target), refused->status}];
    return refused;
  } catch (const std::exception& e) {  // never admitted unchecked
    log::error("internal error checking " + printable(request.method) + " " +
               printable(request.target) + ": " + printable(reason_of(e)));
    return internal_error(std::string("internal error: ") + reason_of(e));
  }
}

std::optional<Reply> ControlPlane::authenticate(const Request& request, const std::string& path,
                                                std::string_view query_token) {
  if (path == "/healthz" && request.method == "GET") return std::nullopt;
  const auto now = AuthThrottle::Clock::now();
  if (auto wait = throttle_.locked_for(request.peer, now)) {
    const std::string seconds = std::to_string(static_cast<long>(std::ceil(*wait)));
    Reply refused = too_many_requests("too many failed authentications from " +
                                      printable(request.peer) + "; retry in " + seconds + " s");
    refused.headers.emplace_back("Retry-After", seconds);
    return refused;
  }
  std::optional<Reply> refused = check_credentials(request, path, query_token);
  if (refused && throttle_.failed(request.peer, now)) {
    log::warn("auth failure: more than " + std::to_string(kMaxAuthFailures) + " from " +
              printable(request.peer) + " within " + std::to_string(kAuthFailureWindow.count()) +
              " s: its requests are refused for " + std::to_string(kAuthLockout.count()) + " s");
  }
  return refused;
}

std::optional<Reply> ControlPlane::check_credentials(const Request& request,
                                                     const std::string& path,
                                                     std::string_view query_token) const {
  const bool get = request.method == "GET", post = request.method == "POST";
  if (auto refused =
          refuse_unauthenticated(request, path, get && browsable(path) ? query_token : "")) {
    return refused;
  }
  std::string id;
  const JobRoute* route = job_route(path, id);
  if (!route) return std::nullopt;
  auto it = jobs_.find(id);
  const Job* job = it == jobs_.end() ? nullptr : it->second.get();
  const bool status_route = std::string_view(route->prefix) == "/jobs/";
  const bool del = status_route && request.method == "DELETE";
  // A wrong method or an unknown job is route's to answer; a job's status needs no secret, nor
  // does deleting a finished or stale one (an operator's cleanup).
  if ((route->post ? !post : !get && !del) || !job || (status_route && !del) ||
      (del && (job->finished() || stale(*job))) || job->secret_matches(request.job_secret)) {
    return std::nullopt;
  }
  log::warn("auth failure: " + printable(request.method) + " " + printable(path) +
            ": wrong job secret");
  return forbidden(std::string("missing or wrong secret of job '") + id +
                   "': send the X-Perseus-Job-Secret that register_job returned");
}

void ControlPlane::route(const Request& request, const Responder& reply) {
  const std::string& method = request.method;
  const std::string& body = request.body;
  Target t = parse_target(request.target);
  const std::string& path = t.path;
  bool get = method == "GET", post = method == "POST";
  if (path == "/healthz" && get) {
    auto uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_);
    json health = {{"status", "ok"}, {"uptime_s", uptime.count()}};
    // Anyone may ask: with a token, nothing about the jobs.
    if (settings_.token.empty()) health["jobs"] = jobs_.size();
    return reply({200, std::move(health)});
  }
  auto token = t.query.find("token");
  if (!request.credentials_checked) {
    if (auto refused = authenticate(request, path, token == t.query.end() ? "" : token->second)) {
      return reply(*refused);
    }
  }
  if (path == "/" && get) {
    // Its links keep a token that came in the address.
    const std::string query = token == t.query.end() || settings_.token.empty()
                                  ? ""
                                  : "?token=" + percent_encode(token->second);
    const double uptime =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    return off_loop(
        [jobs = summaries(), uptime, query] {
          std::vector<json> shown;
          for (const auto& job : jobs) shown.push_back(job.to_json());
          return Reply{200, nullptr, render_status_page(shown, uptime, query),
                       "text/html; charset=utf-8"};
        },
        reply);
  }
  if (path == "/jobs" && get) {
    return off_loop(
        [jobs = summaries()] {
          json list = json::array();
          for (const auto& job : jobs) list.push_back(job.to_json());
          return Reply{200, nullptr, list.dump(-1, ' ', false, json::error_handler_t::replace)};
        },
        reply);
  }
  if (path == "/metrics" && get) {
    return off_loop(
        [snapshot = metrics_snapshot()] {
          return Reply{200, nullptr, metrics_text(snapshot),
                       "text/plain; version=0.0.4; charset=utf-8"};
        },
        reply);
  }
  if (path == wire::kRegisterJobPath && post) return register_job(wire::parse_json(body), reply);
  std::string id;
  if (const JobRoute* route = job_route(path, id)) {
    std::string prefix = route->prefix;
    const bool del = prefix == "/jobs/" && method == "DELETE";
    if (route->post ? !post : !get && !del) {
      return reply(method_not_allowed(std::string(route->post          ? "POST"
                                                  : prefix == "/jobs/" ? "GET or DELETE"
                                                                       : "GET") +
                                      " only: " + method + " " + path));
    }
    Job* job = find(id);
    if (!job) return reply(not_found("unknown job '" + id + "'"));
    if (del) return reply(delete_job(id, t.query.count("force") && t.query["force"] == "true"));
    if (prefix == "/jobs/") {
      json status = job->status();
      status["stale"] = stale(*job);
      // Its plans (megabytes for a large job) are written off the event loop.
      return off_loop(
          [status = std::move(status), plan = job->current_plan()]() mutable {
            if (plan) status["current_plan"] = round_to_json(*plan);
            return Reply{200, nullptr, status.dump(-1, ' ', false, json::error_handler_t::replace)};
          },
          reply);
    }
    if (prefix == wire::kSchedulePath) {
      auto rank = query_int(t, "rank");
      if (!rank) return reply(unprocessable("query 'rank': missing"));
      return job->request_schedule(*rank, query_int(t, "round"), reply);
    }
    json parsed = wire::parse_json(body);
    if (prefix == wire::kRegisterRankPath) {
      reply(job->register_rank(wire::parse_rank_info(parsed), parsed));
      if (job->ready_to_start()) start(*job);
      return;
    }
    if (prefix == wire::kResultPath) {
      return reply(job->report_result(wire::parse_profiling_result(parsed), parsed));
    }
    return reply(job->report_straggler(parsed));
  }
  reply(not_found("no endpoint " + method + " " + path));
}

}  // namespace perseus::server
