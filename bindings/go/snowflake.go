// Package snowflake takes unique, time-ordered 64-bit IDs from the local snowflaked's
// shared-memory ring, through libsnowflake's C ABI (snowflake/snowflake.h).
//
//	c, err := snowflake.Open("orders")
//	if err != nil { return err }
//	defer c.Close()
//	id, err := c.Next()
//	if errors.Is(err, snowflake.ErrUnavailable) { /* fail over */ }
//
// A take is a few loads and one compare-and-swap on the ring plus one cgo call, with no
// system call unless the ring is empty. A Client may be used by any number of goroutines
// at once; Close must not run concurrently with other calls on the same Client.
//
// Errors are *Error values carrying the library's message (what happened and what to
// do); compare them with errors.Is against the Err* sentinels. Building needs
// libsnowflake's headers and library (the libsnowflake-dev package, or CGO_CPPFLAGS and
// CGO_LDFLAGS pointing into a build tree).
package snowflake

/*
#cgo CXXFLAGS: -std=c++20
#cgo LDFLAGS: -lsnowflake
#include <stdlib.h>
#include <string.h>
#include "snowflake/snowflake.h"
#include "status_shim.h"

// One cgo call per take: the message of a failure is copied on the thread that failed
// (sf_last_error is per thread, and a goroutine may move between threads between calls).
typedef struct sfgo_take {
  uint64_t value;  // the ID, or the batch's count
  sf_status status;
  char *message;   // malloc'ed, only on failure
} sfgo_take;

static char *sfgo_message(sf_status s) { return s == SF_OK ? NULL : strdup(sf_last_error()); }

static sfgo_take sfgo_next(sf_client *c) {
  sfgo_take t = {0, SF_OK, NULL};
  t.status = sf_next(c, &t.value);
  t.message = sfgo_message(t.status);
  return t;
}

static sfgo_take sfgo_next_batch(sf_client *c, uint64_t *ids, size_t n) {
  sfgo_take t = {0, SF_OK, NULL};
  size_t got = 0;
  t.status = sf_next_batch(c, ids, n, &got);
  t.value = got;
  t.message = sfgo_message(t.status);
  return t;
}

static sf_status sfgo_open(const char *service, const char *runtime_dir, const char *remotes,
                           uint32_t wait_timeout_ms, uint32_t max_heartbeat_age_ms,
                           sf_client **out, char **message) {
  sf_options opts = SF_OPTIONS_INIT;
  opts.runtime_dir = runtime_dir;
  opts.remotes = remotes;
  opts.wait_timeout_ms = wait_timeout_ms;
  opts.max_heartbeat_age_ms = max_heartbeat_age_ms;
  sf_status s = sf_open(service, &opts, out);
  *message = sfgo_message(s);
  return s;
}

static sf_status sfgo_decode(const sf_client *c, uint64_t id, sf_decoded_id *out,
                             char **message) {
  sf_status s = sf_decode(c, id, out);
  *message = sfgo_message(s);
  return s;
}

static sf_status sfgo_bounds(int64_t epoch, int64_t from, int64_t to, sf_id_bounds *out,
                             char **message) {
  sf_status s = sf_bounds(epoch, from, to, out);
  *message = sfgo_message(s);
  return s;
}

// Nothing: the cost of a bare cgo call, for the benchmarks.
static void sfgo_nothing(void) {}
*/
import "C"

import (
	"errors"
	"math"
	"strings"
	"time"
	"unsafe"
)

// Error is every error of this package: Status is the C ABI's sf_status value, Code its
// stable name ("daemon_paused"), Message what happened and what to do.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return "snowflake: " + e.Code + ": " + e.Message }

// Is matches the sentinel of e's status, and ErrUnavailable for every status that means
// the daemon cannot serve now (fail over or retry).
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

// The sentinels, one per C ABI status (snowflake.h says what each means and what to do).
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

	// ErrUnavailable matches every error meaning the daemon cannot hand out IDs now:
	// not running, starting, paused, out of service, stopped, not heartbeating, dead,
	// timed out.
	ErrUnavailable = errors.New("snowflake: daemon unavailable")

	// ErrClosed is returned by calls on a closed Client; it is also ErrInvalidArgument.
	ErrClosed error = &Error{Status: C.SF_INVALID_ARGUMENT, Code: statusCode(C.SF_INVALID_ARGUMENT),
		Message: "the client is closed: open a new one"}
)

// The last sf_status: sentinels has one entry per status up to it.
const lastStatus = int(C.SF_TIME_OUT_OF_RANGE)

