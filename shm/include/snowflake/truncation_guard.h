// The daemon's defence against a truncated consumer file.
//
// Any member of the clients' group may open the consumer file read-write (every take is a
// CAS on its `head`), so it may also ftruncate it. The kernel then drops the file's pages
// from every mapping, and the next load or store of a lost page raises SIGBUS: without a
// handler, one group member could kill the daemon at will.
//
// Once InstallTruncationGuard() has run, every consumer region this process maps
// (MappedSegment::Open, producer and consumer alike) is registered. A SIGBUS whose address
// lies in a registered region is survived: the handler swaps the region, in one mremap(2),
// for private memory whose `head` is kTruncatedHead and whose segment id is 0, and the
// faulting instruction runs again on it. No take can succeed on that memory (head is at
// or past every tail, and a CAS from a head read before the swap fails), so nothing is
// taken twice; the producer's next per-pass check (RingProducer::CheckCounters) sees the
// region marked truncated and the fill loop retires the segment and serves a fresh pair.
// (Wayland compositors survive a truncated shared buffer with a similar handler that maps
// zero pages: fine for pixels, a duplicate here; hence the prepared stand-in.)
//
// A SIGBUS anywhere else (a file only root or the daemon's user can shrink, or a bug) is
// not survivable: it goes to the `fallback` handler, which should end the process.
//
// Only the daemon installs the guard: a handler for a process-wide signal belongs to the
// program, not to a library linked into it. A client process whose consumer file is
// truncated still gets SIGBUS (docs/security.md).

#ifndef SNOWFLAKE_TRUNCATION_GUARD_H_
#define SNOWFLAKE_TRUNCATION_GUARD_H_

#include <cstdint>

#include "snowflake/segment_layout.h"

namespace snowflake::shm {

// The `head` of a region swapped out after a truncation: not below any tail, so every
// take finds the ring empty.
inline constexpr uint64_t kTruncatedHead = UINT64_MAX;

// Installs the SIGBUS handler; from then on consumer regions are guarded as they are mapped
// (ones mapped before stay unguarded). `fallback` gets every other SIGBUS; it must be
// async-signal-safe and should end the process (write(2), then _exit(2)); if it returns,
// the signal's default action ends it. Returns false, with errno set, if sigaction
// failed. Call it once, before other threads start.
bool InstallTruncationGuard(void (*fallback)(int signal)) noexcept;

// Whether the handler replaced `region` because its file was truncated. False for a region
// that is not guarded.
bool WasTruncated(const ConsumerRegion* region) noexcept;

// How many regions the handler has replaced in this process.
uint64_t TruncationsSurvived() noexcept;

// For MappedSegment: registers a freshly mapped consumer region (before any thread can
// touch it) and forgets it before it is unmapped. Register returns a slot number, or -1
// when the guard is not installed or every slot is taken (then the region stays
// unguarded: a truncation kills the process as it would without the guard).
int GuardConsumerRegion(ConsumerRegion* region) noexcept;
void UnguardConsumerRegion(int slot) noexcept;

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_TRUNCATION_GUARD_H_
