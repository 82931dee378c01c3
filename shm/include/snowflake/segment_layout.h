// The byte layout of the shared-memory segment: a file format, documented field by field
// in shm/LAYOUT.md. The daemon (the only producer) and every client (consumers) map the
// same two regions; these structs are their layouts. Nothing here holds a pointer.
//
// The ring file (`snowflake.ring`, mode 0640: the clients' group may only read it)
//   region      offset            size                               clients map it
//   header      0                 4096                               read-only
//   slots       4096              capacity * 8, rounded up to a page read-only
// The consumer region: a sealed memfd, never a file in the runtime directory. The daemon
// creates it with each segment and hands it to each client over the control socket
// (`attach`, SCM_RIGHTS); its size cannot change (kConsumerRegionSeals).
//   consumer    0                 163840                             read-write
//
// Only the consumer region must be writable by clients (a take is a CAS on its `head`):
// no client can forge an ID, the tail or the header, and none can truncate or grow the
// memory the others take from (docs/decisions.md).
//
// Every shared field is a lock-free std::atomic; producer-written and consumer-written
// fields never share a cache line.

#ifndef SNOWFLAKE_SEGMENT_LAYOUT_H_
#define SNOWFLAKE_SEGMENT_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "snowflake/id_layout.h"

namespace snowflake::shm {

inline constexpr size_t kPageSize = 4096;
inline constexpr size_t kCacheLine = 64;

// "SNOWFLK" followed by the byte 0x01, read as a little-endian u64.
inline constexpr uint64_t kMagic = 0x014b4c46574f4e53ull;
// Bumped on any change of layout or protocol; a client accepts exactly its own version.
// 4: the consumer region is a sealed memfd handed over the control socket, no longer the
// file `snowflake.ring.consumer`.
// 5: the header records the ID layout's bits (`id_bits`, in what was reserved0): a client
// of version 4 would decode and judge freshness with 41/10/12 whatever the daemon numbers
// with, so it must refuse such a segment, and a reader of 5 refuses one without the bits.
inline constexpr uint32_t kVersion = 5;

inline constexpr uint64_t kMinCapacity = 1;
inline constexpr uint64_t kMaxCapacity = uint64_t{1} << 20;

// The ring file's name inside the runtime directory.
inline constexpr std::string_view kSegmentFileName = "snowflake.ring";
// The consumer file of format 3 and earlier. A daemon of this format removes one it finds
// (its old clients then see the old ring stopped and fail with the version error).
inline constexpr std::string_view kLegacyConsumerFileName = "snowflake.ring.consumer";

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "shared across processes; must never fall back to a lock");
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "futex words are shared across processes; must never fall back to a lock");
static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<uint32_t>) == 4,
              "the file format fixes field sizes");

// The daemon's state as published to clients. Values are part of the file format; their
// codes and texts are in protocol/vocabulary.h.
enum class DaemonState : uint32_t {
  kStarting = 1,      // claiming a number / first fill; not yet serving
  kServing = 2,       // IDs are being published
  kPaused = 3,        // temporarily not publishing (small clock step back); clients fail over
  kOutOfService = 4,  // needs an operator (`snowflakectl resume`)
  kStopped = 5,       // shut down cleanly; clients fail over
};

// Why the daemon is not serving. Values are part of the file format; their codes and texts
// are in protocol/vocabulary.h.
enum class StateReason : uint32_t {
  kNone = 0,
  kStarting = 1,
  kClockBehind = 2,         // detail = ms the clock is behind the last issued ms
  kClockStepTooLarge = 3,   // detail = ms of the step; out of service until resume
  kBehindHighWater = 4,     // started with the clock behind the persisted mark; detail = ms
  kTimeRangeExhausted = 5,  // the range of the layout's time bits is used up
  kShutdown = 6,
  kPersistenceFailed = 7,  // could not fsync a reservation; detail = errno
  // The reservation waits on a register that does not answer (etcd down or without
  // quorum); detail = the Unix ms since which it waits.
  kRegisterUnreachable = 8,
  // An operator fenced the machine number in the register (`register raise-all
  // --while-running`) above the clock: nothing is issued until the clock passes the fence;
  // detail = ms the clock is behind it.
  kFenced = 9,
};

