// Finding 6 of issue 9, outside in, with the real snowflaked: a daemon that is stopped
// (SIGSTOP: hung) or killed (SIGKILL: dead) with IDs in its ring. 300 ms later by its
// clock, a client that attached while it served gets an error, never one of those IDs
// (they are 300 ms old, far beyond the bound max_age_ms + liveness_ms = 0 + 50 carried in
// the segment header). The clients read an AheadClock (manual_clock.h): the real clock
// while the daemon serves, skipped 300 ms ahead once it is stopped or killed, so the
// leftovers and the heartbeat age without the test waiting for them (a stopped or killed
// daemon marks no event to wait for). The leftovers are still in the ring when the client
// is refused: the refusal is the client's freshness check, not a drain. (A client that opens only
// after the daemon stopped gets no consumer region at all, so it could take nothing either way: the
// clients here attach first, while the daemon still hands the region out.)

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "daemon_harness.h"
#include "manual_clock.h"
#include "protocol/control_client.h"
#include "snowflake/client.h"
#include "snowflake/ring_consumer.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::AheadClock;
using testing::Daemon;
using testing::DaemonHarness;

// What the test holds when the daemon is stopped or killed, all attached while it served.
struct Attached {
  // A consumer mapping of its own: the region outlives the daemon, so the leftovers are
  // still countable (ring.size()) after it is gone, and nothing takes from it.
  shm::RingConsumer ring;
  Client late;     // the defaults: the header's liveness_ms decides "not heartbeating"
  Client patient;  // trusts the heartbeat for 5 s, waits 200 ms
};

// Attaches a ring and the two clients (on `clock`, which must outlive them), takes an ID
// (waking the daemon if it went dormant) until the ring holds IDs, then applies `signal` at
// once. Returns what was attached once
// the ring held IDs just after the signal, or nullopt. A daemon can drain aged IDs between
// the look and the signal (more so on a loaded host): then it is resumed (SIGSTOP), or
// started again in `daemon` (SIGKILL), and tried again.
std::optional<Attached> SignalWithIdsInTheRing(Daemon& daemon, const DaemonHarness& harness,
                                               int signal, Clock& clock) {
  ClientOptions defaults;
  defaults.runtime_dir = harness.runtime_dir();
  defaults.clock = &clock;
  ClientOptions patient = harness.Clients();
  patient.wait_timeout = 200ms;
  patient.clock = &clock;
  for (int attempt = 0; attempt < 200; ++attempt) {
    // Attached per attempt: a killed daemon's successor serves a new segment.
    auto taker = Client::Open("warmup", harness.Clients());
    if (!taker || !taker->Next()) continue;
    auto ring = protocol::AttachConsumer(harness.runtime_dir());
    auto late = Client::Open("late", defaults);
    auto patient_client = Client::Open("patient", patient);
    if (!ring || !late || !patient_client) continue;
    if (ring->size() == 0) {
      std::this_thread::sleep_for(1ms);
      continue;
    }
    kill(daemon.pid(), signal);
    if (signal == SIGKILL) daemon.Kill();  // reap
    if (ring->size() > 0) {
      return Attached{std::move(*ring), std::move(*late), std::move(*patient_client)};
    }
    // It drained its aged IDs just before the signal: try again, with the daemon going on
    // (SIGSTOP) or started again (SIGKILL).
    if (signal == SIGSTOP) {
      kill(daemon.pid(), SIGCONT);
    } else {
      daemon = harness.Start();
      if (!daemon.ready()) return std::nullopt;
    }
  }
  return std::nullopt;
}

void ExpectNoOldId(const tl::expected<uint64_t, Error>& taken, const Client& client, Clock& clock,
                   const std::string& who) {
  if (taken) {
    const int64_t age = clock.NowUnixMs() - client.Decode(*taken).value().unix_ms;
    ADD_FAILURE() << who << " received an ID " << age << " ms old from a stopped daemon's ring";
  }
}

TEST(DaemonFreshness, AStoppedDaemonsLeftoversAreNeverHandedOut) {
  // Arrange
  DaemonHarness harness("fresh-stop");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  AheadClock clock;
  std::optional<Attached> attached = SignalWithIdsInTheRing(daemon, harness, SIGSTOP, clock);
  ASSERT_TRUE(attached) << "could not stop the daemon with IDs in its ring: " << daemon.Describe();
  // The subject: the leftovers age past the 50 ms freshness bound, on the clients' clock.
  clock.Skip(300ms);

  // Act
  auto taken = attached->late.Next();
  auto patient_taken = attached->patient.Next();

  // Assert
  ExpectNoOldId(taken, attached->late, clock, "a default client");
  ExpectNoOldId(patient_taken, attached->patient, clock, "a client trusting the heartbeat for 5 s");
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kDaemonNotHeartbeating) << taken.error().message;
  ASSERT_FALSE(patient_taken);
  EXPECT_EQ(patient_taken.error().code, ClientError::kTimedOut) << patient_taken.error().message;
  EXPECT_GT(attached->ring.size(), 0u) << "the stale IDs were taken or drained";
  EXPECT_EQ(attached->ring.header().freshness_bound_ms.load(), 50u);

  // And once it runs again it drains them and serves fresh IDs.
  kill(daemon.pid(), SIGCONT);
  ClientOptions again = harness.Clients();
  auto resumed = Client::Open("resumed", again);
  ASSERT_TRUE(resumed);
  auto fresh = resumed->Next();
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_LE(Clock::Real().NowUnixMs() - resumed->Decode(*fresh).value().unix_ms, 50);
  auto stopped = daemon.Stop();
  ASSERT_TRUE(stopped && stopped->ExitedWith(0)) << daemon.Describe();
}

TEST(DaemonFreshness, AKilledDaemonsLeftoversAreNeverHandedOut) {
  // Arrange
  DaemonHarness harness("fresh-kill");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  AheadClock clock;
  std::optional<Attached> attached = SignalWithIdsInTheRing(daemon, harness, SIGKILL, clock);
  ASSERT_TRUE(attached) << "could not kill the daemon with IDs in its ring: " << daemon.Describe();
  // The subject: the leftovers age past the 50 ms freshness bound, on the clients' clock.
  clock.Skip(300ms);

  // Act
  auto taken = attached->late.Next();
  auto patient_taken = attached->patient.Next();

  // Assert
  ExpectNoOldId(taken, attached->late, clock, "a default client");
  ExpectNoOldId(patient_taken, attached->patient, clock, "a client trusting the heartbeat for 5 s");
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kDaemonDead) << taken.error().message;
  ASSERT_FALSE(patient_taken);
  EXPECT_EQ(patient_taken.error().code, ClientError::kDaemonDead) << patient_taken.error().message;
  EXPECT_GT(attached->ring.size(), 0u) << "the stale IDs were taken or drained";
}

}  // namespace
}  // namespace snowflake
