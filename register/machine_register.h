// The register of machine numbers (docs/design.md §7): which holder owns which of the
// 2^machine bits numbers of the ID layout, and each number's high-water mark. A daemon claims its
// number once at startup and keeps it for its lifetime; two live holders never share one.
//
// Backends implement MachineRegister: "file" (file_register.h, the default), "static"
// (static_register.h) and "etcd" (etcd_register.h, for a fleet); register_backends.h is
// their table and MakeMachineRegister(), the factory.

#ifndef SNOWFLAKE_REGISTER_MACHINE_REGISTER_H_
#define SNOWFLAKE_REGISTER_MACHINE_REGISTER_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "snowflake/id_layout.h"

namespace snowflake::reg {

// What a backend's factory gets besides its own config keys (register_backends.h): the
// [register] keys every backend shares, resolved.
struct RegisterCommon {
  std::filesystem::path file_path;  // register.path, or <state_dir>/register.json
  uint32_t first_machine = 0;       // register.machines: the numbers it may hand out
  uint32_t last_machine = kDefaultIdBits.max_machine();
  // id.layout: the fleet's bits, which the register records (file, etcd) and refuses a
  // mismatch of (kEpochMismatch), and whose 2^machine bits bound every number.
  IdBits id_bits = kDefaultIdBits;
};

// Which store a networked register is, as far as its answers tell: the cluster's id and
// the newest revision seen. A store restored from a backup answers with an older revision
// (or, rebuilt, another id), and a daemon that recorded what it saw before notices.
struct RegisterIdentity {
  uint64_t cluster_id = 0;  // 0: not known, or a backend without one (file, static)
  int64_t revision = 0;     // the newest revision seen; 0: not known
  // The operators' restore fence as this host last saw it (etcd: the mod_revision of
  // P restored; 0: none). A fence admits a host that finds the store rolled back only if
  // it is newer than this: one the host already saw answers an earlier restore.
  int64_t fence_revision = 0;
  friend bool operator==(const RegisterIdentity&, const RegisterIdentity&) = default;
};

struct ClaimRequest {
  ClaimRequest(std::string holder, int64_t epoch, RegisterIdentity seen = {},
               int64_t local_high_water = 0, std::optional<uint32_t> preferred = std::nullopt)
      : holder_id(std::move(holder)),
        epoch_unix_ms(epoch),
        last_seen(seen),
        local_high_water_ms(local_high_water),
        preferred_machine(preferred) {}

