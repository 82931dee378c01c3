#include "snowflake/client.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

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

constexpr std::chrono::nanoseconds kWaitSlice = std::chrono::milliseconds(1);

Error MakeError(ClientError code, std::string message) noexcept {
  return Error{code, std::move(message)};
}

ClientError FromSegmentError(SegmentError error) {
  switch (error) {
    case SegmentError::kNotFound:
      return ClientError::kDaemonNotRunning;
    case SegmentError::kPermissionDenied:
      return ClientError::kPermissionDenied;
    case SegmentError::kIncompatibleVersion:
      return ClientError::kIncompatibleVersion;
    case SegmentError::kNotRegularFile:
    case SegmentError::kWrongOwner:
    case SegmentError::kModeTooOpen:
      return ClientError::kUntrustedSegment;
    case SegmentError::kTruncated:
    case SegmentError::kBadMagic:
    case SegmentError::kSizeMismatch:
    case SegmentError::kBadCapacity:
    case SegmentError::kCorruptCounters:
    case SegmentError::kNotIncreasing:
      return ClientError::kCorruptSegment;
    case SegmentError::kSystemError:
      return ClientError::kSystemError;
  }
  return ClientError::kSystemError;
}

std::string_view HealthName(ProducerHealth health) {
  switch (health) {
    case ProducerHealth::kServing:
      return "serving";
    case ProducerHealth::kStarting:
      return "starting";
    case ProducerHealth::kPaused:
      return "paused";
    case ProducerHealth::kOutOfService:
      return "out_of_service";
    case ProducerHealth::kStopped:
      return "stopped";
    case ProducerHealth::kNotHeartbeating:
      return "not_heartbeating";
    case ProducerHealth::kDead:
      return "dead";
  }
  return "unknown";
}

std::string ReasonText(StateReason reason, int64_t detail) {
  switch (reason) {
    case StateReason::kNone:
      return "";
    case StateReason::kStarting:
      return "starting up";
    case StateReason::kClockBehind:
      return "clock moved back " + std::to_string(detail) + " ms";
    case StateReason::kClockStepTooLarge:
      return "clock stepped back " + std::to_string(detail) +
             " ms, more than max_backward_ms; check the clock, then run `snowflakectl resume`";
    case StateReason::kBehindHighWater:
      return "clock is " + std::to_string(detail) +
             " ms behind the persisted high-water mark; check the clock, then run "
             "`snowflakectl resume`";
    case StateReason::kTimeRangeExhausted:
      return "the epoch's 41-bit time range is used up";
    case StateReason::kShutdown:
      return "shut down";
    case StateReason::kPersistenceFailed:
      return "could not persist the high-water reservation (errno " + std::to_string(detail) +
             ": " + std::strerror(static_cast<int>(detail)) + ")";
  }
  return "reason code " + std::to_string(static_cast<uint32_t>(reason));
}

uint64_t HeaderU64(const std::atomic<uint64_t>& field) {
  // Relaxed: status fields are informational and read one by one (see ClientStatus).
  return field.load(std::memory_order_relaxed);
}

ClientStatus ReadStatus(const RingConsumer& ring, std::chrono::nanoseconds max_age) {
  const shm::SegmentHeader& header = ring.header();
  const ProducerStatus producer = ring.CheckProducer(max_age);
  const auto state = static_cast<shm::DaemonState>(header.state.load(std::memory_order_acquire));
  ClientStatus status;
  status.state = std::string(shm::DaemonStateName(state));
  status.health = std::string(HealthName(producer.health));
  status.reason = std::string(shm::StateReasonName(producer.reason));
  status.reason_text = ReasonText(producer.reason, producer.reason_detail);
  status.reason_detail = producer.reason_detail;
  status.machine = header.machine.load(std::memory_order_relaxed);
  status.epoch_unix_ms = static_cast<int64_t>(HeaderU64(header.epoch_unix_ms));
  status.incarnation = HeaderU64(header.incarnation);
  status.daemon_pid = producer.pid;
  status.heartbeat_age_ns = producer.heartbeat_age_ns;
  status.ring_fill = ring.size();
  status.ring_capacity = ring.capacity();
  status.fill_target = HeaderU64(header.fill_target);
  status.published_total = HeaderU64(header.published_total);
  status.taken_total = ring.head();
  status.drained_total = HeaderU64(header.drained_total);
  status.clock_pauses = HeaderU64(header.clock_pauses);
  return status;
}

