package snowflake

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"time"
)

// Status is a snapshot of the daemon and ring. The fields up to FreshnessBoundMs are read
// from the mapped segment (as `snowflakectl status --json` names them); Control holds the
// daemon's own answer over its control socket (docs/control-protocol.md), nil when the
// socket did not answer (ControlError says why: a dead daemon still has a segment).
type Status struct {
	State          string `json:"state"`
	Health         string `json:"health"`
	ReasonCode     string `json:"reason_code"`
	Reason         string `json:"reason"`
	ReasonDetail   int64  `json:"reason_detail"`
	Machine        uint32 `json:"machine"`
	EpochUnixMs    int64  `json:"epoch_unix_ms"`
	Incarnation    uint64 `json:"incarnation"`
	PID            uint64 `json:"pid"`
	HeartbeatAgeNs uint64 `json:"heartbeat_age_ns"`
	// False when the daemon did not hand over the consumer region (stopped, dead, hung):
	// RingFill, TakenTotal and Uncounted, its counts, are then unknown (and 0), never a
	// number read from nowhere.
	CountsKnown      bool   `json:"-"`
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
	// Why the daemon is not serving, in its own words, from the segment (shm/LAYOUT.md,
	// the status text): for a pause on the register, "register etcd <endpoints> <prefix>;
	// last error: ...". "" while serving, or when the daemon wrote none.
	StatusText string `json:"status_text"`
	// IDs this Client took (every segment it attached to).
	ClientTaken uint64 `json:"client_taken"`

	Control      *ControlStatus `json:"control,omitempty"`
	ControlError string         `json:"control_error,omitempty"`
}

// ControlStatus is the control socket's reply to {"command":"status"}, the keys of
// docs/control-protocol.md ("Status keys"). IDs are decimal strings there; LastIssuedID
// is 0 before the first.
type ControlStatus struct {
	State               string `json:"state"`
	ReasonCode          string `json:"reason_code"`
	Reason              string `json:"reason"`
	ReasonDetail        int64  `json:"reason_detail"`
	PID                 int64  `json:"pid"`
	Version             string `json:"version"`
	Instance            string `json:"instance"`
	RuntimeDir          string `json:"runtime_dir"`
	StateDir            string `json:"state_dir"`
	RegisterBackend     string `json:"register_backend"`
	RegisterLocation    string `json:"register_location"`
	HolderID            string `json:"holder_id"`
	Machine             uint32 `json:"machine"`
	EpochUnixMs         int64  `json:"epoch_unix_ms"`
	RingCapacity        uint64 `json:"ring_capacity"`
	RingFill            uint64 `json:"ring_fill"`
	FillTarget          uint64 `json:"fill_target"`
	PublishedTotal      uint64 `json:"published_total"`
	DrainedTotal        uint64 `json:"drained_total"`
	Incarnation         uint64 `json:"incarnation"`
	SegmentReopened     bool   `json:"segment_reopened"`
	LastIssuedID        uint64 `json:"-"`
	GeneratorMarkUnixMs int64  `json:"generator_mark_unix_ms"`
	// Deprecated: GeneratorMarkUnixMs under its old name, removed in the next release.
	LastIssuedUnixMs      int64             `json:"last_issued_unix_ms"`
	ReservedThroughUnixMs int64             `json:"reserved_through_unix_ms"`
	ClockPauses           uint64            `json:"clock_pauses"`
	ClockBehindMs         int64             `json:"clock_behind_ms"`
	StartedUnixMs         int64             `json:"started_unix_ms"`
	StateSinceUnixMs      int64             `json:"state_since_unix_ms"`
	Services              map[string]uint64 `json:"services"`
	SegmentsRetired       uint64            `json:"segments_retired"`
	SegmentRetiredReason  string            `json:"segment_retired_reason"`
	Fronts                []Front           `json:"fronts"`
	// Set while a renewal of the high-water reservation fails or the daemon waits for one.
	Renewal *Renewal `json:"renewal"`
	// Set while the generator waits for its clock to pass a mark (paused, or out of
	// service behind it): the millisecond it waits for and who set it.
	ClockWait *ClockWait `json:"clock_wait"`
}

// ClockWait is the reply's "clock_wait" object: nothing is issued until the clock is
// past UntilUnixMs; SetBy names who set that mark ("state_file", "register",
// "host_mark", "segment", "fence", "last_issued"); ClockPassesInMs is when this host's
// clock passes it, 0 or less once it has.
type ClockWait struct {
	UntilUnixMs     int64  `json:"until_unix_ms"`
	SetBy           string `json:"set_by"`
	ClockPassesInMs int64  `json:"clock_passes_in_ms"`
}

// Renewal is the reply's "renewal" object: what the daemon waits on, since when, and the
// last error in the store's words.
type Renewal struct {
	Store          string  `json:"store"`
	Location       string  `json:"location"`
	SinceUnixMs    int64   `json:"since_unix_ms"`
	WaitedMs       int64   `json:"waited_ms"`
	Unanswered     bool    `json:"unanswered"`
	LastError      *string `json:"last_error"`
	LastErrorStore *string `json:"last_error_store"`
}

