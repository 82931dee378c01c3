// libsnowflake: take unique, time-ordered 64-bit IDs from the local snowflaked.
//
//   auto client = snowflake::Client::Open("orders");          // once per process
//   if (!client) { log(client.error().message); return; }
//   auto id = client->Next();                                  // per record
//
// A Client maps the daemon's shared-memory ring (docs/design.md §4) and takes IDs from it
// directly: a take is a few loads and one compare-and-swap, with no system call. The
// daemon keeps the ring filled; a Client only waits when the ring is empty.
//
// Errors are values (tl::expected<T, Error>); no function here throws.

#ifndef SNOWFLAKE_CLIENT_H_
#define SNOWFLAKE_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "snowflake/client_error.h"
#include "snowflake/clock.h"
#include "snowflake/id_layout.h"

namespace snowflake {

namespace detail {
class RemotePool;
}  // namespace detail

// The runtime directory used when ClientOptions::runtime_dir is empty:
// $SNOWFLAKE_RUNTIME_DIR if set and non-empty, else /run/snowflaked.
std::filesystem::path DefaultRuntimeDir() noexcept;

// Returns kInvalidServiceName unless `service` is 1 to 63 characters of [a-z0-9._-].
tl::expected<void, Error> ValidateServiceName(std::string_view service) noexcept;

struct ClientOptions {
  // Where the daemon's segment lives. Empty: DefaultRuntimeDir().
  std::filesystem::path runtime_dir;
  // How long Next()/NextBatch() wait on an empty ring while the daemon looks healthy
  // before returning kTimedOut. Zero: never wait (kTimedOut at once if empty).
  std::chrono::milliseconds wait_timeout{100};
  // A serving daemon whose heartbeat is older than this is reported as
  // kDaemonNotHeartbeating. Zero (the default): the daemon's own daemon.liveness_ms,
  // carried in the segment header, so the daemon's beat and every client's limit derive
  // from one setting.
  std::chrono::milliseconds max_heartbeat_age{0};

  // Failover (docs/client.md): other daemons' HTTP fronts as "host:port" ("[v6]:port"),
  // "http://host:port" or, over TLS, "https://host:port", used while the local daemon is
  // not serving. Empty: $SNOWFLAKE_REMOTES (comma-separated)
  // if set and remotes_from_environment, else none, and then nothing changes on the take
  // path.
  std::vector<std::string> remotes;
  // One HTTP attempt may take this long ...
  std::chrono::milliseconds remote_attempt_timeout{50};
  // ... and all attempts of one take together this long.
  std::chrono::milliseconds remote_deadline{200};
  // A remote ID older than this by this host's clock is refused (a stale or skewed peer).
  std::chrono::milliseconds remote_max_age{100};
  // A remote ID whose millisecond is further than this ahead of this host's clock (read
  // with this Client's epoch) is refused: a remote with a fast clock, or of another epoch.
  // Accepting one would raise this Client's last ID that far ahead, and until its own clock
  // caught up every correct source's IDs would be below it and refused.
  std::chrono::milliseconds remote_max_ahead{50};
  // False: an empty `remotes` means none, whatever $SNOWFLAKE_REMOTES says. For a Client
  // that must only ever serve the local daemon's IDs (the daemon's own HTTP front).
  bool remotes_from_environment = true;
  // TLS for https:// remotes (docs/client.md, "Remotes over TLS"): the CA certificate(s),
  // PEM, that the remotes' certificates must verify against (empty: $SNOWFLAKE_REMOTES_CA
  // if set, else the system's CAs); and this client's certificate and key, PEM, for
  // fronts with mutual TLS (empty: $SNOWFLAKE_REMOTES_CERT and $SNOWFLAKE_REMOTES_KEY if
  // set, else none; both or neither). A remote that fails verification is an error naming
  // it and the reason; it is never asked over plain HTTP instead.
  std::filesystem::path remotes_ca_file;
  std::filesystem::path remotes_cert_file;
  std::filesystem::path remotes_key_file;