// The error Next() reports for a daemon that is not serving.
Error Unavailable(const ProducerStatus& producer, const std::filesystem::path& runtime_dir,
                  std::chrono::milliseconds max_age) {
  const std::string where = " (runtime directory " + runtime_dir.string() + ")";
  const std::string pid = std::to_string(producer.pid);
  switch (producer.health) {
    case ProducerHealth::kStarting:
      return MakeError(ClientError::kDaemonStarting,
                       "snowflaked is starting" + where + "; retry shortly or fail over");
    case ProducerHealth::kPaused:
      return MakeError(
          ClientError::kDaemonPaused,
          "snowflaked paused generation: " + ReasonText(producer.reason, producer.reason_detail) +
              where + "; fail over, it resumes by itself");
    case ProducerHealth::kOutOfService: {
      const std::string why = ReasonText(producer.reason, producer.reason_detail);
      return MakeError(ClientError::kDaemonOutOfService,
                       "snowflaked is out of service" + (why.empty() ? "" : ": " + why) + where +
                           "; fail over until an operator runs `snowflakectl resume`");
    }
    case ProducerHealth::kStopped:
      return MakeError(ClientError::kDaemonStopped,
                       "snowflaked (pid " + pid + ") has stopped" + where +
                           "; fail over, or retry once it is restarted");
    case ProducerHealth::kNotHeartbeating:
      return MakeError(ClientError::kDaemonNotHeartbeating,
                       "snowflaked (pid " + pid + ") has not refreshed its heartbeat for " +
                           std::to_string(producer.heartbeat_age_ns / 1'000'000) + " ms (limit " +
                           std::to_string(max_age.count()) + " ms)" + where +
                           "; it is hung or stopped: fail over");
    case ProducerHealth::kDead:
      return MakeError(ClientError::kDaemonDead, "snowflaked (pid " + pid +
                                                     ") is gone without shutting down" + where +
                                                     "; fail over and restart it");
    case ProducerHealth::kServing:
      break;
  }
  return MakeError(ClientError::kSystemError,
                   "internal error: serving daemon reported as unavailable");
}

tl::expected<RingConsumer, Error> OpenRing(const std::filesystem::path& runtime_dir) {
  auto maybe_ring = RingConsumer::Open(runtime_dir);
  if (!maybe_ring) {
    return tl::unexpected(MakeError(FromSegmentError(maybe_ring.error().code),
                                    std::move(maybe_ring.error().message)));
  }
  return std::move(*maybe_ring);
}

std::filesystem::path ResolveRuntimeDir(const ClientOptions& options) {
  return options.runtime_dir.empty() ? DefaultRuntimeDir() : options.runtime_dir;
}

}  // namespace

