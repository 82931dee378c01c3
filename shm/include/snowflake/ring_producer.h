// The daemon's side of the shared-memory ring (docs/design.md §4, shm/LAYOUT.md).
//
// A RingProducer is NOT safe for concurrent use: exactly one thread of exactly one
// process (the daemon's fill loop) may publish, drain and set state. The daemon's
// instance lock guarantees the one process; the caller guarantees the one thread.
// Consumers in other processes run concurrently with every method.

#ifndef SNOWFLAKE_RING_PRODUCER_H_
#define SNOWFLAKE_RING_PRODUCER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tl/expected.hpp>

#include "snowflake/boot_id.h"
#include "snowflake/clock.h"
#include "snowflake/segment_error.h"
#include "snowflake/segment_layout.h"
#include "snowflake/unique_fd.h"

namespace snowflake::shm {

class MappedSegment;

struct ProducerOptions {
  std::filesystem::path runtime_dir;  // the segment is runtime_dir/kSegmentFileName
  uint64_t capacity = 4096;           // a power of two in [1, kMaxCapacity]
  int64_t epoch_unix_ms = 0;
  IdBits id_bits = kDefaultIdBits;    // the layout of every ID published (header id_bits)
  uint32_t machine = 0;               // below 2^id_bits.machine
  mode_t mode = 0660;                 // never world-accessible; applied exactly (no umask)
  std::optional<gid_t> group;         // the clients' group; nullopt keeps the daemon's gid
  // The freshness contract written into the header (line 4) at create:
  // clients refuse IDs more than max_age_ms + liveness_ms away from their clock, and
  // report a heartbeat older than liveness_ms. The daemon sets both from its config.
  uint32_t max_age_ms = 0;     // ring.max_age_ms
  uint32_t liveness_ms = 50;   // daemon.liveness_ms
  // False only for producers that publish made-up milliseconds (tests): the header's
  // freshness_bound_ms is then 0 and clients check no bound.
  bool bound_freshness = true;
  // This boot's id, written into the header at create; a segment recording another (or
  // none) is never continued. nullopt: CurrentBootId() (snowflake/boot_id.h);
  // tests name another boot here.
  std::optional<BootId> boot_id = std::nullopt;
  // This process's pid namespace, written into the header at create. nullopt:
  // CurrentPidNamespace() (snowflake/pid_namespace.h); tests name another here.
  std::optional<uint32_t> pid_namespace = std::nullopt;
  // The clock the heartbeat is read from (SteadyNow()), not owned: it must outlive the
  // producer. Null: the real one. Tests that judge the beat on a clock they move give
  // the producer that clock too.
  Clock* clock = &Clock::Real();
};

// How a replacement segment starts (RingProducer::CreateReplacement).
struct FreshSegment {
  // The largest ID the daemon ever generated (0 if none): the new segment's
  // last_published_id, so its IDs continue above everything the old one held.
  uint64_t carried_last_id = 0;
  uint64_t incarnation = 1;
  // The state clients find in it from the start (the daemon's current one), so a client
  // that leaves the retired segment for this one sees no "starting" gap.
  DaemonState state = DaemonState::kStarting;
  StateReason reason = StateReason::kStarting;
  int64_t detail = 0;
};

// A snapshot of one client's counters (see ServiceSlot).
struct ServiceCount {
  size_t slot;
  uint64_t pid;
  std::string name;
  uint64_t taken;  // the slot's shared counter plus every lane of the client
  bool retired;    // the client closed: `taken` is final
};

class RingProducer {
 public:
  ~RingProducer();
  RingProducer(RingProducer&&) noexcept;
  RingProducer& operator=(RingProducer&&) noexcept;

