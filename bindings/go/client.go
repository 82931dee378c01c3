// Package snowflake takes unique, time-ordered 64-bit IDs from the local snowflaked's
// shared-memory ring, in pure Go (no cgo): it maps the ring file read-only and the
// consumer region read-write (a sealed memfd the daemon hands over its control socket,
// attach.go) and runs the client side of shm/LAYOUT.md, as libsnowflake's C++ client does.
//
//	c, err := snowflake.Open("orders")
//	if err != nil { return err }
//	defer c.Close()
//	id, err := c.Next()
//	if errors.Is(err, snowflake.ErrRingEmpty) { /* take again: the daemon is refilling */ }
//	if errors.Is(err, snowflake.ErrUnavailable) { /* fail over */ }
//
// A take is a few loads and one compare-and-swap on the ring, with no system call unless
// the ring is empty. A Client may be used by any number of goroutines at once; Close must
// not run concurrently with other calls on the same Client.
//
// Errors are *Error values carrying what happened and what to do; compare them with
// errors.Is against the Err* sentinels. The package builds with CGO_ENABLED=0 and needs
// nothing but the Go standard library.
package snowflake

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	runtimeDir      string
	remotes         []string
	remotesSet      bool
	remotesCA       string
	remotesCert     string
	remotesKey      string
	timeout         time.Duration
	maxHeartbeatAge time.Duration
	remoteAttempt   time.Duration
	remoteDeadline  time.Duration
}

// Option configures Open.
type Option func(*options)

// WithRuntimeDir names the daemon's runtime directory (default: $SNOWFLAKE_RUNTIME_DIR,
// else /run/snowflaked).
func WithRuntimeDir(dir string) Option { return func(o *options) { o.runtimeDir = dir } }

// WithRemotes names other daemons' HTTP fronts to fail over to while the local daemon is
// not serving (default: $SNOWFLAKE_REMOTES, else none): "host:port" or "http://host:port"
// (plain HTTP), "https://host:port" (TLS only, see WithRemotesCA).
func WithRemotes(remotes ...string) Option {
	return func(o *options) {
		o.remotes = append(o.remotes, remotes...)
		o.remotesSet = true
	}
}

// WithRemotesCA names the PEM file of the CA that https:// remotes' certificates are
// verified against (default: $SNOWFLAKE_REMOTES_CA, else the system's roots). With it,
// every remote must be https://.
func WithRemotesCA(file string) Option { return func(o *options) { o.remotesCA = file } }

// WithRemotesCert names the client certificate (PEM, leaf first) and its key that the
// Client presents to https:// remotes whose front asks for one (mutual TLS). Default:
// $SNOWFLAKE_REMOTES_CERT and $SNOWFLAKE_REMOTES_KEY (both or neither). With it, every
// remote must be https://.
func WithRemotesCert(certFile, keyFile string) Option {
	return func(o *options) { o.remotesCert, o.remotesKey = certFile, keyFile }
}

// WithTimeout sets how long a take waits on an empty ring before ErrRingEmpty (default
// 100 ms; 0: never wait). Millisecond resolution.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithRemoteTimeouts sets how long one HTTP attempt to a remote may take (default 50 ms)
// and all attempts of one take together (default 200 ms), in whole milliseconds. A zero
// keeps that default; a negative one, or one below a millisecond, is refused by Open.
func WithRemoteTimeouts(attempt, deadline time.Duration) Option {
	return func(o *options) { o.remoteAttempt, o.remoteDeadline = attempt, deadline }
}

// WithMaxHeartbeatAge sets the heartbeat age beyond which the daemon counts as hung
// (default 0: the daemon's own daemon.liveness_ms).
func WithMaxHeartbeatAge(d time.Duration) Option {
	return func(o *options) { o.maxHeartbeatAge = d }
}

