#include "snowflake/ring_producer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <functional>
#include <utility>

#include "mapped_segment.h"
#include "service_slot_codec.h"
#include "snowflake/consumer_region.h"
#include "snowflake/futex.h"
#include "snowflake/id_layout.h"
#include "snowflake/pid_namespace.h"
#include "snowflake/status_text.h"

namespace snowflake::shm {
namespace {

SegmentFailure SystemFailure(const std::string& what, int err) {
  return SegmentFailure{SegmentError::kSystemError, what + ": " + std::strerror(err), err};
}

// The options' clock: the real one unless a test gave its own.
Clock& ClockOf(const ProducerOptions& options) {
  return options.clock != nullptr ? *options.clock : Clock::Real();
}

// The heartbeat's unit: the monotonic clock in nanoseconds.
uint64_t BeatNow(Clock& clock) { return static_cast<uint64_t>(SteadyNs(clock.SteadyNow())); }

// Applies the exact mode (no umask) and group to an open file.
tl::expected<void, SegmentFailure> ApplyPermissions(int fd, mode_t mode,
                                                    const ProducerOptions& options,
                                                    const std::string& path) {
  if (fchmod(fd, mode) != 0) return tl::unexpected(SystemFailure("chmod " + path, errno));
  if (options.group && fchown(fd, static_cast<uid_t>(-1), *options.group) != 0) {
    const int err = errno;
    return tl::unexpected(SystemFailure(
        "chown " + path + " to " + DescribeGroup(*options.group) +
            " (the daemon's user must be a member of that group)",
        err));
  }
  return {};
}

// The ring file's mode: the configured one without write for group or others, so no
// client can open the header and slots for writing (or truncate them).
mode_t RingFileMode(const ProducerOptions& options) { return options.mode & ~mode_t{0022}; }

// A random non-zero segment id (getrandom; the real clock's nanoseconds only if it fails:
// never a test's clock, which would name every segment alike).
uint64_t NewSegmentId() {
  uint64_t id = 0;
  if (getrandom(&id, sizeof(id), 0) != static_cast<ssize_t>(sizeof(id))) {
    id = static_cast<uint64_t>(Clock::Real().NowUnixNs());
  }
  return id != 0 ? id : 1;
}

// Creates `tmp_path` (O_EXCL) with `mode` and the options' group, sized `size`, maps its
// first `init_length` bytes and calls init() on them to write its first fields. Unlinks it
// on failure.
tl::expected<void, SegmentFailure> CreateTempFile(const std::string& tmp_path, mode_t mode,
                                                  uint64_t size, const ProducerOptions& options,
                                                  size_t init_length,
                                                  const std::function<void(void*)>& init) {
  unlink(tmp_path.c_str());  // a leftover of a crashed daemon with our pid
  const int fd = open(tmp_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return tl::unexpected(SystemFailure("create " + tmp_path, errno));
  auto fail = [&](SegmentFailure failure) {
    close(fd);
    unlink(tmp_path.c_str());
    return tl::unexpected(std::move(failure));
  };
  if (auto applied = ApplyPermissions(fd, mode, options, tmp_path); !applied) {
    return fail(applied.error());
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return fail(SystemFailure("size " + tmp_path, errno));
  }
  void* base = mmap(nullptr, init_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail(SystemFailure("map " + tmp_path, errno));
  init(base);
  munmap(base, init_length);
  close(fd);
  return {};
}

// How the daemon opens its own files: no owner check, a wrong mode is repaired rather than
// refused, and the boot id is judged by CreateOrOpen itself (a segment of another boot is
// retired, not refused).
MapChecks OwnFileChecks() {
  return MapChecks{
      .expected_owner = std::nullopt, .refuse_other_access = false, .boot_id = std::nullopt};
}

BootId BootIdOf(const ProducerOptions& options) {
  return options.boot_id ? *options.boot_id : CurrentBootId();
}

BootId RecordedBootId(const SegmentHeader& header) {
  return BootId{header.boot_id_high.load(std::memory_order_relaxed),
                header.boot_id_low.load(std::memory_order_relaxed)};
}

// The header's line 4 (the freshness contract and the boot id) from the options.
void StoreFreshness(SegmentHeader& header, const ProducerOptions& options) {
  const BootId boot = BootIdOf(options);
  header.boot_id_high.store(boot.high, std::memory_order_relaxed);
  header.boot_id_low.store(boot.low, std::memory_order_relaxed);
  header.pid_namespace.store(options.pid_namespace ? *options.pid_namespace : CurrentPidNamespace(),
                             std::memory_order_relaxed);
  header.max_age_ms.store(options.max_age_ms, std::memory_order_relaxed);
  header.liveness_ms.store(options.liveness_ms, std::memory_order_relaxed);
  header.freshness_bound_ms.store(
      options.bound_freshness ? options.max_age_ms + options.liveness_ms : 0,
      std::memory_order_relaxed);
}

// Creates a fresh segment's consumer region (a sealed memfd) and writes its ring file
// under a temporary name, then renames it into place: a client never maps a
// half-initialised header, and one that attaches gets the region of the ring file it finds
// (or one of a newer segment: the segment id tells them apart, kUnpaired, retry). Returns
// the region. `fresh.carried_last_id` continues the ID order of a retired segment of the
// same machine and epoch.
tl::expected<UniqueFd, SegmentFailure> CreateSegmentFile(const ProducerOptions& options,
                                                         const std::filesystem::path& path,
                                                         const FreshSegment& fresh) {
  const std::string final_path = path.string();
  const std::string tmp_path = final_path + ".tmp." + std::to_string(getpid());
  const uint64_t segment_id = NewSegmentId();
  const uint64_t size = SegmentSizeFor(options.capacity);

  auto region = CreateConsumerRegion(segment_id);
  if (!region) return tl::unexpected(std::move(region.error()));
  auto created = CreateTempFile(
      tmp_path, RingFileMode(options), size, options, sizeof(SegmentHeader), [&](void* base) {
        auto* header = static_cast<SegmentHeader*>(base);
        header->version.store(kVersion, std::memory_order_relaxed);
        header->header_size.store(sizeof(SegmentHeader), std::memory_order_relaxed);
        header->capacity.store(options.capacity, std::memory_order_relaxed);
        header->segment_size.store(size, std::memory_order_relaxed);
        header->segment_id.store(segment_id, std::memory_order_relaxed);
        header->slots_offset.store(kSlotsOffset, std::memory_order_relaxed);
        header->epoch_unix_ms.store(static_cast<uint64_t>(options.epoch_unix_ms),
                                    std::memory_order_relaxed);
        header->machine.store(options.machine, std::memory_order_relaxed);
        header->id_bits.store(PackIdBits(options.id_bits), std::memory_order_relaxed);
        header->last_published_id.store(fresh.carried_last_id, std::memory_order_relaxed);
        header->state.store(static_cast<uint32_t>(fresh.state), std::memory_order_relaxed);
        header->reason.store(static_cast<uint32_t>(fresh.reason), std::memory_order_relaxed);
        header->reason_detail.store(fresh.detail, std::memory_order_relaxed);
        header->incarnation.store(fresh.incarnation, std::memory_order_relaxed);
        header->pid.store(static_cast<uint64_t>(getpid()), std::memory_order_relaxed);
        header->heartbeat_mono_ns.store(BeatNow(ClockOf(options)), std::memory_order_relaxed);
        StoreFreshness(*header, options);
        // Release: whoever sees the magic sees every field above.
        header->magic.store(kMagic, std::memory_order_release);
      });
  if (!created) return tl::unexpected(std::move(created.error()));
  if (rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp_path.c_str());
    return tl::unexpected(SystemFailure("rename " + tmp_path + " to " + final_path, err));
  }
  return std::move(*region);
}

// A format-3 daemon's consumer file, which nothing of this format reads.
void RemoveLegacyConsumerFile(const std::filesystem::path& runtime_dir) {
  unlink((runtime_dir / kLegacyConsumerFileName).c_str());
}

// Maps the new segment's ring file with its region (a descriptor the producer keeps for
// attaches, and one the mapping consumes).
tl::expected<std::unique_ptr<MappedSegment>, SegmentFailure> MapOwn(
    const std::filesystem::path& path, const UniqueFd& region) {
  UniqueFd copy(fcntl(region.get(), F_DUPFD_CLOEXEC, 0));
  if (!copy) return tl::unexpected(SystemFailure("dup the consumer region", errno));
  return MappedSegment::Open(path, std::move(copy), MapAccess::kProducer, OwnFileChecks());
}

}  // namespace

RingProducer::RingProducer(std::unique_ptr<MappedSegment> segment, UniqueFd region,
                           std::filesystem::path path, bool continued, Clock* clock)
    : segment_(std::move(segment)),
      clock_(clock != nullptr ? clock : &Clock::Real()),
      region_(std::move(region)),
      path_(std::move(path)),
      continued_(continued),
      header_(segment_->header()),
      consumer_(segment_->consumer()),
      slots_(segment_->slots()),
      capacity_(segment_->capacity()),
      mask_(capacity_ - 1),
      // Checked by MappedSegment::Open (IsIdBitsWord); constant for the segment's life.
      time_shift_(
          IdLayout::Create(0, UnpackIdBits(header_->id_bits.load(std::memory_order_relaxed)))
              .value_or(IdLayout())
              .time_shift()),
      // Only the daemon writes tail, and the instance lock makes us the only daemon.
      tail_(header_->tail.load(std::memory_order_relaxed)),
      // A predecessor mapped ring only has no head to watch.
      max_head_seen_(segment_->has_region() ? consumer_->head.load(std::memory_order_acquire)
                                            : tail_) {
  own_last_published_ = last_published_id();
}

RingProducer::~RingProducer() = default;
RingProducer::RingProducer(RingProducer&&) noexcept = default;
RingProducer& RingProducer::operator=(RingProducer&&) noexcept = default;

tl::expected<RingProducer, SegmentFailure> RingProducer::CreateOrOpen(
    const ProducerOptions& options) noexcept {
  try {
    if (!IsPowerOfTwo(options.capacity) || options.capacity > kMaxCapacity) {
      return tl::unexpected(SegmentFailure{
          SegmentError::kBadCapacity, "ring capacity " + std::to_string(options.capacity) +
                                          " is not a power of two from 1 to " +
                                          std::to_string(kMaxCapacity)});
    }
    if ((options.mode & 0007) != 0) {
      return tl::unexpected(SegmentFailure{SegmentError::kModeTooOpen,
                                           "segment mode must give others no access"});
    }
    const std::filesystem::path path = options.runtime_dir / kSegmentFileName;
    // A surviving segment is never reopened: its consumer region was the clients' to write
    // and ended with the daemon that held it, so nothing in it (head, the service slots) is
    // carried into a new start. What must carry over is in the ring file, which only the
    // daemon's user can write: its last published ID bounds every ID it ever held, so the
    // fresh segment continues strictly above it.
    RemoveLegacyConsumerFile(options.runtime_dir);
    std::optional<RingProducer> predecessor;
    FreshSegment fresh{};
    std::string replaced_because;
    bool continued = false;
    struct stat info {};
    if (lstat(path.c_str(), &info) == 0) {
      // Our own file: no owner check, and no mode check (the new files get the configured
      // modes).
      auto existing = MappedSegment::Open(path, UniqueFd(), MapAccess::kProducer, OwnFileChecks());
      if (!existing) return tl::unexpected(std::move(existing.error()));
      predecessor.emplace(
          RingProducer(std::move(*existing), UniqueFd(), path, /*continued=*/false, options.clock));
      const SegmentHeader& old = *predecessor->header_;
      const bool same_ids =
          old.machine.load(std::memory_order_relaxed) == options.machine &&
          old.epoch_unix_ms.load(std::memory_order_relaxed) ==
              static_cast<uint64_t>(options.epoch_unix_ms) &&
          old.id_bits.load(std::memory_order_relaxed) == PackIdBits(options.id_bits);
      // Only a segment of this boot is continued with its incarnation: one of another boot
      // (or of an unknown one) survived on a disk, not in tmpfs, so after a crash it may be
      // older than the daemon's persisted state. Its last ID still bounds what it held, so
      // with the same machine and epoch it is carried over all the same (a bound only).
      const BootId boot = BootIdOf(options);
      const BootId recorded = RecordedBootId(old);
      if (!boot.known()) {
        replaced_because =
            "this boot's id cannot be read (/proc/sys/kernel/random/boot_id), "
            "so no segment is trusted across a restart";
      } else if (recorded != boot) {
        replaced_because = recorded.known()
                               ? "it was left by another boot of this host (boot id " +
                                     FormatBootId(recorded) + ", this boot is " +
                                     FormatBootId(boot) + ")"
                               : "it records no boot id (written by an older daemon), so it "
                                 "may be from another boot of this host";
      } else if (!same_ids) {
        replaced_because = "its machine, epoch or ID layout differs";
      }
      if (same_ids) fresh.carried_last_id = predecessor->last_published_id();
      continued = same_ids && replaced_because.empty();
      if (continued) fresh.incarnation = predecessor->incarnation() + 1;
    }
    // Written whole under a temporary name and renamed over the old ring file, so a client
    // that finds the old segment stopped finds the new one at once.
    auto region = CreateSegmentFile(options, path, fresh);
    if (!region) return tl::unexpected(std::move(region.error()));
    auto mapped = MapOwn(path, *region);
    if (!mapped) return tl::unexpected(std::move(mapped.error()));
    RingProducer producer(std::move(*mapped), std::move(*region), path, continued, options.clock);
    producer.replaced_because_ = std::move(replaced_because);
    producer.Heartbeat();
    // The old one stops only now: its clients, told it stopped, reattach to the new one.
    // Its untaken IDs are gaps, below everything the new one publishes.
    if (predecessor) predecessor->Abandon(StateReason::kShutdown);
    return producer;
  } catch (const std::exception& e) {
    return tl::unexpected(SegmentFailure{SegmentError::kSystemError,
                                         std::string("create segment: ") + e.what()});
  }
}

tl::expected<RingProducer, SegmentFailure> RingProducer::CreateReplacement(
    const ProducerOptions& options, const FreshSegment& fresh) noexcept {
  try {
    if (!IsPowerOfTwo(options.capacity) || options.capacity > kMaxCapacity) {
      return tl::unexpected(SegmentFailure{SegmentError::kBadCapacity,
                                           "ring capacity " + std::to_string(options.capacity) +
                                               " is not a power of two"});
    }
    const std::filesystem::path path = options.runtime_dir / kSegmentFileName;
    auto region = CreateSegmentFile(options, path, fresh);
    if (!region) return tl::unexpected(std::move(region.error()));
    auto mapped = MapOwn(path, *region);
    if (!mapped) return tl::unexpected(std::move(mapped.error()));
    return RingProducer(std::move(*mapped), std::move(*region), path, /*continued=*/false,
                        options.clock);
  } catch (const std::exception& e) {
    return tl::unexpected(SegmentFailure{SegmentError::kSystemError,
                                         std::string("create a fresh segment: ") + e.what()});
  }
}

void RingProducer::Abandon(StateReason reason) noexcept {
  if (!segment_->has_region()) {
    // A predecessor: its region ended with its daemon, so nothing can be taken back by CAS.
    // Its tail is retracted to 0 instead, below every head: from here a take finds the old
    // ring empty (only one that read tail before this store can still claim an ID, unique
    // and below all new ones), goes to its slow path, reads "stopped" and moves to the new
    // segment, so no client takes an old ID after the new segment's first ones. Nothing
    // reads this tail again: last_published_id() was read before the new ring file was put
    // in place, and nobody opens a ring file that is no longer at the path.
    header_->tail.store(0, std::memory_order_release);
    SetState(DaemonState::kStopped, reason);
    return;
  }
  SetState(DaemonState::kStopped, reason);
  // Stopped first (clients that find the ring empty look at the path and reattach), then
  // take back what is left: head forward to our tail by CAS, exactly as a consumer takes,
  // whatever value a client left in it. A head beyond our tail is left alone: no ticket
  // below our tail lies above it.
  uint64_t h = consumer_->head.load(std::memory_order_acquire);
  while (h < tail_ && !consumer_->head.compare_exchange_weak(h, tail_, std::memory_order_acq_rel,
                                                              std::memory_order_acquire)) {
  }
  header_->tail.store(tail_, std::memory_order_release);
  WakeConsumers();
}

namespace {

// Marks an unvalidated segment stopped and empty, using only the fixed offsets of the
// header (never a value read from the file).
void StopUnvalidated(const std::filesystem::path& path) noexcept {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat info {};
  void* base = MAP_FAILED;
  if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
      static_cast<uint64_t>(info.st_size) >= sizeof(SegmentHeader)) {
    base = mmap(nullptr, sizeof(SegmentHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED) return;
  auto* header = static_cast<SegmentHeader*>(base);
  header->tail.store(0, std::memory_order_release);  // reads empty: see Abandon()
  header->reason.store(static_cast<uint32_t>(StateReason::kShutdown), std::memory_order_relaxed);
  // Release: a client that reads "stopped" reads the reason with it.
  header->state.store(static_cast<uint32_t>(DaemonState::kStopped), std::memory_order_release);
  FutexBumpAndWake(header->wake_seq, INT_MAX);
  munmap(base, sizeof(SegmentHeader));
}

}  // namespace

void RingProducer::Retire(const std::filesystem::path& runtime_dir) noexcept {
  const std::filesystem::path path = runtime_dir / kSegmentFileName;
  auto existing = MappedSegment::Open(path, UniqueFd(), MapAccess::kProducer, OwnFileChecks());
  if (existing) {
    try {
      RingProducer old(std::move(*existing), UniqueFd(), path, false, &Clock::Real());
      old.Abandon(StateReason::kShutdown);
    } catch (...) {
      // Best effort: the unlink below is what matters.
    }
  } else {
    // A segment that fails validation may still be mapped by clients that attached before
    // it went bad: mark it stopped through a raw mapping of the fixed header.
    StopUnvalidated(path);
  }
  unlink(path.c_str());
  RemoveLegacyConsumerFile(runtime_dir);
}

uint64_t RingProducer::segment_id() const noexcept {
  return header_->segment_id.load(std::memory_order_relaxed);
}

UniqueFd RingProducer::ConsumerDescriptor() const noexcept {
  if (!region_) return UniqueFd();
  return UniqueFd(fcntl(region_.get(), F_DUPFD_CLOEXEC, 0));
}

uint64_t RingProducer::last_published_id() const noexcept {
  // last_published_id is stored before tail, so it may name an ID nobody received; the
  // slot of ticket tail-1 can never have been overwritten (that needs tail > tail-1+N).
  // The larger of the two bounds every ID any client can hold.
  uint64_t last = header_->last_published_id.load(std::memory_order_relaxed);
  if (tail_ > 0) last = std::max(last, slots_[(tail_ - 1) & mask_].load(std::memory_order_relaxed));
  return last;
}

uint64_t RingProducer::head() const noexcept {
  // Acquire pairs with the consumers' successful CAS (acq_rel): their slot reads happen
  // before we overwrite those slots.
  const uint64_t head = consumer_->head.load(std::memory_order_acquire);
  max_head_seen_ = std::max(max_head_seen_, head);
  return head;
}

uint64_t RingProducer::size() const noexcept {
  const uint64_t h = head();
  return h >= tail_ ? 0 : tail_ - h;
}

tl::expected<void, SegmentFailure> RingProducer::CheckCounters() noexcept {
  // Every violation is a client's write (kCorruptCounters, naming what was seen): the
  // region is sealed, so its size cannot change, but any process holding it may write it.
  const auto tampered = [&](const std::string& what) {
    return tl::unexpected(
        SegmentFailure{SegmentError::kCorruptCounters, path_.string() + ": " + what});
  };
  const uint64_t before = max_head_seen_;
  const uint64_t h = consumer_->head.load(std::memory_order_acquire);
  // Only the daemon writes tail: another value there lets clients take slots we never
  // published (or re-take old ones).
  const uint64_t shared_tail = header_->tail.load(std::memory_order_relaxed);
  if (shared_tail != tail_) {
    return tampered("tail in the header is " + std::to_string(shared_tail) +
                    " but the daemon published through " + std::to_string(tail_) +
                    "; someone other than the daemon wrote the header");
  }
  if (h < before || h > tail_) {
    return tampered("head moved from " + std::to_string(before) + " to " + std::to_string(h) +
                    " (tail " + std::to_string(tail_) +
                    "); a client wrote the consumer region, so IDs could be taken twice");
  }
  // A region whose segment id was overwritten makes every new client's attach fail
  // (kUnpaired): replace the segment rather than leave them failing.
  const uint64_t consumer_id = consumer_->segment_id.load(std::memory_order_relaxed);
  const uint64_t own_id = header_->segment_id.load(std::memory_order_relaxed);
  if (consumer_id != own_id) {
    return tampered("the consumer region's segment id is " + std::to_string(consumer_id) +
                    ", not " + std::to_string(own_id) +
                    "; a client wrote the consumer region, so new clients could not open it");
  }
  max_head_seen_ = h;
  return {};
}

tl::expected<size_t, SegmentFailure> RingProducer::Publish(std::span<const uint64_t> ids) noexcept {
  if (ids.empty()) return 0;
  // REQUIRES (ring_producer.h): strictly increasing; checked in debug builds only, the
  // always-on check below covers the front against what was published before.
  assert(std::adjacent_find(ids.begin(), ids.end(),
                            [](uint64_t a, uint64_t b) { return a >= b; }) == ids.end());
  const uint64_t last = own_last_published_;
  if (ids.front() <= last) {
    return tl::unexpected(SegmentFailure{
        SegmentError::kNotIncreasing,
        "refusing to publish ID " + std::to_string(ids.front()) +
            ": not above the last published ID " + std::to_string(last)});
  }
  if (auto counters = CheckCounters(); !counters) return tl::unexpected(counters.error());
  const uint64_t h = max_head_seen_;
  const uint64_t room = capacity_ - (tail_ - h);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(room, ids.size()));
  if (n == 0) return 0;
  // Tickets tail_..tail_+n-1 have slots no consumer may still read: each such slot last
  // held ticket (t - N) < h, already claimed by a CAS that our acquire load of head
  // synchronised with. Relaxed stores: the release store of tail publishes them.
  for (size_t i = 0; i < n; ++i) {
    slots_[(tail_ + i) & mask_].store(ids[i], std::memory_order_relaxed);
  }
  // Before tail: after a crash between the two stores it is an upper bound, never less.
  header_->last_published_id.store(ids[n - 1], std::memory_order_release);
  own_last_published_ = ids[n - 1];
  tail_ += n;
  header_->tail.store(tail_, std::memory_order_release);
  header_->published_total.store(header_->published_total.load(std::memory_order_relaxed) + n,
                                 std::memory_order_relaxed);
  WakeConsumers();
  return n;
}

uint64_t RingProducer::DrainAll() noexcept {
  uint64_t h = head();
  // A head below one we saw, or past our tail, is a client's write, not a take: leave it for
  // CheckCounters() to report rather than hide it by draining over it.
  if (h < max_head_seen_ || h > tail_) return 0;
  // Case analysis of the CAS: (1) it wins: tickets h..tail_-1 are ours, drained; (2) it
  // loses: a consumer took some; h is reloaded and we retry until h == tail_.
  while (h < tail_) {
    if (consumer_->head.compare_exchange_weak(h, tail_, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
      const uint64_t drained = tail_ - h;
      max_head_seen_ = tail_;
      header_->drained_total.fetch_add(drained, std::memory_order_relaxed);
      return drained;
    }
    // The head the CAS found: a rewind between our check and the CAS must not be drained
    // over either.
    if (h < max_head_seen_ || h > tail_) return 0;
  }
  return 0;
}

uint64_t RingProducer::DrainOlderThan(int64_t min_offset_ms) noexcept {
  uint64_t h = head();
  if (h < max_head_seen_ || h > tail_) return 0;  // tampered: see DrainAll()
  while (h < tail_) {
    // Slots h..tail_-1 hold our own unclaimed or just-claimed IDs; their values are ours.
    uint64_t end = h;
    while (end < tail_ &&
           static_cast<int64_t>(slots_[end & mask_].load(std::memory_order_relaxed) >>
                                time_shift_) < min_offset_ms) {
      ++end;
    }
    if (end == h) return 0;
    // (1) wins: tickets h..end-1 drained; (2) loses: consumers advanced head; recompute
    // from the new head (some stale IDs may have been taken: they were at most max_age
    // old when this pass began, the next pass catches the rest).
    if (consumer_->head.compare_exchange_weak(h, end, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
      max_head_seen_ = std::max(max_head_seen_, end);
      header_->drained_total.fetch_add(end - h, std::memory_order_relaxed);
      return end - h;
    }
    if (h < max_head_seen_ || h > tail_) return 0;  // rewound since our check: as above
  }
  return 0;
}

void RingProducer::SetState(DaemonState state, StateReason reason, int64_t detail) noexcept {
  header_->reason.store(static_cast<uint32_t>(reason), std::memory_order_relaxed);
  header_->reason_detail.store(detail, std::memory_order_relaxed);
  // Release: a client that reads the new state reads its reason with it.
  header_->state.store(static_cast<uint32_t>(state), std::memory_order_release);
  Heartbeat();
  WakeConsumers();
}

void RingProducer::SetStatusText(std::string_view text) noexcept {
  WriteStatusText(*header_, text);
}

DaemonState RingProducer::state() const noexcept {
  return static_cast<DaemonState>(header_->state.load(std::memory_order_relaxed));
}

void RingProducer::Heartbeat() noexcept {
  header_->heartbeat_mono_ns.store(BeatNow(*clock_), std::memory_order_relaxed);
}

void RingProducer::SetFillTarget(uint64_t ids) noexcept {
  header_->fill_target.store(ids, std::memory_order_relaxed);
}

void RingProducer::CountClockPause() noexcept {
  header_->clock_pauses.fetch_add(1, std::memory_order_relaxed);
}

uint64_t RingProducer::incarnation() const noexcept {
  return header_->incarnation.load(std::memory_order_relaxed);
}

uint32_t RingProducer::refill_request() const noexcept {
  return consumer_->refill_request.load(std::memory_order_acquire);
}

uint32_t RingProducer::TakeRefillHint() noexcept {
  // An RMW: it reads the latest value, so it sees every hint added before a request bump
  // that our earlier acquire load of refill_request observed.
  return consumer_->refill_hint.exchange(0, std::memory_order_acq_rel);
}

void RingProducer::WaitForRefillRequest(uint32_t seen, std::chrono::nanoseconds timeout) noexcept {
  FutexWait(consumer_->refill_request, seen, timeout);
}

void RingProducer::WakeFillLoop() noexcept { FutexBumpAndWake(consumer_->refill_request, 1); }

void RingProducer::WakeConsumers() noexcept {
  // seq_cst pairs with the consumer's seq_cst waiters increment (a Dekker handshake): if
  // we read waiters == 0, the consumer's re-check of the ring comes after our tail store
  // and sees the IDs; if it is non-zero we wake, and a consumer that has not slept yet
  // finds wake_seq changed and does not sleep.
  // A predecessor has no region to count its waiters in: it always wakes.
  header_->wake_seq.fetch_add(1, std::memory_order_seq_cst);
  if (!segment_->has_region() || consumer_->waiters.load(std::memory_order_seq_cst) > 0) {
    FutexWake(header_->wake_seq, INT_MAX);
  }
}

void RingProducer::ForEachService(const std::function<void(const ServiceCount&)>& fn) const {
  for (size_t i = 0; i < kServiceSlotCount; ++i) {
    const ServiceSlot& slot = consumer_->services[i];
    const uint64_t pid = slot.owner_pid.load(std::memory_order_acquire);
    const uint64_t ready = slot.name_ready.load(std::memory_order_acquire);
    if (pid == 0 || (ready != kServiceSlotActive && ready != kServiceSlotRetired)) continue;
    // Relaxed: each counter is written by one owner and only ever grows; a late value is
    // a count read a moment earlier. A retired slot's counts are final (acquire above).
    uint64_t taken = slot.taken.load(std::memory_order_relaxed);
    for (const CounterLane& lane : consumer_->lanes[i]) {
      taken += lane.taken.load(std::memory_order_relaxed);
    }
    fn(ServiceCount{.slot = i,
                    .pid = pid,
                    .name = DecodeServiceName(slot),
                    .taken = taken,
                    .retired = ready == kServiceSlotRetired});
  }
}

uint64_t RingProducer::uncounted() const noexcept {
  return consumer_->uncounted.load(std::memory_order_relaxed);
}

bool RingProducer::FreeServiceSlot(size_t slot_index, uint64_t pid) noexcept {
  if (slot_index >= kServiceSlotCount) return false;
  ServiceSlot& slot = consumer_->services[slot_index];
  // Only the daemon frees slots, so an owner equal to `pid` now stays so until our CAS;
  // checking first keeps us from clearing name_ready of a slot someone else owns.
  if (slot.owner_pid.load(std::memory_order_relaxed) != pid) return false;
  slot.name_ready.store(0, std::memory_order_relaxed);
  uint64_t expected = pid;
  // Release: a client that claims the freed slot sees name_ready == 0 first.
  return slot.owner_pid.compare_exchange_strong(expected, 0, std::memory_order_release,
                                                std::memory_order_relaxed);
}

}  // namespace snowflake::shm
