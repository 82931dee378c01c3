// snowflakectl next / status / resume as processes, against a stand-in producer
// (tests/client/test_producer.cc) and a scripted control socket in this process.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "scripted_control_socket.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace snowflake {
namespace {

using testing::kSnowflakectlPath;
using testing::kTestProducerPath;
using testing::Process;
using testing::RunCommand;
using testing::RunResult;
using testing::ScriptedControlSocket;
using testing::TempDir;

// `liveness_ms`: the heartbeat's limit in the segment; "" keeps the daemon's default.
Process StartProducer(const std::filesystem::path& dir, const std::string& liveness_ms = "") {
  Process producer = liveness_ms.empty()
                         ? Process::Spawn({kTestProducerPath, dir.string(), "4096"})
                         : Process::Spawn({kTestProducerPath, dir.string(), "4096", liveness_ms});
  if (!producer.WaitForOutput(Process::Stream::kOut, "serving", std::chrono::seconds(20))) {
    ADD_FAILURE() << "test_producer did not start: " << producer.err();
  }
  return producer;
}

std::vector<uint64_t> ParseLines(const std::string& text, std::string* problem) {
  std::vector<uint64_t> ids;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) {
      *problem = "output does not end with a newline";
      return ids;
    }
    uint64_t id = 0;
    const auto parsed = std::from_chars(text.data() + at, text.data() + end, id);
    if (parsed.ec != std::errc{} || parsed.ptr != text.data() + end) {
      *problem = "not a decimal ID: " + text.substr(at, end - at);
      return ids;
    }
    ids.push_back(id);
    at = end + 1;
  }
  return ids;
}

TEST(CliNext, PrintsAMillionUniqueStrictlyIncreasingIds) {
  TempDir dir("cli-next");
  // A heartbeat limit of 2 s: this test is about the million IDs, and on a loaded host the
  // producer's heartbeat once stalled 60 ms past the default 50 ms mid-run.
  Process producer = StartProducer(dir.path(), "2000");
  const auto began = std::chrono::steady_clock::now();

  RunResult result = RunCommand(
      {kSnowflakectlPath, "next", "-n", "1000000", "--runtime-dir", dir.path().string()},
      {.env = {}, .stdin_text = {}, .timeout = std::chrono::minutes(4), .working_dir = {}});

  const auto took = std::chrono::steady_clock::now() - began;
  ASSERT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << ": " << result.err;
  std::string problem;
  const std::vector<uint64_t> ids = ParseLines(result.out, &problem);
  ASSERT_TRUE(problem.empty()) << problem;
  ASSERT_EQ(ids.size(), 1'000'000u);
  size_t not_increasing = 0;
  for (size_t i = 1; i < ids.size(); ++i) not_increasing += ids[i] <= ids[i - 1];
  EXPECT_EQ(not_increasing, 0u) << "strictly increasing implies unique";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  RecordProperty("million_ids_ms", std::to_string(ms));
  std::printf("next -n 1000000 took %lld ms\n", static_cast<long long>(ms));
}

TEST(CliNext, PrintsOneIdByDefaultWithTheRuntimeDirBeforeTheCommand) {
  TempDir dir("cli-next1");
  Process producer = StartProducer(dir.path());

  RunResult result = RunCommand({kSnowflakectlPath, "--runtime-dir", dir.path().string(), "next"});

  ASSERT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << ": " << result.err;
  std::string problem;
  EXPECT_EQ(ParseLines(result.out, &problem).size(), 1u) << problem << result.out;
}

TEST(CliNext, TakesTheRuntimeDirFromTheEnvironment) {
  TempDir dir("cli-next-env");
  Process producer = StartProducer(dir.path());

  RunResult result =
      RunCommand({kSnowflakectlPath, "next", "-n", "3"},
                 {.env = {.set = {{"SNOWFLAKE_RUNTIME_DIR", dir.path().string()}}, .unset = {}},
                  .stdin_text = {},
                  .timeout = std::chrono::seconds(30),
                  .working_dir = {}});

  ASSERT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << ": " << result.err;
  std::string problem;
  EXPECT_EQ(ParseLines(result.out, &problem).size(), 3u) << problem << result.out;
}

