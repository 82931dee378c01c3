// Finding 8: the heartbeat under CPU contention. The real snowflaked beats from its own
// thread every daemon.liveness_ms / 10; busy-loop processes (more than there are cores)
// compete for the CPUs while the test samples the segment's heartbeat.
//
// The hog runs at nice 10, the daemon at 0: the unit's scheduling settings (Nice=-10,
// CPUWeight=1000) give the daemon that edge over ordinary work on a real host.
//
// Property: the heartbeat's age, read from the segment at any instant, stays below
// daemon.liveness_ms, the bound clients judge it by. Bounded: 3 s of hog.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/ring_consumer.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::DaemonHarness;
using testing::DaemonOptions;

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Busy-loop children, SIGKILLed and reaped on destruction.
class CpuHog {
 public:
  explicit CpuHog(unsigned processes) {
    for (unsigned i = 0; i < processes; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        // Nice 10 against the daemon's 0 is the weight ratio (about 9:1) that the unit's
        // Nice=-10 gives snowflaked over ordinary services at nice 0; an unprivileged test
        // cannot lower the daemon's niceness, so it raises the hog's.
        [[maybe_unused]] const int niced = nice(10);
        std::atomic<uint64_t> spin{0};
        for (;;) spin.fetch_add(1, std::memory_order_relaxed);
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~CpuHog() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  size_t size() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

TEST(DaemonLiveness, HeartbeatStaysYoungerThanLivenessMsUnderACpuHog) {
  // Not the default 50: the test host is shared (CI's two cores, other builds at nice 0
  // beside the hog), and what is tested is that the beat keeps to the setting it derives
  // from, whatever the fill loop does. The default's margin on a real host comes from the
  // unit's Nice=-10/CPUWeight=, which an unprivileged test cannot apply.
  constexpr int64_t kLivenessMs = 200;
  DaemonHarness harness("liveness");
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile(
      "liveness.toml", "[daemon]\nliveness_ms = " + std::to_string(kLivenessMs) + "\n");
  testing::Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  // The ring file alone: the heartbeat is in its header.
  auto ring = shm::RingConsumer::Observe(harness.runtime_dir());
  ASSERT_TRUE(ring) << ring.error().message;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());

  uint64_t oldest_ns = 0;
  uint64_t samples = 0;
  {
    CpuHog hog(2 * cores + 2);
    ASSERT_EQ(hog.size(), 2 * cores + 2);
    const auto end = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < end) {
      // Both readings at one instant: a late sampler does not age the heartbeat.
      const uint64_t beat = ring->header().heartbeat_mono_ns.load(std::memory_order_relaxed);
      const uint64_t now = MonotonicNs();
      if (now > beat) oldest_ns = std::max(oldest_ns, now - beat);
      ++samples;
      std::this_thread::sleep_for(200us);
    }
  }
  std::cout << samples << " samples under " << 2 * cores + 2 << " busy processes on " << cores
            << " cores: oldest heartbeat " << oldest_ns / 1000 << " us (liveness_ms "
            << kLivenessMs << ")\n";

  EXPECT_GT(samples, 100u);
  EXPECT_LT(oldest_ns, static_cast<uint64_t>(kLivenessMs) * 1'000'000u)
      << "clients would have been told \"not heartbeating\"";
  EXPECT_TRUE(daemon.Running());
}

}  // namespace
}  // namespace snowflake
