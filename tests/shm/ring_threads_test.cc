// Many threads on one ring: one producer thread (publishing, and now and then draining
// like the daemon does) and four consumer threads (two taking single IDs, two taking
// batches), at capacities 1, 2, 64 and 65536. Bounded by a count and a wall-time limit.
//
// Property: every ID is taken at most once; each thread's IDs strictly increase; a take
// that began after another completed gets the larger ID (the baton, see id_checker.h).
// Runs under ThreadSanitizer too.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "id_checker.h"
#include "ring_test_util.h"
#include "stress_seed.h"
#include "temp_dir.h"

namespace snowflake::shm {
namespace {

using namespace std::chrono_literals;
using snowflake::testing::IdChecker;
using snowflake::testing::IdCheckResult;
using snowflake::testing::RaiseBaton;
using snowflake::testing::TakeRecord;
using snowflake::testing::TempDir;
using testing::MakeConsumer;
using testing::MakeProducer;
using testing::Unwrap;

#ifdef SNOWFLAKE_SANITIZED
constexpr uint64_t kTargetIds = 300'000;
#else
constexpr uint64_t kTargetIds = 2'000'000;
#endif
constexpr auto kTimeLimit = 30s;
constexpr int kConsumers = 4;

class RingThreads : public ::testing::TestWithParam<uint64_t> {};

INSTANTIATE_TEST_SUITE_P(Capacities, RingThreads, ::testing::Values(1, 2, 64, 65536));

TEST_P(RingThreads, EveryIdOnceInIncreasingAndRealTimeOrder) {
  const uint64_t capacity = GetParam();
  const uint64_t seed = snowflake::testing::StressSeedFromEnv();
  std::printf("capacity %llu seed %llu (replay with SNOWFLAKE_STRESS_SEED=%llu)\n",
              static_cast<unsigned long long>(capacity), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), capacity);
  producer.SetState(DaemonState::kServing);
  std::vector<RingConsumer> consumers;
  for (int i = 0; i < kConsumers; ++i) consumers.push_back(MakeConsumer(dir.path()));
  const auto deadline = std::chrono::steady_clock::now() + kTimeLimit;
  std::atomic<uint64_t> baton{0};
  std::atomic<uint64_t> taken_total{0};
  std::atomic<bool> stop{false};
  std::vector<std::vector<TakeRecord>> records(kConsumers);
  std::atomic<uint64_t> drained{0};
  uint64_t published = 0;

  std::thread producer_thread([&] {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> chunk;
    uint64_t next_id = 1;
    while (!stop.load(std::memory_order_relaxed) && published < kTargetIds) {
      const uint64_t want = std::min<uint64_t>(1 + rng() % capacity, kTargetIds - published);
      chunk.clear();
      for (uint64_t i = 0; i < want; ++i) chunk.push_back(next_id + i);
      const size_t n = producer.Publish(chunk).value();
      next_id += n;
      published += n;
      // The daemon's drain competes with consumers for head, exactly like a take.
      if (rng() % 4096 == 0) drained.fetch_add(producer.DrainAll());
      if (n == 0) std::this_thread::yield();
    }
  });
  std::vector<std::thread> consumer_threads;
  for (int c = 0; c < kConsumers; ++c) {
    consumer_threads.emplace_back([&, c] {
      std::mt19937_64 rng(seed + 1 + static_cast<uint64_t>(c));
      RingConsumer& sut = consumers[static_cast<size_t>(c)];
      std::vector<TakeRecord>& mine = records[static_cast<size_t>(c)];
      const bool batches = c % 2 == 1;
      uint64_t batch[16];
      while (taken_total.load(std::memory_order_relaxed) < kTargetIds - drained.load() &&
             std::chrono::steady_clock::now() < deadline) {
        const uint64_t before = baton.load(std::memory_order_seq_cst);
        size_t n = 0;
        if (batches) {
          n = sut.TryTakeBatch(batch, 1 + rng() % 16);
        } else {
          n = sut.TryTake(&batch[0]) ? 1 : 0;
        }
        if (n == 0) {
          if (rng() % 64 == 0) {
            sut.AwaitPublish(sut.wake_seq(), 1ms);  // exercise the slow path too
          } else {
            std::this_thread::yield();
          }
          continue;
        }
        for (size_t i = 0; i < n; ++i) mine.push_back({batch[i], before});
        RaiseBaton(baton, batch[n - 1]);
        taken_total.fetch_add(n, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& t : consumer_threads) t.join();
  stop.store(true);
  producer_thread.join();

  IdChecker checker;
  for (int c = 0; c < kConsumers; ++c) {
    checker.AddRecorder("thread " + std::to_string(c), records[static_cast<size_t>(c)]);
  }
  const IdCheckResult result = checker.Check();
  std::printf("capacity %llu: published %llu, drained %llu, %s\n",
              static_cast<unsigned long long>(capacity), static_cast<unsigned long long>(published),
              static_cast<unsigned long long>(drained.load()), result.Summary().c_str());
  EXPECT_TRUE(result.ok()) << result.Summary() << "\nseed " << seed;
  EXPECT_GT(result.ids, 0u);
  EXPECT_LE(result.ids + drained.load(), published);
  for (int c = 0; c < kConsumers; ++c) {
    EXPECT_FALSE(records[static_cast<size_t>(c)].empty()) << "thread " << c << " took nothing";
  }
}

}  // namespace
}  // namespace snowflake::shm
