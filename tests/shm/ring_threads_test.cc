// Many threads on one ring: one producer thread (publishing, and now and then draining
// like the daemon does) and four consumer threads (two taking single IDs, two taking
// batches), at capacities 1, 2, 64 and 65536. Consumers take through the path the client
// library ships (TryTakeFresh/TryTakeBatchFresh): the producer publishes IDs of the
// current millisecond under a real freshness bound, drains those that age past max_age
// as the daemon's fill loop does, and a consumer that finds a stale front asks for a
// drain as Client::Next does.
//
// Property: every ID is taken at most once; each thread's IDs strictly increase; a take
// that began after another completed gets the larger ID (the baton, see id_checker.h).
// Size: the run aims at kTargetIds published IDs and ends there or at kTimeLimit. Each
// published ID is taken or drained, counting those the end of the run left in the ring.
// Two cores shared with other tests publish ~1.5 M IDs a minute through a ring of two, so the
// target is an aim; kMinIds is the size the run must reach, and one that ends below it
// fails, naming the shortfall, instead of passing small.
// Runs under ThreadSanitizer too.

#include <gtest/gtest.h>

#include <algorithm>
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
constexpr uint64_t kMinIds = 30'000;
#else
constexpr uint64_t kTargetIds = 2'000'000;
constexpr uint64_t kMinIds = 200'000;
#endif
constexpr auto kTimeLimit = 30s;
constexpr int kConsumers = 4;
// The freshness contract of the header: consumers refuse IDs more than
// kMaxAgeMs + kLivenessMs old. The producer drains IDs older than kMaxAgeMs, as the
// daemon does, so a consumer finds a stale front only when the producer lags.
constexpr uint32_t kMaxAgeMs = 200;
constexpr uint32_t kLivenessMs = 50;

int64_t NowOffsetMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() -
         kDefaultEpochUnixMs;
}

class RingThreads : public ::testing::TestWithParam<uint64_t> {};

INSTANTIATE_TEST_SUITE_P(Capacities, RingThreads, ::testing::Values(1, 2, 64, 65536));

TEST_P(RingThreads, EveryIdOnceInIncreasingAndRealTimeOrder) {
  const uint64_t capacity = GetParam();
  const uint64_t seed = snowflake::testing::StressSeedFromEnv();
  std::printf("capacity %llu seed %llu (replay with SNOWFLAKE_STRESS_SEED=%llu)\n",
              static_cast<unsigned long long>(capacity), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  TempDir dir;
  ProducerOptions options = testing::OptionsFor(dir.path(), capacity);
  options.max_age_ms = kMaxAgeMs;
  options.liveness_ms = kLivenessMs;
  RingProducer producer = MakeProducer(options);
  ASSERT_EQ(producer.header().freshness_bound_ms.load(), int64_t{kMaxAgeMs + kLivenessMs});
  producer.SetState(DaemonState::kServing);
  std::vector<RingConsumer> consumers;
  for (int i = 0; i < kConsumers; ++i) consumers.push_back(MakeConsumer(dir.path(), producer));
  const auto deadline = std::chrono::steady_clock::now() + kTimeLimit;
  std::atomic<uint64_t> baton{0};
  std::atomic<uint64_t> taken_total{0};
  std::atomic<bool> stop{false};
  std::vector<std::vector<TakeRecord>> records(kConsumers);
  std::atomic<uint64_t> drained{0};
  std::atomic<uint64_t> stale_takes{0};
  uint64_t published = 0;

  std::thread producer_thread([&] {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> chunk;
    uint64_t next_id = 1;
    // Runs until the consumers are done, not until the target is published: the IDs left
    // in the ring may still age past max_age and need draining.
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t now_ms = NowOffsetMs();
      // IDs of this millisecond (sequence numbers run on into the machine bits: 4M IDs
      // before the time part moves a millisecond ahead), above every earlier one.
      next_id = std::max(next_id, IdLayout().EncodeUnchecked(now_ms, testing::kTestMachine, 0));
      size_t n = 0;
      if (published < kTargetIds) {
        const uint64_t want = std::min<uint64_t>(1 + rng() % capacity, kTargetIds - published);
        chunk.clear();
        for (uint64_t i = 0; i < want; ++i) chunk.push_back(next_id + i);
        n = producer.Publish(chunk).value();
        next_id += n;
        published += n;
      }
      // The daemon's drains compete with consumers for head, exactly like a take.
      drained.fetch_add(producer.DrainOlderThan(now_ms - kMaxAgeMs));
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
      // Done when every published ID of the target is accounted for. A drain advances head
      // before it is added to `drained`, so this never ends early.
      while (taken_total.load(std::memory_order_relaxed) + drained.load() < kTargetIds &&
             std::chrono::steady_clock::now() < deadline) {
        const uint32_t seen = sut.wake_seq();
        const uint64_t before = baton.load(std::memory_order_seq_cst);
        size_t n = 0;
        TakeResult taken = TakeResult::kEmpty;
        if (batches) {
          n = sut.TryTakeBatchFresh(batch, 1 + rng() % 16, &taken);
        } else {
          taken = sut.TryTakeFresh(&batch[0]);
          n = taken == TakeResult::kTaken ? 1 : 0;
        }
        if (taken == TakeResult::kStale) {
          // As Client::Next: nothing was taken; ask the producer to drain, and wait.
          stale_takes.fetch_add(1, std::memory_order_relaxed);
          sut.AwaitPublish(seen, 1ms, /*front_stale=*/true);
          continue;
        }
        if (n == 0) {
          if (rng() % 64 == 0) {
            sut.AwaitPublish(seen, 1ms);  // exercise the slow path too
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
  // A run the time limit ended leaves up to `capacity` IDs in the ring; they count as drained.
  const uint64_t left_in_ring = producer.DrainAll();
  drained.fetch_add(left_in_ring);

  IdChecker checker;
  for (int c = 0; c < kConsumers; ++c) {
    checker.AddRecorder("thread " + std::to_string(c), records[static_cast<size_t>(c)]);
  }
  const IdCheckResult result = checker.Check();
  std::printf(
      "capacity %llu: published %llu (target %llu, at least %llu), drained %llu (%llu left in "
      "the ring at the end), stale fronts %llu, %s\n",
      static_cast<unsigned long long>(capacity), static_cast<unsigned long long>(published),
      static_cast<unsigned long long>(kTargetIds), static_cast<unsigned long long>(kMinIds),
      static_cast<unsigned long long>(drained.load()),
      static_cast<unsigned long long>(left_in_ring),
      static_cast<unsigned long long>(stale_takes.load()), result.Summary().c_str());
  EXPECT_TRUE(result.ok()) << result.Summary() << "\nseed " << seed;
  EXPECT_GE(published, kMinIds)
      << "the " << std::chrono::duration<double>(kTimeLimit).count()
      << " s limit came first: published " << published << ", short of the least size by "
      << kMinIds - std::min(published, kMinIds) << "\nseed " << seed;
  EXPECT_EQ(result.ids + drained.load(), published)
      << "taken " << result.ids << " + drained " << drained.load() << " of " << published
      << " published: every published ID must be taken or drained\nseed " << seed;
  for (int c = 0; c < kConsumers; ++c) {
    EXPECT_FALSE(records[static_cast<size_t>(c)].empty()) << "thread " << c << " took nothing";
  }
}

}  // namespace
}  // namespace snowflake::shm
