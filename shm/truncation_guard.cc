#include "snowflake/truncation_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace snowflake::shm {
namespace {

// A guarded region's life: kFree -> kIntact (registered) -> kReplacing (one faulting thread
// won the right to swap it) -> kReplaced, and back to kFree when it is unmapped.
enum : uint32_t { kFree = 0, kIntact = 1, kReplacing = 2, kReplaced = 3 };

struct GuardedRegion {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uint32_t> state{kFree};
};

// Enough for the daemon's own segment, the HTTP front's clients and a retired segment's
// mappings still held while a fresh one is mapped. Plain atomics: the handler reads them.
constexpr int kMaxGuarded = 64;
GuardedRegion g_regions[kMaxGuarded];
std::atomic<bool> g_installed{false};
std::atomic<void (*)(int)> g_fallback{nullptr};
std::atomic<uint64_t> g_survived{0};

static_assert(std::atomic<uintptr_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<void (*)(int)>::is_always_lock_free,
              "read in a signal handler: must be lock-free");

// A SIGBUS the guard cannot survive: the fallback (which should not return), else the
// default action: with it restored, returning re-runs the faulting instruction, which
// raises SIGBUS again and ends the process as if no handler had been installed.
void Unhandled(int signal) {
  if (auto* fallback = g_fallback.load(std::memory_order_acquire); fallback != nullptr) {
    fallback(signal);
  }
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, nullptr);
}

// Puts private memory in place of the region at `begin`, already holding the values that
// make every take fail: built aside and moved over the region in one mremap(2), so no
// thread ever sees it half-written (a zero head would let a take re-read old slots).
// Only system calls and stores to our own fresh pages: async-signal-safe in practice (mmap
// and mremap are plain system calls, not on POSIX's list only because POSIX has no mremap).
bool ReplaceRegion(uintptr_t begin) {
  void* fresh = mmap(nullptr, sizeof(ConsumerRegion), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) return false;
  // Placement of the atomics is fine: the pages are zero, a valid value for each of them.
  auto* region = static_cast<ConsumerRegion*>(fresh);
  region->head.store(kTruncatedHead, std::memory_order_relaxed);
  region->segment_id.store(0, std::memory_order_relaxed);
  void* moved = mremap(fresh, sizeof(ConsumerRegion), sizeof(ConsumerRegion),
                       MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(begin));
  if (moved == MAP_FAILED) {
    munmap(fresh, sizeof(ConsumerRegion));
    return false;
  }
  return true;
}

void OnSigbus(int signal, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (GuardedRegion& guarded : g_regions) {
    const uintptr_t begin = guarded.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address - begin >= sizeof(ConsumerRegion)) continue;
    uint32_t state = kIntact;
    if (guarded.state.compare_exchange_strong(state, kReplacing, std::memory_order_acq_rel)) {
      if (!ReplaceRegion(begin)) {
        guarded.state.store(kIntact, std::memory_order_release);
        Unhandled(signal);
        return;
      }
      g_survived.fetch_add(1, std::memory_order_relaxed);
      guarded.state.store(kReplaced, std::memory_order_release);
    }
    // Replaced, or being replaced by another thread: return, and the instruction runs
    // again (on the new memory, or faults again until it is in place).
    errno = saved_errno;
    return;
  }
  Unhandled(signal);
}

}  // namespace

bool InstallTruncationGuard(void (*fallback)(int signal)) noexcept {
  g_fallback.store(fallback, std::memory_order_release);
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGBUS, &action, nullptr) != 0) return false;
  g_installed.store(true, std::memory_order_release);
  return true;
}

bool WasTruncated(const ConsumerRegion* region) noexcept {
  const auto begin = reinterpret_cast<uintptr_t>(region);
  for (const GuardedRegion& guarded : g_regions) {
    if (guarded.begin.load(std::memory_order_acquire) == begin) {
      return guarded.state.load(std::memory_order_acquire) >= kReplacing;
    }
  }
  return false;
}

uint64_t TruncationsSurvived() noexcept { return g_survived.load(std::memory_order_relaxed); }

int GuardConsumerRegion(ConsumerRegion* region) noexcept {
  if (!g_installed.load(std::memory_order_acquire)) return -1;
  for (int slot = 0; slot < kMaxGuarded; ++slot) {
    // Winning the state owns the slot (UnguardConsumerRegion clears begin before it frees
    // the state). The state is set first: the handler treats a region as guarded once it
    // sees its begin.
    uint32_t free_state = kFree;
    if (g_regions[slot].state.compare_exchange_strong(free_state, kIntact,
                                                      std::memory_order_acq_rel)) {
      g_regions[slot].begin.store(reinterpret_cast<uintptr_t>(region), std::memory_order_release);
      return slot;
    }
  }
  return -1;
}

void UnguardConsumerRegion(int slot) noexcept {
  if (slot < 0 || slot >= kMaxGuarded) return;
  g_regions[slot].begin.store(0, std::memory_order_release);
  g_regions[slot].state.store(kFree, std::memory_order_release);
}

}  // namespace snowflake::shm
