// A storm of attaches on the real snowflaked's control socket: the processes of a host
// starting at once (a service restarted with its workers, a node rebooting) each ask for
// the consumer region before their first take. The control server's own tests
// (control_server_test.cc) cover one attach at a time, in-process.
//
// Property: every one of 300 attaches started together (protocol::AttachConsumer: observe
// the ring file, attach, map) succeeds, each with the region of the segment served. How
// long the slowest waited is printed, not asserted: it depends on the host's load.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "protocol/control_client.h"
#include "snowflake/ring_consumer.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;

TEST(ControlAttachStorm, ThreeHundredThreadsAttachingAtOnceToARealDaemonAllSucceed) {
  // Arrange
  DaemonHarness harness("attach-storm");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  const std::filesystem::path runtime_dir = harness.runtime_dir();
  auto observed = shm::RingConsumer::Observe(runtime_dir);
  ASSERT_TRUE(observed) << observed.error().message;
  const uint64_t served = observed->segment_id();
  constexpr int kThreads = 300;
  std::vector<std::string> errors(kThreads);
  std::vector<uint64_t> segment_ids(kThreads, 0);
  // char, not bool: std::vector<bool> packs bits, and each thread writes its own element.
  std::vector<char> has_region(kThreads, false);
  std::vector<std::chrono::steady_clock::duration> took(kThreads);
  // Every thread is started before any attaches: they leave the latch together.
  std::latch start(kThreads);

  // Act
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      const auto began = std::chrono::steady_clock::now();
      auto ring = protocol::AttachConsumer(runtime_dir, 60s);
      took[i] = std::chrono::steady_clock::now() - began;
      if (!ring) {
        errors[i] = ring.error();
        return;
      }
      segment_ids[i] = ring->segment_id();
      has_region[i] = ring->has_region();
    });
  }
  for (std::thread& thread : threads) thread.join();
  const auto slowest = *std::max_element(took.begin(), took.end());
  std::vector<std::chrono::steady_clock::duration> sorted(took);
  std::sort(sorted.begin(), sorted.end());
  std::printf("%d attaches at once: median %.1f ms, slowest %.1f ms\n", kThreads,
              std::chrono::duration<double, std::milli>(sorted[kThreads / 2]).count(),
              std::chrono::duration<double, std::milli>(slowest).count());

  // Assert
  const auto failed = std::count_if(errors.begin(), errors.end(),
                                    [](const std::string& error) { return !error.empty(); });
  const auto first_error = std::find_if(errors.begin(), errors.end(),
                                        [](const std::string& error) { return !error.empty(); });
  EXPECT_EQ(failed, 0) << "of " << kThreads << " attaches; the first: "
                       << (first_error != errors.end() ? *first_error : "");
  for (int i = 0; i < kThreads; ++i) {
    if (!errors[i].empty()) continue;
    EXPECT_TRUE(has_region[i]) << "attach " << i;
    EXPECT_EQ(segment_ids[i], served) << "attach " << i;
  }
  EXPECT_TRUE(daemon.Running()) << daemon.Describe();
}

}  // namespace
}  // namespace snowflake
