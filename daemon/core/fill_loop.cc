#include "daemon/core/fill_loop.h"

#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <algorithm>

#include "daemon/core/state_words.h"
#include "snowflake/id_layout.h"
#include "snowflake/status_text.h"
#include "snowflake/time_text.h"
#include "util/debug_assert.h"

namespace snowflake::daemon {
namespace {

using shm::DaemonState;
using shm::StateReason;

constexpr int64_t kMsNs = 1'000'000;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The reasons of a pause for the reservation, which the segment's status text explains.
bool IsRenewalReason(StateReason reason) {
  return reason == StateReason::kPersistenceFailed || reason == StateReason::kRegisterUnreachable;
}

// The reasons of a pause for the clock to pass the generator's mark, which the segment's
// status text explains with the millisecond and who set it.
bool IsClockWaitReason(StateReason reason) {
  return reason == StateReason::kClockBehind || reason == StateReason::kBehindHighWater ||
         reason == StateReason::kFenced || reason == StateReason::kClockStepTooLarge;
}

// RenewalStatus::store's words (docs/control-protocol.md).
std::string_view StoreCode(ReservationStore store) {
  return store == ReservationStore::kRegister ? "register" : "state_file";
}

// The register did not answer: the last failure says so, or, with none yet, the renewal
// under way waits on it (a call that has not come back has not answered).
bool RegisterUnanswered(const std::optional<ReservationProblem>& problem,
                        const std::optional<RenewalWait>& wait) {
  return problem ? problem->store == ReservationStore::kRegister && problem->unreachable
                 : wait && wait->store == ReservationStore::kRegister;
}

}  // namespace

FillLoop::FillLoop(FillLoopOptions options, Clock& clock, Generator& generator,
                   shm::RingProducer& producer, Horizon& horizon, StatusSink& status,
                   Heartbeat* heartbeat)
    : options_(options),
      clock_(clock),
      generator_(generator),
      producer_(producer),
      horizon_(horizon),
      status_(status),
      heartbeat_(heartbeat),
      // At most half a millisecond's sequence space ahead: a burst that empties the
      // ring is then refilled from the same millisecond in tens of µs, not at the next.
      demand_(std::min<uint64_t>(options.min_fill, generator.config().layout.ids_per_ms() / 2),
              std::min<uint64_t>(options.capacity, generator.config().layout.ids_per_ms() / 2)),
      buffer_(options.capacity),
      last_demand_(clock.SteadyNow()) {
  SNOWFLAKE_REQUIRE(options.capacity >= 1 && options.min_fill >= 1);
  last_head_ = producer_.head();
  incarnation_ = producer_.incarnation();
}

void FillLoop::Run(const std::atomic<bool>& stop, const std::function<void()>& on_ready) {
  // The default timer slack (50 µs) would let each boundary wake-up come late by that
  // much, and every microsecond after a boundary hands out IDs of the previous ms.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  bool ready_sent = false;
  uint32_t refill_seen = producer_.refill_request();
  while (!stop.load(std::memory_order_acquire) && !fatal_ && !claim_lost_) {
    const uint32_t refill_now = producer_.refill_request();
    if (refill_now != refill_seen) last_demand_ = clock_.SteadyNow();
    refill_seen = refill_now;
    Pass();
    if (!ready_sent && (published_.state == DaemonState::kServing ||
                        published_.state == DaemonState::kOutOfService)) {
      // READY=1 once the number is claimed and the ring filled; a daemon that starts out
      // of service is also "up": it waits for an operator's resume on the control socket.
      on_ready();
      ready_sent = true;
    }
    // Sleep until a client asks for a refill, or until just past the next millisecond
    // boundary: a new ms is new sequence space and makes the ring's IDs one ms older, so
    // that is when to drain and refill.
    producer_.WaitForRefillRequest(refill_seen, NextWait());
  }
}

std::pair<UniqueFd, uint64_t> FillLoop::AttachPoint() {
  const std::lock_guard<std::mutex> guard(producer_mutex_);
  return {producer_.ConsumerDescriptor(), producer_.segment_id()};
}

void FillLoop::Interrupt() noexcept {
  const std::lock_guard<std::mutex> guard(producer_mutex_);
  producer_.WakeFillLoop();
}

std::chrono::nanoseconds FillLoop::NextWait() noexcept {
  if (dormant_) return options_.dormant_wait;
  // 5 µs past the next millisecond boundary of the IDs' clock, at most 1.005 ms: the
  // margin lets the new millisecond have begun when we read it.
  constexpr int64_t kMarginNs = 5'000;
  const int64_t now_ns = clock_.NowUnixNs();
  const int64_t into_ms = now_ns - FloorDiv(now_ns, kMsNs) * kMsNs;
  return std::chrono::nanoseconds(kMsNs - into_ms + kMarginNs);
}

void FillLoop::MeasureStep(int64_t now_ns, std::chrono::steady_clock::time_point steady) noexcept {
  // A step is how far the reading falls short of the last reading plus the time that
  // passed since (steady): exact, however long ago the last ID was issued.
  if (last_now_ns_) {
    const int64_t elapsed_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(steady - last_steady_).count();
    const int64_t back_ns = *last_now_ns_ + elapsed_ns - now_ns;
    if (now_ns < *last_now_ns_ && back_ns >= kMsNs / 2) step_ms_ = (back_ns + kMsNs / 2) / kMsNs;
  }
  last_now_ns_ = now_ns;
  last_steady_ = steady;
}

void FillLoop::Pass() {
  const auto steady = clock_.SteadyNow();
  const int64_t now_ns = clock_.NowUnixNs();
  const int64_t now_ms = FloorDiv(now_ns, kMsNs);
  MeasureStep(now_ns, steady);
  HandleResume();
  if (horizon_.claim_lost()) {
    claim_lost_ = true;
    StopServing();
    spdlog::critical("the machine number's claim is lost: stopped serving at once");
    return;
  }

  if (auto counters = producer_.CheckCounters(); !counters) {
    ReplaceTamperedSegment(counters.error().message);
    if (fatal_) return;
  }

  // How many IDs the takers that asked for a refill since the last pass still need (0:
  // none said; a client that predates the hint never does). Run read refill_request
  // before this pass, so a hint added after this exchange comes with a request that
  // ends the wait at once (shm/model/README.md, E6). Clamped to the ring: the word is
  // writable by any member of the clients' group.
  const uint64_t hinted = std::min<uint64_t>(producer_.TakeRefillHint(), options_.capacity);
  const uint64_t head = producer_.head();
  demand_.Record(steady, head >= last_head_ ? head - last_head_ : 0, hinted);
  // A refill request (seen by Run), a hint or a take wakes a dormant daemon in this very
  // pass, so the client that asked is served now, not at the next wake-up.
  if (head != last_head_ || hinted > 0) last_demand_ = steady;
  const bool quiet = steady - last_demand_ >= options_.dormant_after;
  // Dormancy is decided before anything is filled: a pass that enters it must not leave a
  // fresh fill in the ring for the whole dormant wait (it would age past max_age_ms).
  dormant_ = filled_once_ && quiet &&
             (published_.state == DaemonState::kServing ||
              published_.state == DaemonState::kOutOfService);

  const int64_t horizon = ReadHorizon();
  // After the horizon: the service publishes a fence before the horizon it moves with it.
  if (const int64_t fence = horizon_.fence_unix_ms(); fence > applied_fence_) ApplyFence(fence);
  if (generator_.state() == GeneratorState::kServing && now_ms < generator_.last_unix_ms()) {
    // The clock stepped back: the ring's IDs are now in the clock's future. Take them
    // back before anyone receives one, then let the generator judge the step.
    producer_.DrainAll();
    Fill(1, horizon);
  } else if (dormant_) {
    // Nobody has taken an ID for a while: hold none, so none can turn stale. The next
    // client finds the ring empty and its refill request wakes us at once.
    producer_.DrainAll();
  } else {
    // Passes run just after each ms boundary: an ID older than max_age_ms now is drained
    // before anyone can receive it.
    const int64_t min_offset = now_ms - options_.max_age_ms - options_.epoch_unix_ms;
    if (min_offset > 0) producer_.DrainOlderThan(min_offset);
  }

  const uint64_t target = demand_.target();
  if (target != fill_target_) {
    fill_target_ = target;
    producer_.SetFillTarget(target);
  }
  const uint64_t size = producer_.size();
  const bool may_generate = generator_.state() != GeneratorState::kOutOfService && !dormant_ &&
                            !fatal_ && now_ms <= horizon;
  // A batch that found the ring empty gets what it still needs in this one pass, not a
  // fill target at a time: Fill() bounds it by the free slots, the generator by the layout's
  // IDs per millisecond of the clock (never a later one), and the horizon. Everything is of
  // this millisecond, so the freshness rule (the drains above, the clients' bound) is
  // unchanged; what the taker leaves is drained when it ages like any other ID.
  const uint64_t want = std::max(target, hinted);
  if (may_generate && size < want) {
    Fill(want - size, horizon);
  } else if (generator_.state() == GeneratorState::kPaused) {
    // Nothing is generated in this pass (the horizon is behind the clock, most often), but
    // the clock still decides whether the generator waits for it: judged now, a pause for
    // the clock ends when the clock passes the mark, and the state then names what the
    // daemon really waits for (the reservation), not the clock trouble that began it.
    generator_.JudgeClock();
  }
  horizon_.NoteNeed(now_ms);
  const bool changed = SyncState(now_ms, horizon);
  // While paused for a renewal, its last error changes as attempts fail: the text follows,
  // built again only when the renewal changed. While paused for the clock, a fence may
  // move the millisecond waited for: the text follows the mark.
  if (!changed && WaitsForRenewal() && renewal_version_.value_or(0) != status_text_version_) {
    PublishStatusText(RenewalText());
  } else if (!changed && IsClockWaitReason(published_.reason) &&
             generator_.last_unix_ms() != status_text_mark_) {
    PublishStatusText(StatusText());
  }

  if (heartbeat_ != nullptr) heartbeat_->NotePass();
  if (steady >= next_service_scan_) {
    services_.Scan(producer_);
    next_service_scan_ = steady + std::chrono::seconds(1);
  }
  status_.Report([this] { return Facts(); }, changed, steady);
  last_head_ = producer_.head();
}

void FillLoop::ApplyFence(int64_t fence) {
  // Nothing at or below the fence may reach a taker from now on: the generator goes above
  // it (pausing until the clock passes it) and the ring gives back what it holds, all of
  // it made before the fence was known. Only then is the fence acknowledged in the register.
  generator_.RaiseFence(fence);
  const uint64_t drained = producer_.DrainAll();
  applied_fence_ = fence;
  horizon_.NoteFenceApplied(fence);
  spdlog::warn("obeying an operator's fence at {}: took back {} ID(s) from the ring; {}",
               FormatTimeText(fence), drained,
               fence >= clock_.NowUnixMs() ? "paused until the clock passes it"
                                           : "serving above it");
  SyncState(clock_.NowUnixMs(), ReadHorizon());
  // The control socket's record at once, as for a resume: the pass's own report would
  // see no change left to publish and could leave `snowflakectl status` without the
  // fence for up to the board's interval.
  status_.RefreshBoard(Facts());
}

void FillLoop::HandleResume() {
  const uint64_t requested = status_.resume_requested();
  if (requested <= resume_handled_) return;
  const bool was_out = generator_.state() == GeneratorState::kOutOfService;
  if (was_out) {
    generator_.Resume();
    spdlog::warn("resume requested on the control socket: the generator is now {}{}",
                 StateText(generator_.state() == GeneratorState::kServing ? DaemonState::kServing
                                                                          : DaemonState::kPaused),
                 generator_.reason().empty() ? "" : " (" + generator_.reason() + ")");
    const int64_t now_ms = clock_.NowUnixMs();
    SyncState(now_ms, ReadHorizon());
  } else {
    spdlog::info("resume requested on the control socket while {}: nothing to do",
                 StateText(published_.state));
  }
  status_.RefreshBoard(Facts());
  status_.ResumeHandled(requested, was_out);
  resume_handled_ = requested;
}

void FillLoop::Fill(uint64_t want, int64_t horizon) {
  // Never more than the free slots: Publish() would leave the rest unpublished (gaps).
  want = std::min<uint64_t>({want, buffer_.size(), producer_.free_slots()});
  if (want == 0) return;
  auto generated = generator_.Generate(std::span<uint64_t>(buffer_.data(), want));
  if (!generated || *generated == 0) return;  // SyncState() reports pauses
  if (generator_.state() != GeneratorState::kServing) {
    // The clock stepped back inside the batch: its IDs are in the clock's future. Publish
    // none of them (they become gaps); SyncState() pauses.
    return;
  }
  size_t n = *generated;
  // Never above the confirmed reservation: what is beyond it is dropped (gaps, never
  // duplicates). IDs increase, so the publishable ones are a prefix.
  const IdLayout& layout = generator_.config().layout;
  const auto ms_of = [&](uint64_t id) { return layout.epoch_unix_ms() + layout.OffsetMsOf(id); };
  while (n > 0 && ms_of(buffer_[n - 1]) > horizon) --n;
  if (n == 0) return;
  auto published = producer_.Publish(std::span<const uint64_t>(buffer_.data(), n));
  if (!published && shm::IsDamagedSegmentError(published.error().code)) {
    // A client wrote head or the segment id of the consumer region since this pass began
    // (CheckCounters): these IDs were never published (gaps); the fresh segment gets the
    // next ones.
    ReplaceTamperedSegment(published.error().message);
    return;
  }
  if (!published) {
    // Always-on check: publishing out of order or a corrupted head would risk a
    // duplicate. Stop serving.
    spdlog::critical("stopping: {}", published.error().message);
    fatal_ = published.error().message;
    return;
  }
  filled_once_ = true;
}

void FillLoop::ReplaceTamperedSegment(const std::string& why) {
  if (!options_.replace_segment) {
    spdlog::critical("stopping: {}", why);
    fatal_ = why;
    return;
  }
  // Above every ID this daemon generated (published or not) and every ID it found or put
  // in the segment: the generator only goes up from there, so nothing repeats.
  const shm::FreshSegment fresh{
      .carried_last_id =
          std::max(generator_.last_issued_id().value_or(0), producer_.published_through()),
      .incarnation = incarnation_ + 1,
      .state = published_.state,
      .reason = published_.reason,
      .detail = published_.detail};
  // Its clients' counts so far are final: they count on in the fresh segment's slots.
  services_.FoldAll(producer_);
  auto replacement = options_.replace_segment(fresh);
  if (!replacement) {
    fatal_ = why + "; and no fresh segment could be created: " + replacement.error().message;
    spdlog::critical("stopping: {}", *fatal_);
    return;
  }
  // The fresh segment is at the path already, so a client that finds this one stopped
  // reattaches at once.
  producer_.Abandon(StateReason::kShutdown);
  {
    std::unique_lock<std::mutex> hold;
    if (heartbeat_ != nullptr) hold = heartbeat_->Hold();
    const std::lock_guard<std::mutex> guard(producer_mutex_);
    producer_ = std::move(*replacement);
  }
  incarnation_ = fresh.incarnation;
  ++segments_retired_;
  segment_retired_reason_ = why;
  last_head_ = producer_.head();
  fill_target_ = 0;  // set again on the fresh segment by this pass
  status_text_.clear();  // the fresh segment has none; the next pass writes it again
  spdlog::error(
      "retired the segment: {}. Its clients move to a fresh segment (incarnation {}) whose IDs "
      "continue above {}; {} segment(s) retired so far. Check which members of the clients' "
      "group write to the segment",
      why, fresh.incarnation, fresh.carried_last_id, segments_retired_);
  status_.RefreshBoard(Facts());
}

int64_t FillLoop::ReadHorizon() {
  // The horizon before the version: a renewal moves the version before the horizon, so a
  // new horizon comes with a moved version, and the copy below is taken with it.
  const int64_t horizon = horizon_.confirmed_through();
  const uint64_t version = horizon_.renewal_version();
  if (renewal_version_ == version) return horizon;
  Horizon::View view = horizon_.Read();
  renewal_ = Renewal{std::move(view.problem), std::move(view.wait)};
  renewal_version_ = version;
  return view.confirmed_through;
}

StateInputs FillLoop::Inputs(int64_t now_ms, int64_t horizon) const {
  const auto& [problem, wait] = CurrentRenewal();
  StateInputs in;
  in.generator = generator_.state();
  in.range_exhausted =
      generator_.state() == GeneratorState::kOutOfService && generator_.ms_behind() == 0;
  // The generator's own word: a start behind the mark is reported as such only while the
  // generator still waits for that mark (a later step back is a step, not the start).
  in.started_behind = generator_.reason_code() == StateReason::kBehindHighWater;
  in.fenced = generator_.reason_code() == StateReason::kFenced;
  in.step_ms = step_ms_;
  in.ms_behind = generator_.ms_behind();
  in.filled_once = filled_once_;
  in.horizon_reached = now_ms > horizon;
  in.reservation_failed = problem.has_value();
  in.reservation_errno = problem ? problem->sys_errno : 0;
  in.register_unanswered = RegisterUnanswered(problem, wait);
  in.waiting_since_unix_ms = wait ? wait->since_unix_ms : now_ms;
  in.claim_lost = claim_lost_;
  return in;
}

std::string FillLoop::RenewalText() const {
  if (!WaitsForRenewal()) return "";
  const auto& [problem, wait] = CurrentRenewal();
  // Starting, with the renewals confirmed: nothing to wait for but the first fill.
  if (published_.state == DaemonState::kStarting && !problem && !wait) return "";
  // A horizon that tells no wait (a test's) and no failure: only the lag is known.
  if (!problem && !wait) return "a renewal is in progress but slow: a stalled disk or register";
  // What it waits on, named so an operator can go and look: "register etcd
  // http://10.0.0.1:2379,http://10.0.0.2:2379 /snowflake", "state file /var/lib/...".
  std::string text = wait ? std::string(StoreName(wait->store)) + " " + wait->location
                          : std::string(StoreName(problem->store));
  if (!problem) return text + "; no answer yet to the renewal under way";
  // "register unreachable" first, so an operator (and a client reading the text) sees at
  // once that the fleet's register, not this host, is the trouble.
  const std::string whose(StoreName(problem->store));
  return text + "; last error: " +
         (problem->unreachable ? whose + " unreachable: " : whose + ": ") + problem->message;
}

bool FillLoop::WaitsForRenewal() const {
  return IsRenewalReason(published_.reason) || published_.state == DaemonState::kStarting;
}

std::optional<protocol::ClockWait> FillLoop::CurrentClockWait(int64_t now_ms) const {
  // Paused (also at the closed mark itself, 0 ms behind), or out of service behind the
  // mark; not out of service for the epoch's range, which no clock passes.
  const bool waits =
      generator_.state() == GeneratorState::kPaused ||
      (generator_.state() == GeneratorState::kOutOfService && generator_.ms_behind() > 0);
  if (!waits) return std::nullopt;
  const int64_t until = generator_.last_unix_ms();
  return protocol::ClockWait{.until_unix_ms = until,
                             .set_by = std::string(vocab::MarkSourceCode(generator_.mark_source())),
                             .clock_passes_in_ms = until + 1 - now_ms};
}

std::string FillLoop::ClockWaitText() const {
  if (!IsClockWaitReason(published_.reason)) return "";
  const int64_t until = generator_.last_unix_ms();
  const std::string mark = FormatTimeText(until) + " (unix ms " + std::to_string(until) +
                           "), set by " +
                           std::string(vocab::MarkSourceText(generator_.mark_source()));
  // Out of service, the clock passing the mark is not enough: an operator's resume comes
  // first.
  if (published_.state == DaemonState::kOutOfService) {
    return "nothing is issued at or below " + mark +
           "; after a resume it waits for the clock to pass it";
  }
  return "waiting for the clock to pass " + mark;
}

std::string FillLoop::StatusText() const {
  return WaitsForRenewal() ? RenewalText() : ClockWaitText();
}

std::string FillLoop::ReasonExtra(int64_t now_ms) const {
  if (IsClockWaitReason(published_.reason)) {
    // Where the wait ends by this host's clock: a reader compares it with how long the
    // pause has lasted.
    const int64_t in_ms = generator_.last_unix_ms() + 1 - now_ms;
    return ClockWaitText() + (in_ms > 0
                                  ? "; the clock passes it in " + std::to_string(in_ms) + " ms"
                                  : "; the clock passed it " + std::to_string(-in_ms) + " ms ago");
  }
  std::string text = RenewalText();
  // register_unreachable's own words say since when; persistence_failed's do not.
  if (published_.reason == StateReason::kPersistenceFailed) {
    if (const auto& wait = CurrentRenewal().wait) {
      text += "; waited " + std::to_string(now_ms - wait->since_unix_ms) + " ms";
    }
  }
  return text;
}

void FillLoop::PublishStatusText(const std::string& text) {
  status_text_version_ = renewal_version_.value_or(0);  // what RenewalText() was built from
  status_text_mark_ = generator_.last_unix_ms();        // and ClockWaitText()
  if (text == status_text_) return;
  producer_.SetStatusText(shm::FitStatusText(text));
  status_text_ = text;
}

bool FillLoop::SyncState(int64_t now_ms, int64_t horizon) {
  if (published_.state == DaemonState::kStopped) return false;
  const StateDecision desired = DecideState(Inputs(now_ms, horizon));
  if (desired.state == published_.state && desired.reason == published_.reason) return false;
  const StateDecision before = published_;
  const bool trouble =
      desired.state == DaemonState::kPaused || desired.state == DaemonState::kOutOfService;
  if (trouble) {
    // Clients must not receive IDs while the clock or the reservation is in doubt.
    producer_.DrainAll();
    if (!IsRenewalReason(desired.reason) && before.state != DaemonState::kPaused &&
        before.state != DaemonState::kOutOfService) {
      producer_.CountClockPause();
    }
  }
  published_ = desired;
  // The text before the state: a client that sees the new state finds its words.
  PublishStatusText(StatusText());
  producer_.SetState(desired.state, desired.reason, desired.detail);
  const std::string line = status_.Line(Facts());
  if (desired.state == DaemonState::kServing && before.state == DaemonState::kStarting) {
    spdlog::info("state starting -> serving");
  } else if (desired.state == DaemonState::kServing) {
    spdlog::warn("state {} -> serving: {} is over", StateText(before.state),
                 DescribeReason(before.reason, before.detail));
    step_ms_ = 0;
  } else {
    spdlog::warn("state {} -> {}", StateText(before.state), line);
  }
  return true;
}

void FillLoop::StopServing() {
  // Stopped first, so clients that find the ring empty fail over at once; then take back
  // what is left.
  producer_.SetState(DaemonState::kStopped, StateReason::kShutdown);
  published_ = {DaemonState::kStopped, StateReason::kShutdown, 0};
  producer_.DrainAll();
}

StatusFacts FillLoop::Facts() const {
  const shm::SegmentHeader& h = producer_.header();
  StatusFacts f;
  f.decision = published_;
  f.now_unix_ms = clock_.NowUnixMs();
  f.reason_extra = ReasonExtra(f.now_unix_ms);
  const auto& [problem, wait] = CurrentRenewal();
  // Also while starting: before the first ID, a renewal that lags leaves the state
  // "starting", and the renewal is then what the daemon waits for.
  if (problem || (wait && (IsRenewalReason(published_.reason) ||
                           published_.state == DaemonState::kStarting))) {
    protocol::RenewalStatus renewal;
    if (wait) {
      renewal.store = StoreCode(wait->store);
      renewal.location = wait->location;
      renewal.since_unix_ms = wait->since_unix_ms;
      renewal.waited_ms = f.now_unix_ms - wait->since_unix_ms;
    } else {
      renewal.store = StoreCode(problem->store);
    }
    if (problem) {
      renewal.last_error = problem->message;
      renewal.last_error_store = StoreCode(problem->store);
    }
    renewal.unanswered = RegisterUnanswered(problem, wait);
    f.renewal = std::move(renewal);
  }
  f.clock_wait = CurrentClockWait(f.now_unix_ms);
  f.ring_fill = producer_.size();
  f.ring_capacity = producer_.capacity();
  f.fill_target = fill_target_;
  f.published_total = h.published_total.load(std::memory_order_relaxed);
  f.drained_total = h.drained_total.load(std::memory_order_relaxed);
  f.incarnation = producer_.incarnation();
  f.last_issued_id = generator_.last_issued_id();
  f.generator_mark_unix_ms = generator_.last_unix_ms();
  f.reserved_through_unix_ms = horizon_.confirmed_through();
  f.clock_pauses = generator_.pauses_total();
  f.clock_behind_ms = generator_.ms_behind();
  f.services = services_.totals();
  f.segments_retired = segments_retired_;
  f.segment_retired_reason = segment_retired_reason_;
  return f;
}

}  // namespace snowflake::daemon
