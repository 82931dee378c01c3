// A machine number handed from one daemon to another on the same host keeps its mark: two
// real snowflaked processes with separate state directories serve number 9 one after the
// other (two static daemons; an etcd daemon, then a static one), sharing only the host's
// machine-number lock directory. Between them the host's clock steps back 5 s
// (libfaketime: both daemons and the takers read one offset file).
//
// Property: every ID the second daemon hands out is above every ID the first one handed
// out. The second daemon's state directory and register know nothing of the first; only the
// host mark in the lock directory (register/machine_lock.h) does.
//
// The lock directory is shared, so what is in it is judged: a mark another user planted
// never moves a daemon, a state file far past the clock is refused, and a mark names its
// state directory by the directory's identity, not its path.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "etcd_cluster.h"
#include "snowflake/id_layout.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::RunCommand;
using testing::RunOptions;
using testing::SetClockOffset;
using testing::WaitForState;

constexpr uint32_t kMachine = 9;
constexpr size_t kIds = 2000;
constexpr int64_t kTenYearsMs = int64_t{10} * 365 * 24 * 3600 * 1000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class HostMark : public ::testing::Test {
 protected:
  void SetUp() override { SetClockOffset(offset_file_, "+0"); }

  DaemonOptions Named(const std::string& name, const std::string& toml) {
    DaemonOptions options = harness_.NamedOptions(name, toml, DaemonHarness::Host::kShared);
    options.faketime_file = offset_file_;
    return options;
  }
  static std::string StaticToml() {
    return "[register]\nbackend = \"static\"\nmachine = " + std::to_string(kMachine) + "\n";
  }

  // `snowflakectl next -n kIds` against `runtime_dir`, under the host's faked clock (a
  // taker with the real clock would refuse IDs 5 s behind it as stale). The IDs, in order.
  std::vector<uint64_t> Take(const std::filesystem::path& runtime_dir) {
    RunOptions options;
    options.env.set = {{"LD_PRELOAD", testing::kFakeTimeLibrary},
                       {"FAKETIME_TIMESTAMP_FILE", offset_file_.string()},
                       {"FAKETIME_NO_CACHE", "1"},
                       {"FAKETIME_DONT_FAKE_MONOTONIC", "1"},
                       {"ASAN_OPTIONS", "verify_asan_link_order=0"}};
    const auto run = RunCommand({testing::kSnowflakectlPath, "--runtime-dir", runtime_dir.string(),
                                 "next", "-n", std::to_string(kIds)},
                                options);
    EXPECT_TRUE(run.status.ExitedWith(0)) << run.out << run.err;
    std::vector<uint64_t> ids;
    std::istringstream lines(run.out);
    for (uint64_t id = 0; lines >> id;) ids.push_back(id);
    EXPECT_EQ(ids.size(), kIds) << run.err;
    return ids;
  }

  // The second daemon: static on kMachine, its own state directory. It starts with its
  // clock 5 s behind the first daemon's last millisecond, more than a start may wait for
  // by itself, so it starts out of service; the operator resumes it, and it waits, paused,
  // until its clock passes that millisecond. Returns its IDs.
  std::vector<uint64_t> SecondDaemonAfterAStepBack(uint64_t first_last_id) {
    SetClockOffset(offset_file_, "-5");
    Daemon second = harness_.Start(Named("second", StaticToml()));
    EXPECT_TRUE(second.ready()) << second.Describe();
    const auto runtime_dir = harness_.root() / "second-run";
    auto started = WaitForState(runtime_dir, "out_of_service", 10s);
    EXPECT_TRUE(started && started->state == "out_of_service")
        << "the second daemon did not wait for the first's mark: "
        << (started ? started->state : "no segment") << "; " << second.Describe();
    const auto resume =
        RunCommand({testing::kSnowflakectlPath, "--runtime-dir", runtime_dir.string(), "resume"});
    EXPECT_TRUE(resume.status.ExitedWith(0)) << resume.out << resume.err;
    auto serving = WaitForState(runtime_dir, "serving", 20s);
    EXPECT_TRUE(serving && serving->state == "serving") << second.Describe();
    std::vector<uint64_t> ids = Take(runtime_dir);
    EXPECT_TRUE(second.Stop().has_value());
    const uint64_t lowest = ids.empty() ? 0 : *std::min_element(ids.begin(), ids.end());
    EXPECT_GT(lowest, first_last_id)
        << "the second daemon repeated the first one's milliseconds: its lowest ID is "
        << IdLayout().OffsetMsOf(first_last_id) -
               IdLayout().OffsetMsOf(std::min(lowest, first_last_id))
        << " ms below the first's last";
    return ids;
  }

  DaemonHarness harness_{"hostmark"};
  const std::filesystem::path offset_file_ = harness_.root() / "clock-offset";
};

