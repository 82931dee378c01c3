// The real snowflaked against one real etcd member, reached by the old holder through a
// fault proxy (tests/support/fault_proxy.h) that holds one of its raises and delivers it
// after newer ones: the next holder of the number must never hand out an ID the old one
// handed out.
//
// The old holder A runs with its clock 3 s ahead (libfaketime), so its milliseconds are
// still in the future of the next holder B's clock when B claims: B then relies on the
// mark alone to stay above A (as a successor on a host whose clock lags does). Both daemons
// allow IDs 10 s away from the taker's clock (ring.max_age_ms), so this test's clients take
// A's IDs from the future.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "etcd_cluster.h"
#include "fault_proxy.h"
#include "register/etcd_client.h"
#include "register/etcd_records.h"
#include "register/etcd_register.h"
#include "snowflake/client.h"
#include "subprocess.h"
#include "taker_thread.h"
#include "test_paths.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using snowflake::testing::WaitUntil;

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::EtcdCluster;
using testing::FaultProxy;
using testing::TakerThread;

constexpr uint32_t kMachine = 11;
constexpr int64_t kReservationMs = 1000;

int PortOf(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

TEST(DaemonEtcdFencing, AnOldHoldersLateRaiseNeverLetsTheNextHolderReuseItsMilliseconds) {
  // Arrange: one member, a proxy in front of it; A reaches etcd through [proxy, member].
  EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  auto started = FaultProxy::Start(PortOf(cluster.ClientUrl(0)));
  ASSERT_TRUE(started) << started.error();
  FaultProxy& proxy = **started;
  DaemonHarness harness("fencing");
  const std::string prefix = "/fencing-daemon/";
  auto options_for = [&](const std::string& name, const std::string& endpoints) {
    // Each daemon is a host of its own (its own host-wide machine locks).
    return harness.NamedOptions(
        name,
        "[daemon]\ninstance = \"" + name +
            "\"\n[persistence]\nreservation_ms = " + std::to_string(kReservationMs) +
            "\n[ring]\nmax_age_ms = 10000\n[clock]\nmax_backward_ms = 20000\n[register]\nbackend = "
            "\"etcd\"\nmachines = \"" +
            std::to_string(kMachine) + "\"\nholder_id = \"host-" + name +
            "\"\n[register.etcd]\nendpoints = [" + endpoints + "]\nprefix = \"" + prefix +
            "\"\nlease_ttl_s = 5\nrequest_timeout_ms = 300\nconnect_timeout_ms = 300\n"
            // A raise every 250 ms (the reservation's own schedule), so one is held at
            // the proxy at once: the test is about a late raise, not the mark's window.
            "mark_reservation_ms = 0\n",
        DaemonHarness::Host::kOwn);
  };
  DaemonOptions a_options =
      options_for("a", "\"" + proxy.url() + "\", \"" + cluster.ClientUrl(0) + "\"");
  a_options.faketime_file = harness.root() / "a-clock";
  testing::SetClockOffset(*a_options.faketime_file, "+3");
  const DaemonOptions b_options = options_for("b", "\"" + cluster.ClientUrl(0) + "\"");

  std::optional<Daemon> a = harness.Start(a_options);
  ASSERT_TRUE(a->ready()) << a->Describe();
  auto a_client = Client::Open("fencing-a", DaemonHarness::ClientOptionsFor(a_options.runtime_dir));
  ASSERT_TRUE(a_client) << a_client.error().message;
  TakerThread a_taker(std::move(*a_client));
  ASSERT_TRUE(WaitUntil([&] { return a_taker.max_ms() > 0; }, 10s, "a_taker.max_ms() > 0"))
      << a->Describe();

  // Act 1: A's next raise stalls at the proxy and times out; A retries on the member,
  // commits, and goes on issuing above the stalled raise's target (at most A's clock when
  // it was held + the reservation).
  ASSERT_TRUE(proxy.SetMode(FaultProxy::Mode::kHold, "/v3/kv/txn"));
  ASSERT_TRUE(proxy.WaitForHeld(1, 10s)) << a->Describe();
  ASSERT_TRUE(proxy.SetMode(FaultProxy::Mode::kPass));
  const int64_t a_clock_when_held = a_taker.max_ms();
  ASSERT_TRUE(WaitUntil([&] { return a_taker.max_ms() > a_clock_when_held + kReservationMs + 500; },
                        20s, "a_taker.max_ms() > a_clock_when_held + kReservationMs + 500"))
      << "A did not issue past the stalled raise's target: " << a->Describe();

  // Act 2: A dies; the stalled raise lands; A's lease ends; B claims the number.
  a_taker.Stop();
  a->Kill();
  a.reset();
  auto late = proxy.ReleaseHeld();
  ASSERT_TRUE(late) << late.error();
  reg::etcd::ClientOptions admin_options;
  admin_options.endpoints = {cluster.ClientUrl(0)};
  reg::etcd::EtcdClient admin(admin_options);
  auto holder = admin.Range(reg::etcd::MachineKey(prefix, kMachine));
  ASSERT_TRUE(holder) << holder.error().message;
  if (!holder->kvs.empty()) {
    ASSERT_TRUE(admin.Revoke(holder->kvs[0].lease));
  }
  auto mark = admin.Range(reg::etcd::HighWaterKey(prefix, kMachine));
  ASSERT_TRUE(mark && !mark->kvs.empty());
  const auto mark_record = reg::etcd::DecodeHighWater(mark->kvs[0].value);
  ASSERT_TRUE(mark_record);

  Daemon b = harness.Start(b_options, 60s);
  ASSERT_TRUE(b.ready()) << b.Describe();
  auto b_client = Client::Open("fencing-b", DaemonHarness::ClientOptionsFor(b_options.runtime_dir));
  ASSERT_TRUE(b_client) << b_client.error().message;
  std::vector<uint64_t> a_ids = a_taker.ids();
  const int64_t a_max_ms = a_taker.max_ms();
  TakerThread b_taker(std::move(*b_client));
  // Until B's clock has passed every millisecond A issued in (B waits for its clock to
  // pass the mark first).
  const ::testing::AssertionResult b_passed_a =
      WaitUntil([&] { return b_taker.max_ms() > a_max_ms; }, 30s, "b_taker.max_ms() > a_max_ms");
  b_taker.Stop();
  const std::vector<uint64_t> b_ids = b_taker.ids();

  // Assert
  ASSERT_TRUE(b_passed_a) << b.Describe();
  ASSERT_FALSE(a_ids.empty());
  ASSERT_FALSE(b_ids.empty());
  // Millions of IDs: sorted vectors, not sets.
  std::vector<uint64_t> a_sorted = a_ids;
  std::vector<uint64_t> b_sorted = b_ids;
  std::sort(a_sorted.begin(), a_sorted.end());
  std::sort(b_sorted.begin(), b_sorted.end());
  std::vector<uint64_t> both;
  std::set_intersection(a_sorted.begin(), a_sorted.end(), b_sorted.begin(), b_sorted.end(),
                        std::back_inserter(both));
  const size_t duplicates = both.size();
  const uint64_t a_max = a_sorted.back();
  const uint64_t b_min = b_sorted.front();
  EXPECT_GE(mark_record->unix_ms, a_max_ms)
      << "the mark B claimed above is " << (a_max_ms - mark_record->unix_ms)
      << " ms below A's last issued millisecond";
  EXPECT_EQ(duplicates, 0u) << "B handed out " << duplicates << " of A's " << a_ids.size()
                            << " IDs again (B took " << b_ids.size() << ")";
  EXPECT_GT(b_min, a_max) << "B's first ID (ms " << b_taker.client().Decode(b_min)->unix_ms
                          << ") is not above A's last (ms " << a_max_ms << ")";
}

TEST(DaemonEtcdFencing, ARestoredRegisterIsRefusedUntilAnOperatorRaisesEveryMark) {
  // Arrange: a daemon serves from one cluster and stops; the register is then "restored"
  // (a new cluster at the same endpoints' place: another cluster id, no marks).
  DaemonHarness harness("restored");
  const std::string prefix = "/restored/";
  auto options_for = [&](const std::string& endpoint) {
    DaemonOptions options;
    options.runtime_dir = harness.root() / "run";
    options.state_dir = harness.root() / "state";
    options.config_path = harness.WriteFile(
        "snowflaked.toml", "[register]\nbackend = \"etcd\"\nmachines = \"" +
                               std::to_string(kMachine) +
                               "\"\nholder_id = \"host-r\"\n[register.etcd]\nendpoints = [\"" +
                               endpoint + "\"]\nprefix = \"" + prefix + "\"\n");
    return options;
  };
  std::vector<uint64_t> before;
  {
    EtcdCluster original(1);
    ASSERT_TRUE(original.ok()) << original.error();
    Daemon daemon = harness.Start(options_for(original.ClientUrl(0)));
    ASSERT_TRUE(daemon.ready()) << daemon.Describe();
    auto client = Client::Open("restored", DaemonHarness::ClientOptionsFor(harness.root() / "run"));
    ASSERT_TRUE(client) << client.error().message;
    for (int i = 0; i < 5000; ++i) {
      auto id = client->Next();
      ASSERT_TRUE(id) << id.error().message;
      before.push_back(*id);
    }
    auto stopped = daemon.Stop();
    ASSERT_TRUE(stopped && stopped->ExitedWith(0)) << daemon.Describe();
  }
  EtcdCluster restored(1);
  ASSERT_TRUE(restored.ok()) << restored.error();
  const DaemonOptions options = options_for(restored.ClientUrl(0));

  // Act 1: the daemon meets the restored register.
  Daemon refused = Daemon::Spawn(options);
  auto refused_exit = refused.Wait(60s);
  // Act 2: the operator fences it above every ID issued (here: the current time plus
  // 500 ms, as the error message asks; a start waits by itself up to reservation_ms +
  // max_backward_ms for its clock to pass the mark), and the daemon starts again.
  const int64_t above = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count() +
                        500;
  const auto raise =
      testing::RunCommand({testing::kSnowflakectlPath, "register", "raise-all", "--above",
                           std::to_string(above), "--config", options.config_path->string()});
  Daemon again = harness.Start(options, 60s);
  ASSERT_TRUE(again.ready()) << again.Describe();
  auto client = Client::Open("restored-2", DaemonHarness::ClientOptionsFor(harness.root() / "run"));
  ASSERT_TRUE(client) << client.error().message;
  auto after = client->Next();

  // Assert: refused as a configuration error, naming what happened and what to do.
  ASSERT_TRUE(refused_exit) << refused.Describe();
  EXPECT_TRUE(refused_exit->ExitedWith(78)) << refused_exit->ToString() << ": " << refused.Describe();
  EXPECT_NE(refused.err().find("restored from a backup or replaced"), std::string::npos)
      << refused.err();
  EXPECT_NE(refused.err().find("snowflakectl register raise-all --above"), std::string::npos)
      << refused.err();
  EXPECT_TRUE(raise.status.ExitedWith(0)) << raise.out << raise.err;
  EXPECT_NE(raise.out.find("raised 1024 of 1024"), std::string::npos) << raise.out;
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_GT(*after, *std::max_element(before.begin(), before.end()));
  EXPECT_GE(client->Decode(*after)->unix_ms, above);
}

// An operator fences a running holder (`register raise-all --while-running`, through the
// register the command uses) 1 s ahead of the clock, below the holder's 8 s reservation,
// so the fence the holder obeys is its own horizon; the moment raise-all returns, the
// holder is SIGKILLed and started again at once, on its surviving segment and state. Its
// renewals come every 2 s, so the state file has seen no renewal since the fence was
// found. Nothing it hands out after the restart may lie at or below the fence.
TEST(DaemonEtcdFencing, AHolderKilledRightAfterRaiseAllReturnsRestartsAboveTheFence) {
  // Arrange
  EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  DaemonHarness harness("fence-kill");
  const std::string prefix = "/fence-kill/";
  const DaemonOptions options = harness.NamedOptions(
      "f",
      "[persistence]\nreservation_ms = 8000\n[register]\nbackend = \"etcd\"\nmachines = \"" +
          std::to_string(kMachine) +
          "\"\nholder_id = \"host-f\"\n[register.etcd]\nendpoints = [\"" + cluster.ClientUrl(0) +
          "\"]\nprefix = \"" + prefix + "\"\nlease_ttl_s = 10\n",
      DaemonHarness::Host::kOwn);
  std::optional<Daemon> first = harness.Start(options);
  ASSERT_TRUE(first->ready()) << first->Describe();
  auto first_client =
      Client::Open("fence-kill", DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(first_client) << first_client.error().message;
  TakerThread first_taker(std::move(*first_client));
  ASSERT_TRUE(WaitUntil([&] { return first_taker.max_ms() > 0; }, 10s, "first_taker.max_ms() > 0"))
      << first->Describe();
  reg::EtcdRegisterOptions operator_options;
  operator_options.client.endpoints = {cluster.ClientUrl(0)};
  operator_options.prefix = prefix;
  operator_options.fence_ack_timeout = 20s;
  operator_options.host_lock_dir = harness.root() / "operator-locks";
  reg::EtcdRegister operator_register(operator_options);

  // Act: the fence, the kill the moment raise-all returns, the restart at once.
  const int64_t above = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count() +
                        1000;
  auto raised = operator_register.RaiseAll(above, /*while_running=*/true);
  first->Kill();
  first_taker.Stop();
  const std::string first_log = first->Describe();
  first.reset();
  // The fence the holder obeyed: the mark it acknowledged (its horizon, above `above`).
  reg::etcd::ClientOptions admin_options;
  admin_options.endpoints = {cluster.ClientUrl(0)};
  auto mark = reg::etcd::EtcdClient(admin_options).Range(reg::etcd::HighWaterKey(prefix, kMachine));
  ASSERT_TRUE(mark && !mark->kvs.empty());
  const auto mark_record = reg::etcd::DecodeHighWater(mark->kvs[0].value);
  ASSERT_TRUE(mark_record) << mark_record.error();
  const int64_t fence = std::max(above, mark_record->fence);
  Daemon second = harness.Start(options, 60s);
  ASSERT_TRUE(second.ready()) << second.Describe();
  auto second_client =
      Client::Open("fence-kill-2", DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(second_client) << second_client.error().message;
  TakerThread second_taker(std::move(*second_client));
  const ::testing::AssertionResult took =
      WaitUntil([&] { return second_taker.taken().size() >= 1000; }, 40s,
                "1000 IDs from the restarted holder");
  second_taker.Stop();

  // Assert: raise-all returned once the holder acknowledged; every ID after the restart is
  // above the fence, and none repeats one from before.
  ASSERT_TRUE(raised) << raised.error().message << first_log;
  ASSERT_TRUE(took) << second.Describe();
  int64_t lowest_after_ms = INT64_MAX;
  for (const auto& t : second_taker.taken()) lowest_after_ms = std::min(lowest_after_ms, t.unix_ms);
  EXPECT_GT(lowest_after_ms, fence)
      << "the restarted holder handed out IDs " << (fence - lowest_after_ms + 1)
      << " ms at or below the operator's fence: " << second.Describe();
  std::vector<uint64_t> before = first_taker.ids();
  std::vector<uint64_t> after = second_taker.ids();
  std::sort(before.begin(), before.end());
  std::sort(after.begin(), after.end());
  std::vector<uint64_t> both;
  std::set_intersection(before.begin(), before.end(), after.begin(), after.end(),
                        std::back_inserter(both));
  EXPECT_TRUE(both.empty()) << both.size() << " IDs handed out twice";
}

}  // namespace
}  // namespace snowflake