// Client takes IDs from one daemon's ring for one service.
type Client struct {
	service    string
	runtimeDir string
	timeout    time.Duration
	maxAge     time.Duration
	closed     atomic.Bool // set once by Close

	// The attachment takes use. Written under mu; read lock-free.
	current atomic.Pointer[attachment]
	remotes *remotePool // nil without remotes

	mu          sync.Mutex
	attachments []*attachment // every one ever made, newest last; guarded by mu
	publisher   *publisher    // publishes the attachments' counts (count.go); guarded by mu
	nextAttach  atomic.Int64  // monotonic ns before which no late attach is tried
	// attachRegion's schedule and its last failure; guarded by mu.
	nextRegionTry time.Time
	lastAttachErr *Error
}

// attachment is one mapped segment and this Client's count in it. Kept until Close:
// other goroutines may still be inside a take on an older one.
type attachment struct {
	ring  *ring
	slot  int        // the claimed service slot, -1 if every slot was in use
	count *takeCount // published to the slot's `taken` word, or the segment's `uncounted`
}

const (
	waitSlice         = time.Millisecond
	lateAttachEvery   = 100 * time.Millisecond
	defaultRuntimeDir = "/run/snowflaked"
)

// claimServiceSlot: LAYOUT.md §4, ServiceSlot protocol (claim, zero, name, active). Go
// code cannot own a thread, so a Go client's count goes to the slot's `taken` word (the
// word the layout gives takers that own no lane), published from process memory
// (count.go).
func claimServiceSlot(s *segment, service string) int {
	pid := uint64(os.Getpid())
	c := s.consumer
	for i := 0; i < serviceSlots; i++ {
		base := offServices + i*serviceSlotSize
		owner := c.u64(base + offOwnerPID)
		if atomic.LoadUint64(owner) != 0 || !atomic.CompareAndSwapUint64(owner, 0, pid) {
			continue
		}
		atomic.StoreUint64(c.u64(base+offTaken), 0)
		for j := 0; j < lanesPerService; j++ {
			atomic.StoreUint64(c.u64(offLanes+i*lanesPerService*laneSize+j*laneSize+offLaneTaken), 0)
		}
		for w := 0; w < serviceNameBytes/8; w++ {
			var v uint64
			for b := 0; b < 8; b++ {
				if at := w*8 + b; at < len(service) {
					v |= uint64(service[at]) << (8 * b)
				}
			}
			atomic.StoreUint64(c.u64(base+offName+8*w), v)
		}
		atomic.StoreUint64(c.u64(base+offNameReady), serviceSlotActive)
		return i
	}
	return -1
}

// The mapping of an attachment's segment outlives Close: a take running beside Close may
// still read it. It is unmapped by a finalizer once nothing refers to the segment any more
// (each take keeps its attachment alive until it is done with the mapping: keepMapped).
// A segment mapped without its region (its daemon did not hand it over) takes nothing, so
// it claims no slot and counts nothing.
func newAttachment(s *segment, service string) *attachment {
	a := &attachment{ring: newRing(s), slot: -1, count: &takeCount{seg: s, word: new(uint64)}}
	if s.consumer != nil {
		if a.slot = claimServiceSlot(s, service); a.slot >= 0 {
			a.count.word = s.consumer.u64(offServices + a.slot*serviceSlotSize + offTaken)
		} else {
			a.count.word = s.consumer.u64(offUncounted)
		}
	}
	runtime.SetFinalizer(s, (*segment).unmap)
	return a
}

// retire retires the slot: the daemon folds its final count in and frees it. A take that
// runs beside Close may still add to it after that; its count can then be lost, or land in
// a slot another client claimed since. IDs are never affected.
func (a *attachment) retire() {
	s := a.ring.seg
	if a.slot < 0 {
		return
	}
	base := offServices + a.slot*serviceSlotSize
	if atomic.LoadUint64(s.consumer.u64(base+offOwnerPID)) == uint64(os.Getpid()) {
		atomic.StoreUint64(s.consumer.u64(base+offNameReady), serviceSlotRetired)
	}
}

