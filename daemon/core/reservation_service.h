// The reservation service: keeps a durable high-water reservation ahead of the clock, in
// both stores (the state file, then the register), on its own thread, and exposes the
// confirmed horizon: the newest millisecond both stores have durably accepted.
//
// The fill loop reads confirmed_through() (one atomic load) and never publishes an ID
// above it; it never waits for a renewal. The service renews when the clock comes within
// renew_ahead_ms of the horizon, so in steady state the horizon is always ahead. When a
// renewal fails or lags, the horizon stops moving; the fill loop pauses at its end with a
// reason naming the failed store (problem()), and serves again by itself when a renewal
// succeeds. A register that reports the claim lost sets claim_lost(): the daemon stops
// serving at once (docs/design.md §5, "Reservations and the confirmed horizon").
//
// Threads: Start() and Stop() are called by the main thread; the service's own thread is
// the only one that writes the stores between them. The accessors are safe from any
// thread. RecordCleanStop() is for the main thread after Stop().

#ifndef SNOWFLAKE_DAEMON_CORE_RESERVATION_SERVICE_H_
#define SNOWFLAKE_DAEMON_CORE_RESERVATION_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "daemon/core/high_water_store.h"
#include "register/machine_lock.h"
#include "register/machine_register.h"
#include "snowflake/clock.h"

namespace snowflake::daemon {

class Metrics;  // daemon/metrics/metrics.h

enum class ReservationStore { kStateFile, kRegister };
// "state file", "register".
std::string_view StoreName(ReservationStore store) noexcept;

struct ReservationProblem {
  ReservationStore store;
  int sys_errno = 0;     // 0 when not a system error (a timeout, a corrupt register)
  std::string message;   // the store's own sentence
  // The store's servers did not answer (RegisterErrorCode::kUnreachable: etcd down or
  // without quorum), as opposed to a store that answered with an error.
  bool unreachable = false;
  friend bool operator==(const ReservationProblem&, const ReservationProblem&) = default;
};

// A renewal that is due and not confirmed yet: what the daemon waits for, and since when.
struct RenewalWait {
  // The store that holds the wait up: the one the renewal under way waits on, or the one
  // the last attempt failed at. A retry that passes the state file on its way back to a
  // register that did not answer still waits for the register.
  ReservationStore store = ReservationStore::kStateFile;
  // Where that store is: MachineRegister::location() ("etcd http://10.0.0.1:2379,... /p"),
  // or the state file's path.
  std::string location;
  // The clock's reading (Unix ms) when the first renewal not confirmed yet began: the
  // daemon has waited since then. Retries do not move it; a confirmed renewal ends it.
  int64_t since_unix_ms = 0;
};

struct ReservationOptions {
  uint32_t machine = 0;
  int64_t epoch_unix_ms = 0;
  // Each renewal reserves through (the clock's reading) + reservation_ms.
  int64_t reservation_ms = 1000;
  // Renew once the clock is within this many ms of the horizon. REQUIRES: 0 <
  // renew_ahead_ms <= reservation_ms.
  int64_t renew_ahead_ms = 500;
  // After a failed renewal, the next try comes this much later.
  std::chrono::milliseconds retry_interval{100};
  // The register's Renew() (a lease keepalive) runs at least this often.
  std::chrono::milliseconds register_renew_interval{1000};
  // The segment the reservation covers, recorded in the state file (see
  // high_water_store.h): lets a restart on that segment skip waiting out the reservation.
  std::string segment_path;
  uint64_t segment_incarnation = 0;
  // The register's token for this claim (MachineClaim::claim_token), recorded in the
  // state file with every reservation, beside the register's identity() as last seen.
  std::optional<int64_t> register_claim = std::nullopt;
  // The host's directories of marks (machine_lock.h): each reservation is also written to
  // the number's host mark there, right after the state file (WriteHostMarks: beside the
  // locks, then on disk), so another daemon of this host that takes the number next, also
  // after a reboot, starts above it. An empty one: not written there.
  reg::HostMarkDirs host_marks = {};
  // Who writes the host mark (the state directory's identity, state_identity.h): a
  // restart knows its own.
  std::string host_mark_writer = {};
  // The highest host mark at startup (this start's generator issues nothing at or below
  // it): the host mark is never written below it, since daemons of one user share a file.
  int64_t host_mark_floor = 0;
  // The high-water mark this start's generator began above (StartupPlan): recorded in
  // every state-file write with any fence obeyed since (HighWaterState::floor_unix_ms).
  int64_t start_floor_unix_ms = 0;
  // Where renewals (count, result, duration), register calls (duration, errors) and the
  // claim's state are reported (docs/metrics.md); not owned, must outlive the service.
  // Null: not reported.
  Metrics* metrics = nullptr;
};

// The fill loop's view of the service: what it reads each pass. An interface so the fill
// loop's tests can drive a horizon by hand.
class Horizon {
 public:
  virtual ~Horizon();
  // The newest millisecond durably reserved in every store. Never decreases while serving.
  virtual int64_t confirmed_through() const noexcept = 0;
  // Why the horizon is not moving, if the last renewal failed.
  virtual std::optional<ReservationProblem> problem() const = 0;
  // What an unconfirmed renewal waits for; nullopt when the last renewal was confirmed and
  // none is under way. Default: nothing to say (test horizons moved by hand).
  virtual std::optional<RenewalWait> waiting() const { return std::nullopt; }
  // Moves whenever problem() or waiting() may have changed, so a reader that saw a value
  // need not copy them again until it moves. A horizon that cannot tell returns a new
  // value on every call. A confirmed renewal moves it before it moves the horizon, so a
  // reader that reads confirmed_through() first and then finds the version unmoved holds
  // the renewal in force at that horizon.
  virtual uint64_t renewal_version() const noexcept = 0;
  // The horizon with its renewal, read together: a reader never pairs a new horizon with
  // the failure the renewal that raised it ended, nor an old horizon with that failure
  // already gone. Default: the three calls in turn (a horizon a test moves by hand).
  struct View {
    int64_t confirmed_through = 0;
    std::optional<ReservationProblem> problem;
    std::optional<RenewalWait> wait;
  };
  virtual View Read() const { return View{confirmed_through(), problem(), waiting()}; }
  // The register said the claim is gone.
  virtual bool claim_lost() const noexcept = 0;
  // The fill loop wants to publish IDs of `unix_ms`: a hint that wakes the service early
  // when it comes close to the horizon. Never blocks.
  virtual void NoteNeed(int64_t unix_ms) noexcept = 0;
  // An operator's fence on the number (MachineRegister::fence_unix_ms()): nothing may be
  // issued at or below it any more. 0: none. Only grows.
  virtual int64_t fence_unix_ms() const noexcept { return 0; }
  // The fill loop issues nothing at or below `unix_ms` any more: its generator is above
  // it and its ring holds no ID at or below it. The service then acknowledges the fence in
  // the register (MachineRegister::AcknowledgeFence). Never blocks.
  virtual void NoteFenceApplied(int64_t unix_ms) noexcept { (void)unix_ms; }
};

class ReservationService final : public Horizon {
 public:
  // How often one renewal (or clean stop) records a fence the register found and writes
  // again, before it reports the register's kFenced as its failure (an operator who keeps
  // raising the mark).
  static constexpr int kFenceRounds = 3;