std::string_view ClientErrorName(ClientError code) noexcept {
  switch (code) {
    case ClientError::kInvalidServiceName:
      return "invalid_service_name";
    case ClientError::kInvalidArgument:
      return "invalid_argument";
    case ClientError::kDaemonNotRunning:
      return "daemon_not_running";
    case ClientError::kPermissionDenied:
      return "permission_denied";
    case ClientError::kIncompatibleVersion:
      return "incompatible_version";
    case ClientError::kCorruptSegment:
      return "corrupt_segment";
    case ClientError::kUntrustedSegment:
      return "untrusted_segment";
    case ClientError::kDaemonStarting:
      return "daemon_starting";
    case ClientError::kDaemonPaused:
      return "daemon_paused";
    case ClientError::kDaemonOutOfService:
      return "daemon_out_of_service";
    case ClientError::kDaemonStopped:
      return "daemon_stopped";
    case ClientError::kDaemonNotHeartbeating:
      return "daemon_not_heartbeating";
    case ClientError::kDaemonDead:
      return "daemon_dead";
    case ClientError::kTimedOut:
      return "timed_out";
    case ClientError::kSystemError:
      return "system_error";
  }
  return "unknown";
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

// One mapped segment and this Client's counter in it. Immutable once published through
// Impl::current_, so the fast path reads it without a lock.
struct Attachment {
  RingConsumer ring;
  shm::ServiceSlot* slot;           // nullptr if every slot was taken
  std::atomic<uint64_t> own_count;  // the counter when there is no slot
  std::atomic<uint64_t>* counter;   // &slot->taken or &own_count
  IdLayout layout;

  Attachment(RingConsumer consumer, std::string_view service)
      : ring(std::move(consumer)), slot(ring.ClaimServiceSlot(service)), own_count(0) {
    counter = slot != nullptr ? &slot->taken : &own_count;
    auto maybe_layout = IdLayout::Create(
        static_cast<int64_t>(ring.header().epoch_unix_ms.load(std::memory_order_relaxed)));
    layout = maybe_layout ? *maybe_layout : IdLayout();
  }
  ~Attachment() { ring.ReleaseServiceSlot(slot); }
};

class Client::Impl {
 public:
  Impl(std::string service, const ClientOptions& options, std::filesystem::path runtime_dir)
      : service_(std::move(service)), options_(options), runtime_dir_(std::move(runtime_dir)) {}

  tl::expected<void, Error> Attach(RingConsumer ring) {
    auto attachment = std::make_unique<Attachment>(std::move(ring), service_);
    Attachment* raw = attachment.get();
    attachments_.push_back(std::move(attachment));
    // Release: a thread that loads the pointer sees the fully built attachment.
    current_.store(raw, std::memory_order_release);
    return {};
  }

  tl::expected<uint64_t, Error> Next() noexcept {
    Attachment* a = current_.load(std::memory_order_acquire);
    uint64_t id = 0;
    if (a->ring.TryTake(&id)) [[likely]] {
      // Relaxed: a counter read by the daemon for status; it orders nothing.
      a->counter->fetch_add(1, std::memory_order_relaxed);
      return id;
    }
    auto taken = Slow([&id](Attachment& at) -> size_t { return at.ring.TryTake(&id) ? 1 : 0; });
    if (!taken) return tl::unexpected(std::move(taken.error()));
    return id;
  }

  tl::expected<size_t, Error> NextBatch(std::span<uint64_t> out) noexcept {
    if (out.empty()) {
      return tl::unexpected(Error{ClientError::kInvalidArgument, "NextBatch: empty span"});
    }
    Attachment* a = current_.load(std::memory_order_acquire);
    if (const size_t n = a->ring.TryTakeBatch(out.data(), out.size()); n > 0) [[likely]] {
      a->counter->fetch_add(n, std::memory_order_relaxed);
      return n;
    }
    return Slow([out](Attachment& at) { return at.ring.TryTakeBatch(out.data(), out.size()); });
  }

  const IdLayout& layout() const noexcept {
    return current_.load(std::memory_order_acquire)->layout;
  }

  tl::expected<ClientStatus, Error> GetStatus() const noexcept {
    try {
      Attachment* a = current_.load(std::memory_order_acquire);
      ClientStatus status = ReadStatus(a->ring, options_.max_heartbeat_age);
      std::lock_guard lock(mutex_);
      for (const auto& attachment : attachments_) {
        status.client_taken += attachment->counter->load(std::memory_order_relaxed);
      }
      return status;
    } catch (const std::exception& e) {
      return tl::unexpected(
          MakeError(ClientError::kSystemError, std::string("status: ") + e.what()));
    }
  }

  const std::string& service() const noexcept { return service_; }

 private:
  // The slow path: the ring was empty. `take` tries once and returns how many IDs it took.
  template <typename Take>
  tl::expected<size_t, Error> Slow(Take take) noexcept {
    try {
      const auto deadline = std::chrono::steady_clock::now() + options_.wait_timeout;
      for (;;) {
        Attachment* a = current_.load(std::memory_order_acquire);
        // Read before re-checking the ring: a publish after our check moves wake_seq, so
        // the futex wait below returns at once instead of sleeping through it.
        const uint32_t seen = a->ring.wake_seq();
        if (const size_t n = take(*a); n > 0) {
          a->counter->fetch_add(n, std::memory_order_relaxed);
          return n;
        }
        const ProducerStatus producer = a->ring.CheckProducer(options_.max_heartbeat_age);
        if (producer.health != ProducerHealth::kServing) {
          if (Reattach(a)) continue;
          return tl::unexpected(Unavailable(producer, runtime_dir_, options_.max_heartbeat_age));
        }
        const auto remaining = deadline - std::chrono::steady_clock::now();
        if (remaining <= std::chrono::nanoseconds::zero()) {
          return tl::unexpected(
              MakeError(ClientError::kTimedOut,
                        "no ID within " + std::to_string(options_.wait_timeout.count()) +
                            " ms: the ring in " + runtime_dir_.string() +
                            " stayed empty although snowflaked looks healthy; retry or fail over"));
        }
        // Short slices so a daemon that dies or stops without waking us is noticed
        // within about a slice.
        a->ring.AwaitPublish(
            seen, std::min<std::chrono::nanoseconds>(
                      kWaitSlice, std::chrono::duration_cast<std::chrono::nanoseconds>(remaining)));
      }
    } catch (const std::exception& e) {
      return tl::unexpected(MakeError(ClientError::kSystemError, std::string("take: ") + e.what()));
    }
  }

  // Called when `seen` is not serving. If the file at the segment path is now a different
  // segment (a daemon created a new one), maps it and makes it current. Returns whether
  // the caller should retry.
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
    auto maybe_ring = RingConsumer::Open(runtime_dir_);
    if (!maybe_ring) return false;
    // Kept, slot and all, until the Client is destroyed: other threads may still be inside
    // a take on the old mapping and add to its counter. Its segment is retired, so no
    // daemon reads that slot any more.
    Attach(std::move(*maybe_ring));
    return true;
  }

  const std::string service_;
  const ClientOptions options_;
  const std::filesystem::path runtime_dir_;
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
    auto maybe_ring = OpenRing(runtime_dir);
    if (!maybe_ring) return tl::unexpected(std::move(maybe_ring.error()));
    auto impl = std::make_unique<Impl>(std::string(service), options, std::move(runtime_dir));
    if (auto attached = impl->Attach(std::move(*maybe_ring)); !attached) {
      return tl::unexpected(std::move(attached.error()));
    }
    Client client(std::move(impl));
    auto remotes =
        options.remotes.empty() ? detail::RemotePool::FromEnvironment() : options.remotes;
    if (!remotes.empty()) {
      client.remotes_ = std::make_unique<detail::RemotePool>(
          std::string(service), std::move(remotes), options, client.layout().epoch_unix_ms());
    }
    return client;
  } catch (const std::exception& e) {
    return tl::unexpected(MakeError(ClientError::kSystemError, std::string("open: ") + e.what()));
  }
}

tl::expected<ClientStatus, Error> Client::Inspect(const ClientOptions& options) noexcept {
  try {
    auto maybe_ring = OpenRing(ResolveRuntimeDir(options));
    if (!maybe_ring) return tl::unexpected(std::move(maybe_ring.error()));
    return ReadStatus(*maybe_ring, options.max_heartbeat_age);
  } catch (const std::exception& e) {
    return tl::unexpected(MakeError(ClientError::kSystemError, std::string("status: ") + e.what()));
  }
}

tl::expected<uint64_t, Error> Client::Next() noexcept {
  if (remotes_ != nullptr) [[unlikely]] {
    uint64_t id = 0;
    auto taken =
        remotes_->Take({&id, 1}, [this](std::span<uint64_t> out) { return impl_->NextBatch(out); });
    if (!taken) return tl::unexpected(std::move(taken.error()));
    return id;
  }
  return impl_->Next();
}

tl::expected<size_t, Error> Client::NextBatch(std::span<uint64_t> out) noexcept {
  if (remotes_ != nullptr && !out.empty()) [[unlikely]] {
    return remotes_->Take(out, [this](std::span<uint64_t> s) { return impl_->NextBatch(s); });
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
