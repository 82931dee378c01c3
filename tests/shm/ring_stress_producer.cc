// The producer process of the multi-process ring stress test (ring_process_test.cc).
//
//   ring_stress_producer RUNTIME_DIR CONTROL_FILE
//
// Creates the ring (capacity 8) under a freshness bound, hands out its consumer region on
// RUNTIME_DIR/control.sock as snowflaked does (the daemon's ControlServer,
// tests/support/attach_service.h), and publishes strictly increasing IDs of the current
// millisecond, continuing above last_published_id() of the segment a SIGKILLed
// predecessor left behind (a fresh segment: the predecessor's region died with it, and
// what was left in its ring is a gap). Like the daemon's fill loop it
// drains IDs older than max_age, so clients taking through the Fresh path find the ring
// usable; it adds what it publishes to the control file's `published` and what it drains
// to its `drained`. When the driver sets
// stop it drains the rest and exits 0. Prints "start N incarnation I" first.

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "attach_service.h"
#include "snowflake/id_layout.h"
#include "snowflake/ring_producer.h"
#include "stress_files.h"

namespace {

using snowflake::shm::DaemonState;
using snowflake::shm::ProducerOptions;
using snowflake::shm::RingProducer;
namespace st = snowflake::testing;

constexpr uint64_t kCapacity = 8;
// Clients refuse IDs more than kMaxAgeMs + kLivenessMs old; this producer drains them
// at kMaxAgeMs, so a client finds a stale front only when no producer keeps up (across a
// restart, or on a loaded host).
constexpr uint32_t kMaxAgeMs = 200;
constexpr uint32_t kLivenessMs = 50;
constexpr uint32_t kMachine = 1;

int64_t NowOffsetMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() -
         snowflake::kDefaultEpochUnixMs;
}

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
  options.machine = kMachine;
  options.max_age_ms = kMaxAgeMs;
  options.liveness_ms = kLivenessMs;
  auto ring = RingProducer::CreateOrOpen(options);
  if (!ring) {
    std::fprintf(stderr, "ring_stress_producer: %s\n", ring.error().message.c_str());
    return st::kHelperSetupFailed;
  }
  // Consumers attach over the socket; a restarted producer serves it anew (a SIGKILLed
  // one left its socket file behind: the server replaces it).
  std::optional<st::AttachService> attach;
  try {
    attach.emplace(options.runtime_dir, *ring);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_stress_producer: %s\n", e.what());
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
    const int64_t now_ms = NowOffsetMs();
    control->drained.fetch_add(ring->DrainOlderThan(now_ms - kMaxAgeMs));
    // IDs of this millisecond (sequence numbers run on into the machine bits: 4M IDs
    // before the time part moves a millisecond ahead), above every earlier one.
    next = std::max(next, snowflake::IdLayout().EncodeUnchecked(now_ms, kMachine, 0));
    for (uint64_t i = 0; i < kCapacity; ++i) chunk[i] = next + i;
    auto published = ring->Publish(chunk);
    if (!published) {
      std::fprintf(stderr, "ring_stress_producer: %s\n", published.error().message.c_str());
      return st::kHelperSetupFailed;
    }
    next += *published;
    control->published.fetch_add(*published);
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
  // Consumers stop too: what they left is drained, so every published ID is accounted for.
  control->drained.fetch_add(ring->DrainAll());
  ring->SetState(DaemonState::kStopped, snowflake::shm::StateReason::kShutdown);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
