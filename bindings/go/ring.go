package snowflake

// The ring protocol of shm/LAYOUT.md §7 on the mapped segment: Take with its freshness
// rule, the producer check, and the wait slow path (waiters, wake_seq, the refill word
// and its size hint, shared futexes). Go's sync/atomic operations are sequentially
// consistent, at least as strong as every ordering the layout asks for.

import (
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

func loadU64(r region, off int) uint64 { return atomic.LoadUint64(r.u64(off)) }
func loadU32(r region, off int) uint32 { return atomic.LoadUint32(r.u32(off)) }

type takeResult int

const (
	taken takeResult = iota
	empty
	stale
)

// The header's id_bits word (segment_layout.h PackIdBits): time, machine and sequence bits,
// one byte each from the lowest; the top byte zero.
func unpackIDBits(word uint32) (t, m, s int) {
	return int(word & 0xff), int(word >> 8 & 0xff), int(word >> 16 & 0xff)
}

func packIDBits(l Layout) uint32 {
	return uint32(l.TimeBits) | uint32(l.MachineBits)<<8 | uint32(l.SequenceBits)<<16
}

func isIDBitsWord(word uint32) bool {
	t, m, s := unpackIDBits(word)
	return word>>24 == 0 && validBits(t, m, s)
}

// clockLagMs is CLOCK_REALTIME_COARSE's resolution rounded up to a millisecond: how far
// the take's clock may be behind the true one (LAYOUT.md §7, Take, step 0: `lag`).
var clockLagMs = func() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETRES, 5, /* CLOCK_REALTIME_COARSE */
		uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 10 // the coarsest tick Linux uses (HZ=100)
	}
	return (ts.Nano() + 999_999) / 1_000_000
}()

// isFresh is the layout's IsFresh (segment_layout.h): within bound of now, with lag.
func isFresh(idMs, nowMs, boundMs int64) bool {
	if boundMs == 0 {
		return true
	}
	slack := int64(0)
	if boundMs > clockLagMs {
		slack = boundMs - clockLagMs
	}
	return idMs >= nowMs-slack && idMs <= nowMs+boundMs
}

// ring is one mapped segment's protocol state.
type ring struct {
	seg     *segment
	head    *uint64 // consumer region: takes CAS it
	tail    *uint64 // header: the daemon's release store publishes slots
	slots   unsafe.Pointer
	mask    uint64
	bound   *uint32 // freshness_bound_ms
	epochMs int64
	// The header's layout (id_bits, checked at open): an ID's ms since the epoch is
	// id >> shift. Read once per segment, so a take shifts by a register.
	shift  uint
	layout Layout
}

func newRing(s *segment) *ring {
	r := &ring{seg: s, head: &noRegion.head, tail: &noRegion.tail,
		slots: unsafe.Pointer(&s.slots[0]), mask: s.capacity - 1,
		bound: s.header.u32(offFreshnessMs), epochMs: int64(loadU64(s.header, offEpoch))}
	t, m, sq := unpackIDBits(loadU32(s.header, offIDBits))
	r.layout = Layout{Epoch: time.UnixMilli(r.epochMs).UTC(), TimeBits: t, MachineBits: m,
		SequenceBits: sq}
	r.shift = r.layout.timeShift()
	if s.consumer != nil {
		r.head, r.tail = s.consumer.u64(offHead), s.header.u64(offTail)
	}
	return r
}

// noRegion stands in for head and tail in the ring of a segment mapped without its
// consumer region (its daemon did not hand it over): equal and never written, so every
// take finds the ring empty and goes to the slow path, which reports the daemon's state or
// attaches. The take's fast path stays one path, without a test for the region.
var noRegion struct{ head, tail uint64 }

func (r *ring) slot(ticket uint64) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Add(r.slots, (ticket&r.mask)*8)))
}

// copySlots copies the slots of tickets h, h+1, … into out: at most two plain copies (the
// ring wraps once at most), not one atomic load per slot. A slot may be written while it
// is read (torn, even) only after head passed it, and then the take's CAS from h fails and
// the copy is thrown away; head only grows, so a CAS that succeeds proves no slot of
// [h, h+len(out)) was written since tail published it. The tail load before (atomic)
// orders these loads after the daemon's writes.
func (r *ring) copySlots(out []uint64, h uint64) {
	capacity := r.mask + 1
	start := h & r.mask
	first := capacity - start
	if first > uint64(len(out)) {
		first = uint64(len(out))
	}
	slots := unsafe.Slice((*uint64)(r.slots), capacity)
	copy(out[:first], slots[start:start+first])
	copy(out[first:], slots[:uint64(len(out))-first])
}

