// The project's one vocabulary: the daemon's states, what a client sees of them (health),
// why the daemon is not serving (reasons), and every error code a caller can be given, each
// with its wire code (lower_snake_case, stable) and its text for people. Every surface takes
// its words from these tables and none has a switch of its own: the segment's and the
// control socket's state and reason codes, the daemon's logs and STATUS= line, libsnowflake
// (ClientErrorName, sf_status_str and so the Python and Go bindings), the HTTP front's
// /healthz, /v1/status and error bodies, and snowflakectl's --json error_code. One condition
// has one code everywhere; a second code for it is a bug (docs/decisions.md).
//
// It is a library of its own (snowflake::vocabulary) in protocol/, above shm/ whose states,
// reasons and health it names, and below everything that speaks to a caller: the daemon,
// libsnowflake (which carries its objects), the control protocol and the CLI. Adding a row: append
// it to its enum and table (the static_asserts in vocabulary.cc refuse a table that misses a value
// or is out of order), then document the code where its surface lists codes (docs/http.md,
// docs/client.md, docs/cli.md, docs/control-protocol.md).
//
// Thread-safe: constant tables and pure functions; nothing here allocates except
// DescribeReason.

#ifndef SNOWFLAKE_PROTOCOL_VOCABULARY_H_
#define SNOWFLAKE_PROTOCOL_VOCABULARY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "snowflake/ring_consumer.h"
#include "snowflake/segment_layout.h"