  // Creates a fresh segment at options.runtime_dir/kSegmentFileName: a new consumer region
  // (a sealed memfd, CreateConsumerRegion) and a ring file written whole under a temporary
  // name and renamed into place. A segment found there is never reopened (its consumer
  // region was the clients' to write, and it ended with the daemon that held it): only its
  // ring file is mapped, and once the new one is in place it is marked stopped, so its
  // clients reattach to the new one. Its untaken IDs become a gap. With the same machine,
  // epoch and ID layout the new segment continues strictly above the old one's last_published_id()
  // (read from the ring file, which only the daemon's user can write), whatever its
  // capacity or boot. A segment of this boot with the same machine, epoch and layout is
  // *continued*: continued() is true and the incarnation is the old one's + 1, which tells
  // a restart that nobody else served the number in between (docs/design.md §5). One of
  // another boot, or one recording none (an older daemon), is only a bound: its counters
  // may be older than the daemon's state (a runtime directory on a disk that outlived a
  // crash); replaced_because() says why it was not continued. When this boot's id cannot
  // be read, nothing is continued.
  // Errors: kSystemError (cannot create, chmod, chown or map: message names the cause);
  // any validation error of an existing segment that is corrupt (kBadMagic,
  // kIncompatibleVersion, kTruncated, kSizeMismatch, kBadCapacity, kCorruptCounters,
  // kEarlierBoot...): the caller decides whether to retire it (Retire()) and create a
  // fresh one. The ring file is created with `mode` minus group and other write (0660 →
  // 0640). A consumer file of format 3 (kLegacyConsumerFileName) is removed.
  static tl::expected<RingProducer, SegmentFailure> CreateOrOpen(
      const ProducerOptions& options) noexcept;

  // Creates a new segment at options.runtime_dir/kSegmentFileName in place of the one this
  // daemon is serving and no longer trusts (a client tampered with it), whatever is at the
  // path: written whole under a temporary name (state, pid, heartbeat and incarnation from
  // `fresh`) and renamed over it, so a client that finds the old one stopped finds the new
  // one at once. The caller then Abandon()s the old one. Errors: kSystemError, kBadCapacity.
  static tl::expected<RingProducer, SegmentFailure> CreateReplacement(
      const ProducerOptions& options, const FreshSegment& fresh) noexcept;

  // Marks this segment stopped (`reason`), takes back every unclaimed ID whatever a
  // client did to head (when this producer holds its consumer region), and wakes its
  // clients, who reattach to whatever segment is at the path now. For a segment being
  // replaced; nothing is published to it afterwards.
  void Abandon(StateReason reason = StateReason::kShutdown) noexcept;

  // Marks an existing segment stopped, wakes its clients, and unlinks its ring file (and a
  // format-3 consumer file), so a fresh one can be created. Clients still mapping it see
  // `stopped`, also when the segment failed validation (a corrupt magic, version or
  // counters), and take nothing more: the freshness rule refuses what is left in its ring
  // once they see it, and they reattach.
  static void Retire(const std::filesystem::path& runtime_dir) noexcept;

