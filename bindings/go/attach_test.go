package snowflake

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// attach against a fake daemon in this process: a ring file written here and a listener on
// control.sock that answers attach as each test needs, with a memfd made here. Every check
// of the spec's steps 2-8 that a process can provoke on its own has a test; the real
// daemon's attach is daemon_test.go's and snowflake_test.go's.

// memfd_create's number: package syscall names it only on some architectures.
var sysMemfdCreate = map[string]uintptr{"amd64": 319, "arm64": 279, "riscv64": 279,
	"loong64": 279, "386": 356, "arm": 385, "ppc64le": 360, "ppc64": 360, "s390x": 350}[runtime.GOARCH]

const (
	mfdCloexec      = 0x1
	mfdAllowSealing = 0x2
	fAddSeals       = 1033
)

// How many memfds newMemfd made (each stays open until its test ends).
var memfdsMade atomic.Int32

// newMemfd is a memfd of size bytes holding segID at the region's segment_id, sealed with
// seals (0: none, but sealing allowed). Closed when the test ends.
func newMemfd(t *testing.T, size int64, seals uintptr, segID uint64) int {
	t.Helper()
	if sysMemfdCreate == 0 {
		t.Fatalf("no memfd_create number for GOARCH %s: add it to sysMemfdCreate", runtime.GOARCH)
	}
	name := []byte("sf-go-test\x00")
	fd, _, errno := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])),
		mfdCloexec|mfdAllowSealing, 0)
	if errno != 0 {
		t.Fatalf("memfd_create: %v", errno)
	}
	memfdsMade.Add(1)
	t.Cleanup(func() { syscall.Close(int(fd)) })
	if err := syscall.Ftruncate(int(fd), size); err != nil {
		t.Fatal(err)
	}
	if size >= offConsumerSegID+8 {
		var b [8]byte
		*(*uint64)(unsafe.Pointer(&b[0])) = segID
		if _, err := syscall.Pwrite(int(fd), b[:], offConsumerSegID); err != nil {
			t.Fatal(err)
		}
	}
	if seals != 0 {
		if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, fAddSeals, seals); errno != 0 {
			t.Fatalf("F_ADD_SEALS %#x: %v", seals, errno)
		}
	}
	return int(fd)
}

// A ring file of capacity 16 holding ids (fresh ones unless the test says otherwise).
type fakeRing struct {
	segID  uint64
	state  uint32
	pid    uint64
	layout *Layout // nil: DefaultLayout
	bound  uint32  // freshness_bound_ms; 0: no bound
	beat  uint64 // monotonic ns; 0: now
	ids   []uint64
}

func freshIDs(n int) []uint64 {
	ms := uint64(time.Now().UnixMilli() - DefaultEpoch.UnixMilli())
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = ms<<DefaultLayout.timeShift() | 7<<DefaultLayout.SequenceBits | uint64(i)
	}
	return ids
}

