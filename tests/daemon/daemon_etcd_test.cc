// The real snowflaked with register.backend = "etcd" against a real 3-member etcd
// cluster (tests/support/etcd_cluster.h):
//   - a daemon serves IDs from the number it claimed in etcd, and no ID it hands out lies
//     above the high-water mark committed in etcd (the fence is raised before publishing);
//   - 16 daemons started at once race for 8 numbers: exactly 8 serve, distinct, and 8 exit
//     naming the range;
//   - a daemon with another epoch, or garbage under the prefix, stops the start with a
//     clear error (not a crash);
//   - SIGKILL and a restart get the same number back, IDs continuing above;
//   - takeover: daemon A is SIGSTOPped past its lease, B claims A's number; after SIGCONT
//     A hands out nothing more and exits non-zero, and every ID of B is above every ID of A.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "etcd_cluster.h"
#include "register/etcd_json.h"
#include "snowflake/client.h"
#include "snowflake/clock.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::EtcdCluster;

// etcd's JSON gateway carries keys and values base64-encoded: the daemon's own codec.
using reg::etcd::Base64Encode;

std::string Unbase64(const std::string& text) {
  return reg::etcd::Base64Decode(text).value_or(std::string());
}

class DaemonEtcd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new EtcdCluster(3); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(cluster_->ok()) << cluster_->error(); }

  std::string Prefix() const {
    return "/d/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/";
  }

  DaemonOptions OptionsFor(const std::string& name, const std::string& machines = "0-63",
                           const std::string& etcd_extra = "") {
    return harness_.NamedOptions(name, testing::EtcdDaemonToml(name, cluster_->ClientUrls(),
                                                               Prefix(), machines, etcd_extra));
  }

  // The value of `key` under this test's prefix, or "" if absent.
  std::string Get(const std::string& key) {
    auto answer = testing::HttpPost(cluster_->ClientUrl(0) + "/v3/kv/range",
                                    R"({"key":")" + Base64Encode(Prefix() + key) + R"("})", 5s);
    if (!answer || answer->status != 200) return "";
    const auto j = nlohmann::json::parse(answer->body, nullptr, false);
    if (j.is_discarded() || !j.contains("kvs")) return "";
    return Unbase64(j["kvs"][0].value("value", std::string()));
  }

  static std::optional<ClientStatus> Status(const DaemonOptions& options) {
    auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(options.runtime_dir));
    if (!status) return std::nullopt;
    return *status;
  }

  static std::vector<uint64_t> Take(Client& client, size_t count) {
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < count; ++i) {
      auto id = client.Next();
      if (!id) break;
      ids.push_back(*id);
    }
    return ids;
  }

  static EtcdCluster* cluster_;
  DaemonHarness harness_{"etcd"};
};

EtcdCluster* DaemonEtcd::cluster_ = nullptr;