  // True if CreateOrOpen continued a surviving segment of this boot (its incarnation + 1,
  // its last published ID as this one's bound).
  bool continued() const noexcept { return continued_; }
  // Why CreateOrOpen did not continue the segment it found (for the log: "it was left by
  // another boot of this host ..."); empty when it found none, or continued it.
  const std::string& replaced_because() const noexcept { return replaced_because_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  uint64_t capacity() const noexcept { return capacity_; }
  // The segment id the ring file and its consumer region share.
  uint64_t segment_id() const noexcept;
  // A new descriptor of this segment's consumer region (close-on-exec), for a client's
  // attach; invalid if the producer holds none (a predecessor mapped ring only) or dup
  // failed (errno says why).
  UniqueFd ConsumerDescriptor() const noexcept;

  // The largest ID that may have been published to this segment, 0 if none. After a
  // crash mid-publish it may be an ID nobody received (an upper bound, which is what a
  // restarting daemon must continue above).
  uint64_t last_published_id() const noexcept;
  // The largest ID this producer published, or found published when it opened the
  // segment: its own record, which no client can write.
  uint64_t published_through() const noexcept { return own_last_published_; }

  // head, read acquire: tickets below it are taken (or drained). Always-on check: head
  // never moves backwards; if it does (a client corrupted the consumer region),
  // CheckCounters() reports kCorruptCounters and the daemon must stop serving the segment.
  uint64_t head() const noexcept;
  uint64_t tail() const noexcept { return tail_; }
  // IDs published and not yet taken (at some instant during the call).
  uint64_t size() const noexcept;
  uint64_t free_slots() const noexcept { return capacity_ - size(); }
  // The always-on tamper check the fill loop runs every pass (and Publish() before it
  // writes): head has not moved below the largest head the daemon saw, nor past tail, and
  // the header's tail is the daemon's own. Only a write by someone other than a take or the
  // daemon breaks it. Error: kCorruptCounters, the message naming both values; the segment
  // must not be served any more (a rewound head makes clients re-take IDs). A corrupted
  // head is never repaired by DrainAll()/DrainOlderThan() (they drain nothing), so this
  // check still sees it.
  tl::expected<void, SegmentFailure> CheckCounters() noexcept;

  // Publishes up to free_slots() IDs from the front of `ids`; returns how many.
  // REQUIRES: ids strictly increasing. Always-on checks: ids.front() must be above every
  // ID this producer published (its own record, not the header's copy, which a client can
  // overwrite) and above the segment's last_published_id when it was opened, else
  // kNotIncreasing; CheckCounters() must pass, else its error (kCorruptCounters). Either
  // way nothing is published. Wakes sleeping consumers when it
  // published anything.
  tl::expected<size_t, SegmentFailure> Publish(std::span<const uint64_t> ids) noexcept;

  // Takes back every unclaimed ID (advancing head by CAS, exactly like a consumer); the
  // drained tickets become gaps, never handed out. Returns how many it drained.
  uint64_t DrainAll() noexcept;
  // Takes back the unclaimed IDs at the front of the ring whose millisecond offset (since
  // the epoch) is below `min_offset_ms`. Returns how many.
  uint64_t DrainOlderThan(int64_t min_offset_ms) noexcept;

  // Publishes state (and reason/detail) and wakes consumers so waiters notice at once.
  void SetState(DaemonState state, StateReason reason = StateReason::kNone,
                int64_t detail = 0) noexcept;
  DaemonState state() const noexcept;
  // Stores the status text clients add to their errors (snowflake/status_text.h): why the
  // daemon is not serving, in its words; "" clears it. Call it before the SetState() it
  // explains, so a client that sees the state finds the text; then again only when the
  // text changes (it is not for every pass).
  void SetStatusText(std::string_view text) noexcept;
  // Stores the clock's monotonic now (ProducerOptions::clock) as the heartbeat.
  void Heartbeat() noexcept;
  void SetFillTarget(uint64_t ids) noexcept;
  void CountClockPause() noexcept;
  uint64_t incarnation() const noexcept;

  // The refill word: consumers bump it when they find the ring empty.
  uint32_t refill_request() const noexcept;
  // Takes the refill hint (ConsumerRegion::refill_hint): how many IDs the takers that
  // asked for a refill since the last call still need, summed; resets it to 0. 0 = no
  // hint (no batch asked, or a client that predates the hint). Any value may be a
  // group member's forgery: callers clamp it. Call it after reading refill_request() for
  // the wait that follows the pass, never before, so a hint is never left behind while
  // the loop sleeps (shm/model/README.md, E6).
  uint32_t TakeRefillHint() noexcept;
  // Bumps the refill word and wakes a WaitForRefillRequest in progress, as a client's
  // refill request does. Safe from any thread (it touches only that shared word), unlike
  // every other method: the daemon's signal watcher uses it to cut a wait short.
  void WakeFillLoop() noexcept;
  // Sleeps until refill_request() != seen or `timeout` passes.
  void WaitForRefillRequest(uint32_t seen, std::chrono::nanoseconds timeout) noexcept;

  // Calls fn for every claimed client slot with a complete name.
  void ForEachService(const std::function<void(const ServiceCount&)>& fn) const;
  // Frees a slot that is retired or whose owner is dead, after the caller has folded its
  // count into its totals. Returns false if the slot changed owner meanwhile.
  bool FreeServiceSlot(size_t slot, uint64_t pid) noexcept;

  // IDs taken by clients that found no free service slot (their count is nowhere else).
  uint64_t uncounted() const noexcept;

  const SegmentHeader& header() const noexcept { return *header_; }

 private:
  RingProducer(std::unique_ptr<MappedSegment> segment, UniqueFd region, std::filesystem::path path,
               bool continued, Clock* clock);
  void WakeConsumers() noexcept;

  std::unique_ptr<MappedSegment> segment_;
  Clock* clock_;  // the heartbeat's (ProducerOptions::clock); never null
  // The consumer region's memfd, kept open for attaches; invalid for a predecessor.
  UniqueFd region_;
  std::filesystem::path path_;
  bool continued_ = false;
  std::string replaced_because_;
  SegmentHeader* header_ = nullptr;
  ConsumerRegion* consumer_ = nullptr;
  std::atomic<uint64_t>* slots_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t mask_ = 0;
  int time_shift_ = 0;  // the header's layout: an ID's ms since the epoch is id >> time_shift_
  // Our own copy of header_->tail (only we write it).
  uint64_t tail_ = 0;
  // The largest head ever observed, for the always-on "head never moves back" check.
  mutable uint64_t max_head_seen_ = 0;
  // The largest ID published (or found published when the segment was opened): our own
  // record, for the always-on "IDs only increase" check.
  uint64_t own_last_published_ = 0;
};

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_RING_PRODUCER_H_