TEST(CliNext, RejectsCountsOutsideOneToABillionAndBadServiceNamesWithExit2) {
  TempDir dir("cli-next-bad");
  Process producer = StartProducer(dir.path());
  const std::vector<std::vector<std::string>> bad_args = {
      {"-n", "0"},  {"-n", "1000000001"},      {"-n", "abc"},
      {"-n", "-5"}, {"--service", "Bad Name"}, {"--bogus"}};

  for (const auto& args : bad_args) {
    std::vector<std::string> argv = {kSnowflakectlPath, "next", "--runtime-dir",
                                     dir.path().string()};
    argv.insert(argv.end(), args.begin(), args.end());

    RunResult result = RunCommand(argv);

    EXPECT_TRUE(result.status.ExitedWith(2)) << args.back() << ": " << result.status.ToString();
    EXPECT_TRUE(result.out.empty()) << args.back() << ": " << result.out;
    EXPECT_FALSE(result.err.empty()) << args.back();
  }
}

TEST(CliNext, ExitsWith1NamingThePathWhenNoDaemonRuns) {
  TempDir dir("cli-next-none");

  RunResult result = RunCommand({kSnowflakectlPath, "next", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  EXPECT_NE(result.err.find(dir.path().string()), std::string::npos) << result.err;
}

TEST(CliNext, ExitsWith1WhenTheDaemonStopped) {
  TempDir dir("cli-next-stopped");
  Process producer = StartProducer(dir.path());
  ASSERT_TRUE(producer.Kill(SIGTERM));
  ASSERT_TRUE(producer.Wait(std::chrono::seconds(10)));

  RunResult result = RunCommand({kSnowflakectlPath, "next", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  EXPECT_NE(result.err.find("stopped"), std::string::npos) << result.err;
}

// A ring that stays empty under a fresh heartbeat is ring_empty, whose action is
// retry_here: `next` retries it (each take waits its 100 ms) until it has stayed empty for
// kRingEmptyPatience (5 s), then exits 1 saying so. The segment is the conformance table's
// empty_ring_without_waiting row: a serving header whose heartbeat stays fresh for 10 s
// (liveness_ms 10,000), an empty ring, and the region served on its socket.
TEST(CliNext, RetriesARingThatStaysEmptyThenExits1SayingSo) {
  TempDir dir("cli-next-empty");
  const RunResult fixture =
      RunCommand({::snowflake::testing::BinaryPath("tests/conformance/conformance_fixture"),
                  "--cases", ::snowflake::testing::SourcePath("tests/conformance/cases.json"),
                  "--case", "empty_ring_without_waiting", "--dir", dir.path().string(),
                  "--live-pid", std::to_string(getpid())});
  ASSERT_TRUE(fixture.status.ExitedWith(0)) << fixture.err;

  RunResult result = RunCommand({kSnowflakectlPath, "next", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  EXPECT_TRUE(result.out.empty()) << result.out;
  EXPECT_NE(result.err.find("stayed empty although snowflaked looks healthy"), std::string::npos)
      << result.err;
  // It retried: each take waited its 100 ms, so some 50 takes found the ring empty.
  unsigned long long takes = 0;
  long long ms = 0;
  const size_t at = result.err.find("retry here (");
  ASSERT_NE(at, std::string::npos) << result.err;
  ASSERT_EQ(
      std::sscanf(result.err.c_str() + at,
                  "retry here (%llu takes in a row found it empty, for %lld ms)", &takes, &ms),
      2)
      << result.err;
  EXPECT_GT(takes, 1u) << result.err;
  EXPECT_GE(ms, 5000) << result.err;
}

TEST(CliStatus, JsonParsesAndItsCountsMatchWhatWasTaken) {
  TempDir dir("cli-status");
  Process producer = StartProducer(dir.path());
  RunResult taken =
      RunCommand({kSnowflakectlPath, "next", "-n", "5000", "--runtime-dir", dir.path().string()});
  ASSERT_TRUE(taken.status.ExitedWith(0)) << taken.err;

  RunResult result =
      RunCommand({kSnowflakectlPath, "status", "--json", "--runtime-dir", dir.path().string()});

  // No control socket here: the segment's half is complete, the daemon's is missing.
  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  const auto status = nlohmann::json::parse(result.out, nullptr, false);
  ASSERT_TRUE(status.is_object()) << result.out;
  EXPECT_EQ(status["state"], "serving");
  EXPECT_EQ(status["health"], "serving");
  EXPECT_EQ(status["machine"], 5);
  EXPECT_EQ(status["pid"], producer.pid());
  EXPECT_EQ(status["ring_capacity"], 4096);
  EXPECT_EQ(status["taken_total"], 5000);
  // Every taker found a counter slot; the test producer sets no freshness bound.
  EXPECT_EQ(status["uncounted"], 0);
  EXPECT_EQ(status["freshness_bound_ms"], 0);
  EXPECT_GE(status["published_total"].get<uint64_t>(), 5000u);
  EXPECT_EQ(status["published_total"].get<uint64_t>(), status["taken_total"].get<uint64_t>() +
                                                           status["drained_total"].get<uint64_t>() +
                                                           status["ring_fill"].get<uint64_t>());
  EXPECT_EQ(status["incarnation"], 1);
  EXPECT_EQ(status["clock_pauses"], 0);
  EXPECT_EQ(status["daemon_reachable"], false);
  EXPECT_TRUE(status["daemon_error"].get<std::string>().find("control.sock") != std::string::npos)
      << status["daemon_error"];
  EXPECT_TRUE(status["services"].is_null());
  for (const char* key : {"reason_code", "reason", "reason_detail", "epoch_unix_ms",
                          "heartbeat_age_ns", "fill_target", "daemon"}) {
    EXPECT_TRUE(status.contains(key)) << key;
  }
}

TEST(CliStatus, ReportsADeadDaemonFromItsSegmentWithExit1) {
  TempDir dir("cli-status-dead");
  Process producer = StartProducer(dir.path());
  ASSERT_TRUE(producer.Kill(SIGKILL));
  ASSERT_TRUE(producer.Wait(std::chrono::seconds(10)));
  // A missing pid counts as dead once the heartbeat is 10 ms old.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));

  RunResult result =
      RunCommand({kSnowflakectlPath, "status", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  EXPECT_NE(result.out.find("state:          serving"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("health:         dead"), std::string::npos) << result.out;
}

TEST(CliStatus, ShowsTheDaemonsPerServiceTotalsAndExits0WhenServing) {
  TempDir dir("cli-status-services");
  Process producer = StartProducer(dir.path());
  ScriptedControlSocket control(
      dir.path(), R"({"ok":true,"state":"serving","services":{"orders":12,"billing":3}})");

  RunResult result =
      RunCommand({kSnowflakectlPath, "status", "--json", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << result.err;
  const auto status = nlohmann::json::parse(result.out, nullptr, false);
  ASSERT_TRUE(status.is_object()) << result.out;
  EXPECT_EQ(status["daemon_reachable"], true);
  EXPECT_EQ(status["services"], nlohmann::json({{"orders", 12}, {"billing", 3}}));
  EXPECT_EQ(control.request(), "{\"command\":\"status\"}\n");
}

TEST(CliResume, SendsResumeAndExits0WhenTheDaemonAccepts) {
  TempDir dir("cli-resume");
  ScriptedControlSocket control(dir.path(), R"({"ok":true,"resumed":true,"state":"serving"})");

  RunResult result =
      RunCommand({kSnowflakectlPath, "resume", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << result.err;
  EXPECT_EQ(control.request(), "{\"command\":\"resume\"}\n");
  EXPECT_NE(result.out.find("resumed"), std::string::npos) << result.out;
}

TEST(CliResume, PrintsTheRefusalAndExits1) {
  TempDir dir("cli-resume-refused");
  ScriptedControlSocket control(dir.path(), R"({"ok":false,"error":"not out of service"})");

  RunResult result =
      RunCommand({kSnowflakectlPath, "resume", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  EXPECT_NE(result.err.find("not out of service"), std::string::npos) << result.err;
}

TEST(CliResume, JsonTakesTheErrorCodeFromTheDaemonsCode) {
  TempDir dir("cli-resume-code");
  ScriptedControlSocket control(
      dir.path(),
      R"({"ok":false,"code":"permission_denied","error":"permission denied: uid 7 may not resume"})");

  RunResult result =
      RunCommand({kSnowflakectlPath, "resume", "--json", "--runtime-dir", dir.path().string()});
  const auto reply = nlohmann::json::parse(result.out, nullptr, false);

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  ASSERT_TRUE(reply.is_object()) << result.out;
  EXPECT_EQ(reply.value("error_code", ""), "permission_denied") << result.out;
  EXPECT_NE(result.err.find("uid 7 may not resume"), std::string::npos) << result.err;
}

TEST(CliResume, JsonSaysRefusedForAReplyWithoutAKnownCode) {
  for (const std::string reply_line :
       {R"({"ok":false,"error":"not out of service"})",
        R"({"ok":false,"code":"from_a_newer_daemon","error":"not out of service"})"}) {
    TempDir dir("cli-resume-nocode");
    ScriptedControlSocket control(dir.path(), reply_line);

    RunResult result =
        RunCommand({kSnowflakectlPath, "resume", "--json", "--runtime-dir", dir.path().string()});
    const auto reply = nlohmann::json::parse(result.out, nullptr, false);

    EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
    ASSERT_TRUE(reply.is_object()) << result.out;
    EXPECT_EQ(reply.value("error_code", ""), "refused") << reply_line;
  }
}

TEST(CliResume, ExitsWith1NamingTheSocketWhenNoDaemonRuns) {
  TempDir dir("cli-resume-none");

  RunResult result =
      RunCommand({kSnowflakectlPath, "resume", "--runtime-dir", dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  EXPECT_NE(result.err.find((dir / "control.sock").string()), std::string::npos) << result.err;
}

TEST(CliErrors, AnUnknownCommandIsNamedWithTheListOfCommands) {
  RunResult result = RunCommand({kSnowflakectlPath, "frobnicate"});

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString();
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err,
            "snowflakectl: unknown command 'frobnicate'; the commands are: status, next, decode, "
            "bounds, resume, register (snowflakectl --help describes them)\n");
}

TEST(CliErrors, NoCommandListsTheCommands) {
  RunResult result = RunCommand({kSnowflakectlPath, "--runtime-dir", "/tmp"});

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString();
  EXPECT_NE(result.err.find("a command is required: one of status, next, decode, bounds, resume"),
            std::string::npos)
      << result.err;
}

TEST(CliErrors, VersionPrintsTheVersionAndExits0) {
  RunResult result = RunCommand({kSnowflakectlPath, "--version"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << result.err;
  EXPECT_EQ(result.out.rfind("snowflakectl ", 0), 0u) << result.out;
  EXPECT_EQ(result.err, "");
}

TEST(CliErrors, CountsAreStrictDecimalWithAPreciseMessage) {
  TempDir dir("cli-next-strict");
  Process producer = StartProducer(dir.path());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc", "bad count 'abc': not a decimal number"},
      {"0x10", "bad count '0x10': not a decimal number"},
      {"0", "bad count '0': zero IDs is nothing to do"},
      {"-5", "bad count '-5': it is negative"},
      {"18446744073709551616", "bad count '18446744073709551616': too large"}};
  for (const auto& [count, message] : cases) {
    RunResult result =
        RunCommand({kSnowflakectlPath, "next", "-n", count, "--runtime-dir", dir.path().string()});

    EXPECT_TRUE(result.status.ExitedWith(2)) << count << ": " << result.status.ToString();
    EXPECT_EQ(result.out, "") << count;
    EXPECT_EQ(result.err.rfind("snowflakectl: next: " + message, 0), 0u) << result.err;
  }
}

TEST(CliErrors, AMissingRuntimeDirIsNamedWithWhereItCameFrom) {
  for (const char* command : {"resume", "status", "next"}) {
    RunResult flag = RunCommand({kSnowflakectlPath, command, "--runtime-dir", "/nonexistent/sf"});
    RunResult env =
        RunCommand({kSnowflakectlPath, command},
                   {.env = {.set = {{"SNOWFLAKE_RUNTIME_DIR", "/nonexistent/sf"}}, .unset = {}},
                    .stdin_text = {},
                    .timeout = std::chrono::seconds(30),
                    .working_dir = {}});

    EXPECT_TRUE(flag.status.ExitedWith(1)) << command << flag.status.ToString();
    EXPECT_NE(flag.err.find("runtime directory /nonexistent/sf (from --runtime-dir) does not "
                            "exist, so no snowflaked runs there"),
              std::string::npos)
        << flag.err;
    EXPECT_NE(env.err.find("/nonexistent/sf (from $SNOWFLAKE_RUNTIME_DIR) does not exist"),
              std::string::npos)
        << env.err;
  }
}

TEST(CliErrors, JsonCommandsPrintAnErrorObjectWhenNoDaemonIsFound) {
  TempDir dir("cli-json-none");
  for (const char* command : {"status", "resume"}) {
    RunResult result =
        RunCommand({kSnowflakectlPath, command, "--json", "--runtime-dir", dir.path().string()});

    EXPECT_TRUE(result.status.ExitedWith(1)) << command << result.status.ToString();
    const auto error = nlohmann::json::parse(result.out, nullptr, false);
    ASSERT_TRUE(error.is_object()) << command << ": " << result.out;
    EXPECT_EQ(error["ok"], false);
    EXPECT_EQ(error["error_code"], "daemon_not_running") << command;
    EXPECT_EQ(error["exit_status"], 1);
    EXPECT_NE(error["error"].get<std::string>().find(dir.path().string()), std::string::npos);
  }
  RunResult usage = RunCommand({kSnowflakectlPath, "status", "--json", "--bogus"});
  EXPECT_TRUE(usage.status.ExitedWith(2));
  EXPECT_EQ(nlohmann::json::parse(usage.out, nullptr, false)["error_code"], "usage") << usage.out;
}

}  // namespace
}  // namespace snowflake