  // `store`, `reg` and `clock` (not owned) must outlive the service. `confirmed_through`:
  // what both stores already hold for this number (StartupPlan::confirmed_through_unix_ms).
  ReservationService(ReservationOptions options, HighWaterStore& store, reg::MachineRegister& reg,
                     Clock& clock, int64_t confirmed_through);
  ~ReservationService() override;  // Stop()s
  ReservationService(const ReservationService&) = delete;
  ReservationService& operator=(const ReservationService&) = delete;

  // Starts the thread; its first renewal comes at once (it also records the segment).
  // REQUIRES: not started.
  void Start();
  // Ends the thread (after the renewal in progress, if any). Idempotent.
  void Stop();

  int64_t confirmed_through() const noexcept override {
    // Acquire: pairs with the release store after both stores confirmed.
    return confirmed_.load(std::memory_order_acquire);
  }
  std::optional<ReservationProblem> problem() const override;
  std::optional<RenewalWait> waiting() const override;
  View Read() const override;
  uint64_t renewal_version() const noexcept override {
    // Acquire: pairs with the release increment after problem_ or wait_ changed.
    return renewal_version_.load(std::memory_order_acquire);
  }
  bool claim_lost() const noexcept override { return claim_lost_.load(std::memory_order_acquire); }
  void NoteNeed(int64_t unix_ms) noexcept override;
  int64_t fence_unix_ms() const noexcept override {
    // Acquire: pairs with the release store once the register reported it.
    return fence_.load(std::memory_order_acquire);
  }
  void NoteFenceApplied(int64_t unix_ms) noexcept override;

