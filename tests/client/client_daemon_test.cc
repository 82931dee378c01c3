// libsnowflake and snowflakectl against the real snowflaked, started by the daemon harness
// in a temporary runtime and state directory: many processes, restarts (clean and
// SIGKILL), and per-service counts as status reports them.

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "id_checker.h"
#include "snowflake/client.h"
#include "subprocess.h"
#include "test_paths.h"
#include "wait_until.h"
#include "worker_runs.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::AttemptUntil;
using testing::Daemon;
using testing::DaemonHarness;
using testing::kSnowflakectlPath;
using testing::kSucceeded;
using testing::RunCommand;
using testing::RunResult;

class ClientDaemonTest : public ::testing::Test {
 protected:
  std::filesystem::path runtime() const { return harness_.runtime_dir(); }

  // A daemon started and READY (the harness fails the test if READY=1 does not come).
  // The harness's machine-number locks are its own: a test is a host of its own, so
  // another test's daemon (ctest -j) never takes this one's number while it restarts.
  Daemon StartDaemon() { return harness_.Start(); }

  ClientOptions Options() const { return harness_.Clients(); }

  DaemonHarness harness_{"client-daemon"};
};

// Retries Next() for up to 20 s (the daemon restarting); the ID, or the last error.
tl::expected<uint64_t, Error> NextWithin20s(Client& client) {
  return AttemptUntil([&] { return client.Next(); }, kSucceeded, 20s, 10ms);
}

TEST_F(ClientDaemonTest, AClientOutlivesCleanAndKilledDaemonRestarts) {
  Daemon first_daemon = StartDaemon();
  ASSERT_TRUE(first_daemon.ready()) << first_daemon.Describe();
  auto sut = Client::Open("orders", Options());
  ASSERT_TRUE(sut) << sut.error().message;
  const uint64_t first = sut->Next().value();

  ASSERT_TRUE(first_daemon.Stop(20s)) << first_daemon.Describe();
  auto stopped = sut->Next();
  Daemon second_daemon = StartDaemon();
  ASSERT_TRUE(second_daemon.ready()) << second_daemon.Describe();
  const auto after_clean = NextWithin20s(*sut);
  second_daemon.Kill();
  Daemon third_daemon = StartDaemon();
  ASSERT_TRUE(third_daemon.ready()) << third_daemon.Describe();
  const auto after_kill = NextWithin20s(*sut);

  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, ClientError::kDaemonStopped) << stopped.error().message;
  ASSERT_TRUE(after_clean) << after_clean.error().message;
  EXPECT_GT(*after_clean, first);
  ASSERT_TRUE(after_kill) << after_kill.error().message;
  EXPECT_GT(*after_kill, *after_clean);
}

#ifdef SNOWFLAKE_SANITIZED
constexpr size_t kTakesPerThread = 5'000;
#else
constexpr size_t kTakesPerThread = 50'000;
#endif

TEST_F(ClientDaemonTest, ManyThreadsInSeveralProcessesTakeUniqueIncreasingIds) {
  Daemon daemon = StartDaemon();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  constexpr int kProcesses = 3;
  constexpr int kThreads = 4;
  testing::IdCheckResult result;

  ASSERT_NO_FATAL_FAILURE(testing::RunTakeWorkers(
      {runtime(), harness_.root(), kProcesses, kThreads, kTakesPerThread}, &result));

  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_GE(result.ids, kProcesses * kThreads * kTakesPerThread);
}

TEST_F(ClientDaemonTest, StatusJsonCountsMatchWhatNextTook) {
  Daemon daemon = StartDaemon();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  auto taken = RunCommand({kSnowflakectlPath, "next", "-n", "12345", "--service", "cli-test",
                           "--runtime-dir", runtime().string()});
  ASSERT_TRUE(taken.status.ExitedWith(0)) << taken.err;

  // The daemon folds a closed client's count on its next scan (within a second).
  // taken_total is head minus drained_total, two words read one after the other while the
  // daemon drains and refills every millisecond (a drain moves head, then adds to
  // drained_total), so one reading can be off by a drain; the relation holds at rest
  // (docs/cli.md). Poll until a reading shows both counts.
  struct Reading {
    RunResult run;
    nlohmann::json status;
  };
  const Reading reading = AttemptUntil(
      [&] {
        Reading r{RunCommand(
                      {kSnowflakectlPath, "status", "--json", "--runtime-dir", runtime().string()}),
                  {}};
        r.status = nlohmann::json::parse(r.run.out, nullptr, false);
        return r;
      },
      [](const Reading& r) {
        const nlohmann::json& s = r.status;
        return s.is_object() && s.contains("services") && s["services"].is_object() &&
               s["services"].contains("cli-test") && s["services"]["cli-test"] == 12345 &&
               s.contains("taken_total") && s["taken_total"] == 12345;
      },
      30s, 50ms);
  nlohmann::json status = reading.status;
  ASSERT_TRUE(status.is_object()) << reading.run.out << reading.run.err;
  EXPECT_TRUE(reading.run.status.ExitedWith(0)) << reading.run.status.ToString() << reading.run.err;

  EXPECT_EQ(status["services"]["cli-test"], 12345) << status.dump(2);
  EXPECT_EQ(status["taken_total"], 12345) << status.dump(2);
  EXPECT_EQ(status["state"], "serving");
  EXPECT_EQ(status["daemon_reachable"], true);
  EXPECT_EQ(status["pid"], daemon.pid());
}

}  // namespace
}  // namespace snowflake
