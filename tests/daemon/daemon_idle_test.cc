// An idle daemon goes dormant: a second after the last take it holds no IDs (it drains its
// ring: docs/daemon.md "The fill loop"), and the first take after that
// waits for one refill and gets an ID above every earlier one. What idling and refills
// cost (CPU, latency) is measured by the benchmark (bench/, `daemon_idle_cpu_pct`,
// `refill_p50_us`), not here.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/client.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;

// Polls the segment until the ring's fill is (or is not) zero, at most `timeout`.
::testing::AssertionResult WaitForFill(const DaemonHarness& harness, bool empty,
                                       std::chrono::milliseconds timeout) {
  return testing::WaitUntil(
      [&] {
        auto status = Client::Inspect(harness.Clients());
        return status && (status->ring_fill == 0) == empty;
      },
      timeout, empty ? "the ring to be empty" : "the ring to hold IDs", 20ms);
}

// After a take: the awake daemon refills its ring, then, nobody taking, goes dormant and
// empties it. (An awake daemon nobody takes from keeps its ring at the fill target.)
::testing::AssertionResult WaitForDormancy(const DaemonHarness& harness) {
  if (auto refilled = WaitForFill(harness, /*empty=*/false, 20s); !refilled) return refilled;
  return WaitForFill(harness, /*empty=*/true, 20s);
}

// A take that rides out a pause. On a loaded machine a renewal of the reservation (an
// fsync of the state file) can lag for a moment; the daemon then pauses at the horizon
// and resumes by itself (docs/daemon.md), which is right, and not what this test is
// about: it checks the order of the IDs after dormancy, not availability under load.
tl::expected<uint64_t, Error> TakeRidingOutPauses(Client& client) {
  return testing::AttemptUntil(
      [&] { return client.Next(); },
      [](const auto& id) { return id || id.error().code != ClientError::kDaemonPaused; }, 20s,
      10ms);
}

TEST(DaemonDormancy, AnIdleDaemonHoldsNoIdsAndItsNextTakeIsAboveEveryEarlierOne) {
  // Arrange: a client takes a burst, so the ring was filled for demand.
  DaemonHarness harness("dormant");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  auto client = Client::Open("dormancy-test", harness.Clients());
  ASSERT_TRUE(client) << client.error().message;
  std::vector<uint64_t> burst(4096);
  auto took = client->NextBatch(burst);
  ASSERT_TRUE(took) << took.error().message;

  // Act: idle until dormant, then take again, twice over.
  std::vector<uint64_t> after;
  ::testing::AssertionResult dormant[2] = {::testing::AssertionFailure(),
                                           ::testing::AssertionFailure()};
  for (::testing::AssertionResult& went_dormant : dormant) {
    went_dormant = WaitForDormancy(harness);
    auto id = TakeRidingOutPauses(*client);
    ASSERT_TRUE(id) << id.error().message << "; " << daemon.Describe();
    after.push_back(*id);
  }

  // Assert
  EXPECT_TRUE(dormant[0]) << "the ring was not refilled, or still held IDs 20 s later";
  EXPECT_TRUE(dormant[1]) << "the daemon did not go dormant again after one take";
  EXPECT_GT(after[0], burst[*took - 1]);
  EXPECT_GT(after[1], after[0]);
  EXPECT_TRUE(daemon.Running()) << daemon.Describe();
}

}  // namespace
}  // namespace snowflake
