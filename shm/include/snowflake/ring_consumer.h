// A client's side of the shared-memory ring (docs/design.md §4, shm/LAYOUT.md).
//
// A RingConsumer is safe for concurrent use by multiple threads without external
// synchronization, and any number of processes may consume from one segment at once.
// TryTake() and TryTakeBatch() are lock-free: a few loads and one compare-and-swap, no
// system call, no lock, no allocation. A consumer holds nothing after a take: killed at
// any instruction, it can neither stall the ring nor cause a duplicate.

#ifndef SNOWFLAKE_RING_CONSUMER_H_
#define SNOWFLAKE_RING_CONSUMER_H_

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "snowflake/boot_id.h"
#include "snowflake/clock.h"
#include "snowflake/id_layout.h"
#include "snowflake/segment_error.h"
#include "snowflake/segment_layout.h"
#include "snowflake/unique_fd.h"

namespace snowflake::shm {

class MappedSegment;

struct ConsumerOptions {
  // The user that must own the segment. nullopt: the owner of the runtime directory.
  std::optional<uid_t> expected_owner;
  // This boot's id, to refuse a segment left by another boot (kEarlierBoot). nullopt:
  // CurrentBootId() (snowflake/boot_id.h); tests name another boot here.
  std::optional<BootId> boot_id = std::nullopt;
  // The clock a fresh take reads (not owned; it must outlive the consumer). The real one
  // (the default, or null) is read inline on the take path; any other through the Clock
  // interface (tests move one by hand).
  Clock* clock = &Clock::Real();
};

// What the slow path learns about the daemon.
enum class ProducerHealth {
  kServing,          // serving and heartbeating: an empty ring will be refilled
  kStarting,         // not serving yet
  kPaused,           // paused (clock); reason() says why
  kOutOfService,     // needs an operator
  kStopped,          // shut down cleanly
  kNotHeartbeating,  // serving, but the heartbeat is older than the allowed age, or in the
                     // future of this host's CLOCK_MONOTONIC (heartbeat_in_future)
  kDead,             // its pid no longer exists and its heartbeat is over 10 ms old
};

// What one take found.
enum class TakeResult {
  kTaken,  // *id holds an ID this caller won by CAS
  kEmpty,  // nothing published and not taken
  kStale,  // the oldest ID is outside the header's freshness bound: nothing was taken
};

struct ProducerStatus {
  ProducerHealth health;
  StateReason reason;
  int64_t reason_detail;
  uint64_t heartbeat_age_ns;  // 0 when the heartbeat is in the future
  uint64_t pid;
  // The heartbeat is ahead of this host's CLOCK_MONOTONIC (a reading of another boot):
  // never fresh, reported as kNotHeartbeating.
  bool heartbeat_in_future = false;
};

class RingConsumer {
 public:
  ~RingConsumer();
  RingConsumer(RingConsumer&&) noexcept;
  RingConsumer& operator=(RingConsumer&&) noexcept;

  // Opens the ring file runtime_dir/kSegmentFileName (read-only) and maps the consumer
  // region `region`, a descriptor the daemon handed out for it (protocol::Attach): checks
  // the ring file is a regular file owned by the expected user with no access for others
  // and no write for its group, and the region is a memory file of that user sealed with
  // exactly kConsumerRegionSeals at kConsumerRegionSize (snowflake/consumer_region.h);
  // maps the header and slots read-only and the region read-write, and validates magic,
  // version, sizes, capacity, the boot id (when the header records one: it must be this
  // boot's), the pair's segment id and the counters. The descriptor is closed.
  // Errors (each with a message naming the path and what to do): kNotFound (no daemon),
  // kEarlierBoot (a segment left by an earlier boot: no daemon),
  // kUnpaired (the daemon replaced the segment since it sent the region: retry),
  // kPermissionDenied (names the group to join), kNotRegularFile, kWrongOwner,
  // kModeTooOpen, kUnsealed, kTruncated, kBadMagic, kIncompatibleVersion, kSizeMismatch,
  // kBadCapacity, kCorruptCounters, kSystemError.
  static tl::expected<RingConsumer, SegmentFailure> Open(
      const std::filesystem::path& runtime_dir, UniqueFd region,
      const ConsumerOptions& options = {}) noexcept;