TEST_F(HostMark, ASecondStaticDaemonStartsAboveTheFirstsLastIdAfterAClockStepBack) {
  // Arrange: the first static daemon on number 9 hands out IDs, then stops cleanly.
  Daemon first = harness_.Start(Named("first", StaticToml()));
  ASSERT_TRUE(first.ready()) << first.Describe();
  const std::vector<uint64_t> before = Take(harness_.root() / "first-run");
  ASSERT_FALSE(before.empty());
  ASSERT_TRUE(first.Stop().has_value());

  // Act + Assert: the clock steps back 5 s; the second starts on number 9.
  SecondDaemonAfterAStepBack(*std::max_element(before.begin(), before.end()));
}

// The host lock directory is a tmpfs, emptied at boot, and with it this boot's marks. The
// copy on disk carries the first daemon's milliseconds to a second one with another state
// directory that starts after the reboot with its clock behind (a static register keeps
// no mark of its own).
TEST_F(HostMark, ASecondStaticDaemonStartsAboveTheFirstsLastIdAfterARebootAndAClockStepBack) {
  // Arrange: the first static daemon on number 9 hands out IDs, then stops cleanly.
  Daemon first = harness_.Start(Named("first", StaticToml()));
  ASSERT_TRUE(first.ready()) << first.Describe();
  const std::vector<uint64_t> before = Take(harness_.root() / "first-run");
  ASSERT_FALSE(before.empty());
  ASSERT_TRUE(first.Stop().has_value());

  // Act: a reboot empties the tmpfs directories (the host's locks and marks, the first
  // daemon's runtime directory); the clock steps back 5 s; the second starts on number 9.
  std::filesystem::remove_all(harness_.root() / "host-locks");
  std::filesystem::remove_all(harness_.root() / "first-run");
  ASSERT_TRUE(std::filesystem::is_directory(harness_.root() / "host-locks.disk"))
      << "no copy of the host marks beside the lock directory";

  // Assert
  SecondDaemonAfterAStepBack(*std::max_element(before.begin(), before.end()));
}

TEST_F(HostMark, AStaticDaemonAfterAnEtcdDaemonStartsAboveItsLastIdAfterAClockStepBack) {
  testing::EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  // Arrange: an etcd daemon claims number 9 (the only one it may), hands out IDs, stops.
  Daemon first = harness_.Start(Named(
      "first", testing::EtcdDaemonToml("first", cluster.ClientUrls(), "/hostmark/",
                                       std::to_string(kMachine) + "-" + std::to_string(kMachine))));
  ASSERT_TRUE(first.ready()) << first.Describe();
  const std::vector<uint64_t> before = Take(harness_.root() / "first-run");
  ASSERT_FALSE(before.empty());
  ASSERT_EQ(IdLayout().Decode(before.front())->machine, kMachine);
  ASSERT_TRUE(first.Stop().has_value());

  // Act + Assert: a static daemon on number 9 knows nothing of etcd.
  SecondDaemonAfterAStepBack(*std::max_element(before.begin(), before.end()));
}