// tryTakeFresh: LAYOUT.md §7 Take, steps 0–4.
func (r *ring) tryTakeFresh(id *uint64) takeResult {
	bound := int64(atomic.LoadUint32(r.bound))
	nowMs := coarseNowUnixMs() - r.epochMs
	h := atomic.LoadUint64(r.head)
	for {
		t := atomic.LoadUint64(r.tail)
		if h >= t {
			return empty
		}
		v := r.slot(h)
		if !isFresh(int64(v>>r.shift), nowMs, bound) {
			return stale
		}
		// (1) wins: v, checked above, is ours (the daemon overwrites slot h only once head
		// passes h); (2) loses: another take or a drain moved head: re-read it and retry.
		if atomic.CompareAndSwapUint64(r.head, h, h+1) {
			*id = v
			return taken
		}
		h = atomic.LoadUint64(r.head)
	}
}

// tryTakeBatchFresh: the batch take, the rule applied to the first and last ID.
func (r *ring) tryTakeBatchFresh(out []uint64) (int, takeResult) {
	bound := int64(atomic.LoadUint32(r.bound))
	nowMs := coarseNowUnixMs() - r.epochMs
	h := atomic.LoadUint64(r.head)
	for {
		t := atomic.LoadUint64(r.tail)
		if h >= t {
			return 0, empty
		}
		n := t - h
		if n > uint64(len(out)) {
			n = uint64(len(out))
		}
		r.copySlots(out[:n], h)
		if !isFresh(int64(out[0]>>r.shift), nowMs, bound) ||
			!isFresh(int64(out[n-1]>>r.shift), nowMs, bound) {
			return 0, stale
		}
		if atomic.CompareAndSwapUint64(r.head, h, h+n) {
			return int(n), taken
		}
		h = atomic.LoadUint64(r.head)
	}
}

// A daemon's health as a client judges it (the vocabulary's kHealth, in its order).
type health int

const (
	healthServing health = iota
	healthStarting
	healthPaused
	healthOutOfService
	healthStopped
	healthNotHeartbeating
	healthDead
)

var healthCodes = [...]string{"serving", "starting", "paused", "out_of_service", "stopped",
	"not_heartbeating", "dead"}

// The take error of each health (kSystemError for serving: it does not fail).
var healthStatus = [...]int{statusSystemError, statusDaemonStarting, statusDaemonPaused,
	statusDaemonOutOfService, statusDaemonStopped, statusDaemonNotHeartbeating, statusDaemonDead}

// DaemonState values (LAYOUT.md §3, line 2).
var stateCodes = [...]string{"unknown", "starting", "serving", "paused", "out_of_service", "stopped"}

const (
	stateStarting = 1
	stateServing  = 2
	statePaused   = 3
	stateOOS      = 4
	stateStopped  = 5
)

type producerStatus struct {
	health         health
	state          uint32
	reason         uint32
	reasonDetail   int64
	heartbeatAgeNs uint64
	inFuture       bool
	pid            uint64
}

const (
	deadPidBeatAgeNs  = 10_000_000 // a pid is probed only once the beat is this old
	futureBeatSlackNs = 1_000_000
	fallbackLiveness  = 50 * time.Millisecond
)

func monotonicNowNs() uint64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return uint64(ts.Sec)*1_000_000_000 + uint64(ts.Nsec)
}

// heartbeatLimit: the caller's own limit, else the daemon's liveness_ms (LAYOUT.md §3).
func (r *ring) heartbeatLimit(option time.Duration) time.Duration {
	if option > 0 {
		return option
	}
	if l := loadU32(r.seg.header, offLivenessMs); l != 0 {
		return time.Duration(l) * time.Millisecond
	}
	return fallbackLiveness
}

// checkProducer: LAYOUT.md §7, Wait step 3 (the C++ RingConsumer::CheckProducer). Reads
// only the read-only header.
func (r *ring) checkProducer(maxAge time.Duration) producerStatus {
	h := r.seg.header
	st := producerStatus{state: loadU32(h, offState), reason: loadU32(h, offReason),
		reasonDetail: int64(loadU64(h, offReasonDetail)), pid: loadU64(h, offPID)}
	beat := loadU64(h, offHeartbeat)
	now := monotonicNowNs()
	if now > beat {
		st.heartbeatAgeNs = now - beat
	}
	st.inFuture = beat > now+futureBeatSlackNs
	switch st.state {
	case stateServing:
	case stateStarting:
		st.health = healthStarting
		return st
	case statePaused:
		st.health = healthPaused
		return st
	case stateOOS:
		st.health = healthOutOfService
		return st
	case stateStopped:
		st.health = healthStopped
		return st
	default:
		st.health = healthDead
		return st
	}
	ns := loadU32(h, offPidNamespace)
	pidVisible := ns == 0 || ns == currentPidNamespace()
	switch {
	case st.inFuture:
		st.health = healthNotHeartbeating
	case pidVisible && st.pid != 0 && st.heartbeatAgeNs > deadPidBeatAgeNs &&
		syscall.Kill(int(st.pid), 0) == syscall.ESRCH:
		st.health = healthDead
	case st.heartbeatAgeNs > uint64(maxAge):
		st.health = healthNotHeartbeating
	}
	return st
}

