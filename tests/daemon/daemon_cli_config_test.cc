// snowflaked's command line and config errors, through the real binary: every kind of bad
// config exits 2 with the key and file:line on stderr, both under --check-config and on a
// real start (which then creates no segment); --check-config exits 0 on a good file;
// --print-default-config prints systemd/snowflaked.toml, which --check-config accepts.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/segment_layout.h"
#include "test_paths.h"

namespace snowflake {
namespace {

using testing::DaemonHarness;
using testing::kSnowflakedPath;
using testing::RunCommand;
using testing::RunResult;

struct BadConfig {
  std::string name;  // the test's name
  std::string toml;
  std::string key;  // must appear on stderr
  int line;         // file:line must appear on stderr; 0: "file:" and some line
};

void PrintTo(const BadConfig& config, std::ostream* out) { *out << config.name; }

class DaemonBadConfig : public ::testing::TestWithParam<BadConfig> {
 protected:
  DaemonHarness harness_{"bad-config"};
};

std::string Located(const std::filesystem::path& file, int line) {
  return file.string() + ":" + (line > 0 ? std::to_string(line) + ":" : "");
}

TEST_P(DaemonBadConfig, CheckConfigExitsTwoNamingKeyAndLine) {
  const BadConfig& bad = GetParam();
  const auto file = harness_.WriteFile("bad.toml", bad.toml);

  RunResult result = RunCommand({kSnowflakedPath, "--check-config", "--config", file.string()});

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString() << "\n" << result.err;
  EXPECT_NE(result.err.find(Located(file, bad.line)), std::string::npos)
      << "stderr lacks " << Located(file, bad.line) << ": " << result.err;
  EXPECT_NE(result.err.find(bad.key), std::string::npos)
      << "stderr lacks the key " << bad.key << ": " << result.err;
}

TEST_P(DaemonBadConfig, StartExitsTwoWithoutCreatingASegment) {
  const BadConfig& bad = GetParam();
  const auto file = harness_.WriteFile("bad.toml", bad.toml);

  RunResult result =
      RunCommand({kSnowflakedPath, "--config", file.string(), "--runtime-dir",
                  harness_.runtime_dir().string(), "--state-dir", harness_.state_dir().string()});

  EXPECT_FALSE(result.timed_out) << "it started serving on a bad config";
  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString() << "\n" << result.err;
  EXPECT_NE(result.err.find(Located(file, bad.line)), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(bad.key), std::string::npos) << result.err;
  EXPECT_FALSE(std::filesystem::exists(harness_.runtime_dir() / shm::kSegmentFileName));
}

INSTANTIATE_TEST_SUITE_P(
    EveryKind, DaemonBadConfig,
    ::testing::Values(
        BadConfig{"UnknownKey", "[ring]\ncapacity = 4096\nbogus = 1\n", "bogus", 3},
        BadConfig{"UnknownTable", "[daemon]\n\n[nosuch]\nx = 1\n", "nosuch", 3},
        BadConfig{"UnknownNestedKey", "[ring.deeper]\nx = 1\n", "ring.deeper", 1},
        BadConfig{"WrongTypeString", "[ring]\n\ncapacity = \"big\"\n", "ring.capacity", 3},
        BadConfig{"WrongTypeInteger", "[daemon]\ninstance = 7\n", "daemon.instance", 2},
        BadConfig{"WrongTypeFloat", "[ring]\nmax_age_ms = 1.5\n", "ring.max_age_ms", 2},
        BadConfig{"OutOfRangeHigh", "[clock]\nmax_backward_ms = 60001\n", "clock.max_backward_ms",
                  2},
        BadConfig{"OutOfRangeNegative", "[persistence]\nreservation_ms = -1\n",
                  "persistence.reservation_ms", 2},
        BadConfig{"MachineRangeBeyond1023", "[register]\nmachines = \"0-1024\"\n",
                  "register.machines", 2},
        BadConfig{"StaticMachineBeyond1023", "[register]\nbackend = \"static\"\nmachine = 1024\n",
                  "register.machine", 3},
        BadConfig{"UnknownBackend", "[register]\nbackend = \"etcd-ish\"\n", "register.backend", 2},
        BadConfig{"BadLogLevel", "[daemon]\nlog_level = \"loud\"\n", "daemon.log_level", 2},
        BadConfig{"BadEpochText", "[id]\nepoch = \"yesterday\"\n", "id.epoch", 2},
        BadConfig{"BadEpochNoZone", "[id]\nepoch = \"2026-01-01T00:00:00\"\n", "id.epoch", 2},
        BadConfig{"BadEpochNegative", "[id]\nepoch = -5\n", "id.epoch", 2},
        BadConfig{"CapacityNotAPowerOfTwo", "[ring]\ncapacity = 1000\n", "ring.capacity", 2},
        BadConfig{"CapacityTooLarge", "[ring]\ncapacity = 2097152\n", "ring.capacity", 2},
        BadConfig{"CapacityZero", "[ring]\ncapacity = 0\n", "ring.capacity", 2},
        BadConfig{"MinFillAboveCapacity", "[ring]\ncapacity = 64\nmin_fill = 128\n",
                  "ring.min_fill", 0},
        BadConfig{"StaticWithoutMachine", "[register]\nbackend = \"static\"\n", "register.machine",
                  0},
        BadConfig{"RelativeRuntimeDir", "[daemon]\nruntime_dir = \"run\"\n", "daemon.runtime_dir",
                  2},
        BadConfig{"SyntaxError", "[ring]\ncapacity = = 4\n", "", 2}),
    [](const ::testing::TestParamInfo<BadConfig>& info) { return info.param.name; });

TEST(DaemonConfigFile, UnreadableFileExitsTwoNamingIt) {
  DaemonHarness harness("config-unreadable");
  const auto missing = harness.root() / "missing.toml";
  const auto directory = harness.root();

  RunResult missing_result =
      RunCommand({kSnowflakedPath, "--check-config", "--config", missing.string()});
  RunResult directory_result =
      RunCommand({kSnowflakedPath, "--check-config", "--config", directory.string()});
  RunResult start_result =
      RunCommand({kSnowflakedPath, "--config", missing.string(), "--runtime-dir",
                  harness.runtime_dir().string(), "--state-dir", harness.state_dir().string()});

  EXPECT_TRUE(missing_result.status.ExitedWith(2)) << missing_result.status.ToString();
  EXPECT_NE(missing_result.err.find(missing.string()), std::string::npos) << missing_result.err;
  EXPECT_TRUE(directory_result.status.ExitedWith(2)) << directory_result.status.ToString();
  EXPECT_NE(directory_result.err.find(directory.string()), std::string::npos)
      << directory_result.err;
  EXPECT_TRUE(start_result.status.ExitedWith(2)) << start_result.status.ToString();
}

TEST(DaemonConfigFile, CheckConfigAcceptsAGoodFileAndTheDefaults) {
  DaemonHarness harness("config-good");
  const auto file =
      harness.WriteFile("good.toml",
                        "[daemon]\ninstance = \"b\"\n[id]\nepoch = 1767225600000\n[register]\n"
                        "machines = \"5-9\"\n[ring]\ncapacity = 1024\nmin_fill = 16\n");

  RunResult with_file = RunCommand({kSnowflakedPath, "--check-config", "--config", file.string()});
  RunResult defaults = RunCommand({kSnowflakedPath, "--check-config"});

  EXPECT_TRUE(with_file.status.ExitedWith(0)) << with_file.status.ToString() << with_file.err;
  EXPECT_TRUE(defaults.status.ExitedWith(0)) << defaults.status.ToString() << defaults.err;
}

TEST(DaemonConfigFile, PrintedDefaultConfigIsTheSampleAndPassesCheckConfig) {
  DaemonHarness harness("config-default");
  RunResult printed = RunCommand({kSnowflakedPath, "--print-default-config"});
  ASSERT_TRUE(printed.status.ExitedWith(0)) << printed.err;
  const auto file = harness.WriteFile("default.toml", printed.out);
  std::ifstream sample_in(::snowflake::testing::SourcePath("systemd/snowflaked.toml"));
  std::stringstream sample;
  sample << sample_in.rdbuf();

  RunResult checked = RunCommand({kSnowflakedPath, "--check-config", "--config", file.string()});

  EXPECT_EQ(printed.out, sample.str());
  EXPECT_TRUE(checked.status.ExitedWith(0)) << checked.status.ToString() << checked.err;
}

TEST(DaemonCommandLine, BadLogLevelFlagAndUnknownOptionExitTwo) {
  RunResult level = RunCommand({kSnowflakedPath, "--check-config", "--log-level", "loud"});
  RunResult unknown = RunCommand({kSnowflakedPath, "--no-such-option"});

  EXPECT_TRUE(level.status.ExitedWith(2)) << level.status.ToString() << level.err;
  EXPECT_NE(level.err.find("loud"), std::string::npos) << level.err;
  EXPECT_TRUE(unknown.status.ExitedWith(2)) << unknown.status.ToString() << unknown.err;
}

TEST(DaemonCommandLine, VersionAndHelpExitZero) {
  RunResult version = RunCommand({kSnowflakedPath, "--version"});
  RunResult help = RunCommand({kSnowflakedPath, "--help"});

  EXPECT_TRUE(version.status.ExitedWith(0)) << version.err;
  EXPECT_TRUE(version.out.starts_with("snowflaked ")) << version.out;
  EXPECT_TRUE(help.status.ExitedWith(0)) << help.err;
  for (const char* flag : {"--config", "--runtime-dir", "--state-dir", "--log-level",
                           "--check-config", "--print-default-config", "--version"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << " missing from --help";
  }
}

}  // namespace
}  // namespace snowflake

namespace snowflake {
namespace {

// Finding 9: --check-config passed what the start then refused, and the start's refusal
// exited 1, which systemd restarts forever. Both now exit 78 (EX_CONFIG), which the unit's
// RestartPreventExitStatus= stops on.
TEST(DaemonHostConfig, CheckConfigAndStartRefuseAMissingGroupWithTheConfigStatus) {
  DaemonHarness harness("host-config");
  const auto file =
      harness.WriteFile("group.toml", "[daemon]\ngroup = \"no-such-group-snowflake\"\n");

  RunResult check = RunCommand({kSnowflakedPath, "--check-config", "--config", file.string()});
  RunResult start =
      RunCommand({kSnowflakedPath, "--config", file.string(), "--runtime-dir",
                  harness.runtime_dir().string(), "--state-dir", harness.state_dir().string()});

  EXPECT_TRUE(check.status.ExitedWith(78)) << check.status.ToString() << "\n" << check.err;
  EXPECT_NE(check.err.find("daemon.group"), std::string::npos) << check.err;
  EXPECT_TRUE(start.status.ExitedWith(78)) << start.status.ToString() << "\n" << start.err;
  EXPECT_NE(start.err.find("daemon.group"), std::string::npos) << start.err;
}

TEST(DaemonHostConfig, CheckConfigAndStartRefuseAnEpochInTheFuture) {
  DaemonHarness harness("future-epoch");
  const auto file = harness.WriteFile("epoch.toml", "[id]\nepoch = \"2090-01-01T00:00:00Z\"\n");

  RunResult check = RunCommand({kSnowflakedPath, "--check-config", "--config", file.string()});
  RunResult start =
      RunCommand({kSnowflakedPath, "--config", file.string(), "--runtime-dir",
                  harness.runtime_dir().string(), "--state-dir", harness.state_dir().string()});

  EXPECT_TRUE(check.status.ExitedWith(78)) << check.status.ToString() << "\n" << check.err;
  EXPECT_NE(check.err.find("id.epoch"), std::string::npos) << check.err;
  EXPECT_TRUE(start.status.ExitedWith(78)) << start.status.ToString() << "\n" << start.err;
}

TEST(DaemonHostConfig, StartRefusesASegmentPathThatIsASymlinkWithTheConfigStatus) {
  DaemonHarness harness("symlink-segment");
  std::filesystem::create_directories(harness.runtime_dir());
  std::filesystem::create_symlink(harness.root() / "elsewhere",
                                  harness.runtime_dir() / shm::kSegmentFileName);

  RunResult start = RunCommand({kSnowflakedPath, "--runtime-dir", harness.runtime_dir().string(),
                                "--state-dir", harness.state_dir().string()});

  EXPECT_TRUE(start.status.ExitedWith(78)) << start.status.ToString() << "\n" << start.err;
  EXPECT_NE(start.err.find("symbolic link"), std::string::npos) << start.err;
  EXPECT_FALSE(std::filesystem::exists(harness.root() / "elsewhere"));
}

TEST(DaemonUnit, RestartPreventExitStatusStopsOnTheConfigStatus) {
  std::ifstream unit(::snowflake::testing::SourcePath("systemd/snowflaked.service.in"));
  std::stringstream text;
  text << unit.rdbuf();
  EXPECT_NE(text.str().find("RestartPreventExitStatus=2 78\n"), std::string::npos);
}

}  // namespace
}  // namespace snowflake
