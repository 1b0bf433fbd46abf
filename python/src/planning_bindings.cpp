#include "planning_bindings.hpp"

#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "perseus/baselines/envpipe.hpp"
#include "perseus/baselines/plan_for_profile.hpp"
#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/planning.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/profile/plausibility.hpp"
#include "perseus/util/error.hpp"

namespace py = pybind11;

namespace perseus::python {
namespace {

// A plausibility check that, failing, says how to insist from Python.
template <typename F>
void unless_allowed(bool allow_implausible, F&& check) {
  profile::check_unless_allowed(allow_implausible, "allow_implausible=True uses it anyway", check);
}

profile::Profile read_profile(const std::string& path, bool allow_implausible) {
  profile::Profile prof = profile::read_profile_csv(path);
  unless_allowed(allow_implausible, [&] { profile::check_plausible(prof); });
  return prof;
}

// A frontier, planned here (it can be saved as `perseus plan` writes it) or read from a directory
// `perseus plan` wrote; rows are chosen through plan::FrontierQuery, as the CLI chooses them.
class Frontier {
 public:
  Frontier(plan::StoredFrontier stored, std::optional<plan::PlannedFrontier> planned,
           std::string profile_source)
      : stored_(std::move(stored)),
        query_(stored_),
        schedule_(stored_.build_schedule()),
        planned_(std::move(planned)),
        profile_source_(std::move(profile_source)) {}

  const plan::StoredFrontier& stored() const { return stored_; }
  const plan::FrontierQuery& query() const { return query_; }
  const schedule::Schedule& schedule() const { return schedule_; }

  // The frontier directory (frontier.csv, plans.txt, meta.json), as `perseus plan --out-dir`.
  void save(const std::string& dir) const {
    if (!planned_) {
      throw Error("save: this frontier was read from a directory; copy that directory instead");
    }
    plan::write_frontier(dir, planned_->problem, planned_->frontier,
                         {profile_source_, planned_->all_max, planned_->seconds});
  }