func (r *ring) wakeSeq() uint32 { return loadU32(r.seg.header, offWakeSeq) }

func (r *ring) refillHint() uint32 { return atomic.LoadUint32(r.seg.consumer.u32(offRefillHint)) }

const (
	futexWait = 0 // shared futexes, never FUTEX_PRIVATE_FLAG: the waker is another process
	futexWake = 1
)

func futex(addr *uint32, op int, val uint32, timeout *syscall.Timespec) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), uintptr(op), uintptr(val),
		uintptr(unsafe.Pointer(timeout)), 0, 0)
}

// awaitPublish: LAYOUT.md §7, Wait step 4.
func (r *ring) awaitPublish(seen uint32, timeout time.Duration, frontStale bool, want uint64) {
	c := r.seg.consumer
	waiters := c.u64(offWaiters)
	atomic.AddUint64(waiters, 1)
	isEmpty := atomic.LoadUint64(r.head) >= atomic.LoadUint64(r.tail)
	if isEmpty || frontStale {
		if want > 1 {
			r.addRefillHint(want)
		}
		// The hint goes BEFORE the request's bump: a daemon pass that sees the bump takes
		// a hint that includes ours.
		request := c.u32(offRefillRequest)
		atomic.AddUint32(request, 1)
		futex(request, futexWake, 1, nil)
		ts := syscall.NsecToTimespec(int64(timeout))
		futex(r.seg.header.u32(offWakeSeq), futexWait, seen, &ts)
	}
	atomic.AddUint64(waiters, ^uint64(0))
}

// addRefillHint adds want, saturating at 2^32-1. The CAS: (1) wins: our need is in the
// word; (2) loses: another taker added or the daemon took the word: add to the new value.
func (r *ring) addRefillHint(want uint64) {
	need := uint32(1<<32 - 1)
	if want < 1<<32-1 {
		need = uint32(want)
	}
	word := r.seg.consumer.u32(offRefillHint)
	for {
		current := atomic.LoadUint32(word)
		sum := current + need
		if current > 1<<32-1-need {
			sum = 1<<32 - 1
		}
		if atomic.CompareAndSwapUint32(word, current, sum) {
			return
		}
	}
}

// describeReason is the vocabulary's DescribeReason (summaries with {} for the detail),
// without a reading of the clock.
func describeReason(reason uint32, detail int64) string {
	return describeReasonAt(reason, detail, nil)
}

// timeText is FormatTimeText: "2026-01-01T00:00:00.000Z" (UTC), or "N ms" outside years
// 0000-9999.
func timeText(unixMs int64) string {
	if unixMs < -62_167_219_200_000 || unixMs > 253_402_300_799_999 {
		return strconv.FormatInt(unixMs, 10) + " ms"
	}
	return time.UnixMilli(unixMs).UTC().Format("2006-01-02T15:04:05.000Z")
}

// describeReasonAt is DescribeReason with the reader's clock: a time in the detail (the
// register's wait) says how long ago it was when nowUnixMs is given.
func describeReasonAt(reason uint32, detail int64, nowUnixMs *int64) string {
	d := strconv.FormatInt(detail, 10)
	switch reason {
	case 0:
		return ""
	case 1:
		return "starting up"
	case 2:
		return "clock moved back " + d + " ms"
	case 3:
		return "clock moved back " + d + " ms, more than max_backward_ms"
	case 4:
		return "clock started " + d + " ms behind the persisted high-water mark"
	case 5:
		return "the epoch's 41-bit time range is used up"
	case 6:
		return "shut down"
	case 7:
		if detail == 0 {
			return "the high-water reservation is not renewed yet, not issuing past it"
		}
		// glibc's text of the errno, as the C++ side prints it: Go's table holds the same
		// sentences starting in lower case.
		text := syscall.Errno(detail).Error()
		if text != "" && text[0] >= 'a' && text[0] <= 'z' {
			text = string(text[0]-'a'+'A') + text[1:]
		}
		return "cannot persist the high-water reservation, not issuing past it (errno " + d +
			": " + text + ")"
	case 8:
		since := timeText(detail)
		if nowUnixMs != nil {
			since += " (" + strconv.FormatInt(*nowUnixMs-detail, 10) + " ms ago)"
		}
		return "waiting for the register since " + since +
			", not issuing past the high-water reservation"
	case 9:
		return "an operator's fence in the register is " + d +
			" ms ahead of the clock, not issuing at or below it"
	}
	return "reason code unknown"
}

