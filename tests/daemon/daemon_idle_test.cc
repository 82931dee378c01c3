// What the real snowflaked costs, reported and not asserted (the budgets live in bench/,
// DESIGN.md section 10): CPU time over a few idle seconds, read from /proc/<pid>/stat, and
// the latency a client sees when it takes from an empty ring (the refill round trip).
// Each figure is printed and recorded as a test property; the tests fail only if the
// figure cannot be measured.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/client.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::ProcessCpuTicks;

#ifdef SNOWFLAKE_SANITIZED
constexpr const char* kBuild = "sanitized build (figures inflated by the sanitizer)";
#else
constexpr const char* kBuild = "unsanitized build";
#endif

TEST(DaemonCost, IdleCpuTimeIsReported) {
  DaemonHarness harness("idle");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  std::this_thread::sleep_for(500ms);  // past the start-up work

  const auto start_ticks = ProcessCpuTicks(daemon.pid());
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3s);
  const auto end_ticks = ProcessCpuTicks(daemon.pid());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  ASSERT_TRUE(start_ticks && end_ticks) << "cannot read /proc/" << daemon.pid() << "/stat";
  ASSERT_TRUE(daemon.Running()) << daemon.Describe();
  const double cpu_ms = static_cast<double>(*end_ticks - *start_ticks) * 1000.0 /
                        static_cast<double>(sysconf(_SC_CLK_TCK));
  const double percent = cpu_ms / (seconds * 1000.0) * 100.0;
  std::cout << "snowflaked idle: " << cpu_ms << " ms CPU in " << seconds << " s = " << percent
            << "% of one core (" << kBuild << ", resolution " << 1000 / sysconf(_SC_CLK_TCK)
            << " ms)\n";
  ::testing::Test::RecordProperty("idle_cpu_ms", std::to_string(cpu_ms));
  ::testing::Test::RecordProperty("idle_cpu_percent_of_core", std::to_string(percent));
}

TEST(DaemonCost, RefillLatencyFromAnEmptyRingIsReported) {
  DaemonHarness harness("refill");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  auto client = Client::Open("refill-test", harness.Clients());
  ASSERT_TRUE(client) << client.error().message;
  std::vector<uint64_t> drain(1u << 20);
  std::vector<double> latencies_us;
  constexpr int kSamples = 2000;

  for (int i = 0; i < kSamples; ++i) {
    // Empty the ring (a batch takes everything published at that instant), then time the
    // take that has to wait for the daemon.
    ASSERT_TRUE(client->NextBatch(drain)) << daemon.Describe();
    const auto before = std::chrono::steady_clock::now();
    auto id = client->Next();
    const auto after = std::chrono::steady_clock::now();
    ASSERT_TRUE(id) << id.error().message;
    latencies_us.push_back(std::chrono::duration<double, std::micro>(after - before).count());
    std::this_thread::sleep_for(200us);  // let the daemon go back to its idle wait
  }

  std::sort(latencies_us.begin(), latencies_us.end());
  const double p50 = latencies_us[latencies_us.size() / 2];
  const double p99 = latencies_us[latencies_us.size() * 99 / 100];
  const double max = latencies_us.back();
  std::cout << "take from an empty ring (" << kSamples << " samples, " << kBuild << "): p50 " << p50
            << " us, p99 " << p99 << " us, max " << max << " us\n";
  ::testing::Test::RecordProperty("refill_p50_us", std::to_string(p50));
  ::testing::Test::RecordProperty("refill_p99_us", std::to_string(p99));
}

}  // namespace
}  // namespace snowflake