func writeRing(t *testing.T, dir string, r fakeRing) string {
	t.Helper()
	const capacity = 16
	data := make([]byte, segmentSizeFor(capacity))
	h := region(data)
	put64 := func(off int, v uint64) { *h.u64(off) = v }
	put32 := func(off int, v uint32) { *h.u32(off) = v }
	put64(offMagic, layoutMagic)
	put32(offVersion, layoutVersion)
	put32(offHeaderSize, headerSize)
	put64(offCapacity, capacity)
	put64(offSegmentSize, segmentSizeFor(capacity))
	put64(offSegmentID, r.segID)
	put64(offSlotsOffset, slotsOffset)
	put64(offEpoch, uint64(DefaultEpoch.UnixMilli()))
	put32(offMachine, 7)
	layout := DefaultLayout
	if r.layout != nil {
		layout = *r.layout
	}
	put32(offIDBits, packIDBits(layout))
	put32(offFreshnessMs, r.bound)
	put64(offTail, uint64(len(r.ids)))
	put32(offState, r.state)
	beat := r.beat
	if beat == 0 {
		beat = monotonicNowNs()
	}
	put64(offHeartbeat, beat)
	put32(offLivenessMs, 60_000) // the beat is written once: alive for the test's length
	put64(offPID, r.pid)
	put32(offPidNamespace, currentPidNamespace())
	high, low := currentBootID()
	put64(offBootHigh, high)
	put64(offBootLow, low)
	for i, id := range r.ids {
		put64(slotsOffset+8*i, id)
	}
	path := filepath.Join(dir, segmentFileName)
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

// runtimeDir is a fresh runtime directory others may enter (the tests that change a
// thread's user need that), removed when the test ends; short, for sockaddr_un.
func runtimeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sf-go-attach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeDaemon answers attach on a listener: reply(n, conn) writes the answer to the n-th
// request (from 0) once it was read.
type fakeDaemon struct {
	conns    atomic.Int32 // accepted
	requests atomic.Int32 // of those, the ones that sent a request line
	reply    func(n int, c *net.UnixConn)
}

func serveAttach(t *testing.T, ln *net.UnixListener, reply func(n int, c *net.UnixConn)) *fakeDaemon {
	d := &fakeDaemon{reply: reply}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			d.conns.Add(1)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			switch {
			case line == attachRequest:
				d.reply(int(d.requests.Add(1))-1, c)
			case line == "{\"command\":\"status\"}\n": // Status asks too: not this fake's
				send(t, c, refused("unknown_command", "a fake daemon: attach only"))
			case line != "" || err == nil:
				t.Errorf("the fake daemon read %q, %v; want %q", line, err, attachRequest)
			} // else: a client that hung up without asking
			c.Close()
		}
	}()
	return d
}

func listenAttach(t *testing.T, dir string, reply func(n int, c *net.UnixConn)) *fakeDaemon {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: controlSocketPath(dir), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	return serveAttach(t, ln, reply)
}

// send writes one reply line, with fds attached (SCM_RIGHTS) when there are any.
func send(t *testing.T, c *net.UnixConn, line string, fds ...int) {
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix([]byte(line+"\n"), oob, nil); err != nil {
		t.Errorf("the fake daemon's reply: %v", err)
	}
}

func accepted(segID uint64) string {
	return fmt.Sprintf(`{"ok":true,"segment_id":"%d","format_version":%d,"region_bytes":163840}`,
		segID, layoutVersion)
}

func refused(code, message string) string {
	return fmt.Sprintf(`{"ok":false,"code":%q,"error":%q}`, code, message)
}

const testSegID = 0x5e6d00000000002a

// servingRing writes a serving daemon's ring holding n fresh IDs.
func servingRing(t *testing.T, dir string, n int) []uint64 {
	ids := freshIDs(n)
	writeRing(t, dir, fakeRing{segID: testSegID, state: stateServing, pid: uint64(os.Getpid()), ids: ids})
	return ids
}

// openFake opens "orders" on dir with remotes off, and closes it when the test ends.
func openFake(t *testing.T, dir string) (*Client, error) {
	c, err := Open("orders", WithRuntimeDir(dir), WithRemotes(), WithTimeout(0))
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// memfdsOpen counts this process's descriptors of memfds made by newMemfd.
func memfdsOpen(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil &&
			strings.HasPrefix(target, "/memfd:sf-go-test") {
			n++
		}
	}
	return n
}