 private:
  plan::StoredFrontier stored_;
  plan::FrontierQuery query_;
  schedule::Schedule schedule_;
  std::optional<plan::PlannedFrontier> planned_;
  std::string profile_source_;
};

std::shared_ptr<Frontier> plan_profile(const profile::Profile& prof, int microbatches,
                                       double blocking_power_w, const std::string& schedule_name,
                                       int stages, int virtual_stages, double unit_time_s,
                                       int threads, bool allow_implausible) {
  if (microbatches < 1) throw Error("microbatches must be >= 1");
  if (!(blocking_power_w >= 0.0)) throw Error("blocking_power must be >= 0 watts");
  if (stages < 0 || virtual_stages < 0 || threads < 0) {
    throw Error("stages, virtual_stages and threads must be >= 0 (0: the default)");
  }
  unless_allowed(allow_implausible,
                 [&] { profile::check_blocking_power(prof, blocking_power_w, "blocking_power"); });
  const int num_stages = stages > 0 ? stages : prof.num_stages();
  auto problem = plan::PlanProblem::build(
      prof,
      baselines::profile_schedule(schedule_name, prof, num_stages, microbatches, virtual_stages),
      {unit_time_s, blocking_power_w, plan::CostModelKind::kConvexHull, 1.0});
  std::optional<plan::PlannedFrontier> planned;
  {
    py::gil_scoped_release nogil;
    planned = plan::plan_frontier(prof, std::move(problem), {},
                                  {.threads = plan::solver_threads(threads)});
  }
  auto stored = plan::stored_frontier(planned->problem, planned->frontier, planned->all_max);
  return std::make_shared<Frontier>(std::move(stored), std::move(planned), prof.source());
}

// A plan file evaluated on `prof` against all-max, as `perseus plan evaluate` does it.
py::dict evaluate_plan_file(const profile::Profile& prof, const std::string& path,
                            std::optional<double> blocking_power_w, const std::string& schedule,
                            int microbatches, int virtual_stages, bool allow_implausible) {
  if (microbatches < 0 || virtual_stages < 0) {
    throw Error("microbatches and virtual_stages must be >= 0 (0: what the plan says)");
  }
  auto [p, sched] =
      baselines::read_plan_for(path, {schedule, microbatches, virtual_stages}, "schedule", prof);
  const std::optional<double> watts = plan::blocking_power_for(p, blocking_power_w);
  if (!watts || !(*watts >= 0.0)) {
    throw Error(path +
                ": blocking_power is required (watts, >= 0) unless the plan JSON carries it");
  }
  unless_allowed(allow_implausible,
                 [&] { profile::check_blocking_power(prof, *watts, "blocking_power"); });
  plan::AgainstAllMax ev;
  try {
    ev = plan::evaluate_against_all_max(prof, sched, p.frequencies, *watts);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  py::dict out;
  out["schedule"] = sched.name;
  out["num_stages"] = sched.num_stages;
  out["num_microbatches"] = sched.num_microbatches;
  out["blocking_power_w"] = *watts;
  out["time_s"] = ev.plan.time_s;
  out["energy_j"] = ev.plan.energy_j;
  out["all_max"] = std::make_pair(ev.all_max.time_s, ev.all_max.energy_j);
  out["saving_stderr"] = ev.error.standard_error;
  out["saving_pooling_bound"] = ev.error.pooling_bound;
  out["frequencies"] = p.frequencies;
  return out;
}

using Row = std::tuple<std::size_t, double, double, double, double, bool>;

std::vector<Row> rows_of(const Frontier& f) {
  std::vector<Row> rows;
  for (const auto& r : f.stored().rows) {
    rows.emplace_back(r.index, r.planned_time_s, r.predicted_energy_j, r.evaluated_time_s,
                      r.evaluated_energy_j, f.query().is_pareto(r.index));
  }
  return rows;
}

}  // namespace

void add_planning(py::module_& m) {
  py::class_<profile::Profile>(m, "_Profile")
      .def_property_readonly("num_stages", &profile::Profile::num_stages)
      .def_property_readonly("source", &profile::Profile::source)
      .def("instructions", &profile::Profile::instructions, py::arg("stage"))
      .def(
          "clocks",
          [](const profile::Profile& p, int stage, const std::string& instruction) {
            std::vector<int> mhz;
            for (const auto& row : p.rows(stage, instruction)) mhz.push_back(row.frequency_mhz);
            return mhz;
          },
          py::arg("stage"), py::arg("instruction"));
  m.def("_read_profile", &read_profile, py::arg("path"), py::arg("allow_implausible") = false);

  py::class_<Frontier, std::shared_ptr<Frontier>>(m, "_Frontier")
      .def_property_readonly("all_max",
                             [](const Frontier& f) {
                               const auto& a = f.query().all_max();
                               return std::make_pair(a.time_s, a.energy_j);
                             })
      .def_property_readonly("schedule", [](const Frontier& f) { return f.stored().schedule; })
      .def_property_readonly("num_stages", [](const Frontier& f) { return f.stored().num_stages; })
      .def_property_readonly("num_microbatches",
                             [](const Frontier& f) { return f.stored().num_microbatches; })
      .def_property_readonly("blocking_power_w",
                             [](const Frontier& f) { return f.stored().blocking_power_w; })
      .def("rows", &rows_of)
      .def("pareto", [](const Frontier& f) { return f.query().pareto(); })
      .def("fastest", [](const Frontier& f) { return f.query().fastest(); })
      .def("min_energy", [](const Frontier& f) { return f.query().min_energy(); })
      .def(
          "within_slowdown",
          [](const Frontier& f, const std::string& text) {
            return f.query().within_slowdown(plan::parse_slowdown(text));
          },
          py::arg("text"))
      .def(
          "within_time", [](const Frontier& f, double s) { return f.query().within_time(s); },
          py::arg("time_s"))
      .def(
          "select",
          [](const Frontier& f, long index) { return plan::select_by_index(f.stored(), index); },
          py::arg("index"))
      .def("slowdown", [](const Frontier& f, std::size_t i) { return f.query().slowdown(i); })
      .def("saving", [](const Frontier& f, std::size_t i) { return f.query().saving(i); })
      .def("describe", [](const Frontier& f, std::size_t i) { return f.query().describe(i); })
      .def("frequencies", [](const Frontier& f, std::size_t i) { return f.stored().plans.at(i); })
      .def(
          "write_plan_file",
          [](const Frontier& f, std::size_t i, const std::string& format, const std::string& dir) {
            return plan::write_plan_file(f.stored(), f.schedule(), i, format, dir).string();
          },
          py::arg("index"), py::arg("format"), py::arg("dir"))
      .def("save", &Frontier::save, py::arg("dir"));

  m.def("_plan", &plan_profile, py::arg("profile"), py::arg("microbatches"),
        py::arg("blocking_power"), py::arg("schedule") = "1f1b", py::arg("stages") = 0,
        py::arg("virtual_stages") = 0, py::arg("unit_time") = 0.001, py::arg("threads") = 0,
        py::arg("allow_implausible") = false);
  m.def("_evaluate", &evaluate_plan_file, py::arg("profile"), py::arg("path"),
        py::arg("blocking_power") = std::nullopt, py::arg("schedule") = "",
        py::arg("microbatches") = 0, py::arg("virtual_stages") = 0,
        py::arg("allow_implausible") = false);
  m.def(
      "_load_frontier",
      [](const std::string& dir) {
        return std::make_shared<Frontier>(plan::read_frontier(dir), std::nullopt, "");
      },
      py::arg("dir"));
}

}  // namespace perseus::python