var reasonCodes = [...]string{"none", "starting", "clock_behind", "clock_step_too_large",
	"behind_high_water", "time_range_exhausted", "shutdown", "persistence_failed",
	"register_unreachable", "fenced"}

func reasonCode(reason uint32) string {
	if int(reason) < len(reasonCodes) {
		return reasonCodes[reason]
	}
	return "unknown"
}

// statusText is the daemon's status text (LAYOUT.md §3, lines 5-11; the C++
// ReadStatusText): "" when there is none; ok false when every try of
// statusTextReadTries found a write under way or one finished during the read (a daemon
// that died mid-write leaves the word odd: then always). A seqlock read of the read-only
// header: it never blocks and never writes. Read only when an error or a status is built,
// never on the take path.
func (r *ring) statusText() (text string, ok bool) {
	h := r.seg.header
	var bytes [statusTextBytes]byte
	for attempt := 0; attempt < statusTextReadTries; attempt++ {
		before := loadU64(h, offStatusTextSeq)
		if before%2 != 0 {
			continue // a write is under way
		}
		// Go's atomic loads are sequentially consistent: each word's load stays between
		// the two loads of the sequence word, as the layout's acquire loads keep it.
		for i := 0; i < statusTextBytes/8; i++ {
			word := loadU64(h, offStatusText+8*i)
			for b := 0; b < 8; b++ {
				bytes[8*i+b] = byte(word >> (8 * b)) // little-endian, in memory order
			}
		}
		if loadU64(h, offStatusTextSeq) != before {
			continue
		}
		// NUL-padded; no terminator when all 448 bytes are used.
		n := 0
		for n < len(bytes) && bytes[n] != 0 {
			n++
		}
		return string(bytes[:n]), true
	}
	return "", false
}

// daemonSays is "; snowflaked says: <the status text>", or "" when the daemon wrote none
// (an older daemon, or a state it has nothing to add to) or the text kept changing while
// read: the C++ DaemonSays.
func daemonSays(r *ring) string {
	if text, ok := r.statusText(); ok && text != "" {
		return "; snowflaked says: " + text
	}
	return ""
}

// unavailableError is the C++ Unavailable(): the error a take reports for a daemon that
// is not serving, with the same sentences. Only here, on the way out of a take that
// failed, is the status text read (for a paused or out-of-service daemon, as in C++).
func unavailableError(p producerStatus, r *ring, runtimeDir string, maxAge time.Duration) *Error {
	where := " (runtime directory " + runtimeDir + ")"
	pid := strconv.FormatUint(p.pid, 10)
	status := healthStatus[p.health]
	var text string
	switch p.health {
	case healthStarting:
		text = "snowflaked is starting" + where + "; retry shortly or fail over"
	case healthPaused:
		now := time.Now().UnixMilli()
		text = "snowflaked paused generation: " + describeReasonAt(p.reason, p.reasonDetail, &now) +
			where + daemonSays(r) + "; fail over, it resumes by itself"
	case healthOutOfService:
		now := time.Now().UnixMilli()
		why := describeReasonAt(p.reason, p.reasonDetail, &now)
		if why != "" {
			why = ": " + why
		}
		text = "snowflaked is out of service" + why + where + daemonSays(r) +
			"; fail over until an operator runs `snowflakectl resume`"
	case healthStopped:
		text = "snowflaked (pid " + pid + ") has stopped" + where +
			"; fail over, or retry once it is restarted"
	case healthNotHeartbeating:
		if p.inFuture {
			text = "snowflaked (pid " + pid + ")'s heartbeat is in the future of this host's " +
				"monotonic clock, so it is not a beat of this boot" + where +
				"; it is not running: fail over, and start it"
		} else {
			text = "snowflaked (pid " + pid + ") has not refreshed its heartbeat for " +
				strconv.FormatUint(p.heartbeatAgeNs/1_000_000, 10) + " ms (limit " +
				strconv.FormatInt(maxAge.Milliseconds(), 10) + " ms)" + where +
				"; it is hung or stopped: fail over"
		}
	case healthDead:
		text = "snowflaked (pid " + pid + ") is gone without shutting down" + where +
			"; fail over and restart it"
	default:
		text = "internal error: serving daemon reported as unavailable"
	}
	return newError(status, text)
}