// The accepted path end to end: the region arrives, is mapped (its descriptor closed at
// once), takes come from the ring file's slots through the region's head, and the count
// reaches the service slot's word within about publishEvery, exactly after Close.
func TestAttachMapsTheSealedRegionTakesAndCountsExactly(t *testing.T) {
	dir := runtimeDir(t)
	ids := servingRing(t, dir, 12)
	fd := newMemfd(t, regionSize, consumerRegionSeals, testSegID)
	listenAttach(t, dir, func(n int, c *net.UnixConn) { send(t, c, accepted(testSegID), fd) })
	mine, err := syscall.Mmap(fd, 0, regionSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mine)
	view := region(mine)

	c, err := openFake(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := memfdsOpen(t); n != 1 {
		t.Fatalf("%d descriptors of the memfd open after Open, want 1 (the test's own): the "+
			"received one must be closed once mapped", n)
	}
	var got []uint64
	for i := 0; i < 4; i++ {
		id, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	batch := make([]uint64, 5)
	n, err := c.NextBatch(batch)
	if err != nil || n != 5 {
		t.Fatalf("NextBatch: %d, %v", n, err)
	}
	got = append(got, batch...)
	for i := range got {
		if got[i] != ids[i] {
			t.Fatalf("take %d gave %d, the ring holds %d", i, got[i], ids[i])
		}
	}
	if head := loadU64(view, offHead); head != 9 {
		t.Fatalf("the region's head is %d after 9 takes", head)
	}
	if s, err := c.Status(); err != nil || s.ClientTaken != 9 || s.RingFill != 3 {
		t.Fatalf("status: taken %d, fill %d, %v", s.ClientTaken, s.RingFill, err)
	}
	slot := offServices + 0*serviceSlotSize // the first free slot
	word := func() uint64 { return loadU64(view, slot+offTaken) }
	for deadline := time.Now().Add(2 * time.Second); word() != 9; {
		if time.Now().After(deadline) {
			t.Fatalf("the slot's taken word is %d a while after 9 takes, want 9", word())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Next(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if word() != 10 || loadU64(view, slot+offNameReady) != serviceSlotRetired ||
		loadU64(view, slot+offOwnerPID) != uint64(os.Getpid()) {
		t.Fatalf("after Close: taken %d (want 10), name_ready %d (want retired), owner %d",
			word(), loadU64(view, slot+offNameReady), loadU64(view, slot+offOwnerPID))
	}
}

// A take judges freshness, and Decode splits, by the header's layout: in 42/15/6 an ID's
// millisecond is id >> 21, and read by the default's >> 22 these IDs would be decades old
// (stale: no take) and of another machine.
func TestATakeAndDecodeFollowTheHeadersLayout(t *testing.T) {
	dir := runtimeDir(t)
	wide := Layout{Epoch: DefaultEpoch, TimeBits: 42, MachineBits: 15, SequenceBits: 6}
	ms := uint64(time.Now().UnixMilli() - DefaultEpoch.UnixMilli())
	ids := []uint64{ms<<21 | 20000<<6 | 1, ms<<21 | 20000<<6 | 2}
	writeRing(t, dir, fakeRing{segID: testSegID, state: stateServing, pid: uint64(os.Getpid()),
		ids: ids, layout: &wide, bound: 60_000})
	fd := newMemfd(t, regionSize, consumerRegionSeals, testSegID)
	listenAttach(t, dir, func(n int, c *net.UnixConn) { send(t, c, accepted(testSegID), fd) })

	c, err := openFake(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Next()
	if err != nil {
		t.Fatalf("no take from a ring of fresh 42/15/6 IDs: %v", err)
	}
	d, err := c.Decode(id)

	if err != nil || id != ids[0] {
		t.Fatalf("took %d (%v), want %d", id, err, ids[0])
	}
	if got := c.Layout(); got.String() != "42/15/6" || !got.Epoch.Equal(DefaultEpoch) {
		t.Fatalf("the client's layout is %v from %v, want the header's 42/15/6", got, got.Epoch)
	}
	if d.Machine != 20000 || d.Sequence != 1 || d.UnixMs != DefaultEpoch.UnixMilli()+int64(ms) {
		t.Fatalf("decoded %+v, want machine 20000, sequence 1, unix ms %d", d,
			DefaultEpoch.UnixMilli()+int64(ms))
	}
}

// A header whose id_bits are no layout is a corrupt segment: no take may shift by them.
func TestAHeaderWithoutALayoutIsRefused(t *testing.T) {
	dir := runtimeDir(t)
	bad := Layout{Epoch: DefaultEpoch, TimeBits: 41, MachineBits: 17, SequenceBits: 6}
	writeRing(t, dir, fakeRing{segID: testSegID, state: stateServing, pid: uint64(os.Getpid()),
		ids: freshIDs(1), layout: &bad})
	fd := newMemfd(t, regionSize, consumerRegionSeals, testSegID)
	listenAttach(t, dir, func(n int, c *net.UnixConn) { send(t, c, accepted(testSegID), fd) })

	_, err := openFake(t, dir)

	var e *Error
	if !errors.As(err, &e) || e.Status != statusCorruptSegment ||
		!strings.Contains(e.Message, "id_bits 0x00061129 is no ID layout") {
		t.Fatalf("opened a ring whose id_bits are no layout: %v", err)
	}
}

// Counts from many goroutines at once add up exactly: the shards lose nothing.
func TestCountsOfManyGoroutinesAddUpExactly(t *testing.T) {
	k := &takeCount{word: new(uint64)}
	const goroutines, each = 16, 10_000
	done := make(chan struct{})
	for g := 0; g < goroutines; g++ {
		go func(g int) {
			for i := 0; i < each; i++ {
				k.add(uint64(1 + g%2))
				if i%1000 == 0 {
					k.publish()
				}
			}
			done <- struct{}{}
		}(g)
	}
	for g := 0; g < goroutines; g++ {
		<-done
	}
	k.publish()
	want := uint64(goroutines / 2 * each * 3)
	if k.sum() != want || atomic.LoadUint64(k.word) != want {
		t.Fatalf("sum %d, published %d, want %d", k.sum(), atomic.LoadUint64(k.word), want)
	}
}

func TestAttachRetriesTooManyConnectionsAndDaemonStarting(t *testing.T) {
	dir := runtimeDir(t)
	servingRing(t, dir, 1)
	fd := newMemfd(t, regionSize, consumerRegionSeals, testSegID)
	d := listenAttach(t, dir, func(n int, c *net.UnixConn) {
		switch n {
		case 0:
			send(t, c, refused("too_many_connections", "too many connections; retry"))
		case 1:
			send(t, c, refused("daemon_starting", "snowflaked is starting"))
		default:
			send(t, c, accepted(testSegID), fd)
		}
	})
	c, err := openFake(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(); err != nil {
		t.Fatal(err)
	}
	if n := d.requests.Load(); n != 3 {
		t.Fatalf("%d connections, want 3 (two refusals retried)", n)
	}
}

// A daemon that keeps saying it is starting: Open gives up after its budget with
// ErrTimedOut.
func TestAttachGivesUpOnADaemonStartingForTheWholeBudget(t *testing.T) {
	// A budget of 1 s instead of 10: the same rule, a tenth of the wait.
	saved := attachBudget
	attachBudget = time.Second
	t.Cleanup(func() { attachBudget = saved })
	dir := runtimeDir(t)
	servingRing(t, dir, 1)
	d := listenAttach(t, dir, func(n int, c *net.UnixConn) {
		send(t, c, refused("daemon_starting", "snowflaked is starting"))
	})
	start := time.Now()
	_, err := openFake(t, dir)
	e := wantError(t, err, ErrTimedOut, statusTimedOut, "timed_out")
	if took := time.Since(start); took < attachBudget-500*time.Millisecond || took > attachBudget+2*time.Second {
		t.Fatalf("gave up after %v, the budget is %v", took, attachBudget)
	}
	if d.requests.Load() < 5 || !strings.Contains(e.Message,
		"did not hand over its consumer region within 1000 ms (daemon_starting: snowflaked is starting)") {
		t.Fatalf("%d requests; %q", d.requests.Load(), e.Message)
	}
}

// The refusals and checks of steps 5 and 6: each a clear error, nothing mapped.
func TestAttachRefusesWhatTheSpecRefuses(t *testing.T) {
	type row struct {
		name    string
		reply   func(t *testing.T, c *net.UnixConn)
		err     error
		status  int
		code    string
		message string
	}
	sealed := func(t *testing.T, size int64, seals uintptr) int {
		return newMemfd(t, size, seals, testSegID)
	}
	rows := []row{
		{"a reply without a descriptor", func(t *testing.T, c *net.UnixConn) {
			send(t, c, accepted(testSegID))
		}, ErrIncompatibleVersion, statusIncompatibleVersion, "incompatible_version",
			"answered attach on %s without a descriptor (the daemon does not speak this library's attach"},
		{"an unsealed memfd", func(t *testing.T, c *net.UnixConn) {
			send(t, c, accepted(testSegID), sealed(t, regionSize, 0))
		}, ErrUntrustedSegment, statusUntrustedSegment, "untrusted_segment",
			"the consumer region is sealed with none (0x0), not exactly seal|shrink|grow (0x7, with exec or not): " +
				"any process holding it could resize it under every taker; refusing to map it"},
		{"a memfd sealed against resizing but open to more seals", func(t *testing.T, c *net.UnixConn) {
			send(t, c, accepted(testSegID), sealed(t, regionSize, 0x6))
		}, ErrUntrustedSegment, statusUntrustedSegment, "untrusted_segment",
			"sealed with shrink|grow (0x6), not exactly seal|shrink|grow (0x7, with exec or not)"},
		{"a memfd sealed against writes too", func(t *testing.T, c *net.UnixConn) {
			send(t, c, accepted(testSegID), sealed(t, regionSize, 0xf))
		}, ErrUntrustedSegment, statusUntrustedSegment, "untrusted_segment",
			"sealed with seal|shrink|grow|write (0xf), not exactly"},
		{"a memfd sealed with the wrong size", func(t *testing.T, c *net.UnixConn) {
			send(t, c, accepted(testSegID), sealed(t, 4096, consumerRegionSeals))
		}, ErrCorruptSegment, statusCorruptSegment, "corrupt_segment",
			"the consumer region is sealed with 4096 bytes, the format's region is 163840 (sealed with the wrong size)"},
		{"a memfd sealed too large", func(t *testing.T, c *net.UnixConn) {
			send(t, c, accepted(testSegID), sealed(t, regionSize+4096, consumerRegionSeals))
		}, ErrCorruptSegment, statusCorruptSegment, "corrupt_segment", "sealed with 167936 bytes"},
		{"an unsealed memfd of the wrong size: the seals are what is wrong", func(t *testing.T, c *net.UnixConn) {
			send(t, c, accepted(testSegID), sealed(t, 4096, 0))
		}, ErrUntrustedSegment, statusUntrustedSegment, "untrusted_segment",
			"sealed with none (0x0)"},
		{"a regular file, which has no seals", func(t *testing.T, c *net.UnixConn) {
			f, err := os.CreateTemp(t.TempDir(), "region")
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			f.Truncate(regionSize)
			send(t, c, accepted(testSegID), int(f.Fd()))
		}, ErrUntrustedSegment, statusUntrustedSegment, "untrusted_segment",
			"not exactly seal|shrink|grow (0x7, with exec or not)"},
		{"a pipe", func(t *testing.T, c *net.UnixConn) {
			var p [2]int
			if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
				t.Error(err)
				return
			}
			defer syscall.Close(p[0])
			defer syscall.Close(p[1])
			send(t, c, accepted(testSegID), p[0])
		}, ErrUntrustedSegment, statusUntrustedSegment, "untrusted_segment",
			"the consumer region is not a memory file (a socket, pipe, directory or device)"},
		{"a daemon of format 3", func(t *testing.T, c *net.UnixConn) {
			send(t, c, refused("unknown_command", `unknown command "attach": expected "status" or "resume"`))
		}, ErrIncompatibleVersion, statusIncompatibleVersion, "incompatible_version",
			"snowflaked predates segment format 4: its control socket %s does not know attach " +
				"(unknown command \"attach\": expected \"status\" or \"resume\"); run a daemon and " +
				"client library of the same release: restart the service after the package upgrade"},
		{"an accepted reply of another format", func(t *testing.T, c *net.UnixConn) {
			send(t, c, strings.Replace(accepted(testSegID), `"format_version":5`, `"format_version":6`, 1),
				sealed(t, regionSize, consumerRegionSeals))
		}, ErrIncompatibleVersion, statusIncompatibleVersion, "incompatible_version",
			"serves segment format 6, this library speaks format 5: run a daemon and client library of the same release"},
		{"a reply that is no JSON object", func(t *testing.T, c *net.UnixConn) {
			send(t, c, "HTTP/1.1 400 Bad Request")
		}, ErrIncompatibleVersion, statusIncompatibleVersion, "incompatible_version",
			"not the protocol's reply object (the daemon does not speak this library's attach"},
		{"a refusal with a library status", func(t *testing.T, c *net.UnixConn) {
			send(t, c, refused("permission_denied", "not for you"))
		}, ErrPermissionDenied, statusPermissionDenied, "permission_denied",
			"snowflaked refused attach on %s: not for you"},
		{"another refusal", func(t *testing.T, c *net.UnixConn) {
			send(t, c, refused("malformed_request", "not one JSON object"))
		}, ErrSystem, statusSystemError, "system_error",
			"refused attach on %s: malformed_request: not one JSON object"},
		{"a connection closed without a reply", func(t *testing.T, c *net.UnixConn) {},
			ErrIncompatibleVersion, statusIncompatibleVersion, "incompatible_version",
			"snowflaked closed %s without answering attach"},
	}
	for _, r := range rows {
		r := r
		t.Run(r.name, func(t *testing.T) {
			dir := runtimeDir(t)
			servingRing(t, dir, 1)
			listenAttach(t, dir, func(n int, c *net.UnixConn) { r.reply(t, c) })
			before, made := memfdsOpen(t), memfdsMade.Load()
			_, err := openFake(t, dir)
			e := wantError(t, err, r.err, r.status, r.code)
			message := r.message
			if strings.Contains(message, "%s") {
				message = fmt.Sprintf(message, controlSocketPath(dir))
			}
			if !strings.Contains(e.Message, message) {
				t.Fatalf("message %q lacks %q", e.Message, message)
			}
			if after, made := memfdsOpen(t), memfdsMade.Load()-made; after > before+int(made) {
				t.Fatalf("%d memfd descriptors open after the refusal, %d before and %d made "+
					"here: the received one was not closed", after, before, made)
			}
			t.Logf("%s", e.Message)
		})
	}
}

// Step 8: a region of another segment than the ring file (the daemon replaced its segment
// between the two steps) is retried from the ring file, a bounded number of times.
func TestAttachRetriesARegionOfAnotherSegmentAndGivesUp(t *testing.T) {
	dir := runtimeDir(t)
	servingRing(t, dir, 1)
	other := newMemfd(t, regionSize, consumerRegionSeals, testSegID+1)
	right := newMemfd(t, regionSize, consumerRegionSeals, testSegID)
	d := listenAttach(t, dir, func(n int, c *net.UnixConn) {
		if n == 0 {
			send(t, c, accepted(testSegID+1), other) // the next segment, before its ring file
		} else {
			send(t, c, accepted(testSegID), right)
		}
	})
	if _, err := openFake(t, dir); err != nil {
		t.Fatal(err)
	}
	if d.requests.Load() != 2 {
		t.Fatalf("%d requests, want 2", d.requests.Load())
	}

	dir = runtimeDir(t)
	servingRing(t, dir, 1)
	d = listenAttach(t, dir, func(n int, c *net.UnixConn) { send(t, c, accepted(testSegID+1), other) })
	_, err := openFake(t, dir)
	e := wantError(t, err, ErrDaemonNotRunning, statusDaemonNotRunning, "daemon_not_running")
	if !strings.Contains(e.Message, "belongs to another segment") || d.requests.Load() != pairingTries {
		t.Fatalf("%d requests (want %d): %s", d.requests.Load(), pairingTries, e.Message)
	}
	// A reply whose segment_id is the ring file's but whose region is another's.
	dir = runtimeDir(t)
	servingRing(t, dir, 1)
	listenAttach(t, dir, func(n int, c *net.UnixConn) { send(t, c, accepted(testSegID), other) })
	_, err = openFake(t, dir)
	wantError(t, err, ErrDaemonNotRunning, statusDaemonNotRunning, "daemon_not_running")
}

// Step 2: no socket, or nothing listening on it, is no daemon: Open maps the ring file
// alone, and the take reports what its header says (stopped, dead), or, while it says
// serving, that the daemon did not hand over its region. A daemon that starts answering
// later is attached by a take.
func TestAttachWithoutADaemonLeavesTheTakeToSayWhy(t *testing.T) {
	dir := runtimeDir(t)
	ids := servingRing(t, dir, 1)
	takeErr := func() *Error {
		t.Helper()
		c, err := openFake(t, dir)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if s, err := c.Status(); err != nil || s.State == "" || s.RingFill != 0 || s.ClientTaken != 0 {
			t.Fatalf("status of a ring file alone: %+v, %v", s, err)
		}
		_, err = c.Next()
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Next: %v", err)
		}
		return e
	}
	e := takeErr()
	if e.Status != statusDaemonNotRunning || !strings.Contains(e.Message,
		"but did not hand over its consumer region on its control socket "+controlSocketPath(dir)) {
		t.Fatalf("%#v", e)
	}

	// A socket file nobody listens on (ECONNREFUSED).
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: controlSocketPath(dir)}); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	if e := takeErr(); e.Status != statusDaemonNotRunning {
		t.Fatalf("%#v", e)
	}

	writeRing(t, dir, fakeRing{segID: testSegID, state: stateStopped, pid: 12345})
	e = takeErr()
	wantError(t, e, ErrDaemonStopped, statusDaemonStopped, "daemon_stopped")
	if !strings.Contains(e.Message, "has stopped") {
		t.Fatalf("%q", e.Message)
	}

	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	writeRing(t, dir, fakeRing{segID: testSegID, state: stateServing,
		pid: uint64(exited.Process.Pid), beat: monotonicNowNs() - uint64(time.Second)})
	e = takeErr()
	wantError(t, e, ErrDaemonDead, statusDaemonDead, "daemon_dead")
	if !strings.Contains(e.Message, "is gone without shutting down") {
		t.Fatalf("%q", e.Message)
	}

	// Serving again, and answering from now on: the take attaches (after lateAttachEvery
	// since the last try at most) and takes.
	writeRing(t, dir, fakeRing{segID: testSegID, state: stateServing, pid: uint64(os.Getpid()), ids: ids})
	os.Remove(controlSocketPath(dir))
	c, err := Open("orders", WithRuntimeDir(dir), WithRemotes(), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Next(); !errors.Is(err, ErrDaemonNotRunning) {
		t.Fatalf("a take before the daemon answers: %v", err)
	}
	region := newMemfd(t, regionSize, consumerRegionSeals, testSegID)
	listenAttach(t, dir, func(n int, conn *net.UnixConn) { send(t, conn, accepted(testSegID), region) })
	var id uint64
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if id, err = c.Next(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || id != ids[0] {
		t.Fatalf("a take once the daemon answers: %d, %v (want %d)", id, err, ids[0])
	}
}

// asOtherUser runs fn on a thread of its own whose user (and groups) are nobody's, and
// lets that thread die after it: only it changes user (raw system calls, not the
// process-wide syscall.Setresuid). Returns false when this process may not change user.
func asOtherUser(t *testing.T, fn func()) bool {
	t.Helper()
	const nobody = 65534
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		groups := []uint32{nobody}
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SETGROUPS, 1,
			uintptr(unsafe.Pointer(&groups[0])), 0); errno != 0 {
			ok <- false
			return
		}
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SETRESGID, nobody, nobody, 0); errno != 0 {
			ok <- false
			return
		}
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SETRESUID, nobody, nobody, 0); errno != 0 {
			ok <- false
			return
		}
		fn()
		ok <- true
	}()
	return <-ok
}

// Step 3: a listener of another user than the ring file's owner is refused before
// anything is sent to it. The listener is made here by listening on a thread switched to
// another user (SO_PEERCRED records the listening thread's credentials), which only root
// can do.
func TestAttachRefusesAListenerOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not run: a listener of another user can only be made in-process as root " +
			"(this test process is not root); run the package's tests as root to check step 3")
	}
	dir := runtimeDir(t)
	ringPath := writeRing(t, dir, fakeRing{segID: testSegID, state: stateServing,
		pid: uint64(os.Getpid()), ids: freshIDs(1)})
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: controlSocketPath(dir)}); err != nil {
		t.Fatal(err)
	}
	var listenErr error
	if !asOtherUser(t, func() { listenErr = syscall.Listen(fd, 8) }) {
		syscall.Close(fd)
		t.Skip("not run: this root process may not change a thread's user (no CAP_SETUID " +
			"or CAP_SETGID), so it cannot make a listener of another user")
	}
	if listenErr != nil {
		t.Fatal(listenErr)
	}
	f := os.NewFile(uintptr(fd), "listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	memfd := newMemfd(t, regionSize, consumerRegionSeals, testSegID)
	d := serveAttach(t, ln.(*net.UnixListener), func(n int, c *net.UnixConn) {
		send(t, c, accepted(testSegID), memfd)
	})
	_, err = openFake(t, dir)
	e := wantError(t, err, ErrUntrustedSegment, statusUntrustedSegment, "untrusted_segment")
	want := "the process listening on " + controlSocketPath(dir) + " runs as " +
		describeUser(65534) + ", not as the daemon's user " + describeUser(0) + " (the owner of " +
		ringPath + "); refusing it"
	if e.Message != want {
		t.Fatalf("got %q, want %q", e.Message, want)
	}
	for deadline := time.Now().Add(2 * time.Second); d.conns.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no connection reached the listener")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the fake would have read a request by now
	if d.requests.Load() > 0 {
		t.Fatalf("the request was sent to the untrusted listener (%d read)", d.requests.Load())
	}
}