// Page 0. Written only by the daemon; clients map it read-only and read it racily.
struct alignas(kPageSize) SegmentHeader {
  // --- Line 0: identity, immutable once `magic` is set. `magic` is stored last (release)
  // when a segment is created, so a reader that sees it sees every field below.
  std::atomic<uint64_t> magic;
  std::atomic<uint32_t> version;
  std::atomic<uint32_t> header_size;      // sizeof(SegmentHeader)
  std::atomic<uint64_t> capacity;         // slots; a power of two
  std::atomic<uint64_t> segment_size;     // bytes of the ring file
  // A random non-zero number, also in the consumer file's ConsumerRegion::segment_id: a
  // client maps the two files together only when they match (neither was replaced between
  // its two opens).
  std::atomic<uint64_t> segment_id;
  std::atomic<uint64_t> slots_offset;     // byte offset of the slot array in the ring file
  std::atomic<uint64_t> epoch_unix_ms;    // the ID layout's epoch
  std::atomic<uint32_t> machine;          // the daemon's machine number
  // The ID layout's bits (PackIdBits): byte 0 time, byte 1 machine, byte 2 sequence, byte
  // 3 zero. Every ID in the ring has this layout; clients decode and judge freshness by it.
  std::atomic<uint32_t> id_bits;

  // --- Line 1: the producer's hot fields.
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // one past the last published ticket
  // Futex word consumers sleep on; bumped after every publish and every state change.
  std::atomic<uint32_t> wake_seq;
  std::atomic<uint32_t> reserved1;
  // The last ID ever published (0 before the first). Lets a restarted daemon continue
  // strictly above it.
  std::atomic<uint64_t> last_published_id;

  // --- Line 2: liveness and status, refreshed by the daemon about every millisecond.
  alignas(kCacheLine) std::atomic<uint32_t> state;   // DaemonState
  std::atomic<uint32_t> reason;                      // StateReason
  std::atomic<int64_t> reason_detail;                // see StateReason
  std::atomic<uint64_t> heartbeat_mono_ns;           // CLOCK_MONOTONIC of the last beat
  std::atomic<uint64_t> pid;                         // the serving daemon's pid
  std::atomic<uint64_t> incarnation;                 // the last one's + 1 when a start continues it

  // --- Line 3: counters, for status.
  alignas(kCacheLine) std::atomic<uint64_t> published_total;  // IDs ever published
  std::atomic<uint64_t> drained_total;                        // IDs the daemon took back
  std::atomic<uint64_t> clock_pauses;                         // pauses so far
  std::atomic<uint64_t> fill_target;                          // IDs the daemon aims to keep

  // --- Line 4: the freshness contract, set by the daemon when it creates the segment
  // (from its config) and constant while it serves. A client refuses to take an ID
  // whose millisecond is more than freshness_bound_ms behind (or ahead of) its own clock,
  // so a dead, hung or stopped daemon's leftovers are never handed out, whatever its
  // threads do; it reports a daemon whose heartbeat is older than liveness_ms.
  alignas(kCacheLine) std::atomic<uint32_t> max_age_ms;  // ring.max_age_ms
  std::atomic<uint32_t> liveness_ms;                     // daemon.liveness_ms
  // max_age_ms + liveness_ms; 0 = no bound (a producer other than the daemon: tests).
  std::atomic<uint32_t> freshness_bound_ms;
  // The daemon's pid namespace when it created or reopened the segment (the inode of its
  // /proc/self/ns/pid, snowflake/pid_namespace.h). A client of another namespace (a
  // container) cannot see the daemon's pid, so it judges liveness by the heartbeat alone.
  // 0 = not recorded: these bytes were reserved zero (LAYOUT.md §8).
  std::atomic<uint32_t> pid_namespace;
  // The kernel's boot id when the daemon created or reopened the segment (BootId in
  // snowflake/boot_id.h): a segment of another boot is never trusted, by the daemon (it
  // retires it) or by clients (no daemon runs). 0 and 0 = not recorded: these bytes were
  // reserved zero, so a segment of an older daemon of this format version reads as
  // "unknown", which clients accept and the daemon never reopens (LAYOUT.md §8).
  std::atomic<uint64_t> boot_id_high;
  std::atomic<uint64_t> boot_id_low;