  std::string holder_id;  // who asks: a restarting holder gets its own number back
  int64_t epoch_unix_ms;  // the fleet's epoch: the register refuses a mismatch
  // What this host's state file recorded of the register (zeros: nothing, a first start).
  RegisterIdentity last_seen;
  // The newest millisecond this host may have issued an ID in (its state file's
  // reservation): a register found restored is used only if an operator raised every
  // mark above it (`snowflakectl register raise-all`).
  int64_t local_high_water_ms = 0;
  // The number this host's state file was written for: a networked register gives it back
  // first when it is this holder's or free, so a restart continues on its own number even
  // if a late claim of an earlier start left this holder's id on another.
  std::optional<uint32_t> preferred_machine = std::nullopt;
};

struct MachineClaim {
  uint32_t machine;
  // The largest millisecond any earlier holder of this number may have issued an ID in
  // (0 if none is known). The new holder must issue strictly above it.
  int64_t high_water_unix_ms;
  // Who last wrote that mark, and who this claim is, as tokens the state file records
  // (etcd: lease ids). A restart may trust its surviving segment only if the mark's writer
  // is the claim its state file names: then no other holder raised the mark, hence none
  // issued, since. nullopt: the backend does not tell (file, static: one host, whose locks
  // and state file decide).
  std::optional<int64_t> mark_writer = std::nullopt;
  std::optional<int64_t> claim_token = std::nullopt;
  // Lines for the log the daemon should show (a register version with a known bug, a
  // restore an operator fenced). Empty: nothing to say.
  std::vector<std::string> notices = {};
};

enum class RegisterErrorCode {
  kNoFreeNumber,    // every number of the allowed range is assigned to some holder
  kInUse,           // the number is held by a live daemon (two daemons, one holder id)
  kCorrupt,         // the register exists but is not a register we can trust
  kUnreadable,      // the register cannot be read or written (permissions, I/O)
  kEpochMismatch,   // the register belongs to a fleet with another epoch or ID layout
  kNotClaimed,      // UpdateHighWater()/Release before a successful Claim()
  kInvalidRequest,  // a bad argument (holder id empty, machine out of range)
  // The claimed number is no longer ours (etcd: the lease expired, or machines/N was
  // deleted or taken over). Final: stop serving at once and exit non-zero, so the service
  // manager restarts the daemon and it claims anew.
  kClaimLost,
  kTimedOut,  // the register did not answer within its bound (a lock held by
              // another process, a slow store); nothing was changed, retry later
  // A networked register's servers did not answer (etcd: no endpoint reachable, no
  // quorum, no leader). A write that ended this way is NOT committed. Transient: retry
  // (at startup the daemon waits for the register with a backoff; while serving the
  // reservation service retries and the daemon pauses at the end of its horizon).
  kUnreachable,
  // The register is older than what this host saw of it: its revision went back, or its
  // cluster id changed (restored from a backup, or replaced), and no operator fenced the
  // restore above this host's IDs. Its marks cannot be trusted: refuse to start.
  kRolledBack,
  // The backend has no such operation (the static backend keeps no register to list or
  // release; only etcd can be restored from a backup, so only it has RaiseAll). Nothing was
  // done: the message says what to use instead.
  kUnsupported,
  // A write of the mark found an operator's fence on our number (fence_unix_ms() now says
  // where) and wrote nothing: the fence must be durable on this host (the state file)
  // before any write under this holder's claim covers it, or a crash right after that
  // write would restart below the fence with nothing left to say so. Not a failure of the
  // register: record the fence, then call again.
  kFenced,
};

// The code's name in snake case ("claim_lost", "unreachable"): the `code` label of
// snowflake_register_errors_total (docs/metrics.md).
std::string_view RegisterErrorCodeName(RegisterErrorCode code) noexcept;

struct RegisterError {
  RegisterErrorCode code;
  std::string message;  // a sentence naming the register, the number and what to do
};

// One number as an operator sees it (`snowflakectl register list`), whatever the backend.
struct RegisterListEntry {
  uint32_t machine = 0;
  std::string holder;         // "" = free (the mark, if any, is kept)
  std::string host;           // "" where the backend records none (file)
  int64_t pid = 0;            // 0: not known
  int64_t since_unix_ms = 0;  // when the holder claimed it; 0: not known
  bool live = false;          // a running daemon holds it now
  // Seconds left on the holder's lease, for backends with leases (etcd); -1: expired.
  // nullopt: the backend has no leases.
  std::optional<int64_t> lease_left_s;
  std::optional<int64_t> high_water_unix_ms;  // nullopt: no mark recorded
};

// What RaiseAll did.
struct RaiseAllResult {
  int raised = 0;  // marks that were below the fence and now are not
  // With `while_running`: each running holder whose claim ended (its record removed, or
  // the number claimed under another lease) before it wrote its acknowledgment, named as
  // "machine 3 (\"host-a\" on a.example, pid 812)". It was not waited for: stopped, or its
  // lease expired while it was cut off from the register, and then it may still hand out
  // what its ring and confirmed reservation hold, below the fence and below every later
  // holder's IDs, until it notices.
  std::vector<std::string> ended_unacknowledged;
};

// Implementations are NOT required to be thread-safe: the daemon calls them from one
// thread at a time (startup; then only the reservation thread, see
// daemon/core/reservation_service.h; then the main thread at a clean stop, after the
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
  // where it was; the daemon pauses at its end if this persists), kClaimLost, kFenced
  // (nothing written: persist fence_unix_ms(), then call again).
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
  // this; never call it for any other reason. It never writes below a mark this holder did
  // not write itself (an operator's fence). Errors as UpdateHighWater.
  [[nodiscard]] virtual tl::expected<void, RegisterError> RecordCleanStop(
      int64_t last_issued_unix_ms) noexcept = 0;

