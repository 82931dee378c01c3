#include "snowflake/ring_consumer.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>

#include "mapped_segment.h"
#include "service_slot_codec.h"
#include "snowflake/futex.h"
#include "snowflake/pid_namespace.h"
#include "snowflake/status_text.h"

namespace snowflake::shm {
namespace {

constexpr std::chrono::duration<uint64_t, std::nano> kDeadPidBeatAge{10'000'000};
// A heartbeat this far ahead of the caller's CLOCK_MONOTONIC reading is in the future: not
// a beat of this boot. The slack covers a beat stored between the caller's clock read and
// our load of it; a previous boot's reading is either far ahead or behind.
constexpr uint64_t kFutureBeatSlackNs = 1'000'000;

// The clock a consumer keeps: null for the real one, so its takes read it inline.
Clock* OwnClock(Clock* option) {
  return option == nullptr || option == &Clock::Real() ? nullptr : option;
}

}  // namespace

RingConsumer::RingConsumer(std::unique_ptr<MappedSegment> segment, Clock* clock)
    : segment_(std::move(segment)),
      header_(segment_->header()),
      consumer_(segment_->consumer()),
      slots_(segment_->slots()),
      mask_(segment_->capacity() - 1),
      clock_(OwnClock(clock)),
      epoch_ms_(static_cast<int64_t>(header_->epoch_unix_ms.load(std::memory_order_relaxed))),
      clock_lag_ms_((clock_ != nullptr ? *clock_ : Clock::Real()).CoarseLag().count()),
      time_shift_(layout().time_shift()) {}

IdLayout RingConsumer::layout() const noexcept {
  // MappedSegment::Open refused a header whose epoch and bits are no layout.
  return IdLayout::Create(
             static_cast<int64_t>(header_->epoch_unix_ms.load(std::memory_order_relaxed)),
             UnpackIdBits(header_->id_bits.load(std::memory_order_relaxed)))
      .value_or(IdLayout());
}

RingConsumer::~RingConsumer() = default;
RingConsumer::RingConsumer(RingConsumer&&) noexcept = default;
RingConsumer& RingConsumer::operator=(RingConsumer&&) noexcept = default;

namespace {

// The user that must own the segment: the option, or the owner of the runtime directory.
tl::expected<uid_t, SegmentFailure> ExpectedOwner(const std::filesystem::path& runtime_dir,
                                                  const ConsumerOptions& options) {
  if (options.expected_owner) return *options.expected_owner;
  struct stat dir_info {};
  if (stat(runtime_dir.c_str(), &dir_info) == 0) return dir_info.st_uid;
  const int err = errno;
  if (err == ENOENT) {
    return tl::unexpected(SegmentFailure{
        SegmentError::kNotFound,
        "no runtime directory " + runtime_dir.string() +
            ": snowflaked is not running here (start it, or set SNOWFLAKE_RUNTIME_DIR to its "
            "runtime directory)",
        err});
  }
  return tl::unexpected(
      SegmentFailure{err == EACCES ? SegmentError::kPermissionDenied : SegmentError::kSystemError,
                     "cannot stat " + runtime_dir.string() + ": " + std::strerror(err), err});
}

}  // namespace

tl::expected<RingConsumer, SegmentFailure> RingConsumer::Open(
    const std::filesystem::path& runtime_dir, UniqueFd region,
    const ConsumerOptions& options) noexcept {
  try {
    auto owner = ExpectedOwner(runtime_dir, options);
    if (!owner) return tl::unexpected(std::move(owner.error()));
    auto segment = MappedSegment::Open(
        runtime_dir / kSegmentFileName, std::move(region), MapAccess::kConsumer,
        MapChecks{.expected_owner = *owner,
                  .refuse_other_access = true,
                  .boot_id = options.boot_id ? *options.boot_id : CurrentBootId()});
    if (!segment) return tl::unexpected(std::move(segment.error()));
    return RingConsumer(std::move(*segment), options.clock);
  } catch (const std::exception& e) {
    return tl::unexpected(SegmentFailure{SegmentError::kSystemError,
                                         std::string("open segment: ") + e.what()});
  }
}

tl::expected<RingConsumer, SegmentFailure> RingConsumer::Observe(
    const std::filesystem::path& runtime_dir, const ConsumerOptions& options) noexcept {
  return Open(runtime_dir, UniqueFd(), options);
}

bool RingConsumer::has_region() const noexcept { return segment_->has_region(); }

uid_t RingConsumer::owner() const noexcept { return segment_->owner(); }

uint64_t RingConsumer::segment_id() const noexcept {
  return header_->segment_id.load(std::memory_order_relaxed);
}

std::optional<std::string> RingConsumer::status_text() const { return ReadStatusText(*header_); }

namespace {

// What the header says of its producer, read once for one judgement (CheckProducer).
struct ProducerReading {
  DaemonState state;
  StateReason reason;
  int64_t detail;
  uint64_t pid;
  uint32_t pid_namespace;
  uint64_t beat;  // heartbeat_mono_ns
};

ProducerReading ReadProducer(const SegmentHeader& header) {
  // Acquire pairs with SetState's release: reason and detail belong to this state.
  const auto state = static_cast<DaemonState>(header.state.load(std::memory_order_acquire));
  return ProducerReading{
      .state = state,
      .reason = static_cast<StateReason>(header.reason.load(std::memory_order_relaxed)),
      .detail = header.reason_detail.load(std::memory_order_relaxed),
      .pid = header.pid.load(std::memory_order_relaxed),
      .pid_namespace = header.pid_namespace.load(std::memory_order_relaxed),
      .beat = header.heartbeat_mono_ns.load(std::memory_order_relaxed),
  };
}

// The health a state stands for before the heartbeat is judged (kServing: judge it).
ProducerHealth HealthOf(DaemonState state) {
  switch (state) {
    case DaemonState::kServing:
      return ProducerHealth::kServing;
    case DaemonState::kStarting:
      return ProducerHealth::kStarting;
    case DaemonState::kPaused:
      return ProducerHealth::kPaused;
    case DaemonState::kOutOfService:
      return ProducerHealth::kOutOfService;
    case DaemonState::kStopped:
      return ProducerHealth::kStopped;
  }
  return ProducerHealth::kDead;
}

// The judgement of `reading` at monotonic `now` (ns): the state's health, and for a
// serving daemon its heartbeat's and pid's.
ProducerStatus Judge(const ProducerReading& reading, uint64_t now,
                     std::chrono::nanoseconds max_heartbeat_age) {
  ProducerStatus status{
      .health = HealthOf(reading.state),
      .reason = reading.reason,
      .reason_detail = reading.detail,
      .heartbeat_age_ns = now > reading.beat ? now - reading.beat : 0,
      .pid = reading.pid,
      .heartbeat_in_future = reading.beat > now + kFutureBeatSlackNs,
  };
  if (status.health != ProducerHealth::kServing) return status;
  // A SIGKILLed daemon leaves "serving" behind: its pid or its heartbeat tells. The pid
  // counts only in the daemon's own pid namespace: a client in another one (a container
  // sharing the runtime directory) cannot see a live daemon's pid, so there the heartbeat
  // alone decides. A daemon older than the header's pid_namespace records none (0): its
  // pid counts only with a heartbeat older than kDeadPidBeatAge, as before (it beats at
  // least every 5 ms).
  const bool pid_visible =
      reading.pid_namespace == 0 || reading.pid_namespace == CurrentPidNamespace();
  if (status.heartbeat_in_future) {
    // A CLOCK_MONOTONIC reading of another boot (a segment that carries no boot id): it
    // says nothing about a daemon of this boot, so it is never read as fresh.
    status.health = ProducerHealth::kNotHeartbeating;
  } else if (pid_visible && status.pid != 0 && status.heartbeat_age_ns > kDeadPidBeatAge.count() &&
             kill(static_cast<pid_t>(status.pid), 0) != 0 && errno == ESRCH) {
    status.health = ProducerHealth::kDead;
  } else if (status.heartbeat_age_ns > static_cast<uint64_t>(max_heartbeat_age.count())) {
    status.health = ProducerHealth::kNotHeartbeating;
  }
  return status;
}

}  // namespace

ProducerStatus RingConsumer::CheckProducer(std::chrono::nanoseconds max_heartbeat_age,
                                           Clock::SteadyTime now) const noexcept {
  return Judge(ReadProducer(*header_), static_cast<uint64_t>(SteadyNs(now)), max_heartbeat_age);
}

ProducerStatus RingConsumer::CheckProducer(std::chrono::nanoseconds max_heartbeat_age,
                                           Clock& clock) const noexcept {
  // The header first, then the clock: a beat stored in between is older than this now,
  // never in its future (kFutureBeatSlackNs covers the CPU reordering the two reads).
  const ProducerReading reading = ReadProducer(*header_);
  return Judge(reading, static_cast<uint64_t>(SteadyNs(clock.SteadyNow())), max_heartbeat_age);
}

void RingConsumer::AwaitPublish(uint32_t seen, std::chrono::nanoseconds timeout, bool front_stale,
                                uint64_t want) noexcept {
  // seq_cst increment, then a seq_cst re-check of tail: the other half of the handshake
  // in RingProducer::WakeConsumers (see there).
  consumer_->waiters.fetch_add(1, std::memory_order_seq_cst);
  const bool empty = consumer_->head.load(std::memory_order_seq_cst) >=
                     header_->tail.load(std::memory_order_seq_cst);
  if (empty || front_stale) {
    if (want > 1) AddRefillHint(want);
    // The hint is added BEFORE the request's seq_cst bump: a daemon pass that sees the
    // bump (or starts after it) takes a hint that includes ours (RingProducer::
    // TakeRefillHint; shm/model/README.md, E6).
    FutexBumpAndWake(consumer_->refill_request, 1);
    FutexWait(header_->wake_seq, seen, timeout);
  }
  consumer_->waiters.fetch_sub(1, std::memory_order_relaxed);
}

void RingConsumer::AddRefillHint(uint64_t want) noexcept {
  // Saturating add: a sum that would pass UINT32_MAX stays there (the daemon clamps any
  // value to the ring's capacity anyway). Case analysis of the CAS: (1) it wins: our need
  // is in the word; (2) it loses: another taker added or the daemon took the word (to 0);
  // `current` is the new value and we add to it again.
  const uint32_t need = static_cast<uint32_t>(std::min<uint64_t>(want, UINT32_MAX));
  uint32_t current = consumer_->refill_hint.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t sum = current > UINT32_MAX - need ? UINT32_MAX : current + need;
    // seq_cst: ordered before the refill_request bump that follows (also seq_cst).
    if (consumer_->refill_hint.compare_exchange_weak(current, sum, std::memory_order_seq_cst,
                                                     std::memory_order_relaxed)) {
      return;
    }
  }
}

