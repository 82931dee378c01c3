// A consumer process for the multi-process ring stress test (ring_process_test.cc).
//
//   ring_stress_consumer RUNTIME_DIR CONTROL_FILE RECORD_FILE SEED single|batch
//
// Takes IDs through the client library's path (TryTakeFresh/TryTakeBatchFresh) until the
// driver sets stop (exit 0) or its record file is full (exit 10), recording each as
// {id, baton read before the take} and committing it before raising the baton. A stale
// front is answered as Client::Next does: ask for a drain and wait. It may be SIGKILLed at
// any instruction: at worst its last take is a gap.

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <thread>

#include "snowflake/ring_consumer.h"
#include "stress_files.h"

namespace {

using snowflake::shm::RingConsumer;
using snowflake::shm::SegmentError;
using snowflake::shm::TakeResult;
namespace st = snowflake::testing;

int Run(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s RUNTIME_DIR CONTROL RECORDS SEED single|batch\n", argv[0]);
    return st::kHelperSetupFailed;
  }
  const std::string runtime_dir = argv[1];
  const uint64_t seed = std::strtoull(argv[4], nullptr, 10);
  const bool batches = std::string(argv[5]) == "batch";
  auto recorder = st::StressRecorder::Open(argv[2], argv[3]);
  if (!recorder) {
    std::perror("ring_stress_consumer: map");
    return st::kHelperSetupFailed;
  }
  st::StressControl* control = &recorder->control();

  // No segment yet (the producer is starting), or one being replaced (a restarted
  // producer renames a fresh pair into place: between its two renames the files do not
  // pair up): retry, as libsnowflake does.
  auto ring = RingConsumer::Open(runtime_dir);
  while (!ring &&
         (ring.error().code == SegmentError::kNotFound ||
          ring.error().code == SegmentError::kUnpaired) &&
         control->stop.load(std::memory_order_relaxed) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ring = RingConsumer::Open(runtime_dir);
  }
  if (!ring) {
    if (control->stop.load() != 0) return st::kConsumerStopped;
    std::fprintf(stderr, "ring_stress_consumer: %s\n", ring.error().message.c_str());
    return st::kHelperSetupFailed;
  }

  std::mt19937_64 rng(seed);
  constexpr size_t kMaxBatch = 8;
  uint64_t taken[kMaxBatch];
  uint32_t empty_polls = 0;
  while (control->stop.load(std::memory_order_relaxed) == 0) {
    if (recorder->Full(kMaxBatch)) return st::kConsumerFileFull;
    const uint32_t seen = ring->wake_seq();
    const uint64_t before = control->baton.load(std::memory_order_seq_cst);
    TakeResult result = TakeResult::kEmpty;
    size_t n = 0;
    if (batches) {
      n = ring->TryTakeBatchFresh(taken, 1 + rng() % kMaxBatch, &result);
    } else {
      result = ring->TryTakeFresh(&taken[0]);
      n = result == TakeResult::kTaken ? 1 : 0;
    }
    if (result == TakeResult::kStale) {
      // Nothing was taken: the front aged while no producer ran. Ask for a drain.
      control->stale_fronts.fetch_add(1, std::memory_order_relaxed);
      ring->AwaitPublish(seen, std::chrono::milliseconds(1), /*front_stale=*/true);
      continue;
    }
    if (n == 0) {
      // Spin briefly (the producer is usually mid-refill), then sleep on the futex.
      if (++empty_polls < 16) {
        sched_yield();
      } else {
        ring->AwaitPublish(seen, std::chrono::milliseconds(1));
      }
      continue;
    }
    empty_polls = 0;
    recorder->Commit(std::span<const uint64_t>(taken, n), before);
  }
  return st::kConsumerStopped;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