  // Opens the ring file alone, with Open()'s checks, to read the daemon's state and status
  // without its consumer region (it is down, or not answering): has_region() is false, and
  // every take finds the ring empty. Reading head, uncounted or the service slots gives
  // nothing meaningful.
  static tl::expected<RingConsumer, SegmentFailure> Observe(
      const std::filesystem::path& runtime_dir, const ConsumerOptions& options = {}) noexcept;

  // False for a consumer made by Observe(): it holds no region and can take nothing.
  bool has_region() const noexcept;
  // The segment id of the ring file (and of its region).
  uint64_t segment_id() const noexcept;
  // The ring file's owner: the daemon's user, the only one whose socket may hand over the
  // region.
  uid_t owner() const noexcept;

  // Takes the oldest published ID into *id. Returns false if the ring was empty at some
  // point during the call (it may be non-empty by the time the caller looks again).
  bool TryTake(uint64_t* id) noexcept {
    // Case analysis of the CAS: (1) it wins: no one else claimed ticket h, so the
    // producer has not overwritten slot h (it waits for head > h) and `value` is ticket
    // h's ID: ours. (2) it loses: another consumer or the daemon's drain advanced head;
    // h now holds the new head and we retry (lock-free: some take succeeded).
    uint64_t h = consumer_->head.load(std::memory_order_relaxed);
    for (;;) {
      // Acquire pairs with the producer's release store of tail: slot h is written.
      const uint64_t t = header_->tail.load(std::memory_order_acquire);
      if (h >= t) return false;
      const uint64_t value = slots_[h & mask_].load(std::memory_order_relaxed);
      // acq_rel on success: the slot read above is released to the producer's acquire
      // load of head before it may overwrite the slot.
      if (consumer_->head.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
        *id = value;
        return true;
      }
    }
  }

  // Takes up to `count` consecutive IDs (strictly increasing) with one CAS. Returns how
  // many were taken: 0 if the ring was empty, fewer than `count` if it held fewer.
  // REQUIRES: out has room for `count` IDs.
  size_t TryTakeBatch(uint64_t* out, size_t count) noexcept {
    if (count == 0) return 0;
    uint64_t h = consumer_->head.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t t = header_->tail.load(std::memory_order_acquire);
      if (h >= t) return 0;
      const uint64_t n = std::min<uint64_t>(t - h, count);
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = slots_[(h + i) & mask_].load(std::memory_order_relaxed);
      }
      // Same case analysis as TryTake(), for tickets h..h+n-1 at once.
      if (consumer_->head.compare_exchange_weak(h, h + n, std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
        return static_cast<size_t>(n);
      }
    }
  }

  // TryTake() with the freshness rule of the header (IsFresh in segment_layout.h): the
  // ID at the front is refused (kStale, nothing taken) when its millisecond is more than
  // freshness_bound_ms behind the consumer's coarse wall clock (the real one reads
  // CLOCK_REALTIME_COARSE through the vDSO, no system call; its lag is accounted for) or
  // that far ahead of it. So while the daemon is dead, hung or stopped, and its ring is not
  // drained, no take returns an ID older than the bound: the caller's slow path then finds
  // out why. The check happens on the value read for ticket h, a few instructions before
  // the CAS that claims it.
  TakeResult TryTakeFresh(uint64_t* id) const noexcept {
    const int64_t bound = header_->freshness_bound_ms.load(std::memory_order_relaxed);
    const int64_t now_ms = CoarseNowMs();
    uint64_t h = consumer_->head.load(std::memory_order_relaxed);
    for (;;) {
      // Acquire pairs with the producer's release store of tail: slot h is written.
      const uint64_t t = header_->tail.load(std::memory_order_acquire);
      if (h >= t) return TakeResult::kEmpty;
      const uint64_t value = slots_[h & mask_].load(std::memory_order_relaxed);
      if (!IsFresh(static_cast<int64_t>(value >> time_shift_), now_ms, bound, clock_lag_ms_))
          [[unlikely]] {
        return TakeResult::kStale;
      }
      // The CAS as in TryTake(): (1) wins: `value` (checked above) is ours; (2) loses: h is
      // the new head, re-check from the tail.
      if (consumer_->head.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
        *id = value;
        return TakeResult::kTaken;
      }
    }
  }

