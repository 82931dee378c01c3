// A stand-in for the daemon's fill loop, for client tests that need states or segments
// the real daemon cannot easily be put in: it keeps a RingProducer filled with strictly
// increasing IDs, heartbeats about every millisecond and answers refill requests.
//
// Not thread-safe: like the daemon's fill loop, one thread runs it.

#ifndef SNOWFLAKE_TESTS_CLIENT_SERVE_LOOP_H_
#define SNOWFLAKE_TESTS_CLIENT_SERVE_LOOP_H_

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "snowflake/id_layout.h"
#include "snowflake/ring_producer.h"

namespace snowflake::testing {

// Strictly increasing IDs for the current millisecond (waits for the next one when a
// millisecond's 4,096 sequences are used, like the real generator).
class TestIdSource {
 public:
  TestIdSource(IdLayout layout, uint32_t machine, uint64_t last_id)
      : layout_(layout), machine_(machine), last_(last_id) {}

  uint64_t Next() {
    for (;;) {
      timespec now{};
      clock_gettime(CLOCK_REALTIME, &now);
      const int64_t unix_ms = int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1'000'000;
      const int64_t offset = unix_ms - layout_.epoch_unix_ms();
      const uint64_t fresh = IdLayout().EncodeUnchecked(offset, machine_, 0);
      const uint64_t candidate = std::max(fresh, last_ + 1);
      // last_ + 1 carried out of the sequence into the machine bits: this millisecond is
      // used up, wait for the next one.
      if (candidate != fresh && (candidate & IdLayout().max_sequence()) == 0) continue;
      last_ = candidate;
      return candidate;
    }
  }

 private:
  IdLayout layout_;
  uint32_t machine_;
  uint64_t last_;
};

// Fills `producer` until `stop` is set: tops the ring up, beats, and sleeps on the refill
// word for at most a millisecond.
inline void ServeUntil(shm::RingProducer& producer, const std::atomic<bool>& stop,
                       size_t batch = 256) {
  const auto layout =
      IdLayout::Create(static_cast<int64_t>(producer.header().epoch_unix_ms.load()));
  TestIdSource source(layout ? *layout : IdLayout(), producer.header().machine.load(),
                      producer.last_published_id());
  std::vector<uint64_t> ids;
  producer.SetState(shm::DaemonState::kServing);
  while (!stop.load(std::memory_order_relaxed)) {
    const uint32_t seen = producer.refill_request();
    const size_t room = static_cast<size_t>(std::min<uint64_t>(producer.free_slots(), batch));
    if (room > 0) {
      ids.resize(room);
      for (auto& id : ids) id = source.Next();
      (void)producer.Publish(ids);
    }
    producer.Heartbeat();
    if (producer.free_slots() == 0) {
      producer.WaitForRefillRequest(seen, std::chrono::milliseconds(1));
    }
  }
}

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_CLIENT_SERVE_LOOP_H_