  // The clock this Client reads and sleeps on (snowflake/clock.h): the coarse wall clock
  // of the freshness check, the monotonic clock of its deadlines (wait_timeout, the
  // attach, the remotes' deadline and breakers) and of its heartbeat judgement, the wall
  // clock of a remote ID's age and of the times in its messages, and every sleep. Not
  // owned: it must outlive the Client. Null or the default: the real clock (the take's
  // read of it stays inline). Another clock (a test's, moved by hand) is read through the
  // interface.
  // A wait on an empty ring sleeps on a futex (the daemon's publish wakes it) in slices of
  // at most 1 ms of real time, each bounded by what this clock says is left of
  // wait_timeout: on a clock that stands still the wait lasts until an ID is published,
  // the daemon's state changes, or the clock is moved past the deadline. A test that
  // moves the clock to make a waiting Next() judge anew moves it first, then publishes or
  // changes the state (or waits one slice) to end the sleep in progress.
  Clock* clock = &Clock::Real();
};

// A snapshot of the daemon and ring as one client sees them. Fields are read racily, one
// by one: each was true at some instant during the call, not all at the same instant.
struct ClientStatus {
  std::string state;  // "starting", "serving", "paused", "out_of_service", "stopped"
  // state refined by the liveness checks: also "not_heartbeating" or "dead".
  std::string health;
  std::string reason;       // "none", "clock_behind", ... (docs/control-protocol.md)
  std::string reason_text;  // for people: "clock moved back 5 ms"; "" when none
  int64_t reason_detail = 0;
  uint32_t machine = 0;
  int64_t epoch_unix_ms = 0;
  IdBits id_bits = kDefaultIdBits;  // the layout's bits, from the segment header (id_bits)
  uint64_t incarnation = 0;  // 1, or the last segment's + 1 when a start continued it
  uint64_t daemon_pid = 0;
  uint64_t heartbeat_age_ns = 0;
  uint64_t ring_fill = 0;  // published and not yet taken
  uint64_t ring_capacity = 0;
  uint64_t fill_target = 0;      // IDs the daemon aims to keep in the ring
  uint64_t published_total = 0;  // IDs ever published into this segment
  // False when the consumer region could not be reached (the daemon is down, or did not
  // answer attach): taken_total and uncounted are then unknown, and 0 here.
  bool counts_known = true;
  uint64_t taken_total = 0;      // tickets ever claimed (by clients or drained)
  uint64_t drained_total = 0;    // IDs the daemon took back (stale, pause, shutdown)
  uint64_t clock_pauses = 0;
  // IDs taken by clients that found no free per-service counter slot (all 255 in use):
  // they are in no service's total.
  uint64_t uncounted = 0;
  uint64_t liveness_ms = 0;         // the daemon's daemon.liveness_ms (header)
  uint64_t freshness_bound_ms = 0;  // max_age_ms + liveness_ms: no older ID is taken
  uint64_t client_taken = 0;  // IDs this Client has taken (0 from Inspect)
  // Why the daemon is not serving, in its own words, from the segment (shm/LAYOUT.md, the
  // status text): for a pause on the register, "register etcd <endpoints> <prefix>; last
  // error: ...". "" while serving, or when the daemon wrote none.
  std::string status_text;
};

// A Client is safe for concurrent use by multiple threads without external
// synchronization. Next() and NextBatch() are lock-free, never allocate and make no
// system call unless the ring is empty; then they wait on a futex in 1 ms slices,
// re-checking the daemon's state every slice, and return an error as soon as the daemon
// is not serving. A moved-from Client may only be destroyed or assigned to.
//
// Counting (per-service totals for the daemon): each Client claims its own ServiceSlot in
// the segment, and each of its first 8 taking threads one counter lane of it: a cache line
// in the segment that only that thread stores to, with a plain relaxed store of its own
// running total (no atomic read-modify-write on the take path). The daemon reads the
// lanes racily. Counts are exact and in shared memory at once: nothing to flush when a
// thread exits (its lane keeps its total; the next thread continues from it), when the
// Client closes, or when the process dies. Further threads add to the slot's shared word
// with fetch_add. With all 255 slots in use a Client still takes IDs, counted in the
// segment's "uncounted" total.
//
// Freshness: a take refuses (never returns) an ID more than the header's
// freshness_bound_ms (daemon max_age_ms + liveness_ms) away from the Client's coarse wall
// clock (ClientOptions::clock; the real one reads CLOCK_REALTIME_COARSE),
// so a dead, hung or stopped daemon's leftovers are never handed out, at any age; the
// call then reports why (the daemon's state, heartbeat, or kTimedOut).
//
// Restarts: a daemon creates a new segment (a new file at the same path) at every start,
// above the old one's IDs, and stops the old one. A Client keeps working: between the stop
// and the restart it reports kDaemonStopped/kDaemonDead/kDaemonStarting; then the slow
// path notices the old segment is stopped or its daemon dead, maps the new one under a
// mutex and retries there. Old mappings stay mapped until the Client is
// destroyed, because other threads may still be reading them lock-free.
class Client {
 public:
  // Opens the segment in the runtime directory, validates it, and registers `service`
  // (for per-service counts). It does not wait for the daemon: a stopped or paused daemon
  // is reported by Next(). With remotes (options or $SNOWFLAKE_REMOTES), no segment at all
  // is not an error: the Client takes from the remotes (default epoch) and maps the local
  // segment once one appears; GetStatus() says kDaemonNotRunning meanwhile.
  // Errors: kInvalidServiceName; kDaemonNotRunning (no segment and no remotes: the message
  // names the path); kPermissionDenied (names the group to join); kIncompatibleVersion;
  // kCorruptSegment; kUntrustedSegment; kSystemError; kInvalidArgument (a remote that is
  // not [http://|https://]host:port, a TLS file that cannot be read, a client certificate
  // without its key or a key without its certificate: the message names which).
  static tl::expected<Client, Error> Open(std::string_view service,
                                          const ClientOptions& options = {}) noexcept;