// keepMapped marks the end of a use of a's mapping: a stays reachable until here, so the
// finalizer cannot unmap the segment while a take reads it through pointers the garbage
// collector does not follow.
func keepMapped(a *attachment) { runtime.KeepAlive(a) }

// take is one fresh take and its count. The region is sealed against resizing, so no
// other process can take its pages away under the take: no fault to guard against.
func (a *attachment) take(id *uint64) takeResult {
	result := a.ring.tryTakeFresh(id)
	if result == taken {
		a.count.add(1)
	}
	keepMapped(a)
	return result
}

// takeBatch is one fresh batch take and its count.
func (a *attachment) takeBatch(out []uint64) (int, takeResult) {
	n, result := a.ring.tryTakeBatchFresh(out)
	if n > 0 {
		a.count.add(uint64(n))
	}
	keepMapped(a)
	return n, result
}

// taken is every ID this attachment counted (racy beside takes; for Status).
func (a *attachment) taken() uint64 { return a.count.sum() }

func milliseconds(d time.Duration, what string) (time.Duration, error) {
	if d < 0 || d.Milliseconds() > 1<<32-1 {
		return 0, invalidArgument(what + " must be between 0 and 2^32-1 ms, not " + d.String())
	}
	return d.Truncate(time.Millisecond), nil
}

// remoteTimeout is milliseconds for WithRemoteTimeouts, where 0 means the default: a
// duration below a millisecond would silently become that default, so it is refused.
func remoteTimeout(d time.Duration, what string) (time.Duration, error) {
	if d > 0 && d < time.Millisecond {
		return 0, invalidArgument(what + " must be 0 (the default) or at least 1 ms, not " + d.String())
	}
	return milliseconds(d, what)
}