ServiceSlot* RingConsumer::ClaimServiceSlot(std::string_view service) noexcept {
  assert(service.size() <= kServiceNameMax);  // REQUIRES (ring_consumer.h), debug builds
  const uint64_t pid = static_cast<uint64_t>(getpid());
  for (ServiceSlot& slot : consumer_->services) {
    uint64_t expected = 0;
    if (slot.owner_pid.load(std::memory_order_relaxed) != 0) continue;
    // Acquire pairs with the daemon's release when it freed the slot.
    if (!slot.owner_pid.compare_exchange_strong(expected, pid, std::memory_order_acquire,
                                                std::memory_order_relaxed)) {
      continue;
    }
    slot.taken.store(0, std::memory_order_relaxed);
    for (CounterLane& lane : consumer_->lanes[&slot - consumer_->services]) {
      lane.taken.store(0, std::memory_order_relaxed);
    }
    EncodeServiceName(slot, service);
    // Release: the daemon reads a complete name once it sees name_ready.
    slot.name_ready.store(kServiceSlotActive, std::memory_order_release);
    return &slot;
  }
  return nullptr;
}

void RingConsumer::ReleaseServiceSlot(ServiceSlot* slot) noexcept {
  if (slot == nullptr) return;
  // A forked child closing its copy of the parent's client: the slot is the parent's,
  // which still counts into it; the daemon folds it when the parent exits.
  if (slot->owner_pid.load(std::memory_order_relaxed) != static_cast<uint64_t>(getpid())) return;
  // Retired, not freed: the daemon folds the final count into its per-service totals and
  // then frees the slot, so no count is lost. Release: the final count is visible first.
  slot->name_ready.store(kServiceSlotRetired, std::memory_order_release);
}

CounterLane* RingConsumer::LanesOf(const ServiceSlot* slot) noexcept {
  return consumer_->lanes[slot - consumer_->services];
}

uint64_t RingConsumer::size() const noexcept {
  const uint64_t h = head();
  const uint64_t t = tail();
  return t > h ? t - h : 0;
}

ino_t RingConsumer::inode() const noexcept { return segment_->inode(); }
dev_t RingConsumer::device() const noexcept { return segment_->device(); }

}  // namespace snowflake::shm