  // Reads the status of the daemon's segment without registering a service (for tools).
  // Errors: as Open() except kInvalidServiceName.
  static tl::expected<ClientStatus, Error> Inspect(const ClientOptions& options = {}) noexcept;

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // Retires this Client's counter slot (the daemon folds its final count).
  ~Client();

  // Returns one ID, larger than every ID any take that completed before this call began
  // received (on this host, in any process).
  // Errors: kDaemonStarting, kDaemonPaused (the message has the reason),
  // kDaemonOutOfService, kDaemonStopped, kDaemonNotHeartbeating, kDaemonDead: returned
  // within about a millisecond of finding the ring empty (or its IDs too old); fail over.
  // kTimedOut: the ring stayed empty, or held only IDs older than the freshness bound,
  // for wait_timeout although the daemon looked healthy.
  tl::expected<uint64_t, Error> Next() noexcept;

  // Takes n IDs into out[0..n) and returns n, with 1 <= n <= out.size(). The IDs are
  // strictly increasing and taken at one instant (one CAS), so no other take interleaves.
  // A short batch (n < out.size()) means the ring held only n IDs at that instant; it is
  // not an error, call again for more. It never returns 0: when the ring is empty it waits
  // and fails exactly like Next(). Errors: as Next(), plus kInvalidArgument for an empty
  // span. On error out is unspecified and no ID was taken.
  tl::expected<size_t, Error> NextBatch(std::span<uint64_t> out) noexcept;

  // Splits an ID into its millisecond, machine and sequence using the segment's layout (its
  // epoch and bits, from the header).
  // Errors: kInvalidArgument for a value with the sign bit set (not an ID).
  tl::expected<DecodedId, Error> Decode(uint64_t id) const noexcept;

  // The ID layout (epoch and bits) of the segment this Client currently uses; the default
  // (DefaultEpoch, 41/10/12) while it uses none.
  IdLayout layout() const noexcept;

  // A status snapshot, including this Client's own count.
  // Errors: kSystemError (allocation failure) only.
  tl::expected<ClientStatus, Error> GetStatus() const noexcept;

  const std::string& service() const noexcept;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl) noexcept;

  std::unique_ptr<Impl> impl_;
  // Set only with remotes (libclient/remote_pool.h); null keeps the take path unchanged.
  std::unique_ptr<detail::RemotePool> remotes_;
};

}  // namespace snowflake

#endif  // SNOWFLAKE_CLIENT_H_
