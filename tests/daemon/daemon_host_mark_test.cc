// A machine number handed from one daemon to another on the same host keeps its mark: two
// real snowflaked processes with separate state directories serve number 9 one after the
// other (two static daemons; an etcd daemon, then a static one), sharing only the host's
// machine-number lock directory. Between them the host's clock steps back 5 s
// (libfaketime: both daemons and the takers read one offset file).
//
// Property: every ID the second daemon hands out is above every ID the first one handed
// out. The second daemon's state directory and register know nothing of the first; only the
// host mark in the lock directory (register/machine_lock.h) does.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
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
        << IdLayout::OffsetMsOf(first_last_id) - IdLayout::OffsetMsOf(std::min(lowest, first_last_id))
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
  ASSERT_EQ((before.front() >> kSequenceBits) & kMaxMachine, kMachine);
  ASSERT_TRUE(first.Stop().has_value());

  // Act + Assert: a static daemon on number 9 knows nothing of etcd.
  SecondDaemonAfterAStepBack(*std::max_element(before.begin(), before.end()));
}

}  // namespace
}  // namespace snowflake