func validServiceName(service string) error {
	ok := len(service) >= 1 && len(service) <= serviceNameMax
	for i := 0; ok && i < len(service); i++ {
		c := service[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if ok {
		return nil
	}
	if len(service) > 100 {
		service = service[:100]
	}
	return newError(statusInvalidServiceName, "invalid service name '"+service+
		"': a service name is 1 to 63 characters of a-z, 0-9, '.', '_' and '-'")
}

// remotesFromEnvironment parses $SNOWFLAKE_REMOTES ("host:port,host:port").
func remotesFromEnvironment() []string {
	var out []string
	for _, item := range strings.Split(os.Getenv("SNOWFLAKE_REMOTES"), ",") {
		if item = strings.Trim(item, " "); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Open maps the local daemon's ring for service (1-63 characters of [a-z0-9._-]): its
// ring file, and the consumer region the daemon hands over its control socket.
// Errors: ErrInvalidServiceName, ErrInvalidArgument (also: a remote of another form than
// host:port, http:// or https://; a TLS file beside a plain remote; a certificate without
// its key; a TLS file that cannot be read or loaded, named), ErrDaemonNotRunning,
// ErrPermissionDenied, ErrIncompatibleVersion (also a daemon of another release on the
// control socket), ErrCorruptSegment, ErrUntrustedSegment, ErrTimedOut (the daemon
// refused the region as busy or starting for 5 s), ErrSystem. A stopped, dead or paused
// daemon is reported by Next, not here (and so is one whose ring file says it serves but
// that does not answer on its socket). With remotes, no local daemon is not an error: the
// Client takes from the remotes until one appears.
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
	if o.remoteAttempt, err = remoteTimeout(o.remoteAttempt, "the remote attempt timeout"); err != nil {
		return nil, err
	}
	if o.remoteDeadline, err = remoteTimeout(o.remoteDeadline, "the remote deadline"); err != nil {
		return nil, err
	}
	if strings.IndexByte(service, 0) >= 0 || strings.IndexByte(o.runtimeDir, 0) >= 0 {
		return nil, invalidArgument("a NUL byte in the service name or runtime directory")
	}
	if err := validServiceName(service); err != nil {
		return nil, err
	}
	dir := o.runtimeDir
	if dir == "" {
		if dir = os.Getenv("SNOWFLAKE_RUNTIME_DIR"); dir == "" {
			dir = defaultRuntimeDir
		}
	}
	remotes := o.remotes
	if !o.remotesSet {
		remotes = remotesFromEnvironment()
	}
	var remotesTLS remoteTLS
	if len(remotes) > 0 {
		if remotesTLS, err = checkRemotes(remotes, &o); err != nil {
			return nil, err
		}
	}
	c := &Client{service: service, runtimeDir: dir, timeout: timeout, maxAge: maxAge}
	s, e := openSegment(dir, maxAge, time.Now().Add(attachBudget))
	// No local daemon is an error only without remotes; any other failure (permissions,
	// version) stays an error.
	remotesOnly := e != nil && len(remotes) > 0 && e.Status == statusDaemonNotRunning
	if e != nil && !remotesOnly {
		return nil, e
	}
	layout := DefaultLayout
	if !remotesOnly {
		a := newAttachment(s, service)
		c.addAttachmentLocked(a) // c is not shared yet
		layout = a.ring.layout
	}
	if len(remotes) > 0 {
		c.remotes = newRemotePool(service, remotes, remotesTLS, layout, o.remoteAttempt,
			o.remoteDeadline)
	}
	// A Client dropped without Close still retires its slots, publishes its count and
	// stops its publisher (which refers to the counts, not to c).
	runtime.SetFinalizer(c, (*Client).Close)
	return c, nil
}

// addAttachmentLocked makes a the attachment takes use, its count published; c.mu is held
// (or c not shared yet).
func (c *Client) addAttachmentLocked(a *attachment) {
	if c.publisher == nil {
		c.publisher = startPublisher()
	}
	c.publisher.add(a.count)
	c.attachments = append(c.attachments, a)
	c.current.Store(a)
}

// Next returns one ID, larger than every ID any take that completed before this call
// began received on this host. Errors: ErrRingEmpty (the ring stayed empty for the
// timeout while the daemon looked healthy: retry here); ErrUnavailable ones (fail over):
// ErrDaemonStarting, ErrDaemonPaused, ErrDaemonOutOfService, ErrDaemonStopped,
// ErrDaemonNotHeartbeating, ErrDaemonDead, ErrTimedOut (the ring held only IDs too old
// to hand out); after the daemon replaced its segment, the errors of Open for the new
// one; ErrClosed after Close.
func (c *Client) Next() (uint64, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	var id uint64
	if c.remotes == nil {
		a := c.current.Load()
		if a == nil { // closed since the check above
			return 0, ErrClosed
		}
		if a.take(&id) == taken {
			return id, nil
		}
		return c.nextSlow()
	}
	one := [1]uint64{}
	if _, err := c.remotes.take(one[:], c.nextBatchOrAttach); err != nil {
		return 0, err
	}
	return one[0], nil
}

func (c *Client) nextSlow() (uint64, error) {
	var id uint64
	_, err := c.slow(func(a *attachment) (int, takeResult) {
		r := a.take(&id)
		if r == taken {
			return 1, r
		}
		return 0, r
	}, 0)
	return id, err
}

// NextBatch fills ids[0:n] with strictly increasing IDs taken at one instant and returns
// n, 1 <= n <= len(ids). n < len(ids) means the ring held only n IDs then (call again for
// more). Errors: as Next, plus ErrInvalidArgument for an empty slice.
func (c *Client) NextBatch(ids []uint64) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if len(ids) == 0 {
		return 0, invalidArgument("NextBatch needs a non-empty slice")
	}
	if c.remotes != nil {
		return c.remotes.take(ids, c.nextBatchOrAttach)
	}
	return c.nextBatch(ids)
}

func (c *Client) nextBatch(ids []uint64) (int, error) {
	a := c.current.Load()
	if a == nil { // closed since NextBatch's check
		return 0, ErrClosed
	}
	if n, _ := a.takeBatch(ids); n > 0 {
		return n, nil
	}
	// The ring is empty (or its front stale): ask for the whole batch at once, so the
	// daemon publishes it in one pass instead of a fill target per wake-up.
	return c.slow(func(a *attachment) (int, takeResult) { return a.takeBatch(ids) },
		uint64(len(ids)))
}

// nextBatchOrAttach is the local take behind a Client with remotes. Such a Client may
// have been opened with no local daemon: it looks for one now and then (it may start
// later), and says ErrDaemonNotRunning until it finds one, so the remotes serve.
func (c *Client) nextBatchOrAttach(ids []uint64) (int, error) {
	if c.current.Load() == nil && !c.attachLate() {
		return 0, newError(statusDaemonNotRunning, "no snowflaked segment in "+c.runtimeDir+
			" (no local daemon)")
	}
	return c.nextBatch(ids)
}

// slow is the wait slow path (LAYOUT.md §7, Wait): take tries once; want is how many IDs
// the caller still needs, sent as the refill hint (0: a single take).
func (c *Client) slow(take func(*attachment) (int, takeResult), want uint64) (int, error) {
	deadline := time.Now().Add(c.timeout)
	var hinted *attachment // the segment our hint went to, once it went
	for {
		a := c.current.Load()
		if a == nil { // closed meanwhile
			return 0, ErrClosed
		}
		r := a.ring
		// Read before re-checking the ring: a publish after our check moves wake_seq, so
		// the futex wait below returns at once instead of sleeping through it.
		seen := r.wakeSeq()
		n, result := take(a)
		if n > 0 {
			return n, nil
		}
		limit := r.heartbeatLimit(c.maxAge)
		producer := r.checkProducer(limit)
		if producer.health != healthServing {
			if c.reattach(a, deadline) {
				continue
			}
			err := unavailableError(producer, r, c.runtimeDir, limit)
			keepMapped(a)
			return 0, err
		}
		if r.seg.consumer == nil {
			// Opened while the daemon did not answer attach; it serves now: attach.
			if err := c.attachRegion(a, deadline); err != nil {
				return 0, err
			}
			continue
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			// Stale IDs: a daemon that heartbeats but does not drain its ring, so fail over.
			// Empty: the daemon is alive (a hung one fails the heartbeat check above first:
			// liveness_ms is shorter than the default timeout) and refilling: retry here.
			within := "no ID within " + strconv.FormatInt(c.timeout.Milliseconds(), 10) +
				" ms: the ring in " + c.runtimeDir
			if result == stale {
				bound := loadU32(r.seg.header, offFreshnessMs)
				keepMapped(a)
				return 0, newError(statusTimedOut, within+
					" held only IDs older than its freshness bound ("+
					strconv.FormatUint(uint64(bound), 10)+
					" ms) although snowflaked looks healthy: it is not draining its ring; fail over")
			}
			return 0, newError(statusRingEmpty, within+
				" stayed empty although snowflaked looks healthy (it is refilling); retry here")
		}
		if remaining > waitSlice {
			remaining = waitSlice
		}
		// Short slices, so a daemon that dies or stops without waking us is noticed within
		// about a slice. The hint goes with the first request, and again only once the
		// daemon has taken the word (it reads 0), so a slow daemon is not asked for the
		// batch once per slice.
		w := want
		if hinted == a && r.refillHint() != 0 {
			w = 0
		}
		r.awaitPublish(seen, remaining, result == stale, w)
		hinted = a
	}
}

// reattach is called when seen is not serving. If the ring file's path now names another
// segment (a daemon created a new one), it maps it, attaches its region (retrying the
// daemon's "retry" refusals until deadline) and makes it current. Returns whether the
// caller should retry.
func (c *Client) reattach(seen *attachment, deadline time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	if c.current.Load() != seen {
		return true // another goroutine already moved on (or Close dropped it)
	}
	var st syscall.Stat_t
	if syscall.Stat(seen.ring.seg.path, &st) != nil ||
		(st.Ino == seen.ring.seg.ino && st.Dev == seen.ring.seg.dev) {
		return false
	}
	return c.attachLocked(deadline)
}

// attachLocked maps the segment in the runtime directory now and takes from it from here
// on; c.mu is held. Returns whether it could.
func (c *Client) attachLocked(deadline time.Time) bool {
	s, e := openSegment(c.runtimeDir, c.maxAge, deadline)
	if e != nil {
		return false
	}
	c.addAttachmentLocked(newAttachment(s, c.service))
	return true
}

// attachRegion is called when seen, mapped without its consumer region, has a daemon that
// serves by its header: it attaches to the segment at the path and makes it current. At
// most every lateAttachEvery, so a daemon that keeps failing the attach is not asked on
// every take: in between, the last failure is returned. Errors: the attach's, and
// ErrDaemonNotRunning for a daemon that looks healthy but does not hand over its region.
func (c *Client) attachRegion(seen *attachment, deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	if c.current.Load() != seen {
		return nil // another goroutine attached meanwhile
	}
	now := time.Now()
	if now.Before(c.nextRegionTry) && c.lastAttachErr != nil {
		return c.lastAttachErr
	}
	c.nextRegionTry = now.Add(lateAttachEvery)
	s, e := openSegment(c.runtimeDir, c.maxAge, deadline)
	if e != nil {
		c.lastAttachErr = e
		return e
	}
	if s.consumer == nil && s.ino == seen.ring.seg.ino && s.dev == seen.ring.seg.dev {
		// Still no answer: the next pass reports what the header says then, or, while it
		// still says serving, this.
		s.unmap()
		c.lastAttachErr = newError(statusDaemonNotRunning, "snowflaked looks healthy in "+
			c.runtimeDir+" but did not hand over its consumer region on its control socket "+
			controlSocketPath(c.runtimeDir)+"; retry, or fail over")
		return nil
	}
	c.addAttachmentLocked(newAttachment(s, c.service))
	return nil
}

// attachLate maps the segment of a Client opened without a local daemon, at most every
// lateAttachEvery. Returns whether the Client is attached now.
func (c *Client) attachLate() bool {
	if c.closed.Load() {
		return false
	}
	now := time.Now().UnixNano()
	due := c.nextAttach.Load()
	if now < due || !c.nextAttach.CompareAndSwap(due, now+int64(lateAttachEvery)) {
		return c.current.Load() != nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current.Load() != nil {
		return true
	}
	if c.closed.Load() { // Close holds mu while it drops the attachments
		return false
	}
	// One attempt: while no local daemon serves, the remotes do, without waiting here.
	return c.attachLocked(time.Now())
}

// Close releases the Client: its count is published and its counter slot retired (the
// daemon's count of the service is then exact), and its mapping is unmapped once no take
// uses it any more. Later calls return ErrClosed; closing again does nothing. It may run
// beside other calls on c, and beside another Close: a take running at that moment
// returns its ID or ErrClosed, and never reads an unmapped page.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.publisher != nil {
		c.publisher.close() // the last counts, before the slots are retired
		c.publisher = nil
	}
	for _, a := range c.attachments {
		a.retire()
	}
	c.attachments = nil
	c.current.Store(nil)
	if c.remotes != nil {
		c.remotes.close()
	}
	return nil
}

// Layout is the ID layout of c's daemon, from its segment's header: its epoch and bits
// (DefaultLayout until a daemon is found).
func (c *Client) Layout() Layout {
	if a := c.current.Load(); a != nil {
		return a.ring.layout
	}
	return DefaultLayout
}
