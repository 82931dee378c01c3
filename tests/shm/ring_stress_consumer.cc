// A consumer process for the multi-process ring stress test (ring_process_test.cc).
//
//   ring_stress_consumer RUNTIME_DIR CONTROL_FILE RECORD_FILE SEED single|batch
//
// Attaches as a client does (protocol::AttachConsumer: the ring file, then the consumer
// region from the producer's control socket) and takes IDs through the client library's
// path (TryTakeFresh/TryTakeBatchFresh) until the driver sets stop (exit 0) or its record
// file is full (exit 10), recording each as {id, baton read before the take} and
// committing it before raising the baton. A stale front is answered as Client::Next does:
// ask for a drain and wait. A segment found stopped (its producer was restarted: the new
// one stopped it) is left for the one at the path now, as libsnowflake does. It may be
// SIGKILLed at any instruction: at worst its last take is a gap.

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>

#include "protocol/control_client.h"
#include "snowflake/ring_consumer.h"
#include "stress_files.h"

namespace {

using snowflake::shm::ProducerHealth;
using snowflake::shm::RingConsumer;
using snowflake::shm::TakeResult;
namespace st = snowflake::testing;

// How long a (re)attach may keep failing: the producer is restarted within milliseconds
// of a kill, so only a broken one takes this long.
constexpr auto kAttachBudget = std::chrono::seconds(60);

// Attaches to the segment at runtime_dir. Until a producer serves one (it is starting, or
// it was killed and is being restarted: no ring file yet, or nothing answering on its
// socket) every attempt fails: retry, as libsnowflake does, until the driver says stop
// (nullopt, *error empty) or the budget is spent (nullopt, *error the last failure).
std::optional<RingConsumer> Attach(const std::string& runtime_dir, const st::StressControl& control,
                                   std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + kAttachBudget;
  for (;;) {
    auto ring = snowflake::protocol::AttachConsumer(runtime_dir, std::chrono::seconds(5));
    if (ring) return std::move(*ring);
    if (control.stop.load(std::memory_order_relaxed) != 0) {
      error->clear();
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      *error = ring.error();
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a backoff, not an order
  }
}

// True when the producer of `ring` stopped it: a restarted producer stops the segment it
// replaced once the new one is at the path.
bool Replaced(const RingConsumer& ring) {
  return ring.CheckProducer(std::chrono::hours(1), snowflake::Clock::Real()).health ==
         ProducerHealth::kStopped;
}

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

  std::string error;
  std::optional<RingConsumer> ring = Attach(runtime_dir, *control, &error);
  std::mt19937_64 rng(seed);
  constexpr size_t kMaxBatch = 8;
  uint64_t taken[kMaxBatch];
  uint32_t empty_polls = 0;
  while (ring && control->stop.load(std::memory_order_relaxed) == 0) {
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
    if (n > 0) {
      empty_polls = 0;
      recorder->Commit(std::span<const uint64_t>(taken, n), before);
      continue;
    }
    // Nothing taken. The slow path first asks whether the segment was replaced.
    const bool stale = result == TakeResult::kStale;
    if (stale) control->stale_fronts.fetch_add(1, std::memory_order_relaxed);
    // Spin briefly on an empty ring (the producer is usually mid-refill).
    if (!stale && ++empty_polls < 16) {
      sched_yield();
      continue;
    }
    if (Replaced(*ring)) {
      ring = Attach(runtime_dir, *control, &error);
      empty_polls = 0;
      continue;
    }
    // Sleep on the futex; a stale front (it aged while no producer ran) asks for a drain.
    ring->AwaitPublish(seen, std::chrono::milliseconds(1), /*front_stale=*/stale);
  }
  if (!ring && !error.empty()) {
    std::fprintf(stderr, "ring_stress_consumer: %s\n", error.c_str());
    return st::kHelperSetupFailed;
  }
  return st::kConsumerStopped;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
