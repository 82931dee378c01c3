// The errors libsnowflake returns. Each is distinct so a caller can react to it, and every
// Error carries a message that says what happened, names the path, group or daemon state
// involved and says what to do.
//
// ClientError and Error are plain values: safe to copy and use from any thread.

#ifndef SNOWFLAKE_CLIENT_ERROR_H_
#define SNOWFLAKE_CLIENT_ERROR_H_

#include <string>
#include <string_view>

namespace snowflake {

enum class ClientError {
  // Open: the service name is not 1-63 characters of [a-z0-9._-]. Fix the name.
  kInvalidServiceName,
  // A bad argument other than the name (an empty batch, a null pointer). Fix the call.
  kInvalidArgument,
  // Open: no segment in the runtime directory; the message names the path looked at.
  // Start snowflaked, or point SNOWFLAKE_RUNTIME_DIR / ClientOptions::runtime_dir at it.
  kDaemonNotRunning,
  // Open: this user may not read the segment; the message names the group to join.
  kPermissionDenied,
  // Open: the segment was written by a daemon speaking another format version. Run a
  // daemon and client library of the same release.
  kIncompatibleVersion,
  // Open: the segment fails validation (bad magic, sizes, capacity or counters). Stop
  // snowflaked, remove the file and restart it.
  kCorruptSegment,
  // Open: the segment is not a regular file, has the wrong owner or is open to other
  // users. Refused: anyone could forge IDs. Check the runtime directory.
  kUntrustedSegment,
  // Next: the daemon is starting (claiming its number, first fill). Retry shortly.
  kDaemonStarting,
  // Next: the daemon paused generation (the message has the reason, e.g. "clock moved
  // back 5 ms"). Fail over; it resumes by itself when the clock passes its mark.
  kDaemonPaused,
  // Next: the daemon is out of service until an operator runs `snowflakectl resume`.
  // Fail over.
  kDaemonOutOfService,
  // Next: the daemon shut down cleanly. Fail over; retry later.
  kDaemonStopped,
  // Next: the daemon claims to serve but has not refreshed its heartbeat within
  // ClientOptions::max_heartbeat_age (hung or stopped by a signal). Fail over.
  kDaemonNotHeartbeating,
  // Next: the daemon's process no longer exists (crashed or killed). Fail over.
  kDaemonDead,
  // Next: the ring held only IDs older than the header's freshness bound for the whole
  // ClientOptions::wait_timeout although the daemon looked healthy (it is not draining its
  // ring). Open: the daemon did not hand over its consumer region within the attach budget.
  // Fail over.
  kTimedOut,
  // An unexpected OS error or allocation failure; the message names the cause.
  kSystemError,
  // (15, SF_TIME_OUT_OF_RANGE, is sf_bounds' alone: no Client call fails with it.)
  // Next: the ring stayed empty for the whole ClientOptions::wait_timeout although the
  // daemon looked healthy (demand above what it generates, or a refill slower than the
  // wait). A hung or frozen daemon is kDaemonNotHeartbeating by then, so this one is alive
  // and refilling: retry here, not on another daemon.
  kRingEmpty = 16,
};

// "invalid_service_name", "daemon_not_running", ...: stable names for logs and JSON.
std::string_view ClientErrorName(ClientError code) noexcept;

// Whether `code` says this host's daemon cannot serve now, so another daemon may: it is
// not running, starting, paused, out of service, stopped, not heartbeating or dead, or its
// ring held only IDs too old to hand out (also: the local ring's IDs are behind a
// remote's). Failover (ClientOptions::remotes) tries the remotes on exactly these, and the
// HTTP front answers them with 503 so that its callers go elsewhere. kRingEmpty is not
// one (retry here); every other code is a fault of the call or of this host's setup that
// another daemon would not cure. The vocabulary's action column (fail_over) is the rule;
// libsnowflake checks this switch against it at compile time.
constexpr bool AnotherDaemonMayServe(ClientError code) noexcept {
  switch (code) {
    case ClientError::kDaemonNotRunning:
    case ClientError::kDaemonStarting:
    case ClientError::kDaemonPaused:
    case ClientError::kDaemonOutOfService:
    case ClientError::kDaemonStopped:
    case ClientError::kDaemonNotHeartbeating:
    case ClientError::kDaemonDead:
    case ClientError::kTimedOut:
      return true;
    default:
      return false;
  }
}

struct Error {
  ClientError code;
  std::string message;
};

}  // namespace snowflake

#endif  // SNOWFLAKE_CLIENT_ERROR_H_