  // What this register's answers have shown of its identity so far (the state file
  // records it with each reservation). Zeros for backends without one (this default).
  // Called by the thread that calls the other functions.
  virtual RegisterIdentity identity() const noexcept { return {}; }

  // An operator's fence on the claimed number: the highest mark that someone other than
  // this holder wrote since the claim (`snowflakectl register raise-all --while-running`,
  // after a restore of the register), which the daemon must now stay above: no ID at or
  // below it, whatever its clock says. 0: none (this default). It only grows. A call of
  // UpdateHighWater(), RecordCleanStop(), AcknowledgeFence() or Renew() may find one; read
  // it after each. A write that finds a new one returns kFenced without writing, so that
  // the caller records it durably before any write under its claim covers it.
  virtual int64_t fence_unix_ms() const noexcept { return 0; }
  // The daemon issues nothing at or below `fence_unix_ms` any more (its generator is
  // above it and its ring holds no ID at or below it): the register records that this
  // holder obeys the fence (etcd: the mark is written again under this holder's lease,
  // never lower), which is what `register raise-all --while-running` waits for.
  // Errors as UpdateHighWater (not recorded: call again later).
  [[nodiscard]] virtual tl::expected<void, RegisterError> AcknowledgeFence(
      int64_t fence_unix_ms) noexcept {
    (void)fence_unix_ms;
    return {};
  }

  // The operator's operations (`snowflakectl register list|show|release|raise-all`). They
  // work on a register object that has not claimed (the CLI makes one from the daemon's
  // config); they never touch a number a live daemon holds, nor lower a mark.
  //
  // Every number the register records, ascending. Errors: kUnsupported (the backend keeps
  // no register: this default), kCorrupt, kUnreadable, kUnreachable.
  [[nodiscard]] virtual tl::expected<std::vector<RegisterListEntry>, RegisterError>
  ListNumbers() noexcept;
  // Frees `machine` for another holder, keeping its high-water mark. Errors: kUnsupported
  // (this default), kInUse (a live daemon holds it), kInvalidRequest (nothing recorded for
  // it), kCorrupt, kUnreadable, kUnreachable.
  [[nodiscard]] virtual tl::expected<void, RegisterError> Release(uint32_t machine) noexcept;
  // After the register was restored from a backup: raises every number's mark to at least
  // above_unix_ms and records the fence; returns how many marks it raised (RaiseAllResult). A
  // number held by a live daemon is refused (kInUse, naming each holder and host) unless
  // `while_running`: the holders are then fenced (fence_unix_ms()) and RaiseAll returns
  // once each has acknowledged the fence (AcknowledgeFence) or its claim has ended.
  //
  // An optional operation rather than a capability query: only the backend knows why it
  // has none (a file register is never restored behind the daemon's back), so it says so in
  // its kUnsupported error, and a caller cannot ask one thing and then do another.
  // Errors: kUnsupported (this default), and the backend's own (etcd_register.h).
  [[nodiscard]] virtual tl::expected<RaiseAllResult, RegisterError> RaiseAll(
      int64_t above_unix_ms, bool while_running) noexcept;

  // How far ahead of the clock the daemon should reserve in this register, when that is
  // longer than its own persistence.reservation_ms: a register whose every write is costly
  // (etcd: one raft entry) asks for a long window, raised when half of it is left. 0: no
  // wish of its own (this default).
  virtual int64_t mark_reservation_ms() const noexcept { return 0; }

  // "file", "static", ...
  virtual std::string_view backend_name() const noexcept = 0;
  // Where the register is, for logs and status ("/var/lib/snowflaked/register.json").
  virtual std::string location() const = 0;
};

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_MACHINE_REGISTER_H_
