// What the fill loop and the control socket share: a status snapshot the loop refreshes
// and the socket reads, resume requests the socket posts and the loop carries out, and
// the consumer region the socket hands to clients that attach.
// The loop never blocks on the socket: it only takes a mutex for a copy, and polls an
// atomic for resume requests.
//
// A StatusBoard is safe for concurrent use by multiple threads without external
// synchronization.

#ifndef SNOWFLAKE_DAEMON_CONTROL_STATUS_BOARD_H_
#define SNOWFLAKE_DAEMON_CONTROL_STATUS_BOARD_H_

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

#include "protocol/control_protocol.h"
#include "snowflake/clock.h"
#include "snowflake/unique_fd.h"

namespace snowflake::daemon {

// The status the board holds is the control protocol's record: what the status reply
// says is what the fill loop wrote, key for key (protocol/control_protocol.h).
using FrontStatus = protocol::FrontStatus;
using RenewalStatus = protocol::RenewalStatus;
// StatusBoard::Update stamps state_since_unix_ms; Snapshot() reads the fronts.
using DaemonStatus = protocol::StatusRecord;

class StatusBoard {
 public:
  // `clock` (not owned) must outlive the board; it stamps state_since_unix_ms.
  explicit StatusBoard(Clock& clock) noexcept : clock_(clock) {}

  // The clock the board stamps its times with (the daemon's): whoever reports an age
  // against those stamps reads now on it.
  Clock& clock() const noexcept { return clock_; }

  // Called by the fill loop. Keeps state_since_unix_ms from the previous Update() while
  // state and reason_code stay the same, else sets it to the clock's NowUnixMs().
  void Update(const DaemonStatus& status);
  // A consistent copy of the latest Update(), with the fronts' status read now.
  DaemonStatus Snapshot() const;
  // False until the first Update(): Snapshot() then holds only defaults.
  bool HasStatus() const;
  // Seconds spent paused since the board was made, per reason code, up to the latest
  // Update() (each Update() adds the time since the previous one to the reason that was
  // published then, if it was a pause).
  std::map<std::string, double> PausedSeconds() const;

  // Where Snapshot() reads the fronts' status from; empty: no fronts. Set by the daemon
  // when its fronts have started and cleared before they stop; clearing waits for a
  // Snapshot() that is reading them. The fill loop's Update() never waits for it.
  using FrontSource = std::function<std::vector<FrontStatus>()>;
  void SetFrontSource(FrontSource source);

  // The consumer region of the segment served now, for a client's attach: a new descriptor
  // of it (close-on-exec) and the segment id it pairs with.
  struct AttachPoint {
    UniqueFd region;
    uint64_t segment_id = 0;
  };
  // Where AttachPointNow() reads it from; empty: no segment yet (the daemon is starting).
  // Set by the daemon once its fill loop exists; clearing waits for an attach reading it.
  using AttachSource = std::function<AttachPoint()>;
  void SetAttachSource(AttachSource source);
  // The current segment's attach point, or nullopt before the daemon serves a segment (or
  // when dup failed: errno says why).
  std::optional<AttachPoint> AttachPointNow() const;

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
  // guarded by mutex_: the steady clock at the latest Update()
  std::optional<std::chrono::steady_clock::time_point> updated_;
  std::map<std::string, int64_t> paused_ms_;  // guarded by mutex_
  uint64_t resume_handled_ = 0;      // guarded by mutex_
  bool last_resume_effect_ = false;  // guarded by mutex_
  std::atomic<uint64_t> resume_requested_{0};
  mutable std::mutex fronts_mutex_;  // taken without mutex_, never inside it
  FrontSource front_source_;         // guarded by fronts_mutex_
  mutable std::mutex attach_mutex_;  // taken without mutex_, never inside it
  AttachSource attach_source_;       // guarded by attach_mutex_
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CONTROL_STATUS_BOARD_H_
