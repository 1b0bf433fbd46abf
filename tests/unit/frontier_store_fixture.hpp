// The frontier store tests' fixture: a small synthetic problem (3 stages, 4 microbatches, A100
// model) solved once per suite, a helper that writes its frontier to a directory, and the
// names both test files use.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/schedule/catalog.hpp"
#include "test_support.hpp"

namespace perseus::plan {

// What both frontier store test files use.
namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using test::lines_of;
using test::read_text;
using test::write_text;

class FrontierStore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    profile_ = new profile::Profile(
        profile::synthesize_profile(profile::gpu_model("a100"), profile::default_model(3)));
    PlanSettings settings;
    settings.blocking_power_w = 83.64;
    problem_ = new PlanProblem(
        PlanProblem::build(*profile_, schedule::make_schedule("1f1b", 3, 4), settings));
    frontier_ = new Frontier(solve_frontier(*problem_));
  }
  static void TearDownTestSuite() {
    delete frontier_;
    delete problem_;
    delete profile_;
  }

  // Writes the frontier to `<tmp>/F` and returns that path.
  fs::path write(const perseus::test::TempDir& tmp) const {
    fs::path dir = tmp.path() / "F";
    write_frontier(dir, *problem_, *frontier_, info());
    return dir;
  }
  static FrontierInfo info() { return {"synthetic a100", {1.0, 2.0}, 0.5}; }

  static inline profile::Profile* profile_ = nullptr;
  static inline PlanProblem* problem_ = nullptr;
  static inline Frontier* frontier_ = nullptr;
};

}  // namespace perseus::plan