TEST_F(DaemonEtcd, ServesIdsFromItsEtcdNumberNeverAboveTheCommittedMark) {
  // Arrange
  const DaemonOptions options = OptionsFor("a");
  Daemon daemon = harness_.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  auto client = Client::Open("etcd-test", DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(client) << client.error().message;

  // Act
  const std::vector<uint64_t> ids = Take(*client, 20'000);
  const auto status = Status(options);
  ASSERT_TRUE(status);
  const std::string holder = Get("machines/" + std::to_string(status->machine));
  const std::string mark_text = Get("high-water/" + std::to_string(status->machine));

  // Assert
  ASSERT_EQ(ids.size(), 20'000u);
  EXPECT_NE(holder.find("\"holder\":\"host-a\""), std::string::npos) << holder;
  const auto mark = nlohmann::json::parse(mark_text, nullptr, false);
  ASSERT_FALSE(mark.is_discarded()) << mark_text;
  const int64_t mark_ms = mark["unix_ms"].get<int64_t>();
  for (const uint64_t id : ids) {
    const auto decoded = client->Decode(id);
    ASSERT_TRUE(decoded);
    ASSERT_EQ(decoded->machine, status->machine);
    ASSERT_LE(decoded->unix_ms, mark_ms) << "an ID above the mark committed in etcd";
  }
  EXPECT_TRUE(daemon.Stop().value_or(testing::ExitStatus{}).ExitedWith(0)) << daemon.Describe();
}

TEST_F(DaemonEtcd, TheMarkReservesItsOwnWindowAheadAndTheStateFileCoversIt) {
  // Arrange: an 8 s mark window (the default is 30 s), far longer than the state file's
  // 1 s reservation.
  const DaemonOptions options =
      OptionsFor("w", "0-63", "request_timeout_ms = 1000\nmark_reservation_ms = 8000\n");
  Daemon daemon = harness_.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  auto client = Client::Open("etcd-window", DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(client) << client.error().message;

  // Act
  const std::vector<uint64_t> ids = Take(*client, 1'000);
  const auto status = Status(options);
  ASSERT_TRUE(status);
  const int64_t before_ms = snowflake::Clock::Real().NowUnixMs();
  const std::string mark_text = Get("high-water/" + std::to_string(status->machine));
  std::ifstream state_in(options.state_dir / "high-water.json");
  const auto state = nlohmann::json::parse(state_in, nullptr, false);

  // Assert: the mark lies at least half its window ahead (it is raised when less is left),
  // far beyond the 1 s reservation; the state file, written first, reserves at least as
  // far, so a restart on the surviving segment still finds the mark within it.
  ASSERT_EQ(ids.size(), 1'000u);
  const auto mark = nlohmann::json::parse(mark_text, nullptr, false);
  ASSERT_FALSE(mark.is_discarded()) << mark_text;
  const int64_t mark_ms = mark["unix_ms"].get<int64_t>();
  EXPECT_GE(mark_ms - before_ms, 4'000 - 1'000) << mark_text;  // a second for the reads
  ASSERT_FALSE(state.is_discarded());
  EXPECT_GE(state["reserved_through_unix_ms"].get<int64_t>(), mark_ms) << state.dump();
}

TEST_F(DaemonEtcd, SixteenDaemonsRaceForEightNumbersExactlyEightServeDistinctNumbers) {
  // Arrange
  constexpr int kDaemons = 16;
  std::vector<DaemonOptions> options;
  std::vector<Daemon> daemons;
  for (int i = 0; i < kDaemons; ++i) options.push_back(OptionsFor("d" + std::to_string(i), "0-7"));

  // Act: all started at once.
  for (int i = 0; i < kDaemons; ++i) daemons.push_back(Daemon::Spawn(options[i]));
  // Each either serves (READY=1) or gives up; the losers learn only once the winners'
  // claims committed, so wait for every one to end up on one side.
  std::vector<int> serving;
  std::vector<int> refused;
  for (int i = 0; i < kDaemons; ++i) {
    if (daemons[i].WaitForReady(60s)) {
      serving.push_back(i);
    } else {
      auto exit = daemons[i].Wait(60s);
      ASSERT_TRUE(exit) << "neither serving nor exited: " << daemons[i].Describe();
      EXPECT_TRUE(exit->exited()) << exit->ToString() << ": " << daemons[i].Describe();
      EXPECT_FALSE(exit->ExitedWith(0)) << daemons[i].Describe();
      refused.push_back(i);
    }
  }

  // Assert
  ASSERT_EQ(serving.size(), 8u);
  ASSERT_EQ(refused.size(), 8u);
  std::set<uint32_t> numbers;
  for (const int i : serving) {
    const auto status = Status(options[i]);
    ASSERT_TRUE(status);
    EXPECT_EQ(status->state, "serving");
    EXPECT_LE(status->machine, 7u);
    EXPECT_TRUE(numbers.insert(status->machine).second) << "machine " << status->machine << " twice";
  }
  EXPECT_EQ(numbers.size(), 8u);
  for (const int i : refused) {
    EXPECT_NE(daemons[i].err().find("no free machine number in 0-7"), std::string::npos)
        << daemons[i].err();
  }
}

TEST_F(DaemonEtcd, AnotherEpochIsRefusedAtStartNamingBothValues) {
  // Arrange: the fleet's first daemon records the default epoch.
  Daemon first = harness_.Start(OptionsFor("e1"));
  ASSERT_TRUE(first.ready()) << first.Describe();

  // Act: a second one with another epoch, on the same fleet.
  Daemon other =
      Daemon::Spawn(OptionsFor("e2", "0-63", "[id]\nepoch = \"2026-01-01T00:00:01Z\"\n"));
  auto exit = other.Wait(60s);

  // Assert: refused as a configuration error (systemd does not restart it), both named.
  ASSERT_TRUE(exit) << other.Describe();
  EXPECT_TRUE(exit->ExitedWith(78)) << exit->ToString() << ": " << other.Describe();
  EXPECT_NE(other.err().find("2026-01-01T00:00:00.000Z"), std::string::npos) << other.err();
  EXPECT_NE(other.err().find("2026-01-01T00:00:01.000Z"), std::string::npos) << other.err();
  EXPECT_TRUE(first.Running());
}

TEST_F(DaemonEtcd, GarbageUnderThePrefixStopsTheStartWithAClearErrorNotACrash) {
  // Arrange: a value no snowflaked wrote where the claim looks first.
  auto put = testing::HttpPost(cluster_->ClientUrl(0) + "/v3/kv/put",
                               R"({"key":")" + Base64Encode(Prefix() + "machines/0") +
                                   R"(","value":")" + Base64Encode("\x01not a holder\xff") + R"("})",
                               5s);
  ASSERT_TRUE(put && put->status == 200);

  // Act
  Daemon daemon = Daemon::Spawn(OptionsFor("g"));
  auto exit = daemon.Wait(60s);

  // Assert
  ASSERT_TRUE(exit) << daemon.Describe();
  EXPECT_TRUE(exit->exited()) << exit->ToString() << ": " << daemon.Describe();
  EXPECT_FALSE(exit->ExitedWith(0)) << daemon.Describe();
  EXPECT_NE(daemon.err().find("machines/0 holds a value snowflaked did not write"),
            std::string::npos)
      << daemon.err();
}

TEST_F(DaemonEtcd, SigkillAndRestartGetTheSameNumberBackAndContinueAbove) {
  // Arrange
  const DaemonOptions options = OptionsFor("k");
  std::optional<Daemon> daemon = harness_.Start(options);
  ASSERT_TRUE(daemon->ready()) << daemon->Describe();
  auto client = Client::Open("etcd-kill", DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(client) << client.error().message;
  const std::vector<uint64_t> before = Take(*client, 5000);
  const auto machine_before = Status(options)->machine;

  // Act
  daemon->Kill();
  daemon.emplace(harness_.Start(options));
  ASSERT_TRUE(daemon->ready()) << daemon->Describe();
  auto fresh = Client::Open("etcd-kill-2", DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(fresh) << fresh.error().message;
  const std::vector<uint64_t> after = Take(*fresh, 5000);

  // Assert
  ASSERT_EQ(before.size(), 5000u);
  ASSERT_EQ(after.size(), 5000u);
  EXPECT_EQ(Status(options)->machine, machine_before);
  EXPECT_GT(*std::min_element(after.begin(), after.end()),
            *std::max_element(before.begin(), before.end()));
}

TEST_F(DaemonEtcd, TakeoverAfterSigstopFencesTheOldDaemon) {
  // Arrange: A serves the only number of the range with a 2 s lease.
  const std::string short_lease = "lease_ttl_s = 2\nrequest_timeout_ms = 1000\n";
  const DaemonOptions a_options = OptionsFor("ta", "9", short_lease);
  DaemonOptions b_options = OptionsFor("tb", "9", short_lease);
  // B stands for another host: a daemon of A's host would find A's host-wide lock of 9.
  b_options.host_lock_dir = b_options.runtime_dir.parent_path() / "host-locks-b";
  Daemon a = harness_.Start(a_options);
  ASSERT_TRUE(a.ready()) << a.Describe();
  auto a_client = Client::Open("takeover-a", DaemonHarness::ClientOptionsFor(a_options.runtime_dir));
  ASSERT_TRUE(a_client) << a_client.error().message;
  std::vector<uint64_t> a_ids = Take(*a_client, 5000);
  ASSERT_EQ(a_ids.size(), 5000u);

  // Act: A stops past its lease; B claims number 9; A continues.
  ASSERT_TRUE(a.process().Kill(SIGSTOP));
  // Until etcd has expired A's lease and dropped its record (2 s, more on a loaded host).
  ASSERT_TRUE(testing::WaitUntil([&] { return Get("machines/9").empty(); }, 30s,
                                 "etcd to expire A's 2 s lease and drop its record machines/9",
                                 100ms));
  Daemon b = harness_.Start(b_options, 60s);
  ASSERT_TRUE(b.ready()) << b.Describe();
  auto b_client = Client::Open("takeover-b", DaemonHarness::ClientOptionsFor(b_options.runtime_dir));
  ASSERT_TRUE(b_client) << b_client.error().message;
  const std::vector<uint64_t> b_ids = Take(*b_client, 5000);
  ASSERT_TRUE(a.process().Kill(SIGCONT));
  // Whatever A still hands out (its ring, filled before the stop), until it exits. Each
  // look takes at most a ring's worth, so a daemon that kept serving ends the wait and
  // fails the assertion on its exit below.
  [[maybe_unused]] const auto a_ended = testing::WaitUntil(
      [&] {
        for (int i = 0; i < 4096; ++i) {
          auto id = a_client->Next();
          if (!id) break;
          a_ids.push_back(*id);
        }
        return !a.Running();
      },
      30s, "A to exit after losing its number");
  auto a_exit = a.Wait(30s);

  // Assert
  ASSERT_EQ(b_ids.size(), 5000u);
  EXPECT_EQ(Status(b_options)->machine, 9u);
  ASSERT_TRUE(a_exit) << "A kept running after losing its number: " << a.Describe();
  EXPECT_FALSE(a_exit->ExitedWith(0)) << a.Describe();
  EXPECT_NE(a.err().find("claim anew"), std::string::npos) << a.err();
  EXPECT_GT(*std::min_element(b_ids.begin(), b_ids.end()),
            *std::max_element(a_ids.begin(), a_ids.end()))
      << "an ID of the new holder is not above every ID of the old one";
}

}  // namespace
}  // namespace snowflake
