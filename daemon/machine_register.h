// The register of machine numbers (docs/design.md §7): which holder owns which of the
// 1,024 numbers, and each number's high-water mark. A daemon claims its number once at
// startup and keeps it for its lifetime; two live holders never share one.
//
// Backends implement MachineRegister: "file" (file_register.h, the default), "static"
// (static_register.h) and "etcd" (etcd_register.h, for a fleet).

#ifndef SNOWFLAKE_DAEMON_MACHINE_REGISTER_H_
#define SNOWFLAKE_DAEMON_MACHINE_REGISTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake::daemon {

struct Config;

struct ClaimRequest {
  std::string holder_id;  // who asks: a restarting holder gets its own number back
  int64_t epoch_unix_ms;  // the fleet's epoch: the register refuses a mismatch
};

struct MachineClaim {
  uint32_t machine;
  // The largest millisecond any earlier holder of this number may have issued an ID in
  // (0 if none is known). The new holder must issue strictly above it.
  int64_t high_water_unix_ms;
};

enum class RegisterErrorCode {
  kNoFreeNumber,    // every number of the allowed range is assigned to some holder
  kInUse,           // the number is held by a live daemon (two daemons, one holder id)
  kCorrupt,         // the register exists but is not a register we can trust
  kUnreadable,      // the register cannot be read or written (permissions, I/O)
  kEpochMismatch,   // the register belongs to a fleet with another epoch
  kNotClaimed,      // UpdateHighWater()/Release before a successful Claim()
  kInvalidRequest,  // a bad argument (holder id empty, machine out of range)
  // The claimed number is no longer ours (etcd: the lease expired, or machines/N was
  // deleted or taken over). Final: stop serving at once and exit non-zero, so the service
  // manager restarts the daemon and it claims anew.
  kClaimLost,
  kTimedOut,        // the register did not answer within its bound (a lock held by
                    // another process, a slow store); nothing was changed, retry later
  // A networked register's servers did not answer (etcd: no endpoint reachable, no
  // quorum, no leader). A write that ended this way is NOT committed. Transient: retry
  // (at startup the daemon waits for the register with a backoff; while serving the
  // reservation service retries and the daemon pauses at the end of its horizon).
  kUnreachable,
};

struct RegisterError {
  RegisterErrorCode code;
  std::string message;  // a sentence naming the register, the number and what to do
};

// Implementations are NOT required to be thread-safe: the daemon calls them from one
// thread at a time (startup; then only the reservation thread, see
// daemon/reservation_service.h; then the main thread at a clean stop, after the
// reservation thread has ended). They must be safe against other processes using the same
// register concurrently, and every call must return within a bound (seconds, never
// "until another process lets go"): kTimedOut otherwise.
//
// The lifecycle: Claim() once; then, on the reservation thread, UpdateHighWater() before
// the daemon relies on a new horizon and Renew() at least every renewal interval; at a
// clean stop RecordCleanStop(). Any of them returning kClaimLost means the number may
// already serve another holder: the daemon stops serving at once and exits.
class MachineRegister {
 public:
  virtual ~MachineRegister();

  // Claims a number for request.holder_id and keeps it until this object is destroyed
  // (or the process dies). Call once.
  // Errors: kNoFreeNumber, kInUse, kCorrupt, kUnreadable, kEpochMismatch, kInvalidRequest
  // (all fatal at startup: the message says what to fix); kUnreachable (nothing claimed:
  // call Claim() again later, the daemon retries with a backoff).
  [[nodiscard]] virtual tl::expected<MachineClaim, RegisterError> Claim(
      const ClaimRequest& request) noexcept = 0;

  // Records that IDs up to unix_ms may have been issued under the claimed number, so a
  // later holder of the number continues above it. Never lowers the recorded mark.
  // Only a successful return makes unix_ms part of the daemon's confirmed horizon.
  // Errors: kNotClaimed, kUnreadable, kCorrupt, kTimedOut, kUnreachable (the horizon stays
  // where it was; the daemon pauses at its end if this persists), kClaimLost.
  [[nodiscard]] virtual tl::expected<void, RegisterError> UpdateHighWater(
      int64_t unix_ms) noexcept = 0;

  // Keeps the claim alive (a lease keepalive for a networked backend) and says whether it
  // still holds. The file and static backends hold their number's flock for the life of
  // the process, which cannot be lost: they always succeed (this default).
  // Errors: kClaimLost (stop serving at once), kTimedOut, kUnreachable or kUnreadable
  // (not known: retry; the horizon stays where it was).
  [[nodiscard]] virtual tl::expected<void, RegisterError> Renew() noexcept { return {}; }

  // At a clean stop, after the ring is drained: records exactly the last millisecond
  // issued, LOWERING the mark from the reservation (which runs ahead of the clock), so a
  // clean restart need not wait for the reservation to pass. Only the live holder knows
  // this; never call it for any other reason. Errors as UpdateHighWater.
  [[nodiscard]] virtual tl::expected<void, RegisterError> RecordCleanStop(
      int64_t last_issued_unix_ms) noexcept = 0;

  // "file", "static", ...
  virtual std::string_view backend_name() const noexcept = 0;
  // Where the register is, for logs and status ("/var/lib/snowflaked/register.json").
  virtual std::string location() const = 0;
};

// The backend config.machine_register names. Never null.
std::unique_ptr<MachineRegister> MakeMachineRegister(const Config& config);

// The holder id config asks for: machine_register.holder_id, or else the first line of
// /etc/machine-id, ":" and daemon.instance (just the instance if machine-id is unreadable).
std::string ResolveHolderId(const Config& config);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_MACHINE_REGISTER_H_