// The host lock directory is shared by every daemon of the host: a mark another user put
// there (whatever its name and value) must not move this daemon. Property: a planted mark
// of nobody's ten years ahead leaves a static daemon serving at once, and says so.
TEST_F(HostMark, AMarkPlantedByAnotherUserTenYearsAheadDoesNotTakeTheDaemonOutOfService) {
  // Arrange (tests run as root): nobody's mark of number 9, ten years ahead.
  const std::filesystem::path locks = harness_.root() / "host-locks";
  std::filesystem::create_directory(locks);
  const std::filesystem::path planted = locks / "machine-9.65534.high-water";
  { std::ofstream(planted) << "{\"unix_ms\":" << NowMs() + kTenYearsMs << ",\"writer\":\"x\"}\n"; }
  ASSERT_EQ(chown(planted.c_str(), 65534, 65534), 0);

  // Act
  Daemon sut = harness_.Start(Named("planted", StaticToml()));

  // Assert
  ASSERT_TRUE(sut.ready()) << sut.Describe();
  auto state = WaitForState(harness_.root() / "planted-run", "serving", 10s);
  EXPECT_TRUE(state && state->state == "serving")
      << "a planted mark took the daemon out of service: "
      << (state ? state->state : "no segment") << "; " << sut.Describe();
  EXPECT_TRUE(sut.WaitForErr(planted.string())) << sut.Describe();
  EXPECT_TRUE(sut.Stop().has_value());
}

// A state file whose reservation lies ten years ahead is either a clock that is that wrong
// or a file that is: the daemon refuses to start and names the file, instead of taking the
// number out of service for ten years (and, at its next clean stop, the register with it).
TEST_F(HostMark, AStateFileFarPastTheClockIsRefusedNamingIt) {
  // Arrange
  DaemonOptions options = Named("far", StaticToml());
  std::filesystem::create_directories(options.state_dir);
  const std::filesystem::path file = options.state_dir / "high-water.json";
  {
    std::ofstream(file) << "{\"version\":1,\"machine\":9,\"epoch_unix_ms\":" << kDefaultEpochUnixMs
                        << ",\"reserved_through_unix_ms\":" << NowMs() + kTenYearsMs
                        << ",\"last_issued_unix_ms_at_clean_stop\":null}\n";
  }

  // Act
  Daemon sut = Daemon::Spawn(options);
  const auto ended = sut.Wait(30s);

  // Assert
  ASSERT_TRUE(ended.has_value()) << "the daemon adopted a reservation ten years ahead: "
                                 << sut.Describe();
  EXPECT_TRUE(ended->ExitedWith(78)) << ended->ToString() << "; " << sut.Describe();
  EXPECT_NE(sut.err().find(file.string()), std::string::npos) << sut.Describe();
  EXPECT_NE(sut.err().find("clock.max_forward_ms"), std::string::npos) << sut.Describe();
}

// The host mark names the state directory by an identity written into it once, not by its
// path (a pod's emptyDir and the host's daemon may both be /var/lib/snowflaked). Property:
// the first start creates <state_dir>/identity, every later start keeps it, and the mark
// carries it.
TEST_F(HostMark, TheMarkCarriesTheStateDirectorysIdentityWhichARestartKeeps) {
  // Arrange
  const DaemonOptions options = Named("identity", StaticToml());
  const std::filesystem::path identity_file = options.state_dir / "identity";
  const std::filesystem::path mark = harness_.root() / "host-locks" / "machine-9.0.high-water";
  auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    std::string text;
    std::getline(in, text);
    return text;
  };

  // Act: start, stop, start again.
  Daemon first = harness_.Start(options);
  ASSERT_TRUE(first.ready()) << first.Describe();
  ASSERT_TRUE(first.Stop().has_value());
  const std::string identity = read(identity_file);
  const std::string first_mark = read(mark);
  Daemon second = harness_.Start(options);
  ASSERT_TRUE(second.ready()) << second.Describe();
  ASSERT_TRUE(second.Stop().has_value());

  // Assert: 128 random bits in hex, the same after the restart, in the mark.
  EXPECT_EQ(identity.size(), 32u) << identity;
  EXPECT_EQ(identity.find_first_not_of("0123456789abcdef"), std::string::npos) << identity;
  EXPECT_EQ(read(identity_file), identity);
  EXPECT_NE(first_mark.find("\"writer\":\"" + identity + "\""), std::string::npos)
      << first_mark;
  EXPECT_EQ(first_mark.find(options.state_dir.string()), std::string::npos) << first_mark;
}

}  // namespace
}  // namespace snowflake