// Step 2's EACCES names the socket's group. Provoked by connecting from a thread of
// another user, which only root can switch to.
func TestAttachWithoutPermissionNamesTheSocketsGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not run: a connection refused with EACCES needs a thread of another user, " +
			"which only root can make in-process; run the package's tests as root to check it")
	}
	dir := runtimeDir(t)
	servingRing(t, dir, 1)
	listenAttach(t, dir, func(n int, c *net.UnixConn) { t.Error("a connection was accepted") })
	if err := os.Chmod(controlSocketPath(dir), 0o660); err != nil {
		t.Fatal(err)
	}
	s, e := openRing(dir)
	if e != nil {
		t.Fatal(e)
	}
	defer s.unmap()
	var attachErr *Error
	if !asOtherUser(t, func() {
		_, _, attachErr = attachRegion(s, time.Now(), func() bool { return false })
	}) {
		t.Skip("not run: this root process may not change a thread's user (no CAP_SETUID " +
			"or CAP_SETGID)")
	}
	e = wantError(t, attachErr, ErrPermissionDenied, statusPermissionDenied, "permission_denied")
	if !strings.Contains(e.Message, "permission denied connecting to "+controlSocketPath(dir)+
		" (mode 0660, "+describeGroup(0)+")") {
		t.Fatalf("%q", e.Message)
	}
	if s.consumer != nil {
		t.Fatal("a region was mapped")
	}
}