  // --- Lines 5-11: the status text, why the daemon is not serving in its own words
  // ("register etcd http://10.0.0.1:2379 /snowflake; last error: ..."). Written only by
  // the daemon (snowflake/status_text.h: a seqlock), when the state or the text changes;
  // read by clients only when they report a state that is not serving, never by a take.
  // Zero bytes mean "no text": these bytes were reserved zero (LAYOUT.md §8).
  // Even: the text is complete; odd: the daemon is writing it. +2 per write.
  alignas(kCacheLine) std::atomic<uint64_t> status_text_seq;
  // UTF-8, NUL-padded (no terminator when it fills all kStatusTextBytes), 8 bytes per
  // word in memory order. Words, not bytes: a read racing a write is then a race on
  // atomics, which the sequence word detects, never undefined behaviour.
  std::atomic<uint64_t> status_text[56];
};
inline constexpr size_t kStatusTextBytes = sizeof(SegmentHeader::status_text);
static_assert(sizeof(SegmentHeader) == kPageSize, "the header is exactly one page");
static_assert(offsetof(SegmentHeader, tail) == 64, "LAYOUT.md: tail at offset 64");
static_assert(offsetof(SegmentHeader, state) == 128, "LAYOUT.md: state at offset 128");
static_assert(offsetof(SegmentHeader, published_total) == 192, "LAYOUT.md: counters at 192");
// Every other offset shm/LAYOUT.md documents: the file format, pinned field by field.
static_assert(offsetof(SegmentHeader, magic) == 0 && offsetof(SegmentHeader, version) == 8 &&
                  offsetof(SegmentHeader, header_size) == 12 &&
                  offsetof(SegmentHeader, capacity) == 16 &&
                  offsetof(SegmentHeader, segment_size) == 24 &&
                  offsetof(SegmentHeader, segment_id) == 32 &&
                  offsetof(SegmentHeader, slots_offset) == 40 &&
                  offsetof(SegmentHeader, epoch_unix_ms) == 48 &&
                  offsetof(SegmentHeader, machine) == 56 && offsetof(SegmentHeader, id_bits) == 60,
              "LAYOUT.md: the identity line");
static_assert(offsetof(SegmentHeader, wake_seq) == 72 &&
                  offsetof(SegmentHeader, last_published_id) == 80,
              "LAYOUT.md: the producer's hot line");
static_assert(offsetof(SegmentHeader, reason) == 132 &&
                  offsetof(SegmentHeader, reason_detail) == 136 &&
                  offsetof(SegmentHeader, heartbeat_mono_ns) == 144 &&
                  offsetof(SegmentHeader, pid) == 152 && offsetof(SegmentHeader, incarnation) == 160,
              "LAYOUT.md: the liveness line");
static_assert(offsetof(SegmentHeader, drained_total) == 200 &&
                  offsetof(SegmentHeader, clock_pauses) == 208 &&
                  offsetof(SegmentHeader, fill_target) == 216,
              "LAYOUT.md: the counters line");
static_assert(offsetof(SegmentHeader, max_age_ms) == 256 &&
                  offsetof(SegmentHeader, liveness_ms) == 260 &&
                  offsetof(SegmentHeader, freshness_bound_ms) == 264 &&
                  offsetof(SegmentHeader, pid_namespace) == 268 &&
                  offsetof(SegmentHeader, boot_id_high) == 272 &&
                  offsetof(SegmentHeader, boot_id_low) == 280,
              "LAYOUT.md: the freshness line and the boot id");
static_assert(offsetof(SegmentHeader, status_text_seq) == 320 &&
                  offsetof(SegmentHeader, status_text) == 328 && kStatusTextBytes == 448,
              "LAYOUT.md: the status text, bytes 320-775 (they were reserved zero)");

inline constexpr uint32_t kServiceNameMax = 63;
inline constexpr size_t kServiceSlotCount = 255;
// Per-thread counters of one client: the first kLanesPerService threads of a client that
// take IDs each own one lane; further threads add to ServiceSlot::taken.
inline constexpr size_t kLanesPerService = 8;
inline constexpr uint64_t kServiceSlotActive = 1;
inline constexpr uint64_t kServiceSlotRetired = 2;

// One client's counters, so per-service totals need no write to a line other clients
// touch. Claimed by a client (CAS owner_pid 0 -> pid), then the name is written and
// `name_ready` set (release). The client marks it retired when it closes; the daemon
// folds the count of a retired slot, or of one whose owner_pid is dead, and frees it.
// The client's count is `taken` plus its kLanesPerService lanes (CounterLane).
struct alignas(kCacheLine) ServiceSlot {
  std::atomic<uint64_t> owner_pid;   // 0 = free
  std::atomic<uint64_t> name_ready;  // kServiceSlotActive once name[] is complete; retired
                                     // (final count) when the client closed
  // IDs taken by the client's threads that own no lane (fetch_add, shared by them).
  std::atomic<uint64_t> taken;
  std::atomic<uint64_t> reserved[5];
  std::atomic<uint64_t> name[8];     // NUL-padded service name, 8 bytes per word
};
static_assert(sizeof(ServiceSlot) == 2 * kCacheLine, "two lines per client");
static_assert(offsetof(ServiceSlot, owner_pid) == 0 && offsetof(ServiceSlot, name_ready) == 8 &&
                  offsetof(ServiceSlot, taken) == 16 && offsetof(ServiceSlot, name) == 64,
              "LAYOUT.md: a service slot");