// statusCode is the library's code of a status (sf_status_str, from the one vocabulary
// table shared by the C and C++ APIs, the HTTP front and snowflakectl).
func statusCode(status int) string { return C.GoString(C.sf_status_str(C.sf_status(status))) }

// Indexed by sf_status; index 0 (SF_OK) is no error.
var sentinels = []error{nil, ErrInvalidServiceName, ErrInvalidArgument, ErrDaemonNotRunning,
	ErrPermissionDenied, ErrIncompatibleVersion, ErrCorruptSegment, ErrUntrustedSegment,
	ErrDaemonStarting, ErrDaemonPaused, ErrDaemonOutOfService, ErrDaemonStopped,
	ErrDaemonNotHeartbeating, ErrDaemonDead, ErrTimedOut, ErrSystem, ErrTimeOutOfRange}

func unavailable(status int) bool {
	switch status {
	case C.SF_DAEMON_NOT_RUNNING, C.SF_DAEMON_STARTING, C.SF_DAEMON_PAUSED,
		C.SF_DAEMON_OUT_OF_SERVICE, C.SF_DAEMON_STOPPED, C.SF_DAEMON_NOT_HEARTBEATING,
		C.SF_DAEMON_DEAD, C.SF_TIMED_OUT:
		return true
	}
	return false
}

// newError takes ownership of message (malloc'ed by the C side).
func newError(status C.sf_status, message *C.char) error {
	text := ""
	if message != nil {
		text = C.GoString(message)
		C.free(unsafe.Pointer(message))
	}
	return &Error{Status: int(status), Code: statusCode(int(status)), Message: text}
}

func invalidArgument(message string) error {
	return &Error{Status: C.SF_INVALID_ARGUMENT, Code: statusCode(C.SF_INVALID_ARGUMENT),
		Message: message}
}

type options struct {
	runtimeDir      string
	remotes         []string
	timeout         time.Duration
	maxHeartbeatAge time.Duration
}

// Option configures Open.
type Option func(*options)

// WithRuntimeDir names the daemon's runtime directory (default: $SNOWFLAKE_RUNTIME_DIR,
// else /run/snowflaked).
func WithRuntimeDir(dir string) Option { return func(o *options) { o.runtimeDir = dir } }

// WithRemotes names other daemons' HTTP fronts ("host:port") to fail over to while the
// local daemon is not serving (default: $SNOWFLAKE_REMOTES, else none).
func WithRemotes(remotes ...string) Option {
	return func(o *options) { o.remotes = append(o.remotes, remotes...) }
}

// WithTimeout sets how long a take waits on an empty ring before ErrTimedOut (default
// 100 ms; 0: never wait). Millisecond resolution.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithMaxHeartbeatAge sets the heartbeat age beyond which the daemon counts as hung
// (default 0: the daemon's own daemon.liveness_ms).
func WithMaxHeartbeatAge(d time.Duration) Option {
	return func(o *options) { o.maxHeartbeatAge = d }
}

// Client takes IDs from one daemon's ring for one service.
type Client struct {
	c          *C.sf_client
	runtimeDir string
}

func milliseconds(d time.Duration, what string) (C.uint32_t, error) {
	if d < 0 || d.Milliseconds() > math.MaxUint32 {
		return 0, invalidArgument(what + " must be between 0 and 2^32-1 ms, not " + d.String())
	}
	return C.uint32_t(d.Milliseconds()), nil
}