  // Renewals that succeeded so far.
  uint64_t renewals() const noexcept { return renewals_.load(std::memory_order_relaxed); }

  // At a clean stop, after the ring is drained and Stop(): lowers the reservation in both
  // stores to the last issued millisecond, so a clean restart need not wait.
  // Errors: the sentence of the store that failed (the old reservation then stays: still
  // safe, a restart may just wait). REQUIRES: Stop() was called.
  [[nodiscard]] tl::expected<void, std::string> RecordCleanStop(int64_t last_issued_unix_ms);

 private:
  void Run();
  // What the state file records for a reservation through `through`.
  HighWaterState StateThrough(int64_t through, std::optional<int64_t> clean_stop) const;
  // One renewal through `through`; false (and problem_ set) if a store failed.
  bool Renew(int64_t through);
  // This host's side of a reservation: the state file, then the number's host mark (never
  // below host_mark_floor). Errors: the store's problem (both count as the state file).
  tl::expected<void, ReservationProblem> SaveLocally(const HighWaterState& state);
  // This daemon's host mark through `through` (never below host_mark_floor); nothing
  // without host mark directories. Errors: WriteHostMarks' sentence.
  tl::expected<void, std::string> WriteOwnHostMark(int64_t through);
  // Makes the register's fence durable on this host before a write under the claim covers
  // it (an acknowledgment): publishes it (ReadFence) and, unless the state file's floor
  // covers it already, writes the state file and the host mark again with it, keeping
  // their reservation. Errors: the state file's problem (then nothing may build on it).
  tl::expected<void, ReservationProblem> PersistFence();
  // The claim's keepalive failed with `problem`; moves renewal_version_ if it changed. The
  // next confirmed renewal clears it (Renew()).
  void SetProblem(ReservationProblem problem);
  // A renewal failed at `problem.store`: that store now holds the wait up.
  void FailAt(ReservationProblem problem);
  // A renewal now waits on `store` (the first since the last confirmed one starts the wait;
  // a retry's state file write does not take the wait back from the register).
  void NoteWaiting(ReservationStore store);
  std::optional<RenewalWait> WaitingLocked() const;  // REQUIRES: mutex_ held
  // Runs one register call named `call` ("raise", "renew", "clean_stop"), reporting its
  // duration and, if it fails, its error code.
  template <typename Call>
  auto RegisterCall(std::string_view call, Call&& run);
  void ReportClaimLost() noexcept;
  // Reads the register's fence after a call that may have found one, and publishes it.
  void ReadFence() noexcept;
  // Acknowledges in the register a fence the fill loop has applied, if one is pending.
  void AcknowledgeAppliedFence();

  // Constant after construction.
  const ReservationOptions options_;
  HighWaterStore& store_;
  reg::MachineRegister& register_;
  Clock& clock_;
  // RenewalWait::location of each store, read once (location() builds a string).
  const std::string state_file_location_;
  const std::string register_location_;

  // Written by the service's thread, read by any thread.
  std::atomic<int64_t> confirmed_;
  std::atomic<bool> claim_lost_{false};
  std::atomic<uint64_t> renewals_{0};
  // Written by the fill loop, read by the service's thread.
  std::atomic<int64_t> need_{0};
  // The operator's fence: written by the service's thread (from the register), read by
  // the fill loop; the fence the fill loop has applied, written by it, read here.
  std::atomic<int64_t> fence_{0};
  std::atomic<int64_t> fence_applied_{0};
  // What the state file holds: its reservation, the highest fence its floor covers and
  // the register's identity (SaveLocally); the service's thread, then the main thread
  // after Stop().
  int64_t saved_through_ = 0;
  int64_t fence_saved_ = 0;
  reg::RegisterIdentity saved_identity_;
  // The fence acknowledged in the register, and when a failed acknowledgment is tried
  // again; the service's thread only.
  int64_t fence_acknowledged_ = 0;
  bool fence_ack_failing_ = false;
  std::chrono::steady_clock::time_point next_fence_ack_try_{};

  // State below is protected by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool started_ = false;
  std::optional<ReservationProblem> problem_;
  // Set by the first renewal after a confirmed one, cleared when one is confirmed: the
  // store that holds it up and since when (RenewalWait without the location).
  struct Wait {
    ReservationStore store;
    int64_t since_unix_ms;
  };
  std::optional<Wait> wait_;
  // Incremented (release) under mutex_ whenever problem_ or wait_ changes; read lock-free.
  std::atomic<uint64_t> renewal_version_{0};

  std::thread thread_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_RESERVATION_SERVICE_H_
