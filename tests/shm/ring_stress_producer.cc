// The producer process of the multi-process ring stress test (ring_process_test.cc).
//
//   ring_stress_producer RUNTIME_DIR CONTROL_FILE
//
// Creates or reopens the ring (capacity 8) and publishes a strictly increasing counter,
// continuing above last_published_id() when it reopens a segment a SIGKILLed predecessor
// left behind. Exits 0 when the driver sets stop. Prints "start N incarnation I" first.

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "snowflake/id_layout.h"
#include "snowflake/ring_producer.h"
#include "stress_files.h"

namespace {

using snowflake::shm::DaemonState;
using snowflake::shm::ProducerOptions;
using snowflake::shm::RingProducer;
namespace st = snowflake::testing;

constexpr uint64_t kCapacity = 8;

int Run(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RUNTIME_DIR CONTROL\n", argv[0]);
    return st::kHelperSetupFailed;
  }
  auto* control = static_cast<st::StressControl*>(
      st::MapSharedFile(argv[2], sizeof(st::StressControl), /*create=*/false));
  if (control == nullptr) {
    std::perror("ring_stress_producer: map control");
    return st::kHelperSetupFailed;
  }
  ProducerOptions options;
  options.runtime_dir = argv[1];
  options.capacity = kCapacity;
  options.epoch_unix_ms = snowflake::kDefaultEpochUnixMs;
  options.machine = 1;
  auto ring = RingProducer::CreateOrOpen(options);
  if (!ring) {
    std::fprintf(stderr, "ring_stress_producer: %s\n", ring.error().message.c_str());
    return st::kHelperSetupFailed;
  }
  uint64_t next = ring->last_published_id() + 1;
  std::printf("start %llu incarnation %llu\n", static_cast<unsigned long long>(next),
              static_cast<unsigned long long>(ring->incarnation()));
  std::fflush(stdout);
  ring->SetState(DaemonState::kServing);

  std::vector<uint64_t> chunk(kCapacity);
  uint32_t idle = 0;
  while (control->stop.load(std::memory_order_relaxed) == 0) {
    const uint32_t refill_seen = ring->refill_request();
    for (uint64_t i = 0; i < kCapacity; ++i) chunk[i] = next + i;
    auto published = ring->Publish(chunk);
    if (!published) {
      std::fprintf(stderr, "ring_stress_producer: %s\n", published.error().message.c_str());
      return st::kHelperSetupFailed;
    }
    next += *published;
    if (*published > 0) {
      idle = 0;
      continue;
    }
    ring->Heartbeat();
    // Full: consumers are behind. Yield, and after a while sleep until one asks.
    if (++idle < 64) {
      sched_yield();
    } else {
      ring->WaitForRefillRequest(refill_seen, std::chrono::milliseconds(1));
    }
  }
  ring->SetState(DaemonState::kStopped, snowflake::shm::StateReason::kShutdown);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