// Front is one running front of the daemon (its HTTP listener).
type Front struct {
	Name        string   `json:"name"`
	Listen      []string `json:"listen"`
	Connections uint64   `json:"connections"`
	Requests    uint64   `json:"requests"`
	Refused     uint64   `json:"refused"`
}

const controlTimeout = 2 * time.Second

// queryControl asks the daemon of runtimeDir for its status over control.sock: one JSON
// line out, one JSON line back.
func queryControl(runtimeDir string) (*ControlStatus, error) {
	conn, err := net.DialTimeout("unix", filepath.Join(runtimeDir, "control.sock"), controlTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(controlTimeout))
	if _, err := conn.Write([]byte("{\"command\":\"status\"}\n")); err != nil {
		return nil, err
	}
	line, err := bufio.NewReaderSize(conn, 64<<10).ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var reply struct {
		ControlStatus
		OK           bool    `json:"ok"`
		Code         string  `json:"code"`
		Error        string  `json:"error"`
		LastIssuedID *string `json:"last_issued_id"`
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		return nil, errors.New("the control socket's answer is not one JSON object: " + err.Error())
	}
	if !reply.OK {
		return nil, errors.New("the daemon refused the status request: " + reply.Code + ": " +
			reply.Error)
	}
	s := reply.ControlStatus
	if reply.LastIssuedID != nil {
		if s.LastIssuedID, err = strconv.ParseUint(*reply.LastIssuedID, 10, 64); err != nil {
			return nil, errors.New("last_issued_id is not a decimal ID: " + *reply.LastIssuedID)
		}
	}
	return &s, nil
}

// readStatus is the C++ ReadStatus: the segment's view.
func readStatus(r *ring, maxAgeOption time.Duration) Status {
	h := r.seg.header
	p := r.checkProducer(r.heartbeatLimit(maxAgeOption))
	state := loadU32(h, offState)
	s := Status{State: "unknown", Health: healthCodes[p.health], ReasonCode: reasonCode(p.reason),
		Reason: describeReason(p.reason, p.reasonDetail), ReasonDetail: p.reasonDetail,
		Machine: loadU32(h, offMachine), EpochUnixMs: int64(loadU64(h, offEpoch)),
		Incarnation: loadU64(h, offIncarnation), PID: p.pid, HeartbeatAgeNs: p.heartbeatAgeNs,
		RingCapacity: r.seg.capacity, FillTarget: loadU64(h, offFillTarget),
		PublishedTotal: loadU64(h, offPublished), DrainedTotal: loadU64(h, offDrained),
		ClockPauses: loadU64(h, offClockPauses), LivenessMs: uint64(loadU32(h, offLivenessMs)),
		FreshnessBoundMs: uint64(loadU32(h, offFreshnessMs))}
	if int(state) < len(stateCodes) {
		s.State = stateCodes[state]
	}
	// The daemon's own words only say why it does not serve; a serving daemon has none.
	if state != stateServing {
		s.StatusText, _ = r.statusText()
	}
	if r.seg.consumer == nil {
		return s // the ring file alone: its daemon did not hand over the region
	}
	s.CountsKnown = true
	head, tail := loadU64(r.seg.consumer, offHead), loadU64(r.seg.header, offTail)
	if tail > head {
		s.RingFill = tail - head
	}
	// taken minus drained, as `snowflakectl status --json`.
	if s.DrainedTotal < head {
		s.TakenTotal = head - s.DrainedTotal
	}
	s.Uncounted = loadU64(r.seg.consumer, offUncounted)
	return s
}

// Status reads the segment c takes from (or, without one, the runtime directory's) and
// asks the daemon over its control socket. A segment whose daemon did not hand over its
// consumer region (stopped, dead) is read from its ring file alone: the ring's fill and
// the taken and uncounted totals are then unknown (CountsKnown false, and they are 0). Errors: as Open's, ErrClosed; a control
// socket that does not answer is no error (see Status.ControlError).
func (c *Client) Status() (Status, error) {
	if c.closed.Load() {
		return Status{}, ErrClosed
	}
	var s Status
	if a := c.current.Load(); a != nil {
		s = readStatus(a.ring, c.maxAge)
		keepMapped(a)
		c.mu.Lock()
		for _, a := range c.attachments {
			s.ClientTaken += a.taken()
		}
		c.mu.Unlock()
	} else {
		seg, e := openSegment(c.runtimeDir, c.maxAge, time.Now())
		if e != nil {
			return Status{}, e
		}
		s = readStatus(newRing(seg), c.maxAge)
		seg.unmap()
	}
	control, err := queryControl(c.runtimeDir)
	if err != nil {
		s.ControlError = err.Error()
	} else {
		s.Control = control
	}
	return s, nil
}

// ringFill is the IDs the ring holds now (the benchmarks' pacing).
func (c *Client) ringFill() uint64 {
	a := c.current.Load()
	if a == nil {
		return 0
	}
	if a.ring.seg.consumer == nil {
		return 0
	}
	var fill uint64
	head, tail := loadU64(a.ring.seg.consumer, offHead), loadU64(a.ring.seg.header, offTail)
	if tail > head {
		fill = tail - head
	}
	keepMapped(a)
	return fill
}
