// The start/stop table alone: starts in order, stops in exactly the reverse order, a
// failed start undoes exactly the stages before it, and Stop() is idempotent.
#include "daemon/stage_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/exit_status.h"

namespace snowflake::daemon {
namespace {

// A table of stages "a", "b", "c" that log "start x" / "stop x"; `failing` fails its start.
struct Logged {
  explicit Logged(std::string failing = "") {
    for (std::string name : {"a", "b", "c"}) {
      table.Add(
          name,
          [this, name, failing]() -> tl::expected<void, StageFailure> {
            if (name == failing) return tl::unexpected(StageFailure{kExitConfig, "no " + name});
            log.push_back("start " + name);
            return {};
          },
          [this, name] { log.push_back("stop " + name); });
    }
    table.SetObserver([this](std::string_view stage, StageStep step) {
      const char* what = step == StageStep::kStarted  ? "started "
                         : step == StageStep::kFailed ? "failed "
                                                      : "stopped ";
      log.push_back(what + std::string(stage));
    });
  }
  StageTable table;
  std::vector<std::string> log;
};

TEST(StageTable, StartsInOrderAndStopsInReverse) {
  Logged t;
  EXPECT_EQ(t.table.names(), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(t.table.Start());
  EXPECT_EQ(t.table.started(), 3u);
  t.table.Stop();
  EXPECT_EQ(t.log, (std::vector<std::string>{"start a", "started a", "start b", "started b",
                                             "start c", "started c", "stop c", "stopped c",
                                             "stop b", "stopped b", "stop a", "stopped a"}));
  EXPECT_EQ(t.table.started(), 0u);
}

TEST(StageTable, AFailedStartStopsOnlyTheStagesBeforeItAndReturnsItsFailure) {
  Logged t("b");
  auto started = t.table.Start();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().exit_status, kExitConfig);
  EXPECT_EQ(started.error().message, "no b");
  EXPECT_EQ(t.log,
            (std::vector<std::string>{"start a", "started a", "failed b", "stop a", "stopped a"}));
  EXPECT_EQ(t.table.started(), 0u);
}

TEST(StageTable, StopIsIdempotentAndANoOpBeforeStart) {
  Logged t;
  t.table.Stop();
  EXPECT_TRUE(t.log.empty());
  ASSERT_TRUE(t.table.Start());
  t.table.Stop();
  const size_t after_first = t.log.size();
  t.table.Stop();
  EXPECT_EQ(t.log.size(), after_first);
}

TEST(StageTable, AStageWithoutAStartOrAStopStillTakesItsPlace) {
  StageTable table;
  std::vector<std::string> seen;
  table.Add("nothing to start", {}, [&] { seen.push_back("stop 1"); });
  table.Add("nothing to stop",
            [&]() -> tl::expected<void, StageFailure> {
              seen.push_back("start 2");
              return {};
            },
            {});
  table.SetObserver([&](std::string_view stage, StageStep) { seen.emplace_back(stage); });
  ASSERT_TRUE(table.Start());
  table.Stop();
  EXPECT_EQ(seen, (std::vector<std::string>{"nothing to start", "start 2", "nothing to stop",
                                            "nothing to stop", "stop 1", "nothing to start"}));
}

}  // namespace
}  // namespace snowflake::daemon
