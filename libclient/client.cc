#include "snowflake/client.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <list>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "protocol/control_client.h"
#include "protocol/vocabulary.h"
#include "remote_pool.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/segment_error.h"
#include "snowflake/segment_layout.h"

namespace snowflake {
namespace {

using shm::ProducerHealth;
using shm::ProducerStatus;
using shm::RingConsumer;
using shm::SegmentError;
using shm::SegmentFailure;
using shm::StateReason;
using shm::TakeResult;

constexpr std::chrono::nanoseconds kWaitSlice = std::chrono::milliseconds(1);
// The heartbeat limit for a segment whose producer set no liveness_ms (not a daemon).
constexpr std::chrono::milliseconds kFallbackLiveness{50};

// The heartbeat age a Client tolerates: its own option, or the daemon's liveness_ms.
std::chrono::nanoseconds HeartbeatLimit(const RingConsumer& ring,
                                        std::chrono::milliseconds option) {
  if (option.count() > 0) return option;
  const uint32_t liveness = ring.liveness_ms();
  return liveness != 0 ? std::chrono::milliseconds(liveness) : kFallbackLiveness;
}

Error MakeError(ClientError code, std::string message) noexcept {
  return Error{code, std::move(message)};
}

ClientError FromSegmentError(SegmentError error) {
  switch (error) {
    case SegmentError::kNotFound:
    case SegmentError::kUnpaired:
    case SegmentError::kEarlierBoot:
      return ClientError::kDaemonNotRunning;
    case SegmentError::kPermissionDenied:
      return ClientError::kPermissionDenied;
    case SegmentError::kIncompatibleVersion:
      return ClientError::kIncompatibleVersion;
    case SegmentError::kNotRegularFile:
    case SegmentError::kWrongOwner:
    case SegmentError::kModeTooOpen:
    case SegmentError::kUnsealed:
      return ClientError::kUntrustedSegment;
    case SegmentError::kTruncated:
    case SegmentError::kBadMagic:
    case SegmentError::kSizeMismatch:
    case SegmentError::kBadCapacity:
    case SegmentError::kBadEpoch:
    case SegmentError::kCorruptCounters:
    case SegmentError::kNotIncreasing:
      return ClientError::kCorruptSegment;
    case SegmentError::kSystemError:
      return ClientError::kSystemError;
  }
  return ClientError::kSystemError;
}

// ClientError lists the library's conditions in sf_status order, one below the
// vocabulary's ErrorCode; these pin every value so the conversions cannot drift.
constexpr vocab::ErrorCode VocabularyCode(ClientError code) noexcept {
  return static_cast<vocab::ErrorCode>(static_cast<uint32_t>(code) + 1);
}
constexpr std::pair<ClientError, vocab::ErrorCode> kClientCodes[] = {
    {ClientError::kInvalidServiceName, vocab::ErrorCode::kInvalidServiceName},
    {ClientError::kInvalidArgument, vocab::ErrorCode::kInvalidArgument},
    {ClientError::kDaemonNotRunning, vocab::ErrorCode::kDaemonNotRunning},
    {ClientError::kPermissionDenied, vocab::ErrorCode::kPermissionDenied},
    {ClientError::kIncompatibleVersion, vocab::ErrorCode::kIncompatibleVersion},
    {ClientError::kCorruptSegment, vocab::ErrorCode::kCorruptSegment},
    {ClientError::kUntrustedSegment, vocab::ErrorCode::kUntrustedSegment},
    {ClientError::kDaemonStarting, vocab::ErrorCode::kDaemonStarting},
    {ClientError::kDaemonPaused, vocab::ErrorCode::kDaemonPaused},
    {ClientError::kDaemonOutOfService, vocab::ErrorCode::kDaemonOutOfService},
    {ClientError::kDaemonStopped, vocab::ErrorCode::kDaemonStopped},
    {ClientError::kDaemonNotHeartbeating, vocab::ErrorCode::kDaemonNotHeartbeating},
    {ClientError::kDaemonDead, vocab::ErrorCode::kDaemonDead},
    {ClientError::kTimedOut, vocab::ErrorCode::kTimedOut},
    {ClientError::kSystemError, vocab::ErrorCode::kSystemError},
    {ClientError::kRingEmpty, vocab::ErrorCode::kRingEmpty},
};
constexpr bool ClientErrorsAreTheVocabularys() {
  for (const auto& [client, code] : kClientCodes) {
    if (VocabularyCode(client) != code) return false;
  }
  return true;
}
static_assert(ClientErrorsAreTheVocabularys(),
              "a ClientError is not one below its vocabulary code: the C ABI's sf_status is "
              "both, so neither may move");
// kTimeOutOfRange (sf_bounds) is the C ABI's alone: no C++ call fails with it, so
// ClientError skips its value, and kRingEmpty, the last library code, follows the gap.
static_assert(static_cast<uint32_t>(VocabularyCode(ClientError::kSystemError)) + 1 ==
                      static_cast<uint32_t>(vocab::ErrorCode::kTimeOutOfRange) &&
                  VocabularyCode(ClientError::kRingEmpty) == vocab::kLastLibraryError &&
                  std::size(kClientCodes) + 1 == static_cast<size_t>(vocab::kLastLibraryError),
              "every library code but kTimeOutOfRange has its ClientError");

// The inverse, for the library's codes other than kTimeOutOfRange.
constexpr ClientError FromVocabulary(vocab::ErrorCode code) noexcept {
  return static_cast<ClientError>(static_cast<uint32_t>(code) - 1);
}
static_assert(FromVocabulary(vocab::ErrorCode::kDaemonDead) == ClientError::kDaemonDead,
              "FromVocabulary is VocabularyCode's inverse");

uint64_t HeaderU64(const std::atomic<uint64_t>& field) {
  // Relaxed: status fields are informational and read one by one (see ClientStatus).
  return field.load(std::memory_order_relaxed);
}

// The clock a Client reads: the options', or the real one for null.
Clock& ClockOf(const ClientOptions& options) {
  return options.clock != nullptr ? *options.clock : Clock::Real();
}

// A consumer's options: it reads `clock`.
shm::ConsumerOptions ConsumerReading(Clock& clock) {
  shm::ConsumerOptions options;
  options.clock = &clock;
  return options;
}

// The reason in words; a detail that is a time also says how long ago, by `clock`.
std::string ReasonWords(const ProducerStatus& producer, Clock& clock) {
  return vocab::DescribeReason(producer.reason, producer.reason_detail, clock.NowUnixMs());
}

// The status of `ring` as `options` see it: their heartbeat limit, on their clock.
ClientStatus ReadStatus(const RingConsumer& ring, const ClientOptions& options) {
  const shm::SegmentHeader& header = ring.header();
  Clock& clock = ClockOf(options);
  const ProducerStatus producer =
      ring.CheckProducer(HeartbeatLimit(ring, options.max_heartbeat_age), clock);
  const auto state = static_cast<shm::DaemonState>(header.state.load(std::memory_order_acquire));
  ClientStatus status;
  status.state = std::string(vocab::StateCode(state));
  status.health = std::string(vocab::HealthCode(producer.health));
  status.reason = std::string(vocab::ReasonCode(producer.reason));
  status.reason_text = ReasonWords(producer, clock);
  status.reason_detail = producer.reason_detail;
  status.machine = header.machine.load(std::memory_order_relaxed);
  status.epoch_unix_ms = static_cast<int64_t>(HeaderU64(header.epoch_unix_ms));
  status.id_bits = shm::UnpackIdBits(header.id_bits.load(std::memory_order_relaxed));
  status.incarnation = HeaderU64(header.incarnation);
  status.daemon_pid = producer.pid;
  status.heartbeat_age_ns = producer.heartbeat_age_ns;
  status.ring_fill = ring.has_region() ? ring.size() : 0;
  status.ring_capacity = ring.capacity();
  status.fill_target = HeaderU64(header.fill_target);
  status.published_total = HeaderU64(header.published_total);
  // Without the region (the daemon did not answer attach) nothing says how many were
  // taken: unknown, never a number read from a stand-in.
  status.counts_known = ring.has_region();
  status.taken_total = status.counts_known ? ring.head() : 0;
  status.drained_total = HeaderU64(header.drained_total);
  status.clock_pauses = HeaderU64(header.clock_pauses);
  status.uncounted = status.counts_known ? ring.uncounted() : 0;
  status.liveness_ms = header.liveness_ms.load(std::memory_order_relaxed);
  status.freshness_bound_ms = header.freshness_bound_ms.load(std::memory_order_relaxed);
  // The daemon's own words only say why it does not serve; a serving daemon has none.
  if (state != shm::DaemonState::kServing) status.status_text = ring.status_text().value_or("");
  return status;
}

// "; snowflaked says: <the segment's status text>", or "" when it wrote none (an older
// daemon, or a state it has nothing to add to) or the text kept changing while read.
std::string DaemonSays(const RingConsumer& ring) {
  const std::string text = ring.status_text().value_or("");
  return text.empty() ? "" : "; snowflaked says: " + text;
}

// The error Next() reports for a daemon that is not serving.
// Only here, on the way out of a take that failed, is the status text read: never on the
// take's path.
Error Unavailable(const ProducerStatus& producer, const RingConsumer& ring,
                  const std::filesystem::path& runtime_dir, std::chrono::nanoseconds max_age,
                  Clock& clock) {
  const std::string where = " (runtime directory " + runtime_dir.string() + ")";
  const std::string pid = std::to_string(producer.pid);
  // The code from the vocabulary's health table; the sentence from here.
  const ClientError code = FromVocabulary(vocab::HealthError(producer.health));
  switch (producer.health) {
    case ProducerHealth::kStarting:
      return MakeError(code, "snowflaked is starting" + where + "; retry shortly or fail over");
    case ProducerHealth::kPaused:
      return MakeError(code, "snowflaked paused generation: " + ReasonWords(producer, clock) +
                                 where + DaemonSays(ring) + "; fail over, it resumes by itself");
    case ProducerHealth::kOutOfService: {
      const std::string why = ReasonWords(producer, clock);
      return MakeError(code, "snowflaked is out of service" + (why.empty() ? "" : ": " + why) +
                                 where + DaemonSays(ring) +
                                 "; fail over until an operator runs `snowflakectl resume`");
    }
    case ProducerHealth::kStopped:
      return MakeError(code, "snowflaked (pid " + pid + ") has stopped" + where +
                                 "; fail over, or retry once it is restarted");
    case ProducerHealth::kNotHeartbeating:
      if (producer.heartbeat_in_future) {
        return MakeError(code, "snowflaked (pid " + pid +
                                   ")'s heartbeat is in the future of this host's monotonic clock, "
                                   "so it is not a beat of this boot" +
                                   where + "; it is not running: fail over, and start it");
      }
      return MakeError(code, "snowflaked (pid " + pid + ") has not refreshed its heartbeat for " +
                                 std::to_string(producer.heartbeat_age_ns / 1'000'000) +
                                 " ms (limit " + std::to_string(max_age.count() / 1'000'000) +
                                 " ms)" + where + "; it is hung or stopped: fail over");
    case ProducerHealth::kDead:
      return MakeError(code, "snowflaked (pid " + pid + ") is gone without shutting down" + where +
                                 "; fail over and restart it");
    case ProducerHealth::kServing:
      break;
  }
  return MakeError(code, "internal error: serving daemon reported as unavailable");
}

// How long an open may wait for the daemon to hand over its consumer region: a host's
// processes starting at once queue on one control socket. A daemon whose heartbeat stops
// meanwhile is given up on at once (the take then reports it).
constexpr std::chrono::milliseconds kAttachBudget{10'000};
// Client::Inspect's: a status must not wait for a daemon that does not answer, nor fail for
// one that refuses; its counts are then unknown (the control socket's own answer says why).
constexpr std::chrono::milliseconds kInspectAttachBudget{1'000};

// A ControlError of the attach, as the library's error.
Error AttachError(const protocol::ControlError& error, std::chrono::milliseconds budget) {
  using vocab::ErrorCode;
  switch (error.code) {
    case ErrorCode::kUnknownCommand:
    case ErrorCode::kBadReply:
    case ErrorCode::kRefused:
      return MakeError(ClientError::kIncompatibleVersion,
                       error.message +
                           " (the daemon does not speak this library's attach: run a daemon and "
                           "client library of the same release; restart the service after the "
                           "package upgrade)");
    case ErrorCode::kTooManyConnections:
    case ErrorCode::kDaemonStarting:
      return MakeError(ClientError::kTimedOut,
                       "snowflaked did not hand over its consumer region within " +
                           std::to_string(budget.count()) + " ms: " + error.message);
    case ErrorCode::kUsage:
      return MakeError(ClientError::kInvalidArgument, error.message);
    default:
      break;
  }
  const auto code = static_cast<uint32_t>(error.code);
  if (code >= static_cast<uint32_t>(vocab::kFirstLibraryError) &&
      code <= static_cast<uint32_t>(vocab::kLastLibraryError) &&
      error.code != ErrorCode::kTimeOutOfRange) {
    return MakeError(FromVocabulary(error.code), error.message);
  }
  return MakeError(ClientError::kSystemError, error.message);
}

// Whether a daemon in this health answers attach: one that stopped, died or stopped
// heartbeating does not, and its ring file says so to every take.
bool MayAnswer(ProducerHealth health) {
  return health != ProducerHealth::kStopped && health != ProducerHealth::kDead &&
         health != ProducerHealth::kNotHeartbeating;
}

// Opens the segment in runtime_dir: its ring file (read-only), and its consumer region,
// handed over by the daemon on the control socket (protocol::Attach) and checked before it
// is mapped. A daemon that does not answer (stopped, dead, hung) leaves the ring file alone
// mapped, without a region (has_region() false): every take then reports the state its
// header shows, and a later take attaches once a daemon serves. `options`: the Client's
// heartbeat limit (max_heartbeat_age; 0: the daemon's own) and its clock, which the ring
// reads and the attach's deadline and backoff are measured on.
// `budget`: how long the attach may take; `observe_on_failure`: when the attach fails, the
// ring file alone (the counts unknown) instead of the attach's error.
tl::expected<RingConsumer, Error> OpenRing(const std::filesystem::path& runtime_dir,
                                           const ClientOptions& options,
                                           std::chrono::milliseconds budget = kAttachBudget,
                                           bool observe_on_failure = false) {
  Clock& clock = ClockOf(options);
  const auto deadline = clock.SteadyNow() + budget;
  std::chrono::milliseconds backoff{1};
  // A segment replaced between the attach and the open of its ring file is followed a few
  // times; a region that never pairs with the ring file is an error.
  int unpaired_retries = 3;
  for (;;) {
    auto observed = RingConsumer::Observe(runtime_dir, ConsumerReading(clock));
    if (!observed) {
      return tl::unexpected(
          MakeError(FromSegmentError(observed.error().code), std::move(observed.error().message)));
    }
    const std::chrono::nanoseconds limit = HeartbeatLimit(*observed, options.max_heartbeat_age);
    const auto gave_up = [&observed, &clock, limit] {
      return !MayAnswer(observed->CheckProducer(limit, clock).health);
    };
    if (gave_up()) return std::move(*observed);
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.SteadyNow());
    auto attached = protocol::Attach(runtime_dir, observed->owner(),
                                     std::max(left, std::chrono::milliseconds(1)), gave_up);
    if (!attached) {
      const protocol::ControlError& error = attached.error();
      // Gone since the header said it ran, or given up on: the ring file tells the takes.
      if (error.code == vocab::ErrorCode::kDaemonNotRunning ||
          error.code == vocab::ErrorCode::kDaemonNotHeartbeating) {
        return std::move(*observed);
      }
      const bool busy = error.refused && (error.code == vocab::ErrorCode::kTooManyConnections ||
                                          error.code == vocab::ErrorCode::kDaemonStarting);
      if (busy && clock.SteadyNow() + backoff < deadline) {
        clock.SleepFor(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
        continue;
      }
      if (observe_on_failure) return std::move(*observed);
      return tl::unexpected(AttachError(error, budget));
    }
    if (attached->record.format_version != shm::kVersion) {
      return tl::unexpected(MakeError(
          ClientError::kIncompatibleVersion,
          "snowflaked in " + runtime_dir.string() + " serves segment format " +
              std::to_string(attached->record.format_version) + ", this library speaks format " +
              std::to_string(shm::kVersion) +
              ": run a daemon and client library of the same release (restart the service "
              "after the package upgrade)"));
    }
    const uint64_t replied_segment = attached->record.segment_id;
    auto ring =
        RingConsumer::Open(runtime_dir, std::move(attached->region), ConsumerReading(clock));
    if (ring && ring->segment_id() != replied_segment) {
      // The region pairs with the ring file but not with the reply: not the region of the
      // segment the daemon named.
      ring = tl::unexpected(shm::SegmentFailure{
          SegmentError::kUnpaired, "snowflaked's attach reply names segment " +
                                       std::to_string(replied_segment) +
                                       " but its region and ring file belong to segment " +
                                       std::to_string(ring->segment_id()) + "; retry"});
    }
    if (!ring && ring.error().code == SegmentError::kUnpaired && unpaired_retries-- > 0 &&
        clock.SteadyNow() < deadline) {
      continue;  // replaced between the attach and the ring file: attach to the new one
    }
    if (!ring) {
      return tl::unexpected(
          MakeError(FromSegmentError(ring.error().code), std::move(ring.error().message)));
    }
    return std::move(*ring);
  }
}

std::filesystem::path ResolveRuntimeDir(const ClientOptions& options) {
  return options.runtime_dir.empty() ? DefaultRuntimeDir() : options.runtime_dir;
}

}  // namespace

std::string_view ClientErrorName(ClientError code) noexcept {
  return vocab::ErrorName(VocabularyCode(code));
}

std::filesystem::path DefaultRuntimeDir() noexcept {
  try {
    const char* env = std::getenv("SNOWFLAKE_RUNTIME_DIR");
    if (env != nullptr && *env != '\0') return std::filesystem::path(env);
    return std::filesystem::path("/run/snowflaked");
  } catch (...) {
    return {};
  }
}

tl::expected<void, Error> ValidateServiceName(std::string_view service) noexcept {
  const bool length_ok = !service.empty() && service.size() <= shm::kServiceNameMax;
  const bool chars_ok = std::all_of(service.begin(), service.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
  if (length_ok && chars_ok) return {};
  try {
    return tl::unexpected(
        MakeError(ClientError::kInvalidServiceName,
                  "invalid service name '" + std::string(service.substr(0, 100)) +
                      "': a service name is 1 to 63 characters of a-z, 0-9, '.', '_' and '-'"));
  } catch (...) {
    return tl::unexpected(Error{ClientError::kInvalidServiceName, {}});
  }
}

namespace {

struct Attachment;

// --- Per-thread counting (see "Counting" in client.h).

// Every live Attachment by its id, so a thread that exits releases its lanes only in
// attachments that still exist. Leaked on purpose: thread-exit destructors may run after
// static destructors at process exit.
struct AttachmentRegistry {
  std::mutex mutex;
  std::unordered_map<uint64_t, Attachment*> live;  // guarded by mutex
};
AttachmentRegistry& Registry() {
  static auto* registry = new AttachmentRegistry;
  return *registry;
}
// Ids are never reused, so a thread's cached lane can never match a later attachment
// that happens to live at a freed one's address.
std::atomic<uint64_t> next_attachment_id{1};

// One counter lane this thread owns in one attachment.
struct OwnedLane {
  uint64_t attachment_id;
  std::atomic<uint64_t>* counter;  // the lane's word in the segment: only we store to it
  uint64_t total;                  // our copy of *counter
  size_t index;
};

// Every lane this thread owns; released at thread exit (their totals stay in the lanes).
struct ThreadLanes {
  std::list<OwnedLane> owned;  // a list: current_lane points into it
  ~ThreadLanes();
};
thread_local ThreadLanes thread_lanes;
// The take path's cache: the lane this thread counted in last. initial-exec: one
// %fs-relative load, no __tls_get_addr call from the shared library.
thread_local OwnedLane* current_lane __attribute__((tls_model("initial-exec"))) = nullptr;

// A process forked from one that holds Clients inherits them, and with them the lanes its
// forking thread owned: a child storing its own running total into the parent's lane
// would overwrite the parent's count. So a forked child never counts in lanes: the
// pthread_atfork child handler (which runs in the child's only thread) forgets the lane
// that thread cached, and from then on every take of the child adds to the slot's shared
// word with fetch_add (exact, slower only there; no mutex the parent may have held), and
// its threads release no lanes (they own none; the parent's threads release theirs).
//
// The registry's mutex is held across fork() (taken in the prepare handler, released in
// both processes after): a child inherits it free and the map whole, so a Client it
// destroys leaves the registry without waiting on a thread that exists only in the parent.
// Without this, a fork while another thread claimed its first lane left the child's
// Client destructor blocked forever.
std::atomic<bool> in_forked_child{false};

void LockRegistryBeforeFork() noexcept { Registry().mutex.lock(); }
void UnlockRegistryAfterFork() noexcept { Registry().mutex.unlock(); }

void ForgetLanesInForkedChild() noexcept {
  in_forked_child.store(true, std::memory_order_relaxed);
  current_lane = nullptr;
  UnlockRegistryAfterFork();
}

void RegisterForkHandlerOnce() noexcept {
  static const bool registered [[maybe_unused]] =
      pthread_atfork(LockRegistryBeforeFork, UnlockRegistryAfterFork, ForgetLanesInForkedChild) ==
      0;
}

// One mapped segment and this Client's counters in it. Immutable once published through
// Impl::current_ (except the lane bookkeeping, under lanes_mutex), so the fast path reads
// it without a lock.
struct Attachment {
  const uint64_t id;
  RingConsumer ring;
  shm::ServiceSlot* slot;           // nullptr if every slot was taken
  shm::CounterLane* lanes;          // slot's lanes; nullptr without a slot
  std::atomic<uint64_t> own_count;  // this Client's takes when there is no slot
  IdLayout layout;
  std::mutex lanes_mutex;
  bool lane_used[shm::kLanesPerService] = {};  // guarded by lanes_mutex

  Attachment(RingConsumer consumer, std::string_view service)
      : id(next_attachment_id.fetch_add(1, std::memory_order_relaxed)),
        ring(std::move(consumer)),
        // Without a region nothing is taken, so nothing is counted.
        slot(ring.has_region() ? ring.ClaimServiceSlot(service) : nullptr),
        lanes(slot != nullptr ? ring.LanesOf(slot) : nullptr),
        own_count(0) {
    RegisterForkHandlerOnce();
    layout = ring.layout();  // the segment's epoch and bits
    std::lock_guard lock(Registry().mutex);
    Registry().live.emplace(id, this);
  }
  ~Attachment() {
    {
      std::lock_guard lock(Registry().mutex);
      Registry().live.erase(id);
    }
    ring.ReleaseServiceSlot(slot);
  }

  // Every ID this attachment has counted.
  uint64_t Taken() const {
    if (slot == nullptr) return own_count.load(std::memory_order_relaxed);
    uint64_t total = slot->taken.load(std::memory_order_relaxed);
    for (size_t i = 0; i < shm::kLanesPerService; ++i) {
      total += lanes[i].taken.load(std::memory_order_relaxed);
    }
    return total;
  }
};

ThreadLanes::~ThreadLanes() {
  current_lane = nullptr;
  // A forked child's lanes list is its forking thread's copy: those lanes are the
  // parent's, and a lanes_mutex the parent's other threads held at the fork stays held.
  if (in_forked_child.load(std::memory_order_relaxed)) return;
  std::lock_guard registry_lock(Registry().mutex);
  for (const OwnedLane& lane : owned) {
    const auto it = Registry().live.find(lane.attachment_id);
    if (it == Registry().live.end()) continue;  // that Client is closed already
    std::lock_guard lanes_lock(it->second->lanes_mutex);
    it->second->lane_used[lane.index] = false;
  }
}

// Counts n IDs this thread took through `a`: the first take of a thread through an
// attachment claims a lane (or falls back to a shared fetch_add); later ones store to it.
void CountSlow(Attachment* a, uint64_t n) noexcept {
  if (a->slot == nullptr) {
    a->own_count.fetch_add(n, std::memory_order_relaxed);
    a->ring.CountUncounted(n);
    return;
  }
  if (in_forked_child.load(std::memory_order_relaxed)) {
    a->slot->taken.fetch_add(n, std::memory_order_relaxed);
    return;
  }
  try {
    for (OwnedLane& lane : thread_lanes.owned) {
      if (lane.attachment_id != a->id) continue;
      current_lane = &lane;
      lane.total += n;
      lane.counter->store(lane.total, std::memory_order_relaxed);
      return;
    }
    std::optional<size_t> index;
    {
      std::lock_guard lock(a->lanes_mutex);
      for (size_t i = 0; i < shm::kLanesPerService && !index; ++i) {
        if (!a->lane_used[i]) {
          a->lane_used[i] = true;
          index = i;
        }
      }
    }
    if (!index) {
      // More threads than lanes: these share the slot's word.
      a->slot->taken.fetch_add(n, std::memory_order_relaxed);
      return;
    }
    {
      // Forget lanes of closed Clients, so a thread that opens many keeps a short list.
      std::lock_guard lock(Registry().mutex);
      thread_lanes.owned.remove_if([](const OwnedLane& lane) {
        if (Registry().live.count(lane.attachment_id) != 0) return false;
        if (current_lane == &lane) current_lane = nullptr;
        return true;
      });
    }
    std::atomic<uint64_t>* counter = &a->lanes[*index].taken;
    // The lane's previous owner (a thread that exited) released it under lanes_mutex after
    // its last store, and we claimed it under the same mutex: we continue from its total.
    OwnedLane& lane = thread_lanes.owned.emplace_back(
        OwnedLane{a->id, counter, counter->load(std::memory_order_relaxed), *index});
    current_lane = &lane;
    lane.total += n;
    lane.counter->store(lane.total, std::memory_order_relaxed);
  } catch (...) {
    // Out of memory for the list: count the shared way, still exact.
    a->slot->taken.fetch_add(n, std::memory_order_relaxed);
  }
}

// The take path's count: a store to this thread's own lane, no read-modify-write.
inline void Count(Attachment* a, uint64_t n) noexcept {
  OwnedLane* lane = current_lane;
  if (lane != nullptr && lane->attachment_id == a->id) [[likely]] {
    lane->total += n;
    // Relaxed: only this thread stores to the lane; the daemon reads it racily.
    lane->counter->store(lane->total, std::memory_order_relaxed);
    return;
  }
  CountSlow(a, n);
}

// What one attempt of the slow path found.
struct Attempt {
  size_t taken;
  bool stale;  // the ring's front is outside the freshness bound
};

}  // namespace

class Client::Impl {
 public:
  Impl(std::string service, const ClientOptions& options, std::filesystem::path runtime_dir)
      : service_(std::move(service)),
        options_(options),
        clock_(ClockOf(options)),
        runtime_dir_(std::move(runtime_dir)) {}

  tl::expected<void, Error> Attach(RingConsumer ring) {
    auto attachment = std::make_unique<Attachment>(std::move(ring), service_);
    Attachment* raw = attachment.get();
    attachments_.push_back(std::move(attachment));
    // Release: a thread that loads the pointer sees the fully built attachment.
    current_.store(raw, std::memory_order_release);
    return {};
  }

  // The fast path: one fresh take and its count, inlined into Client::Next(); all else
  // (waiting, failover, errors) is out of line in NextSlow(), so the fast path keeps few
  // values live across the clock read and needs no large stack frame.
  tl::expected<uint64_t, Error> Next() noexcept {
    Attachment* a = current_.load(std::memory_order_acquire);
    uint64_t id = 0;
    if (a->ring.TryTakeFresh(&id) == TakeResult::kTaken) [[likely]] {
      Count(a, 1);
      return id;
    }
    return NextSlow();
  }

  // Next() through the failover pool: out of line, so a Client without remotes pays only
  // the pointer test for it.
  [[gnu::noinline]] tl::expected<uint64_t, Error> NextThroughRemotes(
      detail::RemotePool& remotes) noexcept {
    uint64_t id = 0;
    auto taken =
        remotes.Take({&id, 1}, [this](std::span<uint64_t> out) { return NextBatchOrAttach(out); });
    if (!taken) return tl::unexpected(std::move(taken.error()));
    return id;
  }

  [[gnu::noinline]] tl::expected<uint64_t, Error> NextSlow() noexcept {
    uint64_t id = 0;
    auto taken = Slow([&id](Attachment& at) {
      const TakeResult result = at.ring.TryTakeFresh(&id);
      return Attempt{result == TakeResult::kTaken ? 1u : 0u, result == TakeResult::kStale};
    });
    if (!taken) return tl::unexpected(std::move(taken.error()));
    return id;
  }

  tl::expected<size_t, Error> NextBatch(std::span<uint64_t> out) noexcept {
    if (out.empty()) {
      return tl::unexpected(Error{ClientError::kInvalidArgument, "NextBatch: empty span"});
    }
    Attachment* a = current_.load(std::memory_order_acquire);
    TakeResult result;
    if (const size_t n = a->ring.TryTakeBatchFresh(out.data(), out.size(), &result); n > 0)
        [[likely]] {
      Count(a, n);
      return n;
    }
    // The ring is empty (or its front stale): ask for the whole batch at once, so the
    // daemon publishes it in one pass instead of a fill target per wake-up.
    return Slow(
        [out](Attachment& at) {
          TakeResult attempt;
          const size_t n = at.ring.TryTakeBatchFresh(out.data(), out.size(), &attempt);
          return Attempt{n, attempt == TakeResult::kStale};
        },
        out.size());
  }

  // The take behind a Client with remotes (RemotePool's LocalTake). Such a Client may have
  // been opened with no local daemon at all: then it looks for one now and then (it may
  // start later), and says kDaemonNotRunning until it finds one, so the remotes serve.
  tl::expected<size_t, Error> NextBatchOrAttach(std::span<uint64_t> out) noexcept {
    if (current_.load(std::memory_order_acquire) == nullptr) [[unlikely]] {
      if (!AttachLate()) {
        return tl::unexpected(MakeError(
            ClientError::kDaemonNotRunning,
            "no snowflaked segment in " + runtime_dir_.string() + " (no local daemon)"));
      }
    }
    return NextBatch(out);
  }

  const IdLayout& layout() const noexcept {
    Attachment* a = current_.load(std::memory_order_acquire);
    return a != nullptr ? a->layout : no_daemon_layout_;
  }

  tl::expected<ClientStatus, Error> GetStatus() const noexcept {
    try {
      Attachment* a = current_.load(std::memory_order_acquire);
      if (a == nullptr) {
        return tl::unexpected(MakeError(ClientError::kDaemonNotRunning,
                                        "no snowflaked segment in " + runtime_dir_.string() +
                                            " (this client takes from its remotes only)"));
      }
      ClientStatus status = ReadStatus(a->ring, options_);
      std::lock_guard lock(mutex_);
      for (const auto& attachment : attachments_) status.client_taken += attachment->Taken();
      return status;
    } catch (const std::exception& e) {
      return tl::unexpected(
          MakeError(ClientError::kSystemError, std::string("status: ") + e.what()));
    }
  }

  const std::string& service() const noexcept { return service_; }

 private:
  // The slow path: the ring was empty, or its front too old. `take` tries once. `want`:
  // how many IDs the caller still needs, sent to the daemon with each refill request as
  // the segment's refill hint (0: a single take, the daemon's own fill target suffices).
  template <typename Take>
  tl::expected<size_t, Error> Slow(Take take, size_t want = 0) noexcept {
    try {
      const auto deadline = clock_.SteadyNow() + options_.wait_timeout;
      Attachment* hinted = nullptr;  // the segment our hint went to, once it went
      for (;;) {
        Attachment* a = current_.load(std::memory_order_acquire);
        // Read before re-checking the ring: a publish after our check moves wake_seq, so
        // the futex wait below returns at once instead of sleeping through it.
        const uint32_t seen = a->ring.wake_seq();
        const Attempt attempt = take(*a);
        if (attempt.taken > 0) {
          Count(a, attempt.taken);
          return attempt.taken;
        }
        const std::chrono::nanoseconds limit = HeartbeatLimit(a->ring, options_.max_heartbeat_age);
        const ProducerStatus producer = a->ring.CheckProducer(limit, clock_);
        if (producer.health != ProducerHealth::kServing) {
          if (Reattach(a)) continue;
          return tl::unexpected(Unavailable(producer, a->ring, runtime_dir_, limit, clock_));
        }
        const auto remaining = deadline - clock_.SteadyNow();
        if (!a->ring.has_region()) [[unlikely]] {
          // Opened while the daemon did not answer, and its header says it serves: attach,
          // or wait a slice for it to answer or for its header to say why not (a daemon
          // killed a moment ago still looks healthy until its heartbeat ages).
          auto attached = AttachRegion(
              a, std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::max<std::chrono::nanoseconds>(remaining, std::chrono::milliseconds(1))));
          if (!attached) return tl::unexpected(std::move(attached.error()));
          if (*attached) continue;
          if (remaining <= std::chrono::nanoseconds::zero()) {
            std::lock_guard lock(mutex_);
            return tl::unexpected(last_attach_error_);
          }
          a->ring.AwaitPublish(seen, std::min<std::chrono::nanoseconds>(kWaitSlice, remaining));
          continue;
        }
        if (remaining <= std::chrono::nanoseconds::zero()) {
          // Stale IDs: a daemon that heartbeats but does not drain its ring, so fail over.
          // Empty: the daemon is alive (a hung one fails the heartbeat check above first:
          // liveness_ms is shorter than the default wait) and refilling, so retry here.
          const std::string within = "no ID within " +
                                     std::to_string(options_.wait_timeout.count()) +
                                     " ms: the ring in " + runtime_dir_.string();
          if (attempt.stale) {
            return tl::unexpected(MakeError(
                ClientError::kTimedOut,
                within + " held only IDs older than its freshness bound (" +
                    std::to_string(
                        a->ring.header().freshness_bound_ms.load(std::memory_order_relaxed)) +
                    " ms) although snowflaked looks healthy: it is not draining its ring; "
                    "fail over"));
          }
          return tl::unexpected(MakeError(
              ClientError::kRingEmpty,
              within + " stayed empty although snowflaked looks healthy (it is refilling); "
                       "retry here"));
        }
        // Short slices so a daemon that dies or stops without waking us is noticed
        // within about a slice. A stale front asks the daemon to drain it. The hint goes
        // with the first request, and again only once the daemon has taken the word
        // (it reads 0): re-adding it every slice would ask a slow daemon for the batch
        // once per slice, and a ring filled to several times the need holds IDs nobody
        // takes until they age.
        const bool hint_pending = hinted == a && a->ring.refill_hint() != 0;
        a->ring.AwaitPublish(
            seen,
            std::min<std::chrono::nanoseconds>(
                kWaitSlice, std::chrono::duration_cast<std::chrono::nanoseconds>(remaining)),
            attempt.stale, hint_pending ? 0 : want);
        hinted = a;
      }
    } catch (const std::exception& e) {
      return tl::unexpected(MakeError(ClientError::kSystemError, std::string("take: ") + e.what()));
    }
  }

  // Called when `seen` is not serving. If the file at the segment path is now a different
  // segment (a daemon created a new one), attaches to it and makes it current. Returns
  // whether the caller should retry.
  bool Reattach(Attachment* seen) {
    std::lock_guard lock(mutex_);
    Attachment* current = current_.load(std::memory_order_acquire);
    if (current != seen) return true;  // another thread already moved on
    const std::filesystem::path path = runtime_dir_ / shm::kSegmentFileName;
    struct stat info {};
    if (stat(path.c_str(), &info) != 0) return false;
    if (info.st_ino == current->ring.inode() && info.st_dev == current->ring.device()) {
      return false;
    }
    auto maybe_ring = OpenRing(runtime_dir_, options_);
    if (!maybe_ring) return false;
    // Kept, slot and all, until the Client is destroyed: other threads may still be inside
    // a take on the old mapping and add to its counter. Its segment is retired, so no
    // daemon reads that slot any more.
    Attach(std::move(*maybe_ring));
    return true;
  }

  // `seen` has no consumer region (the daemon did not answer when it was opened) and its
  // header says it serves: attaches to the segment at the path and makes it current.
  // Returns true when the caller should take again (attached, or another thread did),
  // false when the daemon does not answer yet (last_attach_error_ says how; tried at most
  // every kRegionRetry), or an error that waiting does not cure (permissions, versions, an
  // untrusted region). `budget`: how long this attach may wait for a busy daemon.
  tl::expected<bool, Error> AttachRegion(Attachment* seen, std::chrono::milliseconds budget) {
    std::lock_guard lock(mutex_);
    if (current_.load(std::memory_order_acquire) != seen) return true;  // another thread did
    const auto now = clock_.SteadyNow();
    if (now < next_region_try_) return false;
    next_region_try_ = now + kRegionRetry;
    auto maybe_ring = OpenRing(runtime_dir_, options_, std::min(budget, kAttachBudget));
    if (!maybe_ring) {
      if (maybe_ring.error().code != ClientError::kTimedOut) {
        return tl::unexpected(std::move(maybe_ring.error()));
      }
      last_attach_error_ = std::move(maybe_ring.error());  // busy: wait on
      return false;
    }
    if (!maybe_ring->has_region() && maybe_ring->inode() == seen->ring.inode() &&
        maybe_ring->device() == seen->ring.device()) {
      last_attach_error_ =
          MakeError(ClientError::kDaemonNotRunning,
                    "snowflaked looks healthy in " + runtime_dir_.string() +
                        " but did not hand over its consumer region on its control socket within " +
                        std::to_string(options_.wait_timeout.count()) + " ms; retry or fail over");
      return false;
    }
    Attach(std::move(*maybe_ring));
    return true;
  }

  // A Client opened without a local daemon: tries to map the segment, at most every
  // kLateAttachInterval (a stat that fails is cheap, but not on every take). Returns whether
  // the Client is attached now.
  bool AttachLate() noexcept {
    try {
      const int64_t now = clock_.SteadyNow().time_since_epoch().count();
      int64_t due = next_attach_try_.load(std::memory_order_relaxed);
      if (now < due) return false;
      const int64_t next =
          now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(kLateAttachInterval)
                    .count();
      if (!next_attach_try_.compare_exchange_strong(due, next, std::memory_order_relaxed)) {
        return current_.load(std::memory_order_acquire) != nullptr;
      }
      std::lock_guard lock(mutex_);
      if (current_.load(std::memory_order_acquire) != nullptr) return true;
      auto maybe_ring = OpenRing(runtime_dir_, options_);
      if (!maybe_ring) return false;
      return Attach(std::move(*maybe_ring)).has_value();
    } catch (...) {
      return false;
    }
  }

  static constexpr std::chrono::milliseconds kLateAttachInterval{100};
  // How often a take waiting for a daemon that does not answer attach asks it again.
  static constexpr std::chrono::milliseconds kRegionRetry{10};

  const std::string service_;
  const ClientOptions options_;
  Clock& clock_;  // options_.clock, or the real one
  const std::filesystem::path runtime_dir_;
  const IdLayout no_daemon_layout_{};  // the default epoch and bits, until a daemon is found
  std::atomic<int64_t> next_attach_try_{0};
  // AttachRegion()'s schedule and its last failure. Guarded by mutex_.
  Clock::SteadyTime next_region_try_{};
  Error last_attach_error_{ClientError::kDaemonNotRunning, "not attached yet"};
  // The attachment takes use. Written under mutex_; read lock-free.
  std::atomic<Attachment*> current_{nullptr};
  // Every attachment ever made, newest last. Guarded by mutex_.
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Attachment>> attachments_;
};

Client::Client(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

tl::expected<Client, Error> Client::Open(std::string_view service,
                                         const ClientOptions& options) noexcept {
  if (auto valid = ValidateServiceName(service); !valid) return tl::unexpected(valid.error());
  try {
    std::filesystem::path runtime_dir = ResolveRuntimeDir(options);
    auto remotes = options.remotes.empty() && options.remotes_from_environment
                       ? detail::RemotePool::FromEnvironment()
                       : options.remotes;
    detail::RemotePool::TlsFiles tls;
    if (!remotes.empty()) {
      auto checked = detail::RemotePool::Check(remotes, options);
      if (!checked) return tl::unexpected(std::move(checked.error()));
      tls = std::move(*checked);
    }
    auto maybe_ring = OpenRing(runtime_dir, options);
    // No local daemon (no segment, no runtime dir: a host without snowflaked) is an error
    // only without remotes; with them the Client takes from the remotes and maps the
    // segment once one appears. Any other failure (permissions, version) stays an error.
    const bool remotes_only = !maybe_ring && !remotes.empty() &&
                              maybe_ring.error().code == ClientError::kDaemonNotRunning;
    if (!maybe_ring && !remotes_only) return tl::unexpected(std::move(maybe_ring.error()));
    auto impl = std::make_unique<Impl>(std::string(service), options, std::move(runtime_dir));
    if (!remotes_only) {
      if (auto attached = impl->Attach(std::move(*maybe_ring)); !attached) {
        return tl::unexpected(std::move(attached.error()));
      }
    }
    Client client(std::move(impl));
    if (!remotes.empty()) {
      client.remotes_ = std::make_unique<detail::RemotePool>(
          std::string(service), std::move(remotes), options, std::move(tls), client.layout());
    }
    return client;
  } catch (const std::exception& e) {
    return tl::unexpected(MakeError(ClientError::kSystemError, std::string("open: ") + e.what()));
  }
}

tl::expected<ClientStatus, Error> Client::Inspect(const ClientOptions& options) noexcept {
  try {
    auto maybe_ring = OpenRing(ResolveRuntimeDir(options), options, kInspectAttachBudget,
                               /*observe_on_failure=*/true);
    if (!maybe_ring) return tl::unexpected(std::move(maybe_ring.error()));
    return ReadStatus(*maybe_ring, options);
  } catch (const std::exception& e) {
    return tl::unexpected(MakeError(ClientError::kSystemError, std::string("status: ") + e.what()));
  }
}

tl::expected<uint64_t, Error> Client::Next() noexcept {
  if (remotes_ != nullptr) [[unlikely]] return impl_->NextThroughRemotes(*remotes_);
  return impl_->Next();
}

tl::expected<size_t, Error> Client::NextBatch(std::span<uint64_t> out) noexcept {
  if (remotes_ != nullptr && !out.empty()) [[unlikely]] {
    return remotes_->Take(out,
                          [this](std::span<uint64_t> s) { return impl_->NextBatchOrAttach(s); });
  }
  return impl_->NextBatch(out);
}

tl::expected<DecodedId, Error> Client::Decode(uint64_t id) const noexcept {
  auto decoded = impl_->layout().Decode(id);
  if (decoded) return *decoded;
  try {
    return tl::unexpected(
        MakeError(ClientError::kInvalidArgument,
                  std::to_string(id) + ": " + std::string(IdErrorMessage(decoded.error()))));
  } catch (...) {
    return tl::unexpected(Error{ClientError::kInvalidArgument, {}});
  }
}

IdLayout Client::layout() const noexcept { return impl_->layout(); }

tl::expected<ClientStatus, Error> Client::GetStatus() const noexcept { return impl_->GetStatus(); }

const std::string& Client::service() const noexcept { return impl_->service(); }

}  // namespace snowflake
