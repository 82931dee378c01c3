// snowflakectl against the real snowflaked: what an operator sees first (status, the
// versions), the daemon's epoch in decode and bounds, and the permission error for a
// user outside the daemon's group. Every command runs as a process.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/time_text.h"
#include "subprocess.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using testing::Daemon;
using testing::DaemonHarness;
using testing::kSnowflakectlPath;
using testing::kSnowflakedPath;
using testing::RunCommand;
using testing::RunResult;

RunResult Ctl(const DaemonHarness& harness, std::vector<std::string> args) {
  std::vector<std::string> argv = {kSnowflakectlPath};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--runtime-dir");
  argv.push_back(harness.runtime_dir().string());
  return RunCommand(
      argv, {.env = {}, .stdin_text = {}, .timeout = std::chrono::seconds(60), .working_dir = {}});
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<uint64_t> Ids(const std::string& text) {
  std::vector<uint64_t> ids;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    uint64_t id = 0;
    std::from_chars(text.data() + at, text.data() + end, id);
    ids.push_back(id);
    at = end + 1;
  }
  return ids;
}

// Polls `status --json` until `done` holds (the daemon scans per-service counts
// periodically), up to 20 s; returns the last object.
nlohmann::json StatusJsonWhen(const DaemonHarness& harness,
                              const std::function<bool(const nlohmann::json&)>& done) {
  nlohmann::json status;
  // The caller checks the object it gets back; the wait's own verdict adds nothing.
  [[maybe_unused]] const auto answered = snowflake::testing::WaitUntil(
      [&] {
        RunResult result = Ctl(harness, {"status", "--json"});
        status = nlohmann::json::parse(result.out, nullptr, false);
        return status.is_object() && done(status);
      },
      std::chrono::seconds(20), "status --json to show the awaited counts",
      std::chrono::milliseconds(100));
  return status;
}

TEST(CliDaemon, VersionsOfTheCliAndTheDaemonMatch) {
  RunResult ctl = RunCommand({kSnowflakectlPath, "--version"});
  RunResult daemon = RunCommand({kSnowflakedPath, "--version"});

  EXPECT_TRUE(ctl.status.ExitedWith(0)) << ctl.err;
  EXPECT_TRUE(daemon.status.ExitedWith(0)) << daemon.err;
  EXPECT_EQ(ctl.out, "snowflakectl " SNOWFLAKE_VERSION "\n");
  EXPECT_EQ(daemon.out, "snowflaked " SNOWFLAKE_VERSION "\n");
}

TEST(CliDaemon, StatusJsonHasEveryDocumentedKey) {
  DaemonHarness harness("cli-status-keys");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  RunResult taken = Ctl(harness, {"next", "-n", "100", "--service", "orders"});
  ASSERT_TRUE(taken.status.ExitedWith(0)) << taken.err;
  const std::vector<uint64_t> ids = Ids(taken.out);
  ASSERT_EQ(ids.size(), 100u);

  const nlohmann::json status = StatusJsonWhen(harness, [](const nlohmann::json& s) {
    return s["services"].is_object() && s["services"].value("orders", 0) == 100;
  });

  ASSERT_TRUE(status.is_object());
  EXPECT_EQ(status["ok"], true);
  EXPECT_EQ(status["daemon_reachable"], true);
  EXPECT_EQ(status["state"], "serving");
  EXPECT_EQ(status["version"], SNOWFLAKE_VERSION);
  EXPECT_EQ(status["instance"], "default");
  EXPECT_EQ(status["register_backend"], "file");
  EXPECT_TRUE(status["register_location"].is_string());
  EXPECT_FALSE(status["holder_id"].get<std::string>().empty());
  EXPECT_EQ(status["runtime_dir"], harness.runtime_dir().string());
  EXPECT_GE(status["uptime_ms"].get<int64_t>(), 0);
  EXPECT_GE(status["state_age_ms"].get<int64_t>(), 0);
  EXPECT_LE(status["state_age_ms"].get<int64_t>(), status["uptime_ms"].get<int64_t>() + 1000);
  // The last ID is at least the last one we took, and the reservation covers it.
  const uint64_t last = std::stoull(status["last_issued_id"].get<std::string>());
  EXPECT_GE(last, ids.back());
  EXPECT_GE(status["reserved_through_unix_ms"].get<int64_t>(),
            status["last_issued_id_unix_ms"].get<int64_t>());
  EXPECT_EQ(status["last_issued_id_time"],
            FormatTimeText(status["last_issued_id_unix_ms"].get<int64_t>()));
  EXPECT_EQ(status["services"]["orders"], 100);
  for (const char* key : {"started_unix_ms", "state_since_unix_ms", "last_issued_unix_ms",
                          "reserved_through_time", "uncounted_taken", "health", "reason",
                          "reason_code", "machine", "epoch_unix_ms", "layout", "drained_total"}) {
    EXPECT_TRUE(status.contains(key)) << key;
  }
}

