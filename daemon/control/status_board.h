// What the fill loop and the control socket share: a status snapshot the loop refreshes
// and the socket reads, and resume requests the socket posts and the loop carries out.
// The loop never blocks on the socket: it only takes a mutex for a copy, and polls an
// atomic for resume requests.
//
// A StatusBoard is safe for concurrent use by multiple threads without external
// synchronization.

#ifndef SNOWFLAKE_DAEMON_STATUS_BOARD_H_
#define SNOWFLAKE_DAEMON_STATUS_BOARD_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/clock.h"
#include "snowflake/segment_layout.h"
#include "snowflake/vocabulary.h"

namespace snowflake::daemon {

// One front's part of the status (daemon/fronts/front.h: Front::Status()).
struct FrontStatus {
  std::string name;                 // "http"
  std::vector<std::string> listen;  // the bound addresses, "127.0.0.1:8080", "[::1]:8080"
  uint64_t connections = 0;         // open now
  uint64_t requests = 0;            // replies sent since it started
  uint64_t refused = 0;             // connections refused since it started
};

// A renewal of the high-water reservation that fails, or that the daemon paused waiting
// for: the status reply's "renewal" object (docs/control-protocol.md).
struct RenewalStatus {
  std::string store;     // what it waits on now: "register" or "state_file"
  std::string location;  // MachineRegister::location(), or the state file's path
  int64_t since_unix_ms = 0;  // when the first renewal not confirmed yet began
  int64_t waited_ms = 0;      // from then to the refresh
  // The last attempt's failure since then ("" if none yet: the first is still under way),
  // in the store's words (a register's RegisterError message), and whose it is.
  std::string last_error;
  std::string last_error_store;  // "register", "state_file" or ""
  // The store did not answer (a timeout, no leader, no quorum), or has not answered yet.
  bool unanswered = false;
  friend bool operator==(const RenewalStatus&, const RenewalStatus&) = default;
};

// Every key of the control protocol's status reply (docs/control-protocol.md).
struct DaemonStatus {
  // vocab::StateCode(): starting, serving, paused, out_of_service, stopped.
  std::string state = std::string(vocab::StateCode(shm::DaemonState::kStarting));
  // vocab::ReasonCode(): none, clock_behind, ...
  std::string reason_code = std::string(vocab::ReasonCode(shm::StateReason::kStarting));
  std::string reason;                    // human text, "" when serving
  int64_t reason_detail = 0;             // see reason_code (ms of a clock step, errno, ...)
  int64_t pid = 0;
  std::string version;
  std::string instance;
  std::string runtime_dir;
  std::string state_dir;
  std::string register_backend;
  std::string register_location;
  std::string holder_id;
  int64_t machine = -1;  // -1 until claimed
  int64_t epoch_unix_ms = 0;
  uint64_t ring_capacity = 0;
  uint64_t ring_fill = 0;    // IDs in the ring at the last refresh
  uint64_t fill_target = 0;  // IDs the loop aims to keep
  uint64_t published_total = 0;
  uint64_t drained_total = 0;
  uint64_t incarnation = 0;
  bool segment_reopened = false;
  std::optional<uint64_t> last_issued_id;
  int64_t last_issued_unix_ms = 0;  // the generator's mark: newest ms that may carry an ID
  int64_t reserved_through_unix_ms = 0;
  uint64_t clock_pauses = 0;
  int64_t clock_behind_ms = 0;
  int64_t started_unix_ms = 0;
  // When state or reason_code last changed (Unix ms). Stamped by StatusBoard::Update, not
  // by the caller.
  int64_t state_since_unix_ms = 0;
  // IDs taken per client service name (finished clients folded in), as of the last scan.
  std::map<std::string, uint64_t> services;
  // Segments retired because a client tampered with them, and why the last one was.
  uint64_t segments_retired = 0;
  std::string segment_retired_reason;
  // Set while a renewal fails, or while the daemon is paused waiting for one.
  std::optional<RenewalStatus> renewal;
  // The running fronts, read from them at each Snapshot() (not refreshed by the loop).
  std::vector<FrontStatus> fronts;
};

class StatusBoard {
 public:
  // `clock` (not owned) must outlive the board; it stamps state_since_unix_ms.
  explicit StatusBoard(Clock& clock) noexcept : clock_(clock) {}

  // Called by the fill loop. Keeps state_since_unix_ms from the previous Update() while
  // state and reason_code stay the same, else sets it to the clock's NowUnixMs().
  void Update(const DaemonStatus& status);
  // A consistent copy of the latest Update(), with the fronts' status read now.
  DaemonStatus Snapshot() const;

  // Where Snapshot() reads the fronts' status from; empty: no fronts. Set by the daemon
  // when its fronts have started and cleared before they stop; clearing waits for a
  // Snapshot() that is reading them. The fill loop's Update() never waits for it.
  using FrontSource = std::function<std::vector<FrontStatus>()>;
  void SetFrontSource(FrontSource source);

  // Called by the control socket: asks the loop to leave out-of-service. Returns a ticket
  // for WaitForResume().
  uint64_t RequestResume() noexcept;
  // Waits until the loop has handled `ticket` (or a later request) or `timeout` passes.
  // Returns whether the loop found the daemon out of service and resumed it, or nullopt
  // on timeout.
  std::optional<bool> WaitForResume(uint64_t ticket, std::chrono::milliseconds timeout);

  // Called by the fill loop each pass: the newest ticket issued so far (0 if none). The
  // loop compares it with the last ticket it handled. One atomic load, no lock.
  uint64_t resume_requested() const noexcept {
    return resume_requested_.load(std::memory_order_acquire);  // pairs with RequestResume
  }
  // The loop has handled every request up to `ticket`; `resumed`: it left out-of-service.
  void ResumeHandled(uint64_t ticket, bool resumed);

 private:
  Clock& clock_;
  mutable std::mutex mutex_;
  std::condition_variable resume_done_;
  DaemonStatus status_;              // guarded by mutex_
  uint64_t resume_handled_ = 0;      // guarded by mutex_
  bool last_resume_effect_ = false;  // guarded by mutex_
  std::atomic<uint64_t> resume_requested_{0};
  mutable std::mutex fronts_mutex_;  // taken without mutex_, never inside it
  FrontSource front_source_;         // guarded by fronts_mutex_
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_STATUS_BOARD_H_
