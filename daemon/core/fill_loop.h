// The fill loop: the daemon's policy over the ring, pass by pass (docs/architecture.md).
// Each pass, just after a millisecond boundary of the injected Clock (or at once when a
// client asks for a refill): drain what became too old, judge the clock, generate what
// demand needs up to the confirmed reservation horizon, publish it, and publish the state
// DecideState() calls for. It reads every clock through the injected Clock, never waits
// for the reservation service (it reads its horizon), and never publishes an ID above the
// horizon or from a batch during which the clock stepped back.
//
// Not thread-safe: one thread (the main thread, or a test) runs it. It shares the
// producer with the Heartbeat thread (which only beats), reads the Horizon, which is
// thread-safe, and reports through a StatusSink (daemon/core/status_sink.h), which control/
// implements.

#ifndef SNOWFLAKE_DAEMON_CORE_FILL_LOOP_H_
#define SNOWFLAKE_DAEMON_CORE_FILL_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/demand_tracker.h"
#include "daemon/core/generator.h"
#include "daemon/core/heartbeat.h"
#include "daemon/core/reservation_service.h"
#include "daemon/core/service_counts.h"
#include "daemon/core/state_decision.h"
#include "daemon/core/status_sink.h"
#include "snowflake/clock.h"
#include "snowflake/ring_producer.h"

namespace snowflake::daemon {

struct FillLoopOptions {
  int64_t epoch_unix_ms = 0;
  uint32_t machine = 0;
  int64_t max_age_ms = 0;
  uint64_t capacity = 4096;
  uint64_t min_fill = 64;
  // A dormant daemon (nobody took for dormant_after) holds no IDs and sleeps this long
  // between passes (a refill request wakes it at once).
  std::chrono::milliseconds dormant_after{1000};
  std::chrono::milliseconds dormant_wait{20};
  // Makes a fresh segment in place of one a client tampered with (head moved backwards or
  // past tail, the header's tail overwritten): RingProducer::CreateReplacement with the
  // daemon's producer options. Empty: a tampered segment stops the daemon (fatal()).
  std::function<tl::expected<shm::RingProducer, shm::SegmentFailure>(const shm::FreshSegment&)>
      replace_segment;
};

class FillLoop {
 public:
  // Every reference (not owned) must outlive the loop. `heartbeat` may be null (tests).
  FillLoop(FillLoopOptions options, Clock& clock, Generator& generator,
           shm::RingProducer& producer, Horizon& horizon, StatusSink& status,
           Heartbeat* heartbeat);

  // Every pass first checks the segment (RingProducer::CheckCounters). A segment a client
  // tampered with is never served again: it is replaced by a fresh one whose IDs continue
  // above every ID this daemon generated (options.replace_segment), then marked stopped and
  // drained, so its clients reattach to the fresh one; the log and status say why.
  //
  // Runs passes until `stop` is set, a fatal error, or the claim is lost. `on_ready` runs
  // once, when the daemon first serves (or starts out of service).
  void Run(const std::atomic<bool>& stop, const std::function<void()>& on_ready);

  // Wakes Run from its wait between passes, so it sees `stop` at once rather than after up
  // to dormant_wait (a dormant loop sleeps 20 ms): a clean stop then tells clients
  // "stopped" within microseconds of the signal. The one method safe from any thread.
  void Interrupt() noexcept;

  // One pass (Run's body; tests drive passes one by one).
  void Pass();
  // How long Run sleeps after a pass unless a client asks for a refill.
  std::chrono::nanoseconds NextWait() noexcept;

  // Marks the segment stopped and takes back what the ring holds (shutdown, a lost claim,
  // a fatal error). The state stays stopped.
  void StopServing();

  const StateDecision& published() const noexcept { return published_; }
  const std::optional<std::string>& fatal() const noexcept { return fatal_; }
  bool claim_lost() const noexcept { return claim_lost_; }
  bool dormant() const noexcept { return dormant_; }
  // How many segments this loop retired because a client tampered with them, and why it
  // retired the last one ("" if none).
  uint64_t segments_retired() const noexcept { return segments_retired_; }
  const std::string& segment_retired_reason() const noexcept { return segment_retired_reason_; }
  StatusFacts Facts() const;
  // A new descriptor of the consumer region of the segment served now and its segment id,
  // for a client's attach. Safe from any thread: takes the lock a replacement holds.
  std::pair<UniqueFd, uint64_t> AttachPoint();