TEST(CliDaemon, StatusTextAnswersTheOperatorsQuestions) {
  DaemonHarness harness("cli-status-text");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  ASSERT_TRUE(Ctl(harness, {"next", "-n", "5", "--service", "billing"}).status.ExitedWith(0));
  StatusJsonWhen(harness, [](const nlohmann::json& s) {
    return s["services"].is_object() && s["services"].contains("billing");
  });

  RunResult result = Ctl(harness, {"status"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.out << result.err;
  for (const std::string expected :
       {"snowflaked " SNOWFLAKE_VERSION ", instance \"default\", pid ", ", up ",
        "state:          serving for ", "machine:        ", "from the file register ",
        "as holder \"", "last ID made:   ", ", made at ",
        "reserved until: ", "a restart after a crash numbers above it",
        "ring:           ", "IDs taken:      ", "billing"}) {
    EXPECT_NE(result.out.find(expected), std::string::npos) << expected << "\n" << result.out;
  }
}

TEST(CliDaemon, StatusShowsTheDaemonsLayout) {
  DaemonHarness harness("cli-status-layout");
  const auto config = harness.WriteFile("layout.toml", "[id]\nlayout = \"65536-hosts\"\n");
  auto options = harness.Options();
  options.config_path = config;
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();

  RunResult json = Ctl(harness, {"status", "--json"});
  RunResult text = Ctl(harness, {"status"});

  ASSERT_TRUE(json.status.ExitedWith(0)) << json.out << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["layout"], "41/16/6") << json.out;
  ASSERT_TRUE(text.status.ExitedWith(0)) << text.out << text.err;
  EXPECT_NE(text.out.find("layout:         41/16/6: 65,536 hosts, 64,000 IDs per second per "
                          "host, until "),
            std::string::npos)
      << text.out;
}

TEST(CliDaemon, DecodeAndBoundsUseTheDaemonsEpochAndSaySo) {
  DaemonHarness harness("cli-epoch");
  // An epoch with an offset, as the config allows: 2025-06-01T00:00:00+02:00.
  const auto config =
      harness.WriteFile("epoch.toml", "[id]\nepoch = \"2025-06-01T00:00:00+02:00\"\n");
  const int64_t epoch = ParseTimeText("2025-05-31T22:00:00Z").value();
  auto options = harness.Options();
  options.config_path = config;
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  const int64_t before = NowMs();
  RunResult taken = Ctl(harness, {"next", "-n", "3"});
  const int64_t after = NowMs();
  ASSERT_TRUE(taken.status.ExitedWith(0)) << taken.err;
  const std::vector<uint64_t> ids = Ids(taken.out);
  ASSERT_EQ(ids.size(), 3u);

  RunResult decoded = Ctl(harness, {"decode", "--json", std::to_string(ids[0])});
  RunResult human = Ctl(harness, {"decode", std::to_string(ids[0])});
  RunResult bounds = Ctl(harness, {"bounds", "--from", std::to_string(before - 5), "--to",
                                   std::to_string(after + 5), "--json"});

  ASSERT_TRUE(decoded.status.ExitedWith(0)) << decoded.err;
  const auto fields = nlohmann::json::parse(decoded.out);
  EXPECT_EQ(fields["epoch_source"], "daemon");
  EXPECT_EQ(fields["epoch_unix_ms"], epoch);
  EXPECT_GE(fields["unix_ms"].get<int64_t>(), before - 1000) << "decoded with the wrong epoch";
  EXPECT_LE(fields["unix_ms"].get<int64_t>(), after + 1000) << "decoded with the wrong epoch";
  EXPECT_NE(human.err.find("the epoch of the daemon in " + harness.runtime_dir().string()),
            std::string::npos)
      << human.err;
  ASSERT_TRUE(bounds.status.ExitedWith(0)) << bounds.err;
  const auto range = nlohmann::json::parse(bounds.out);
  EXPECT_EQ(range["epoch_source"], "daemon");
  for (const uint64_t id : ids) {
    EXPECT_GE(id, std::stoull(range["first_id"].get<std::string>()));
    EXPECT_LE(id, std::stoull(range["last_id"].get<std::string>()));
  }
}

TEST(CliDaemon, BoundsOfAFinishedRangeExcludeIdsTakenAfterIt) {
  DaemonHarness harness("cli-bounds");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  RunResult early = Ctl(harness, {"next", "-n", "10"});
  const int64_t cut = NowMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  RunResult late = Ctl(harness, {"next", "-n", "10"});
  ASSERT_TRUE(early.status.ExitedWith(0) && late.status.ExitedWith(0));

  RunResult bounds = Ctl(
      harness, {"bounds", "--from", "2026-01-01T00:00:00Z", "--to", std::to_string(cut), "--json"});

  ASSERT_TRUE(bounds.status.ExitedWith(0)) << bounds.err;
  const auto range = nlohmann::json::parse(bounds.out);
  const uint64_t last = std::stoull(range["last_id"].get<std::string>());
  for (const uint64_t id : Ids(early.out)) EXPECT_LE(id, last);
  for (const uint64_t id : Ids(late.out)) EXPECT_GT(id, last);
}

// Needs root (to run snowflakectl as another user) and setpriv (util-linux).
TEST(CliDaemon, SocketPermissionErrorNamesTheUserAndTheGroup) {
  if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs root and /usr/bin/setpriv to act as another user";
  }
  DaemonHarness harness("cli-perm");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  // Let nobody reach the socket file (so connect() is what refuses), not the directory.
  for (auto dir = harness.runtime_dir(); dir != dir.root_path(); dir = dir.parent_path()) {
    struct stat info {};
    if (stat(dir.c_str(), &info) == 0) chmod(dir.c_str(), (info.st_mode & 07777) | 0005);
  }

  RunResult result = RunCommand({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                 "--clear-groups", kSnowflakectlPath, "resume", "--json",
                                 "--runtime-dir", harness.runtime_dir().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString() << result.err;
  EXPECT_NE(result.err.find("permission denied connecting to"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("(uid 65534) is not in group "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("sudo usermod -aG "), std::string::npos) << result.err;
  const auto error = nlohmann::json::parse(result.out, nullptr, false);
  ASSERT_TRUE(error.is_object()) << result.out;
  EXPECT_EQ(error["error_code"], "permission_denied");
}

}  // namespace
}  // namespace snowflake