// Open maps the local daemon's ring for service (1-63 characters of [a-z0-9._-]).
// Errors: ErrInvalidServiceName, ErrInvalidArgument, ErrDaemonNotRunning,
// ErrPermissionDenied, ErrIncompatibleVersion, ErrCorruptSegment, ErrUntrustedSegment,
// ErrSystem. A stopped or paused daemon is reported by Next, not here.
func Open(service string, opts ...Option) (*Client, error) {
	o := options{timeout: 100 * time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	timeout, err := milliseconds(o.timeout, "the timeout")
	if err != nil {
		return nil, err
	}
	maxAge, err := milliseconds(o.maxHeartbeatAge, "the heartbeat age")
	if err != nil {
		return nil, err
	}
	if strings.IndexByte(service, 0) >= 0 || strings.IndexByte(o.runtimeDir, 0) >= 0 {
		return nil, invalidArgument("a NUL byte in the service name or runtime directory")
	}
	cService := C.CString(service)
	defer C.free(unsafe.Pointer(cService))
	var cDir, cRemotes *C.char
	if o.runtimeDir != "" {
		cDir = C.CString(o.runtimeDir)
		defer C.free(unsafe.Pointer(cDir))
	}
	if len(o.remotes) > 0 {
		cRemotes = C.CString(strings.Join(o.remotes, ","))
		defer C.free(unsafe.Pointer(cRemotes))
	}
	var client *C.sf_client
	var message *C.char
	if status := C.sfgo_open(cService, cDir, cRemotes, timeout, maxAge, &client,
		&message); status != C.SF_OK {
		return nil, newError(status, message)
	}
	return &Client{c: client, runtimeDir: o.runtimeDir}, nil
}

// Next returns one ID, larger than every ID any take that completed before this call
// began received on this host. Errors (all ErrUnavailable): ErrDaemonStarting,
// ErrDaemonPaused, ErrDaemonOutOfService, ErrDaemonStopped, ErrDaemonNotHeartbeating,
// ErrDaemonDead, ErrTimedOut; ErrClosed after Close.
func (c *Client) Next() (uint64, error) {
	if c.c == nil {
		return 0, ErrClosed
	}
	t := C.sfgo_next(c.c)
	if t.status != C.SF_OK {
		return 0, newError(t.status, t.message)
	}
	return uint64(t.value), nil
}

// NextBatch fills ids[0:n] with strictly increasing IDs taken at one instant and returns
// n, 1 <= n <= len(ids). n < len(ids) means the ring held only n IDs then (call again for
// more). Errors: as Next, plus ErrInvalidArgument for an empty slice.
func (c *Client) NextBatch(ids []uint64) (int, error) {
	if c.c == nil {
		return 0, ErrClosed
	}
	if len(ids) == 0 {
		return 0, invalidArgument("NextBatch needs a non-empty slice")
	}
	t := C.sfgo_next_batch(c.c, (*C.uint64_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)))
	if t.status != C.SF_OK {
		return 0, newError(t.status, t.message)
	}
	return int(t.value), nil
}

// Close releases the Client (its counter slot is retired). Later calls return ErrClosed;
// closing again does nothing. It must not run concurrently with other calls on c.
func (c *Client) Close() error {
	if c.c != nil {
		C.sf_close(c.c)
		c.c = nil
	}
	return nil
}

// Decoded is the fields of an ID.
type Decoded struct {
	Time     time.Time // the creation millisecond (UTC)
	UnixMs   int64
	Machine  uint32 // 0..1023
	Sequence uint32 // 0..4095
}

func decoded(d C.sf_decoded_id) Decoded {
	return Decoded{Time: time.UnixMilli(int64(d.unix_ms)).UTC(), UnixMs: int64(d.unix_ms),
		Machine: uint32(d.machine), Sequence: uint32(d.sequence)}
}

// Decode splits id with the epoch of c's daemon. Errors: ErrInvalidArgument (the sign
// bit is set: no ID), ErrClosed.
func (c *Client) Decode(id uint64) (Decoded, error) {
	if c.c == nil {
		return Decoded{}, ErrClosed
	}
	var d C.sf_decoded_id
	var message *C.char
	if status := C.sfgo_decode(c.c, C.uint64_t(id), &d, &message); status != C.SF_OK {
		return Decoded{}, newError(status, message)
	}
	return decoded(d), nil
}

// DefaultEpoch is the epoch of IDs unless the daemons set another: 2026-01-01T00:00:00Z.
var DefaultEpoch = time.UnixMilli(int64(C.SF_DEFAULT_EPOCH_UNIX_MS)).UTC()

// Decode splits id with the default epoch. Errors: ErrInvalidArgument.
func Decode(id uint64) (Decoded, error) { return DecodeWithEpoch(id, DefaultEpoch) }

// DecodeWithEpoch splits id with the daemons' [id] epoch. Errors: ErrInvalidArgument
// (no ID, or an epoch before 1970 or too late).
func DecodeWithEpoch(id uint64, epoch time.Time) (Decoded, error) {
	if id >= 1<<63 {
		return Decoded{}, invalidArgument("the sign bit is set: no ID")
	}
	epochMs := epoch.UnixMilli()
	if epochMs < 0 || epochMs > math.MaxInt64-(1<<41) {
		return Decoded{}, invalidArgument("epoch out of range: it must be from 1970 on")
	}
	offset := int64(id >> 22)
	return Decoded{Time: time.UnixMilli(epochMs + offset).UTC(), UnixMs: epochMs + offset,
		Machine: uint32(id>>12) & 1023, Sequence: uint32(id) & 4095}, nil
}

