package snowflake

import "errors"

// Error is every error of this package: Status is the library's status number (the C
// ABI's sf_status, the same numbers in every language), Code its stable name
// ("daemon_paused"), Message what happened and what to do.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return "snowflake: " + e.Code + ": " + e.Message }

// Is matches the sentinel of e's status, and ErrUnavailable for every status whose action
// is fail_over (the daemon cannot serve now; another may). ErrRingEmpty is not one of them.
func (e *Error) Is(target error) bool {
	if e == target {
		return true
	}
	if target == ErrUnavailable {
		return unavailable(e.Status)
	}
	if e.Status >= 0 && e.Status < len(sentinels) {
		return sentinels[e.Status] == target
	}
	return false
}

// The library's statuses: the vocabulary's error codes 1..17
// (protocol/vocabulary.h, ErrorCode), which the C ABI's sf_status, the C++
// ClientError (plus one), the HTTP front and snowflakectl share. The conformance suite
// checks this table against the C++ one (tests/conformance).
const (
	statusInvalidServiceName    = 1
	statusInvalidArgument       = 2
	statusDaemonNotRunning      = 3
	statusPermissionDenied      = 4
	statusIncompatibleVersion   = 5
	statusCorruptSegment        = 6
	statusUntrustedSegment      = 7
	statusDaemonStarting        = 8
	statusDaemonPaused          = 9
	statusDaemonOutOfService    = 10
	statusDaemonStopped         = 11
	statusDaemonNotHeartbeating = 12
	statusDaemonDead            = 13
	statusTimedOut              = 14
	statusSystemError           = 15
	statusTimeOutOfRange        = 16
	statusRingEmpty             = 17
	// The last status: sentinels has one entry per status up to it.
	lastStatus = statusRingEmpty
)

// Indexed by status; index 0 is no error.
var statusCodes = [...]string{"ok", "invalid_service_name", "invalid_argument",
	"daemon_not_running", "permission_denied", "incompatible_version", "corrupt_segment",
	"untrusted_segment", "daemon_starting", "daemon_paused", "daemon_out_of_service",
	"daemon_stopped", "daemon_not_heartbeating", "daemon_dead", "timed_out", "system_error",
	"time_out_of_range", "ring_empty"}

// statusCode is the vocabulary's code of a status, "unknown_status" past the table.
func statusCode(status int) string {
	if status < 0 || status >= len(statusCodes) {
		return "unknown_status"
	}
	return statusCodes[status]
}

// The sentinels, one per status (docs/client.md says what each means and what to do).
var (
	ErrInvalidServiceName    = errors.New("snowflake: invalid service name")
	ErrInvalidArgument       = errors.New("snowflake: invalid argument")
	ErrDaemonNotRunning      = errors.New("snowflake: daemon not running")
	ErrPermissionDenied      = errors.New("snowflake: permission denied")
	ErrIncompatibleVersion   = errors.New("snowflake: incompatible segment version")
	ErrCorruptSegment        = errors.New("snowflake: corrupt segment")
	ErrUntrustedSegment      = errors.New("snowflake: untrusted segment")
	ErrDaemonStarting        = errors.New("snowflake: daemon starting")
	ErrDaemonPaused          = errors.New("snowflake: daemon paused")
	ErrDaemonOutOfService    = errors.New("snowflake: daemon out of service")
	ErrDaemonStopped         = errors.New("snowflake: daemon stopped")
	ErrDaemonNotHeartbeating = errors.New("snowflake: daemon not heartbeating")
	ErrDaemonDead            = errors.New("snowflake: daemon dead")
	ErrTimedOut              = errors.New("snowflake: timed out")
	ErrSystem                = errors.New("snowflake: system error")
	ErrTimeOutOfRange        = errors.New("snowflake: time out of range")
	// ErrRingEmpty: the ring stayed empty for the whole timeout while the daemon looked
	// healthy. It is alive and refilling (a hung daemon is ErrDaemonNotHeartbeating by
	// then): retry here. Not ErrUnavailable, so a caller that fails over on those does not
	// leave a healthy daemon because its ring was briefly empty.
	ErrRingEmpty = errors.New("snowflake: ring empty")

	// ErrUnavailable matches every error whose action is fail_over, meaning this host's
	// daemon cannot hand out IDs now and another may: not running, starting, paused, out
	// of service, stopped, not heartbeating, dead, timed out (a ring of IDs too old to
	// hand out).
	ErrUnavailable = errors.New("snowflake: daemon unavailable")

	// ErrClosed is returned by calls on a closed Client; it is also ErrInvalidArgument.
	ErrClosed error = newError(statusInvalidArgument, "the client is closed: open a new one")
)

var sentinels = []error{nil, ErrInvalidServiceName, ErrInvalidArgument, ErrDaemonNotRunning,
	ErrPermissionDenied, ErrIncompatibleVersion, ErrCorruptSegment, ErrUntrustedSegment,
	ErrDaemonStarting, ErrDaemonPaused, ErrDaemonOutOfService, ErrDaemonStopped,
	ErrDaemonNotHeartbeating, ErrDaemonDead, ErrTimedOut, ErrSystem, ErrTimeOutOfRange,
	ErrRingEmpty}

// What a caller does about each status: the vocabulary's action column
// (protocol/vocabulary.h, sf_status_action), indexed by status; index 0 is no error. The
// conformance suite checks it against the C++ table.
var statusActions = [...]string{"none", "fix_the_call", "fix_the_call", "fail_over",
	"fix_the_host", "fix_the_host", "fix_the_host", "fix_the_host", "fail_over", "fail_over",
	"fail_over", "fail_over", "fail_over", "fail_over", "fail_over", "fix_the_host",
	"fix_the_call", "retry_here"}

// Action is what a caller does about err, the same in every language: "fail_over" (this
// host's daemon cannot serve now, another may: exactly the errors matching
// ErrUnavailable), "retry_here" (ErrRingEmpty: take again from this Client),
// "fix_the_call" or "fix_the_host"; "none" for nil and "fix_the_host" for an error not of
// this package.
func Action(err error) string {
	if err == nil {
		return "none"
	}
	var e *Error
	if !errors.As(err, &e) || e.Status <= 0 || e.Status >= len(statusActions) {
		return "fix_the_host"
	}
	return statusActions[e.Status]
}

// unavailable: another daemon may serve (the C++ AnotherDaemonMayServe); failover tries
// the remotes on exactly these.
func unavailable(status int) bool {
	return status > 0 && status < len(statusActions) && statusActions[status] == "fail_over"
}

func newError(status int, message string) *Error {
	return &Error{Status: status, Code: statusCode(status), Message: message}
}

func invalidArgument(message string) error { return newError(statusInvalidArgument, message) }