  // TryTakeBatch() with the freshness rule, applied to the oldest and the newest ID of the
  // batch (IDs increase with the ticket, so every ID between is within the bound too).
  // Returns how many were taken into out[]; *result says kTaken, kEmpty or kStale (then
  // nothing was taken). REQUIRES: out has room for `count` IDs; count > 0.
  size_t TryTakeBatchFresh(uint64_t* out, size_t count, TakeResult* result) const noexcept {
    const int64_t bound = header_->freshness_bound_ms.load(std::memory_order_relaxed);
    const int64_t now_ms = CoarseNowMs();
    uint64_t h = consumer_->head.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t t = header_->tail.load(std::memory_order_acquire);
      if (h >= t) {
        *result = TakeResult::kEmpty;
        return 0;
      }
      const uint64_t n = std::min<uint64_t>(t - h, count);
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = slots_[(h + i) & mask_].load(std::memory_order_relaxed);
      }
      if (!IsFresh(static_cast<int64_t>(out[0] >> time_shift_), now_ms, bound, clock_lag_ms_) ||
          !IsFresh(static_cast<int64_t>(out[n - 1] >> time_shift_), now_ms, bound, clock_lag_ms_)) {
        *result = TakeResult::kStale;
        return 0;
      }
      if (consumer_->head.compare_exchange_weak(h, h + n, std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
        *result = TakeResult::kTaken;
        return static_cast<size_t>(n);
      }
    }
  }

  // Milliseconds since the segment's epoch by the consumer's coarse wall clock. The real
  // clock's read stays inline: a take pays no call for the seam.
  int64_t CoarseNowMs() const noexcept {
    if (clock_ == nullptr) [[likely]] {
      return RealCoarseNowUnixMs() - epoch_ms_;
    }
    return clock_->CoarseNowUnixMs() - epoch_ms_;
  }

  // The daemon's liveness setting from the header (ms); 0 if the producer set none.
  uint32_t liveness_ms() const noexcept {
    return header_->liveness_ms.load(std::memory_order_relaxed);
  }

  // --- Slow path: every call below may make system calls.

  // Reads the daemon's state; for a serving daemon also judges its heartbeat at `now` (a
  // monotonic time, Clock::SteadyNow()): older than `max_heartbeat_age`, or more than 1 ms
  // in the future of `now`, is kNotHeartbeating. A judgement of the header and `now`
  // alone, but for one probe: when the client shares the daemon's pid namespace and the
  // beat is over 10 ms old, whether its pid exists (kDead if not).
  // `now` must not be older than the beat it judges: a live daemon may beat between a
  // caller's clock read and this call, and a preempted caller would then find its beat in
  // the future. A caller beside a live daemon passes its clock instead (below).
  ProducerStatus CheckProducer(std::chrono::nanoseconds max_heartbeat_age,
                               Clock::SteadyTime now) const noexcept;
  // The same judgement at `clock`'s monotonic now, read after the header: what a client
  // calls.
  ProducerStatus CheckProducer(std::chrono::nanoseconds max_heartbeat_age,
                               Clock& clock) const noexcept;

  // The futex word consumers sleep on; read it BEFORE re-checking the ring.
  uint32_t wake_seq() const noexcept {
    return header_->wake_seq.load(std::memory_order_acquire);
  }

  // Asks the daemon for a refill and sleeps until something is published or the state
  // changes (wake_seq moves past `seen`), or `timeout` passes. Returns at once if the ring
  // is not empty, unless `front_stale` (the caller found the front outside the freshness
  // bound: the daemon must drain it). The caller re-checks the ring and the daemon's
  // state afterwards.
  // `want`: how many IDs the caller still needs (a batch); 0 or 1 for a single take. A
  // want above 1 is added to the segment's refill hint before the request, so the daemon
  // publishes up to that many in one pass (bounded by the ring's capacity, the IDs
  // per millisecond of the segment's ID layout and its reservation) instead of its usual fill
  // target. A daemon that predates the hint ignores it: the request still refills.
  void AwaitPublish(uint32_t seen, std::chrono::nanoseconds timeout, bool front_stale = false,
                    uint64_t want = 0) noexcept;

  // The segment's refill hint as it is now (racy; for tests and status).
  uint32_t refill_hint() const noexcept {
    return consumer_->refill_hint.load(std::memory_order_relaxed);
  }

  // Claims a per-client counter slot for `service` (see ServiceSlot). Returns nullptr if
  // all slots are in use (counts are then not tracked; taking still works).
  // REQUIRES: service.size() <= kServiceNameMax.
  ServiceSlot* ClaimServiceSlot(std::string_view service) noexcept;
  // Releases a slot claimed by this process.
  void ReleaseServiceSlot(ServiceSlot* slot) noexcept;
  // The per-thread counter lanes of a slot claimed by this process (kLanesPerService).
  CounterLane* LanesOf(const ServiceSlot* slot) noexcept;
  // Adds takes of a client that found no free slot to the segment's "uncounted" total.
  void CountUncounted(uint64_t n) noexcept {
    consumer_->uncounted.fetch_add(n, std::memory_order_relaxed);
  }

  const SegmentHeader& header() const noexcept { return *header_; }
  // The segment's ID layout: its epoch and bits, from the identity line (checked at Open).
  IdLayout layout() const noexcept;
  // The daemon's status text (snowflake/status_text.h): "" when it wrote none, nullopt when
  // it kept changing while read. For errors and status only: it is a seqlock read of up
  // to 448 bytes and allocates, so it has no place on the take path.
  std::optional<std::string> status_text() const;
  uint64_t capacity() const noexcept { return mask_ + 1; }
  // Published and not yet taken, at some instant during the call.
  uint64_t size() const noexcept;
  uint64_t head() const noexcept { return consumer_->head.load(std::memory_order_acquire); }
  uint64_t tail() const noexcept { return header_->tail.load(std::memory_order_acquire); }
  // IDs taken by clients that found no free service slot (see CountUncounted).
  uint64_t uncounted() const noexcept {
    return consumer_->uncounted.load(std::memory_order_relaxed);
  }
  // The ring file's identity: a daemon that recreated the segment has a new inode.
  ino_t inode() const noexcept;
  dev_t device() const noexcept;

 private:
  RingConsumer(std::unique_ptr<MappedSegment> segment, Clock* clock);
  // Adds `want` to the segment's refill hint, saturating at UINT32_MAX.
  void AddRefillHint(uint64_t want) noexcept;

  std::unique_ptr<MappedSegment> segment_;
  const SegmentHeader* header_ = nullptr;
  ConsumerRegion* consumer_ = nullptr;
  const std::atomic<uint64_t>* slots_ = nullptr;
  uint64_t mask_ = 0;
  Clock* clock_ = nullptr;    // null: the real clock, read inline (see CoarseNowMs)
  int64_t epoch_ms_ = 0;      // the segment's epoch (immutable identity line)
  int64_t clock_lag_ms_ = 0;  // the coarse clock's lag (Clock::CoarseLag)
  // The segment's layout (its id_bits, immutable identity line): an ID's ms since the
  // epoch is id >> time_shift_. Read once at Open, so a take shifts by a register.
  int time_shift_ = 0;
};

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_RING_CONSUMER_H_