// IDBounds is the IDs of a time range, for `WHERE id BETWEEN First AND Last`.
type IDBounds struct {
	FirstID, LastID uint64
	// The range as used: raised to the epoch, lowered to its last millisecond.
	First, Last time.Time
}

// Bounds returns the smallest and largest IDs any machine makes from `from` to `to`
// (both included, millisecond resolution) with the default epoch. Errors:
// ErrInvalidArgument (from after to), ErrTimeOutOfRange (no ID of the epoch can carry
// any time of the range).
func Bounds(from, to time.Time) (IDBounds, error) {
	return BoundsWithEpoch(DefaultEpoch, from, to)
}

// BoundsWithEpoch is Bounds with the daemons' [id] epoch.
func BoundsWithEpoch(epoch, from, to time.Time) (IDBounds, error) {
	var b C.sf_id_bounds
	var message *C.char
	if status := C.sfgo_bounds(C.int64_t(epoch.UnixMilli()), C.int64_t(from.UnixMilli()),
		C.int64_t(to.UnixMilli()), &b, &message); status != C.SF_OK {
		return IDBounds{}, newError(status, message)
	}
	return IDBounds{FirstID: uint64(b.first_id), LastID: uint64(b.last_id),
		First: time.UnixMilli(int64(b.first_unix_ms)).UTC(),
		Last:  time.UnixMilli(int64(b.last_unix_ms)).UTC()}, nil
}

// Status is a snapshot of the daemon and ring as the segment shows them; the JSON names
// are those of `snowflakectl status --json` (docs/cli.md) for the same fields.
type Status struct {
	State            string `json:"state"`
	Health           string `json:"health"`
	ReasonCode       string `json:"reason_code"`
	Reason           string `json:"reason"`
	ReasonDetail     int64  `json:"reason_detail"`
	Machine          uint32 `json:"machine"`
	EpochUnixMs      int64  `json:"epoch_unix_ms"`
	Incarnation      uint64 `json:"incarnation"`
	PID              uint64 `json:"pid"`
	HeartbeatAgeNs   uint64 `json:"heartbeat_age_ns"`
	RingFill         uint64 `json:"ring_fill"`
	RingCapacity     uint64 `json:"ring_capacity"`
	FillTarget       uint64 `json:"fill_target"`
	PublishedTotal   uint64 `json:"published_total"`
	TakenTotal       uint64 `json:"taken_total"`
	DrainedTotal     uint64 `json:"drained_total"`
	ClockPauses      uint64 `json:"clock_pauses"`
	Uncounted        uint64 `json:"uncounted"`
	LivenessMs       uint64 `json:"liveness_ms"`
	FreshnessBoundMs uint64 `json:"freshness_bound_ms"`
}

// Status reads the segment of c's runtime directory. Errors: as Open's, ErrClosed.
func (c *Client) Status() (Status, error) {
	if c.c == nil {
		return Status{}, ErrClosed
	}
	var cDir *C.char
	if c.runtimeDir != "" {
		cDir = C.CString(c.runtimeDir)
		defer C.free(unsafe.Pointer(cDir))
	}
	var s C.sfgo_status
	var message *C.char
	if status := C.sfgo_inspect(cDir, &s, &message); status != C.SF_OK {
		return Status{}, newError(status, message)
	}
	return Status{
		State: C.GoString(&s.state[0]), Health: C.GoString(&s.health[0]),
		ReasonCode: C.GoString(&s.reason_code[0]), Reason: C.GoString(&s.reason[0]),
		ReasonDetail: int64(s.reason_detail), Machine: uint32(s.machine),
		EpochUnixMs: int64(s.epoch_unix_ms), Incarnation: uint64(s.incarnation),
		PID: uint64(s.pid), HeartbeatAgeNs: uint64(s.heartbeat_age_ns),
		RingFill: uint64(s.ring_fill), RingCapacity: uint64(s.ring_capacity),
		FillTarget: uint64(s.fill_target), PublishedTotal: uint64(s.published_total),
		TakenTotal: uint64(s.taken_total), DrainedTotal: uint64(s.drained_total),
		ClockPauses: uint64(s.clock_pauses), Uncounted: uint64(s.uncounted),
		LivenessMs: uint64(s.liveness_ms), FreshnessBoundMs: uint64(s.freshness_bound_ms),
	}, nil
}

// bareCall is a cgo call of an empty C function: the benchmarks' floor for Next.
func bareCall() { C.sfgo_nothing() }
