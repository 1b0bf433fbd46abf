#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "perseus/server/store.hpp"

using perseus::server::kMaxStoredValueBytes;
using perseus::server::Store;
using perseus::server::StoreError;

// A value above the store's limit is a failed write, never a row stored with NULL in its place
// (SQLite leaves a parameter it refuses unbound), and the store goes on taking writes.
TEST(StoreValueLimit, AValueTooLargeIsAFailedWriteAndNothingIsStored) {
  Store store(":memory:");
  store.add_job("job", {{"world_size", 1}});
  const nlohmann::json big = {{"pad", std::string(kMaxStoredValueBytes, 'x')}};
  try {
    store.add_round("job", 0, big.dump());
    FAIL() << "a round above the limit was stored";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be stored"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store.load("job").rounds.empty());
  store.add_round("job", 0, R"({"plans": []})");
  ASSERT_EQ(store.load("job").rounds.size(), 1u);
  EXPECT_EQ(store.load("job").rounds[0], (nlohmann::json{{"plans", nlohmann::json::array()}}));
}