namespace snowflake::vocab {

// --- Error codes --------------------------------------------------------------------------

// Every condition a caller of any surface can be told about, with one code each. The
// library's conditions come first, numbered as the C ABI's sf_status (SF_OK is 0 and no
// error), so sf_status, ClientError (one less) and this enum convert by arithmetic that
// static_asserts in libclient check value by value.
enum class ErrorCode : uint32_t {
  // libsnowflake (C++, C ABI, bindings), snowflakectl and the HTTP front.
  kInvalidServiceName = 1,
  kInvalidArgument = 2,
  kDaemonNotRunning = 3,
  kPermissionDenied = 4,
  kIncompatibleVersion = 5,
  kCorruptSegment = 6,
  kUntrustedSegment = 7,
  kDaemonStarting = 8,
  kDaemonPaused = 9,
  kDaemonOutOfService = 10,
  kDaemonStopped = 11,
  kDaemonNotHeartbeating = 12,
  kDaemonDead = 13,
  kTimedOut = 14,
  kSystemError = 15,
  kTimeOutOfRange = 16,  // sf_bounds and `snowflakectl bounds`
  kRingEmpty = 17,       // a take: no ID came while the daemon looked healthy
  // snowflakectl's own.
  kUsage = 18,
  kBadReply = 19,
  kRefused = 20,
  // The HTTP front's own refusals of a request.
  kBadRequest = 21,
  kMissingService = 22,
  kBadCount = 23,
  kBadQuery = 24,
  kForbidden = 25,
  kNotFound = 26,
  kMethodNotAllowed = 27,
  kBodyTooLarge = 28,
  kHeadersTooLarge = 29,
  kTooManyConnections = 30,
  kTooManyServices = 31,
  kBadVersion = 32,
  // The control socket's own refusals of a request (docs/control-protocol.md).
  kMalformedRequest = 33,
  kUnknownCommand = 34,
  kRequestTooLarge = 35,
  // The HTTP front's again: a take past [http] max_share or per_client_ids_per_s.
  kThrottled = 36,
};

// The first and last of the library's codes (those with an sf_status; all but
// kTimeOutOfRange, which only sf_bounds gives, have a ClientError). Only the library's
// numbers are ABI (sf_status): the codes after them are renumbered when a library code is
// added, and cross every wire as their text.
inline constexpr ErrorCode kFirstLibraryError = ErrorCode::kInvalidServiceName;
inline constexpr ErrorCode kLastLibraryError = ErrorCode::kRingEmpty;

// What a caller does about an error: the one failover rule. libsnowflake's failover and
// the HTTP front's statuses (503 to fail over, 429 with Retry-After to retry here) take it
// from here (AnotherDaemonMayServe is checked against it at compile time), the C ABI hands
// it out (sf_status_action), and each binding's error classes follow it: its conformance
// run compares them with this column.
enum class ErrorAction : uint8_t {
  kFailOver = 1,  // this host's daemon cannot serve now; another daemon may: ask it
  kRetryHere,     // this source serves again shortly (after Retry-After, if given)
  kFixTheCall,    // the call is wrong: no retry and no other daemon changes the answer
  kFixTheHost,    // this host's setup (permissions, versions, the segment, the OS)
};

struct ActionWords {
  ErrorAction action;
  std::string_view code;  // "fail_over"
  std::string_view text;  // "fail over to another daemon"
};

// In enum order, starting at value 1.
inline constexpr std::array<ActionWords, 4> kActions = {{
    {ErrorAction::kFailOver, "fail_over", "fail over to another daemon"},
    {ErrorAction::kRetryHere, "retry_here", "retry here shortly"},
    {ErrorAction::kFixTheCall, "fix_the_call", "fix the call"},
    {ErrorAction::kFixTheHost, "fix_the_host", "fix this host's setup"},
}};

struct ErrorWords {
  ErrorCode error;
  std::string_view code;  // on the wire: "daemon_not_running"
  std::string_view text;  // for people, when there is no message: "snowflaked is not running"
  ErrorAction action;
};

// In enum order, starting at value 1: kErrors[value - 1].error == value.
inline constexpr std::array<ErrorWords, 36> kErrors = {{
    {ErrorCode::kInvalidServiceName, "invalid_service_name",
     "the service name is not 1-63 characters of [a-z0-9._-]", ErrorAction::kFixTheCall},
    {ErrorCode::kInvalidArgument, "invalid_argument", "an invalid argument",
     ErrorAction::kFixTheCall},
    {ErrorCode::kDaemonNotRunning, "daemon_not_running",
     "snowflaked is not running with this runtime directory", ErrorAction::kFailOver},
    {ErrorCode::kPermissionDenied, "permission_denied",
     "this user may not read the segment or reach the control socket", ErrorAction::kFixTheHost},
    {ErrorCode::kIncompatibleVersion, "incompatible_version",
     "the daemon speaks another segment format version", ErrorAction::kFixTheHost},
    {ErrorCode::kCorruptSegment, "corrupt_segment", "the segment fails validation",
     ErrorAction::kFixTheHost},
    {ErrorCode::kUntrustedSegment, "untrusted_segment",
     "the segment has the wrong owner, an open mode or is not a regular file",
     ErrorAction::kFixTheHost},
    {ErrorCode::kDaemonStarting, "daemon_starting", "snowflaked is starting",
     ErrorAction::kFailOver},
    {ErrorCode::kDaemonPaused, "daemon_paused", "snowflaked paused generation",
     ErrorAction::kFailOver},
    {ErrorCode::kDaemonOutOfService, "daemon_out_of_service",
     "snowflaked is out of service until `snowflakectl resume`", ErrorAction::kFailOver},
    {ErrorCode::kDaemonStopped, "daemon_stopped", "snowflaked has stopped", ErrorAction::kFailOver},
    {ErrorCode::kDaemonNotHeartbeating, "daemon_not_heartbeating",
     "snowflaked has not refreshed its heartbeat", ErrorAction::kFailOver},
    {ErrorCode::kDaemonDead, "daemon_dead", "snowflaked is gone without shutting down",
     ErrorAction::kFailOver},
    // A ring that held only IDs past their freshness bound (its daemon is not draining it),
    // or no answer from a control socket or the remotes in time. An empty ring is not this
    // (kRingEmpty below).
    {ErrorCode::kTimedOut, "timed_out",
     "no answer within the time allowed, or a ring of IDs too old to hand out",
     ErrorAction::kFailOver},
    {ErrorCode::kSystemError, "system_error", "an unexpected system error",
     ErrorAction::kFixTheHost},
    {ErrorCode::kTimeOutOfRange, "time_out_of_range",
     "no ID of the epoch can carry a time of the range", ErrorAction::kFixTheCall},
    // A hung or frozen daemon is reported as daemon_not_heartbeating (liveness_ms, 50 ms by
    // default) before a take's wait (100 ms) runs out, so a ring that stays empty under a
    // fresh heartbeat belongs to a daemon that is alive and refilling: not a failover.
    {ErrorCode::kRingEmpty, "ring_empty",
     "the ring stayed empty for the wait allowed although snowflaked looks healthy; retry here",
     ErrorAction::kRetryHere},
    {ErrorCode::kUsage, "usage", "a bad command line or input", ErrorAction::kFixTheCall},
    {ErrorCode::kBadReply, "bad_reply", "the control socket's answer is not one JSON object",
     ErrorAction::kFixTheHost},
    {ErrorCode::kRefused, "refused", "the daemon refused the request", ErrorAction::kFixTheCall},
    {ErrorCode::kBadRequest, "bad_request", "not an HTTP/1.x request", ErrorAction::kFixTheCall},
    {ErrorCode::kMissingService, "missing_service", "the query names no service",
     ErrorAction::kFixTheCall},
    {ErrorCode::kBadCount, "bad_count", "count is not a whole number from 1 to 4096",
     ErrorAction::kFixTheCall},
    {ErrorCode::kBadQuery, "bad_query", "an unknown or repeated query parameter",
     ErrorAction::kFixTheCall},
    {ErrorCode::kForbidden, "forbidden",
     "this client's identity may not use this endpoint or service ([[http.authorize]])",
     ErrorAction::kFixTheCall},
    {ErrorCode::kNotFound, "not_found", "no such endpoint", ErrorAction::kFixTheCall},
    {ErrorCode::kMethodNotAllowed, "method_not_allowed", "only GET is served",
     ErrorAction::kFixTheCall},
    {ErrorCode::kBodyTooLarge, "body_too_large", "the request body is too large",
     ErrorAction::kFixTheCall},
    {ErrorCode::kHeadersTooLarge, "headers_too_large", "the request headers are too large",
     ErrorAction::kFixTheCall},
    {ErrorCode::kTooManyConnections, "too_many_connections",
     "the front serves as many connections as it may", ErrorAction::kFailOver},
    {ErrorCode::kTooManyServices, "too_many_services",
     "the front serves as many service names as it may", ErrorAction::kFailOver},
    {ErrorCode::kBadVersion, "bad_version", "only HTTP/1.0 and HTTP/1.1 are served",
     ErrorAction::kFixTheCall},
    {ErrorCode::kMalformedRequest, "malformed_request",
     "a control request is one JSON object with a string \"command\" per line",
     ErrorAction::kFixTheCall},
    {ErrorCode::kUnknownCommand, "unknown_command",
     "the control socket knows only \"status\", \"resume\" and \"attach\"",
     ErrorAction::kFixTheCall},
    {ErrorCode::kRequestTooLarge, "request_too_large",
     "a control request line is longer than 4096 bytes", ErrorAction::kFixTheCall},
    {ErrorCode::kThrottled, "throttled",
     "remote callers' share of this host's IDs, or this client's rate, is used up; retry",
     ErrorAction::kRetryHere},
}};

// "daemon_not_running"; "unknown" for a value outside the table.
std::string_view ErrorName(ErrorCode error) noexcept;
// What a caller does about `error`; kFixTheHost for a value outside the table (a newer
// peer's code: nothing known about it makes another daemon or a retry the answer).
ErrorAction ActionOf(ErrorCode error) noexcept;
// "fail_over"; "unknown" for a value outside the table.
std::string_view ActionCode(ErrorAction action) noexcept;
// The table's text; "an unknown error" for a value outside it.
std::string_view ErrorText(ErrorCode error) noexcept;
// The ErrorCode whose wire code is `code` ("daemon_not_running"); nullopt for any other
// text (a newer peer's code, or none).
std::optional<ErrorCode> ErrorFromName(std::string_view code) noexcept;

// --- States -------------------------------------------------------------------------------

struct StateWords {
  shm::DaemonState state;
  std::string_view code;  // in the segment's readers, the control socket, JSON: "out_of_service"
  std::string_view text;  // for people (logs, STATUS=, status): "out of service"
};

// In enum order, starting at value 1: kStates[value - 1].state == value.
inline constexpr std::array<StateWords, 5> kStates = {{
    {shm::DaemonState::kStarting, "starting", "starting"},
    {shm::DaemonState::kServing, "serving", "serving"},
    {shm::DaemonState::kPaused, "paused", "paused"},
    {shm::DaemonState::kOutOfService, "out_of_service", "out of service"},
    {shm::DaemonState::kStopped, "stopped", "stopped"},
}};

// "out_of_service"; "unknown" for a value outside the table (a newer daemon's).
std::string_view StateCode(shm::DaemonState state) noexcept;
// "out of service"; "unknown" for a value outside the table.
std::string_view StateText(shm::DaemonState state) noexcept;

// --- Health: the state as a client sees it -------------------------------------------------

struct HealthWords {
  std::string_view code;  // ClientStatus::health, /healthz "state": "not_heartbeating"
  ErrorCode error;        // what a take fails with in this health (kSystemError: it does not)
};

// Indexed by shm::ProducerHealth (its values are 0, 1, ... in declaration order). The
// state's codes plus the liveness checks' own two.
inline constexpr std::array<HealthWords, 7> kHealth = {{
    {"serving", ErrorCode::kSystemError},
    {"starting", ErrorCode::kDaemonStarting},
    {"paused", ErrorCode::kDaemonPaused},
    {"out_of_service", ErrorCode::kDaemonOutOfService},
    {"stopped", ErrorCode::kDaemonStopped},
    {"not_heartbeating", ErrorCode::kDaemonNotHeartbeating},
    {"dead", ErrorCode::kDaemonDead},
}};
// The health when there is no segment to read at all (/healthz): no ProducerHealth has it.
inline constexpr HealthWords kNoDaemonHealth = {"not_running", ErrorCode::kDaemonNotRunning};

// "not_heartbeating"; "unknown" for a value outside the table.
std::string_view HealthCode(shm::ProducerHealth health) noexcept;
// The error a take gets from a daemon in `health` (kSystemError for kServing, which is
// not a failure).
ErrorCode HealthError(shm::ProducerHealth health) noexcept;

// --- Reasons ------------------------------------------------------------------------------

// What ends a state of this reason.
enum class Recovery {
  kNone,         // serving or starting: nothing to recover from
  kByItself,     // the daemon resumes by itself (the clock passes the mark, a store heals)
  kNeedsResume,  // out of service until `snowflakectl resume`
  kFinal,        // stopped
};

// What a reason's detail (shm::SegmentHeader::reason_detail) counts.
enum class Detail {
  kNone,
  kMs,     // milliseconds of a clock step or lag
  kErrno,  // an errno; 0 while a renewal is still under way (not failed yet)
  // A time, Unix ms: since when the daemon waits. A point, not a length, so it stays true
  // while the state lasts (the header's detail is written once per state change); a
  // reader computes the wait from its own clock (DescribeReason's now_unix_ms).
  kSinceUnixMs,
};

struct ReasonWords {
  shm::StateReason reason;
  std::string_view code;     // "clock_behind"
  std::string_view summary;  // for people; "{}" stands for the detail
  // The summary when the detail is 0 ("" if the summary serves): a persistence renewal that
  // has not failed but not finished either has no errno to show.
  std::string_view summary_without_detail;
  Detail detail;
  Recovery recovery;
};

// In enum order, starting at value 0: kReasons[value].reason == value. The array's size
// follows the rows (a new row is one line here and one value in shm::StateReason).
inline constexpr auto kReasons = std::to_array<ReasonWords>({
    {shm::StateReason::kNone, "none", "", "", Detail::kNone, Recovery::kNone},
    {shm::StateReason::kStarting, "starting", "starting up", "", Detail::kNone, Recovery::kNone},
    {shm::StateReason::kClockBehind, "clock_behind", "clock moved back {} ms", "", Detail::kMs,
     Recovery::kByItself},
    {shm::StateReason::kClockStepTooLarge, "clock_step_too_large",
     "clock moved back {} ms, more than max_backward_ms", "", Detail::kMs, Recovery::kNeedsResume},
    // Paused: a restart waiting out its own reservation; out of service: further behind.
    // What happens next comes from the state (RecoveryFor), so one text fits both.
    {shm::StateReason::kBehindHighWater, "behind_high_water",
     "clock started {} ms behind the persisted high-water mark", "", Detail::kMs,
     Recovery::kByItself},
    {shm::StateReason::kTimeRangeExhausted, "time_range_exhausted",
     "the epoch's 41-bit time range is used up", "", Detail::kNone, Recovery::kNeedsResume},
    {shm::StateReason::kShutdown, "shutdown", "shut down", "", Detail::kNone, Recovery::kFinal},
    {shm::StateReason::kPersistenceFailed, "persistence_failed",
     "cannot persist the high-water reservation, not issuing past it (errno {})",
     "the high-water reservation is not renewed yet, not issuing past it", Detail::kErrno,
     Recovery::kByItself},
    // Apart from persistence_failed: the state file is fine, the fleet's register does
    // not answer (a timeout, no leader, no quorum); the segment's status text names it.
    {shm::StateReason::kRegisterUnreachable, "register_unreachable",
     "waiting for the register since {}, not issuing past the high-water reservation", "",
     Detail::kSinceUnixMs, Recovery::kByItself},
    {shm::StateReason::kFenced, "fenced",
     "an operator's fence in the register is {} ms ahead of the clock, not issuing at or below it",
     "", Detail::kMs, Recovery::kByItself},
});

// "clock_behind"; "unknown" for a value outside the table (a newer daemon's).
std::string_view ReasonCode(shm::StateReason reason) noexcept;
// The row of `reason`; for a value outside the table a row with code "unknown" and the
// summary "reason code unknown".
const ReasonWords& WordsFor(shm::StateReason reason) noexcept;

// The reason for people, with its detail: "clock moved back 5 ms", "cannot persist the
// high-water reservation, not issuing past it (errno 28: No space left on device)"; "" for
// kNone. A kSinceUnixMs detail reads as a time ("waiting for the register since
// 2026-12-05T01:02:03.456Z"), followed by " (4210 ms ago)" when `now_unix_ms` is given.
// Throws std::bad_alloc only.
std::string DescribeReason(shm::StateReason reason, int64_t detail,
                           std::optional<int64_t> now_unix_ms = std::nullopt);

// --- Who set the mark a paused daemon waits for --------------------------------------------

// What the millisecond the generator's mark stands at came from, i.e. what a daemon that
// waits for the clock waits for (the status's `clock_wait.set_by`).
enum class MarkSource : uint8_t {
  kNone,        // the epoch: nothing was issued yet
  kStateFile,   // this daemon's reservation, or the floor, in its state file
  kRegister,    // the register's mark: the number's last holder reserved up to it
  kHostMark,    // the host mark: another daemon of this host reserved up to it
  kSegment,     // the surviving segment's last ID
  kFence,       // an operator's fence (`register raise-all --while-running`)
  kLastIssued,  // the generator's own last ID: the clock stepped back behind it
};

struct MarkSourceWords {
  MarkSource source;
  std::string_view code;  // `clock_wait.set_by`: "state_file"
  std::string_view text;  // for people: "this daemon's reservation in its state file"
};

// In enum order, starting at value 0: kMarkSources[value].source == value.
inline constexpr std::array<MarkSourceWords, 7> kMarkSources = {{
    {MarkSource::kNone, "none", "the epoch"},
    {MarkSource::kStateFile, "state_file", "this daemon's reservation in its state file"},
    {MarkSource::kRegister, "register", "the register's mark (the number's last holder)"},
    {MarkSource::kHostMark, "host_mark", "the host mark (another daemon of this host)"},
    {MarkSource::kSegment, "segment", "the surviving segment's last ID"},
    {MarkSource::kFence, "fence", "an operator's fence"},
    {MarkSource::kLastIssued, "last_issued",
     "the last issued millisecond (the clock stepped back)"},
}};

// "state_file"; "none" for a value outside the table.
std::string_view MarkSourceCode(MarkSource source) noexcept;
// "this daemon's reservation in its state file"; "the epoch" outside the table.
std::string_view MarkSourceText(MarkSource source) noexcept;
// The text of a `set_by` code as a daemon sent it; the code itself if this build does
// not know it (a newer daemon's).
std::string_view MarkSourceTextOfCode(std::string_view code) noexcept;

// What ends `state`: paused resumes by itself, out of service needs `snowflakectl resume`,
// whatever the reason (one rule, so clients and logs never tell two stories).
Recovery RecoveryFor(shm::DaemonState state) noexcept;

// What comes next, for people: "it resumes by itself", "run `snowflakectl resume` after
// checking the clock", or "".
std::string_view RecoveryText(Recovery recovery) noexcept;

}  // namespace snowflake::vocab

#endif  // SNOWFLAKE_PROTOCOL_VOCABULARY_H_