// One thread's count of IDs taken through one client: a whole cache line that only its
// owning thread stores to (a plain relaxed store of its own running total, no
// read-modify-write), read racily by the daemon. A thread that exits leaves its total in
// the lane; the next thread of the client that claims the lane continues from it.
struct alignas(kCacheLine) CounterLane {
  std::atomic<uint64_t> taken;
  std::atomic<uint64_t> reserved[7];
};
static_assert(sizeof(CounterLane) == kCacheLine, "LAYOUT.md: one line per lane");

// The only region clients may write: the whole sealed memfd, mapped read-write by every
// client that attached.
struct alignas(kPageSize) ConsumerRegion {
  // --- Line 0: the ticket counter every take CASes (and the daemon's drain).
  std::atomic<uint64_t> head;
  // --- Line 1: the slow path.
  // Futex word the daemon sleeps on; a client bumps it (and wakes it) to ask for a refill.
  alignas(kCacheLine) std::atomic<uint32_t> refill_request;
  // How many IDs the takers that asked for a refill still need, summed (saturating at
  // UINT32_MAX): a taker adds its need before it bumps refill_request; the daemon takes
  // the word back to 0 (exchange) in every pass and fills up to it, bounded by capacity.
  // 0 = no hint: the daemon fills to its own target. These bytes were reserved zero and
  // no older party reads or writes them, so old and new clients and daemons mix (LAYOUT.md
  // §8). Any member of the clients' group may write any value: the daemon only ever
  // reads it as "fill up to this many", clamped.
  std::atomic<uint32_t> refill_hint;
  // Consumers currently inside a futex wait; the daemon wakes only when it is non-zero.
  // A consumer killed while counted leaves it high: harmless, it costs spurious wakes.
  std::atomic<uint64_t> waiters;
  // IDs taken by clients that found no free ServiceSlot (fetch_add by those clients
  // only); reported as "uncounted" in status.
  std::atomic<uint64_t> uncounted;
  // SegmentHeader::segment_id of the ring file this region belongs to; written by the
  // daemon before the file is renamed into place, never changed after.
  std::atomic<uint64_t> segment_id;
  // --- Lines 2..: one slot per client.
  alignas(kCacheLine) ServiceSlot services[kServiceSlotCount];
  // --- Then kLanesPerService per-thread lanes per slot: lanes[i] belong to services[i].
  CounterLane lanes[kServiceSlotCount][kLanesPerService];
};
static_assert(sizeof(ConsumerRegion) == 40 * kPageSize, "LAYOUT.md: consumer region is 160 KiB");
static_assert(offsetof(ConsumerRegion, refill_request) == 64, "LAYOUT.md: refill at +64");
static_assert(offsetof(ConsumerRegion, refill_hint) == 68,
              "LAYOUT.md: the refill hint in the bytes that were reserved0 at +68");
static_assert(offsetof(ConsumerRegion, services) == 128, "LAYOUT.md: services at +128");
static_assert(offsetof(ConsumerRegion, lanes) == 32768, "LAYOUT.md: lanes at +32768");
static_assert(offsetof(ConsumerRegion, head) == 0 && offsetof(ConsumerRegion, waiters) == 72 &&
                  offsetof(ConsumerRegion, uncounted) == 80 &&
                  offsetof(ConsumerRegion, segment_id) == 88,
              "LAYOUT.md: head at +0, waiters at +72, uncounted at +80, segment_id at +88");