 private:
  void MeasureStep(int64_t now_ns, std::chrono::steady_clock::time_point steady) noexcept;
  void HandleResume();
  void Fill(uint64_t want, int64_t horizon);
  // An operator's fence came (Horizon::fence_unix_ms()): nothing at or below it is issued
  // from now on, and the ring is emptied of what was made before.
  void ApplyFence(int64_t fence);
  // The segment failed CheckCounters(): serve a fresh one instead (or stop, see Run()).
  void ReplaceTamperedSegment(const std::string& why);
  // Publishes DecideState()'s answer if state or reason changed; returns true if it did.
  bool SyncState(int64_t now_ms, int64_t horizon);
  StateInputs Inputs(int64_t now_ms, int64_t horizon) const;
  // The horizon's renewal (its problem and wait) as ReadHorizon() last copied it: what the
  // published state was decided from, so the status shows the two together.
  struct Renewal {
    std::optional<ReservationProblem> problem;
    std::optional<RenewalWait> wait;
  };
  const Renewal& CurrentRenewal() const { return renewal_; }
  // The horizon, with the renewal copied again when Horizon::renewal_version() moved (a
  // paused loop passes every millisecond): the two always belong together.
  int64_t ReadHorizon();
  // A pause for the reservation (persistence_failed, register_unreachable) in words: the
  // store it waits on with its location, and the last error. "" for other states.
  std::string RenewalText() const;
  // The published state is a pause for the reservation (persistence_failed,
  // register_unreachable), or "starting", which a first renewal that lags prolongs.
  bool WaitsForRenewal() const;
  // What the generator waits for the clock to pass, while it does (Facts().clock_wait).
  std::optional<protocol::ClockWait> CurrentClockWait(int64_t now_ms) const;
  // A pause for the clock (clock_behind, behind_high_water, fenced, clock_step_too_large)
  // in words: the millisecond and who set it. "" for other states.
  std::string ClockWaitText() const;
  // The segment's status text for the published state: RenewalText() or ClockWaitText().
  std::string StatusText() const;
  std::string ReasonExtra(int64_t now_ms) const;
  // Stores `text` as the segment's status text if it differs from the last one stored.
  void PublishStatusText(const std::string& text);

  // Constant after construction.
  const FillLoopOptions options_;
  Clock& clock_;
  Generator& generator_;
  shm::RingProducer& producer_;
  Horizon& horizon_;
  StatusSink& status_;
  Heartbeat* const heartbeat_;

  // State below is owned by the loop's thread.
  DemandTracker demand_;
  ServiceCounts services_;
  std::vector<uint64_t> buffer_;
  StateDecision published_;
  std::optional<std::string> fatal_;
  bool claim_lost_ = false;
  bool filled_once_ = false;
  int64_t applied_fence_ = 0;  // the operator's fence the generator and ring obey
  bool dormant_ = false;
  std::chrono::steady_clock::time_point last_demand_;
  uint64_t last_head_ = 0;
  uint64_t fill_target_ = 0;
  uint64_t resume_handled_ = 0;
  // The clock's last reading and when (steady), to measure a step back exactly.
  std::optional<int64_t> last_now_ns_;
  std::chrono::steady_clock::time_point last_steady_{};
  int64_t step_ms_ = 0;
  std::chrono::steady_clock::time_point next_service_scan_{};
  // Held while producer_ is replaced and while Interrupt() wakes it from another thread.
  std::mutex producer_mutex_;
  // The incarnation of the segment served now, as this loop set it (its own record).
  uint64_t incarnation_ = 0;
  uint64_t segments_retired_ = 0;
  std::string segment_retired_reason_;
  // The segment's status text as this loop last stored it, and the renewal version it was
  // built from.
  std::string status_text_;
  uint64_t status_text_version_ = 0;
  int64_t status_text_mark_ = 0;  // the generator's mark ClockWaitText() was built from
  // ReadHorizon()'s copy of the renewal and the version it was taken at.
  Renewal renewal_;
  std::optional<uint64_t> renewal_version_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_FILL_LOOP_H_