// Offsets: the slots in the ring file (after the header); the consumer region is the
// whole memfd.
inline constexpr uint64_t kSlotsOffset = sizeof(SegmentHeader);
inline constexpr uint64_t kConsumerRegionSize = sizeof(ConsumerRegion);
static_assert(kSlotsOffset == 4096 && kConsumerRegionSize == 163840, "LAYOUT.md: region sizes");
// The seals of the consumer region's memfd, exactly: F_SEAL_SEAL (1) | F_SEAL_SHRINK (2) |
// F_SEAL_GROW (4). No process can then resize it (ftruncate, fallocate and a growing
// write fail with EPERM) nor change its seals; writes stay allowed (a take is a CAS). A
// client maps no region sealed otherwise, except that F_SEAL_EXEC (0x20, Linux 6.3: the
// region may never be made executable) may be set too (segment.cc checks these against
// <fcntl.h>).
inline constexpr uint32_t kConsumerRegionSeals = 0x7;
// F_SEAL_EXEC (Linux 6.3; glibc 2.36's <fcntl.h> does not name it), allowed beside them.
inline constexpr uint32_t kConsumerRegionExecSeal = 0x20;
// Whether F_GET_SEALS's `seals` are the consumer region's.
constexpr bool IsConsumerRegionSealed(uint32_t seals) {
  return (seals & ~kConsumerRegionExecSeal) == kConsumerRegionSeals;
}
static_assert(IsConsumerRegionSealed(0x7) && IsConsumerRegionSealed(0x27) &&
                  !IsConsumerRegionSealed(0x6) && !IsConsumerRegionSealed(0xf),
              "seal|shrink|grow exactly, with exec or not");
static_assert(kMagic == 0x014b4c46574f4e53ull, "LAYOUT.md: bytes 53 4e 4f 57 46 4c 4b 01");

// SegmentHeader::id_bits: one byte per width, time in the lowest, so the bytes read 41 10
// 12 0 in memory order for the default. Byte 3 stays zero: a unit other than 1 ms would
// be a new format version, not a value here.
constexpr uint32_t PackIdBits(IdBits bits) {
  return static_cast<uint32_t>(bits.time) | static_cast<uint32_t>(bits.machine) << 8 |
         static_cast<uint32_t>(bits.sequence) << 16;
}
constexpr IdBits UnpackIdBits(uint32_t word) {
  return IdBits{static_cast<int>(word & 0xff), static_cast<int>(word >> 8 & 0xff),
                static_cast<int>(word >> 16 & 0xff)};
}
// Whether a header's id_bits word is a layout (a reader refuses the segment otherwise).
constexpr bool IsIdBitsWord(uint32_t word) {
  return (word >> 24) == 0 && IsValidIdBits(UnpackIdBits(word));
}
static_assert(PackIdBits(kDefaultIdBits) == 0x000c0a29 &&
                  UnpackIdBits(0x00061029) == IdBits{41, 16, 6} && IsIdBitsWord(0x00061029) &&
                  !IsIdBitsWord(0x010c0a29) && !IsIdBitsWord(0),
              "LAYOUT.md: id_bits reads 29 0a 0c 00 for 41/10/12; zero (version 4's "
              "reserved0) is no layout");

constexpr bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// The freshness rule a client applies before it claims an ID (a pure function, so it is
// tested as a table). `id_ms` and `now_ms` are milliseconds since the epoch; `now_ms` is
// read from CLOCK_REALTIME_COARSE, which lags the true time by up to `clock_lag_ms` (its
// resolution). The ID is fresh when it is at most bound_ms - clock_lag_ms behind the
// coarse reading (so at most bound_ms behind the true time) and at most bound_ms ahead of
// it (a clock stepped back). bound_ms == 0: no bound.
constexpr bool IsFresh(int64_t id_ms, int64_t now_ms, int64_t bound_ms, int64_t clock_lag_ms) {
  if (bound_ms == 0) return true;
  const int64_t oldest = now_ms - (bound_ms > clock_lag_ms ? bound_ms - clock_lag_ms : 0);
  return id_ms >= oldest && id_ms <= now_ms + bound_ms;
}
static_assert(IsFresh(100, 150, 50, 4) == false && IsFresh(104, 150, 50, 4) &&
                  IsFresh(200, 150, 50, 4) && !IsFresh(201, 150, 50, 4) && IsFresh(0, 1000, 0, 4),
              "fresh: within bound_ms of now, less the clock lag, and not ahead by more");

constexpr uint64_t SegmentSizeFor(uint64_t capacity) {
  const uint64_t slot_bytes = capacity * sizeof(std::atomic<uint64_t>);
  return kSlotsOffset + (slot_bytes + kPageSize - 1) / kPageSize * kPageSize;
}
static_assert(SegmentSizeFor(1) == kSlotsOffset + kPageSize &&
                  SegmentSizeFor(512) == kSlotsOffset + kPageSize &&
                  SegmentSizeFor(513) == kSlotsOffset + 2 * kPageSize,
              "the slots are rounded up to whole pages: 512 slots fill one");

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_SEGMENT_LAYOUT_H_
