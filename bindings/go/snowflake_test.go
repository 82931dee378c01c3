package snowflake

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func TestMain(m *testing.M) {
	if os.Getenv("SNOWFLAKE_GO_WORKER") != "" {
		os.Exit(stressWorker())
	}
	os.Exit(m.Run())
}

func open(t *testing.T, d *daemon, opts ...Option) *Client {
	t.Helper()
	c, err := Open("orders", append([]Option{WithRuntimeDir(d.runtimeDir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantError(t *testing.T, err error, sentinel error, status int, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want an *Error (%v)", err, sentinel)
	}
	if !errors.Is(err, sentinel) || e.Status != status || e.Code != code || e.Message == "" {
		t.Fatalf("got %#v, want %v (status %d, code %s, a message)", e, sentinel, status, code)
	}
	return e
}

func TestNextReturnsIncreasingIDsOfNow(t *testing.T) {
	c := open(t, startDaemon(t))
	before := time.Now()
	var last uint64
	for i := 0; i < 1000; i++ {
		id, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if id <= last || id >= 1<<63 {
			t.Fatalf("ID %d after %d", id, last)
		}
		last = id
	}
	d, err := Decode(last)
	if err != nil {
		t.Fatal(err)
	}
	if d.Time.Before(before.Add(-10*time.Second)) || d.Time.After(time.Now().Add(time.Second)) {
		t.Fatalf("ID of %v, taken at %v", d.Time, before)
	}
}

func TestNextBatchFillsIncreasingIDs(t *testing.T) {
	c := open(t, startDaemon(t))
	first, _ := c.Next()
	ids := make([]uint64, 5000)
	n, err := c.NextBatch(ids)
	if err != nil || n < 1 || n > len(ids) {
		t.Fatalf("NextBatch: %d, %v", n, err)
	}
	prev := first
	for _, id := range ids[:n] {
		if id <= prev {
			t.Fatalf("ID %d after %d", id, prev)
		}
		prev = id
	}
	if _, err := c.NextBatch(nil); err == nil {
		t.Fatal("an empty slice was accepted")
	} else {
		wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
	}
}

// The batch copy wraps at the ring's end: every start and length on a ring of 8 slots
// gives the slots of tickets h, h+1, … in order.
func TestCopySlotsWrapsAtTheRingsEnd(t *testing.T) {
	var slots [8]uint64
	for i := range slots {
		slots[i] = uint64(100 + i)
	}
	r := &ring{slots: unsafe.Pointer(&slots[0]), mask: 7}
	for h := uint64(0); h < 20; h++ {
		for n := 1; n <= 8; n++ {
			out := make([]uint64, n)
			r.copySlots(out, h)
			for i, v := range out {
				if want := uint64(100 + (h+uint64(i))%8); v != want {
					t.Fatalf("h=%d n=%d: out[%d] = %d, want %d", h, n, i, v, want)
				}
			}
		}
	}
}

func TestStatusReportsTheServingDaemon(t *testing.T) {
	c := open(t, startDaemon(t))
	id, _ := c.Next()
	s, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	fields, err := c.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != "serving" || s.Health != "serving" || s.ReasonCode != "none" ||
		s.Machine != fields.Machine || s.EpochUnixMs != DefaultEpoch.UnixMilli() ||
		s.PID == 0 || s.RingCapacity == 0 || s.FreshnessBoundMs == 0 || s.PublishedTotal == 0 ||
		s.ClientTaken != 1 {
		t.Fatalf("status %+v", s)
	}
	// The daemon's own answer over its control socket (docs/control-protocol.md); its
	// numbers may be up to ~50 ms older than the segment's.
	ctl := s.Control
	if ctl == nil {
		t.Fatalf("no control status: %s", s.ControlError)
	}
	if ctl.State != "serving" || ctl.PID != int64(s.PID) || ctl.Machine != s.Machine ||
		ctl.RingCapacity != s.RingCapacity || ctl.RuntimeDir == "" || ctl.LastIssuedID == 0 ||
		ctl.Version == "" {
		t.Fatalf("control status %+v (segment %+v, id %d)", ctl, s, id)
	}
	// Counts reach the daemon through the service slot; its status folds them in by name.
	deadline := time.Now().Add(10 * time.Second)
	for s.Control.Services["orders"] < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never counted the take: services %v", s.Control.Services)
		}
		time.Sleep(20 * time.Millisecond)
		if s, err = c.Status(); err != nil || s.Control == nil {
			t.Fatalf("%v %s", err, s.ControlError)
		}
	}
}

// Every key of the real daemon's status reply (protocol/control_protocol.cc, the one
// definition) has its field in ControlStatus, so no fact is dropped on the way into Go.
func TestControlStatusHasAFieldForEveryKeyTheDaemonSends(t *testing.T) {
	d := startDaemon(t)
	conn, err := net.DialTimeout("unix", filepath.Join(d.runtimeDir, "control.sock"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("{\"command\":\"status\"}\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var reply map[string]json.RawMessage
	if err := json.Unmarshal(line, &reply); err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{"ok": true, "last_issued_id": true} // read beside the struct
	typ := reflect.TypeOf(ControlStatus{})
	for i := 0; i < typ.NumField(); i++ {
		fields[strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	for key := range reply {
		if !fields[key] {
			t.Errorf("the daemon sends %q, which ControlStatus has no field for", key)
		}
	}
	if len(reply) < 30 {
		t.Fatalf("a reply of %d keys: %s", len(reply), line)
	}
}

func TestStatusOfAStoppedDaemonHasNoControlPart(t *testing.T) {
	d := startDaemon(t)
	c := open(t, d)
	d.stop()
	s, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if s.State != "stopped" || s.Control != nil || s.ControlError == "" {
		t.Fatalf("status %+v", s)
	}
}

// The daemon's count of a service is exact once its Clients closed: N IDs taken by four
// goroutines (singles and batches) are N counted, none lost in the per-goroutine shards
// and none counted twice. While open, the count reaches the slot within about
// publishEvery.
func TestTheDaemonCountsExactlyWhatWasTakenOnceClosed(t *testing.T) {
	d := startDaemon(t)
	c, err := Open("counted", WithRuntimeDir(d.runtimeDir), WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			batch := make([]uint64, 1+g*7)
			for i := 0; i < 500; i++ {
				if i%2 == 0 {
					if _, err := c.Next(); err != nil {
						t.Error(err)
						return
					}
					total.Add(1)
				} else {
					n, err := c.NextBatch(batch)
					if err != nil {
						t.Error(err)
						return
					}
					total.Add(int64(n))
				}
			}
		}(g)
	}
	wg.Wait()
	want := uint64(total.Load())
	s, err := c.Status()
	if err != nil || s.ClientTaken != want {
		t.Fatalf("the client counts %d, it took %d (%v)", s.ClientTaken, want, err)
	}
	services := func() map[string]uint64 {
		ctl, err := queryControl(d.runtimeDir)
		if err != nil {
			t.Fatal(err)
		}
		return ctl.Services
	}
	for deadline := time.Now().Add(10 * time.Second); services()["counted"] != want; {
		if time.Now().After(deadline) {
			t.Fatalf("while open, the daemon counts %d of %d", services()["counted"], want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// One more take, then Close: the last one is published by Close, not by the ticker.
	if _, err := c.Next(); err != nil {
		t.Fatal(err)
	}
	want++
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); services()["counted"] != want; {
		if got := services()["counted"]; got > want || time.Now().After(deadline) {
			t.Fatalf("after Close the daemon counts %d, %d were taken", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A restarted daemon serves a fresh segment (a new ring file and region): a Client of the
// old one attaches to the new one on its next take, and its IDs keep growing.
func TestATakeAfterARestartAttachesTheNewSegment(t *testing.T) {
	d := startDaemon(t)
	c := open(t, d, WithTimeout(5*time.Second))
	before, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	d.stop()
	if _, err := c.Next(); !errors.Is(err, ErrDaemonStopped) {
		// IDs the stopped daemon left are still taken; drain to the stop.
		for i := 0; i < 10_000_000 && err == nil; i++ {
			_, err = c.Next()
		}
		wantError(t, err, ErrDaemonStopped, statusDaemonStopped, "daemon_stopped")
	}
	d.start()
	d.waitReady()
	after, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("ID %d after the restart, %d before", after, before)
	}
	c.mu.Lock()
	attachments := len(c.attachments)
	c.mu.Unlock()
	if attachments != 2 {
		t.Fatalf("%d attachments, want 2 (the first segment and the restarted daemon's)", attachments)
	}
}

// Close beside takes, and beside another Close: every take returns an ID or ErrClosed,
// never a panic (a nil attachment), a fault (an unmapped page) or a "truncated" error, and
// no ID twice. Run under the race detector by go_test_race, where an unsynchronized
// closed flag fails too. 20 rounds of 4 taking goroutines and 2 closers.
func TestCloseIsSafeBesideTakesAndAnotherClose(t *testing.T) {
	d := startDaemon(t)
	seen := map[uint64]bool{}
	var mu sync.Mutex
	for round := 0; round < 20; round++ {
		c, err := Open("orders", WithRuntimeDir(d.runtimeDir))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(batch bool) {
				defer wg.Done()
				<-start
				ids := make([]uint64, 16)
				for {
					var got []uint64
					var err error
					if batch {
						var n int
						n, err = c.NextBatch(ids)
						got = ids[:n]
					} else {
						var id uint64
						id, err = c.Next()
						got = []uint64{id}
					}
					if err == ErrClosed {
						return
					}
					if err != nil {
						t.Errorf("a take beside Close: %v", err)
						return
					}
					mu.Lock()
					for _, id := range got {
						if seen[id] {
							t.Errorf("ID %d twice", id)
						}
						seen[id] = true
					}
					mu.Unlock()
				}
			}(g%2 == 1)
		}
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				time.Sleep(time.Millisecond)
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		runtime.GC() // the finalizer unmaps the segments nothing refers to any more
	}
	t.Logf("%d IDs in 20 rounds, none twice", len(seen))
}

func TestCloseIsIdempotentAndLaterCallsFail(t *testing.T) {
	c := open(t, startDaemon(t))
	if c.Close() != nil || c.Close() != nil {
		t.Fatal("Close failed")
	}
	_, err := c.Next()
	wantError(t, err, ErrClosed, 2, "invalid_argument")
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatal("ErrClosed is not ErrInvalidArgument")
	}
	if _, err := c.NextBatch(make([]uint64, 3)); err != ErrClosed {
		t.Fatal(err)
	}
	if _, err := c.Status(); err != ErrClosed {
		t.Fatal(err)
	}
	if _, err := c.Decode(1); err != ErrClosed {
		t.Fatal(err)
	}
}

func TestGoroutinesShareOneClient(t *testing.T) {
	c := open(t, startDaemon(t), WithTimeout(5*time.Second))
	taken := make([][]uint64, 4)
	var wg sync.WaitGroup
	for g := range taken {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			batch := make([]uint64, 7)
			for i := 0; i < 2000; i++ {
				if i%2 == 1 {
					id, err := c.Next()
					if err != nil {
						t.Error(err)
						return
					}
					taken[g] = append(taken[g], id)
				} else {
					n, err := c.NextBatch(batch)
					if err != nil {
						t.Error(err)
						return
					}
					taken[g] = append(taken[g], batch[:n]...)
				}
			}
		}(g)
	}
	wg.Wait()
	checkUniqueAndOrdered(t, taken)
}

func checkUniqueAndOrdered(t *testing.T, taken [][]uint64) int {
	t.Helper()
	seen := make(map[uint64]struct{})
	for g, ids := range taken {
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("taker %d: ID %d after %d", g, id, ids[i-1])
			}
			if _, dup := seen[id]; dup {
				t.Fatalf("duplicate ID %d", id)
			}
			seen[id] = struct{}{}
		}
	}
	return len(seen)
}

func TestDecodeSplitsAnID(t *testing.T) {
	d, err := Decode(1<<22 | 5<<12 | 7)
	if err != nil {
		t.Fatal(err)
	}
	want := Decoded{Time: DefaultEpoch.Add(time.Millisecond), UnixMs: DefaultEpoch.UnixMilli() + 1,
		Machine: 5, Sequence: 7}
	if d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	d, err = DecodeWithEpoch(2<<22, time.Unix(0, 0))
	if err != nil || d.UnixMs != 2 {
		t.Fatalf("%+v %v", d, err)
	}
	_, err = Decode(1 << 63)
	wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
	_, err = DecodeWithEpoch(1, time.Unix(-5, 0))
	wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
}

func TestBoundsGivesTheIDsOfARange(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	b, err := Bounds(start, start.Add(999*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := Decode(b.FirstID)
	last, _ := Decode(b.LastID)
	if !b.First.Equal(start) || !first.Time.Equal(start) || first.Machine != 0 ||
		first.Sequence != 0 || !last.Time.Equal(b.Last) || last.Machine != 1023 ||
		last.Sequence != 4095 || !b.Last.Equal(start.Add(999*time.Millisecond)) {
		t.Fatalf("%+v", b)
	}
	_, err = Bounds(start, start.Add(-time.Millisecond))
	wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
	_, err = Bounds(time.Unix(0, 0), time.Unix(1, 0))
	wantError(t, err, ErrTimeOutOfRange, 16, "time_out_of_range")
	b, err = BoundsWithEpoch(time.Unix(0, 0), time.Unix(0, 0), time.Unix(0, 0))
	if err != nil || b.FirstID != 0 || b.LastID != 1<<22-1 {
		t.Fatalf("%+v %v", b, err)
	}
}

// Decode and Bounds in a layout other than the default split the same 63 bits elsewhere.
func TestALayoutDecodesAndBoundsByItsBits(t *testing.T) {
	wide := Layout{Epoch: DefaultEpoch, TimeBits: 41, MachineBits: 16, SequenceBits: 6}
	d, err := wide.Decode(1<<22 | 65535<<6 | 63)
	if err != nil || d.UnixMs != DefaultEpoch.UnixMilli()+1 || d.Machine != 65535 || d.Sequence != 63 {
		t.Fatalf("%+v %v", d, err)
	}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	b, err := wide.Bounds(start, start)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := wide.Decode(b.LastID)
	if b.LastID-b.FirstID != 1<<22-1 || last.Machine != 65535 || last.Sequence != 63 {
		t.Fatalf("%+v, last %+v", b, last)
	}
	for _, bad := range []Layout{{DefaultEpoch, 41, 17, 6}, {DefaultEpoch, 39, 12, 12},
		{DefaultEpoch, 45, 12, 6}, {DefaultEpoch, 41, 17, 5}} {
		_, err = bad.Decode(1)
		wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
		_, err = bad.Bounds(start, start)
		wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
	}
	// As sf_decode_in: the bits are judged before the ID, so a bad layout is named first.
	_, err = Layout{DefaultEpoch, 41, 17, 6}.Decode(1 << 63)
	if e, ok := err.(*Error); !ok || !strings.Contains(e.Message, "not a layout: 41/17/6") {
		t.Fatalf("a bad layout and no ID: %v, want the layout named", err)
	}
	if DefaultLayout.String() != "41/10/12" {
		t.Fatalf("the default layout is %v", DefaultLayout)
	}
}

func TestOpenRefusesABadServiceName(t *testing.T) {
	d := startDaemon(t)
	for _, name := range []string{"", "Orders", "a b", strings.Repeat("x", 64)} {
		_, err := Open(name, WithRuntimeDir(d.runtimeDir))
		wantError(t, err, ErrInvalidServiceName, 1, "invalid_service_name")
	}
	_, err := Open("or\x00ders", WithRuntimeDir(d.runtimeDir))
	wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
	_, err = Open("orders", WithRuntimeDir(d.runtimeDir), WithTimeout(-time.Second))
	wantError(t, err, ErrInvalidArgument, 2, "invalid_argument")
}

func TestOpenWithoutADaemonNamesThePath(t *testing.T) {
	d := newDaemon(t)
	os.MkdirAll(d.runtimeDir, 0o755)
	_, err := Open("orders", WithRuntimeDir(d.runtimeDir))
	e := wantError(t, err, ErrDaemonNotRunning, 3, "daemon_not_running")
	if !errors.Is(err, ErrUnavailable) || !contains(e.Message, d.runtimeDir) {
		t.Fatalf("%v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestOpenWithRemotesAndNoDaemonFailsOnTake(t *testing.T) {
	d := newDaemon(t)
	os.MkdirAll(d.runtimeDir, 0o755)
	c, err := Open("orders", WithRuntimeDir(d.runtimeDir), WithRemotes("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Next(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

func TestOpenRefusesAnUntrustedSegment(t *testing.T) {
	d := newDaemon(t)
	os.MkdirAll(filepath.Join(d.runtimeDir, "snowflake.ring"), 0o755)
	_, err := Open("orders", WithRuntimeDir(d.runtimeDir))
	wantError(t, err, ErrUntrustedSegment, 7, "untrusted_segment")
}

func TestOpenRefusesACorruptSegment(t *testing.T) {
	d := startDaemon(t)
	d.stop()
	f, err := os.OpenFile(filepath.Join(d.runtimeDir, "snowflake.ring"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 64), 0) // the magic and format version
	f.Close()
	_, err = Open("orders", WithRuntimeDir(d.runtimeDir))
	if !errors.Is(err, ErrCorruptSegment) && !errors.Is(err, ErrIncompatibleVersion) {
		t.Fatalf("got %v, want ErrCorruptSegment", err)
	}
}

func TestTakeFromAStoppedDaemonFailsWithErrDaemonStopped(t *testing.T) {
	d := startDaemon(t)
	c := open(t, d)
	d.stop()
	var err error
	for i := 0; i < 10_000_000 && err == nil; i++ {
		_, err = c.Next()
	}
	wantError(t, err, ErrDaemonStopped, 11, "daemon_stopped")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatal("ErrDaemonStopped is not ErrUnavailable")
	}
}

// A paused daemon's error carries its own words, the segment's status text (LAYOUT.md §3),
// after "snowflaked says:", as the C++ client's. The daemon is paused for real: its state
// file's path is made a directory, so it cannot renew its high-water reservation.
func TestTakeFromAPausedDaemonSaysWhatTheDaemonSays(t *testing.T) {
	d := newDaemon(t)
	d.config = "[persistence]\nreservation_ms = 100\n" // pause soon after the renewals fail
	d.start()
	d.waitReady()
	c := open(t, d, WithTimeout(0))
	if s, err := c.Status(); err != nil || s.StatusText != "" {
		t.Fatalf("a serving daemon's status text: %q, %v", s.StatusText, err)
	}
	stateFile := filepath.Join(d.root, "state", "high-water.json")
	// The daemon renames a new file into place every few renewals: one may land between the
	// remove and the mkdir. Retry until the directory stands where the file was.
	var blocked error
	for attempt := 0; attempt < 100; attempt++ {
		if blocked = os.Remove(stateFile); blocked != nil && !errors.Is(blocked, os.ErrNotExist) {
			t.Fatal(blocked)
		}
		if blocked = os.MkdirAll(filepath.Join(stateFile, "in-the-way"), 0o755); blocked == nil {
			break
		}
	}
	if blocked != nil {
		t.Fatalf("cannot put a directory where %s was: %v", stateFile, blocked)
	}
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if _, err = c.Next(); errors.Is(err, ErrDaemonPaused) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	e := wantError(t, err, ErrDaemonPaused, statusDaemonPaused, "daemon_paused")
	says := "; snowflaked says: state file " + stateFile + "; last error: state file: " +
		"cannot save the high-water mark: rename to " + stateFile + ": Is a directory" +
		"; fail over, it resumes by itself"
	if !strings.HasPrefix(e.Message, "snowflaked paused generation: cannot persist") ||
		!strings.HasSuffix(e.Message, says) {
		t.Fatalf("got %q, want it to end with %q", e.Message, says)
	}
	s, err := c.Status()
	if err != nil || s.State != "paused" ||
		!strings.HasPrefix(s.StatusText, "state file "+stateFile+"; last error: ") {
		t.Fatalf("status of the paused daemon: state %q, text %q, %v", s.State, s.StatusText, err)
	}
	t.Logf("paused: %s", e.Message)
	// Out of the way again, the daemon resumes by itself and has nothing more to say.
	if err := os.RemoveAll(stateFile); err != nil {
		t.Fatal(err)
	}
	d.waitServing()
	if s, err := c.Status(); err != nil || s.StatusText != "" {
		t.Fatalf("the resumed daemon's status text: %q, %v", s.StatusText, err)
	}
}

func TestTakeFromAStoppedProcessFailsWithErrDaemonNotHeartbeating(t *testing.T) {
	d := startDaemon(t)
	c := open(t, d, WithTimeout(30*time.Second))
	d.signal(syscall.SIGSTOP)
	defer d.signal(syscall.SIGCONT)
	ids := make([]uint64, 1<<16)
	var err error
	for i := 0; i < 100_000_000 && err == nil; i++ {
		_, err = c.NextBatch(ids)
	}
	wantError(t, err, ErrDaemonNotHeartbeating, 12, "daemon_not_heartbeating")
}

// A healthy daemon's ring found empty is ErrRingEmpty (retry here), not a failover.
func TestTakeFromAnEmptyRingWithoutWaitingIsErrRingEmpty(t *testing.T) {
	c := open(t, startDaemon(t), WithTimeout(0))
	ids := make([]uint64, 1<<20)
	var err error
	for i := 0; i < 1_000_000 && err == nil; i++ {
		_, err = c.NextBatch(ids)
	}
	e := wantError(t, err, ErrRingEmpty, 17, "ring_empty")
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTimedOut) || Action(err) != "retry_here" {
		t.Errorf("ErrUnavailable %v, ErrTimedOut %v, action %q", errors.Is(err, ErrUnavailable),
			errors.Is(err, ErrTimedOut), Action(err))
	}
	if !strings.HasSuffix(e.Message, "retry here") {
		t.Errorf("message %q does not end with retry here", e.Message)
	}
}

// Two processes (this test binary again) x 4 goroutines take 1 M IDs (100 k with -short):
// no duplicate, each goroutine's IDs strictly increasing.
func TestTwoProcessesOfFourGoroutinesTakeAMillionUniqueOrderedIDs(t *testing.T) {
	const processes, goroutines = 2, 4
	total := 1_000_000
	if testing.Short() {
		total = 100_000 // under the race detector
	}
	d := startDaemon(t)
	seed := time.Now().UnixNano()
	if s := os.Getenv("SNOWFLAKE_STRESS_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (rerun with SNOWFLAKE_STRESS_SEED=%d)", seed, seed)
	perGoroutine := total / (processes * goroutines)
	var cmds []*exec.Cmd
	for p := 0; p < processes; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SNOWFLAKE_GO_WORKER=1",
			"SNOWFLAKE_GO_WORKER_DIR="+d.runtimeDir,
			"SNOWFLAKE_GO_WORKER_OUT="+filepath.Join(d.root, fmt.Sprintf("ids%d", p)),
			fmt.Sprintf("SNOWFLAKE_GO_WORKER_ARGS=%d %d %d", goroutines, perGoroutine, seed+int64(p)))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		done := make(chan error, 1)
		go func(cmd *exec.Cmd) { done <- cmd.Wait() }(cmd)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("a worker failed (seed %d): %v", seed, err)
			}
		case <-time.After(240 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("a worker hung (seed %d)", seed)
		}
	}
	var taken [][]uint64
	for p := 0; p < processes; p++ {
		for g := 0; g < goroutines; g++ {
			data, err := os.ReadFile(filepath.Join(d.root, fmt.Sprintf("ids%d.%d", p, g)))
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]uint64, len(data)/8)
			for i := range ids {
				ids[i] = binary.LittleEndian.Uint64(data[8*i:])
			}
			if len(ids) != perGoroutine {
				t.Fatalf("process %d goroutine %d took %d IDs, want %d", p, g, len(ids), perGoroutine)
			}
			taken = append(taken, ids)
		}
	}
	if n := checkUniqueAndOrdered(t, taken); n != total {
		t.Fatalf("%d unique IDs, want %d (seed %d)", n, total, seed)
	}
}

func stressWorker() int {
	var goroutines, count int
	var seed int64
	fmt.Sscan(os.Getenv("SNOWFLAKE_GO_WORKER_ARGS"), &goroutines, &count, &seed)
	c, err := Open("stress", WithRuntimeDir(os.Getenv("SNOWFLAKE_GO_WORKER_DIR")),
		WithTimeout(10*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	failed := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed*1000 + int64(g)))
			ids := make([]uint64, 0, count)
			batch := make([]uint64, 1000)
			// A daemon that cannot serve for a moment (on a loaded machine its heartbeat may
			// lag past its 50 ms liveness limit) is retried, as a service would: the
			// property is uniqueness and order, not availability.
			var retryUntil time.Time // 30 s after the first outage, then the error stands
			unavailable := func(err error) bool {
				if retryUntil.IsZero() {
					retryUntil = time.Now().Add(30 * time.Second)
				}
				if !(errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRingEmpty)) ||
					time.Now().After(retryUntil) {
					return false
				}
				time.Sleep(time.Millisecond)
				return true
			}
			for len(ids) < count {
				if rng.Intn(2) == 0 {
					id, err := c.Next()
					if err != nil && unavailable(err) {
						continue
					}
					if err != nil {
						failed <- err
						return
					}
					ids = append(ids, id)
				} else {
					want := 1 + rng.Intn(1000)
					if want > count-len(ids) {
						want = count - len(ids)
					}
					n, err := c.NextBatch(batch[:want])
					if err != nil && unavailable(err) {
						continue
					}
					if err != nil {
						failed <- err
						return
					}
					ids = append(ids, batch[:n]...)
				}
			}
			data := make([]byte, 8*len(ids))
			for i, id := range ids {
				binary.LittleEndian.PutUint64(data[8*i:], id)
			}
			if err := os.WriteFile(fmt.Sprintf("%s.%d", os.Getenv("SNOWFLAKE_GO_WORKER_OUT"), g),
				data, 0o644); err != nil {
				failed <- err
			}
		}(g)
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// SIGKILL while 4 goroutines take: each gets an error (never a hang) and no ID returned
// is a duplicate or older than the freshness bound.
func TestSigkillWhileTakingFailsAndHandsOutNoStaleID(t *testing.T) {
	d := startDaemon(t)
	c := open(t, d, WithTimeout(time.Second))
	s, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	type take struct {
		id       uint64
		beforeMs int64
	}
	taken := make([][]take, 4)
	results := make(chan error, 4)
	for g := range taken {
		go func(g int) {
			batch := make([]uint64, 100)
			for {
				before := time.Now().UnixMilli()
				var n int
				var err error
				if g%2 == 1 {
					n, err = c.NextBatch(batch)
				} else {
					batch[0], err = c.Next()
					n = 1
				}
				if err != nil {
					results <- err
					return
				}
				for _, id := range batch[:n] {
					taken[g] = append(taken[g], take{id, before})
				}
			}
		}(g)
	}
	time.Sleep(time.Duration(100+rand.New(rand.NewSource(seed)).Intn(400)) * time.Millisecond)
	d.signal(syscall.SIGKILL)
	killedMs := time.Now().UnixMilli()
	for range taken {
		select {
		case err := <-results:
			if !errors.Is(err, ErrDaemonDead) && !errors.Is(err, ErrDaemonNotHeartbeating) {
				t.Fatalf("got %v, want ErrDaemonDead or ErrDaemonNotHeartbeating", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("a take hung after SIGKILL (seed %d)", seed)
		}
	}
	ids := make([][]uint64, len(taken))
	for g, takes := range taken {
		for _, tk := range takes {
			made, _ := Decode(tk.id)
			// Never older than the bound when handed out (10 ms for the coarse clock's tick),
			// never from after the kill.
			if tk.beforeMs-made.UnixMs > int64(s.FreshnessBoundMs)+10 || made.UnixMs > killedMs+10 {
				t.Fatalf("ID %d of %d ms taken at %d ms (bound %d ms, killed at %d)", tk.id,
					made.UnixMs, tk.beforeMs, s.FreshnessBoundMs, killedMs)
			}
			ids[g] = append(ids[g], tk.id)
		}
	}
	if checkUniqueAndOrdered(t, ids) == 0 {
		t.Fatal("no ID was taken before the kill")
	}
	_, err = c.Next()
	wantError(t, err, ErrDaemonDead, 13, "daemon_dead")
}

// Every C ABI status has its sentinel and the library's own code (sf_status_str, from the
// one vocabulary table), and no two statuses share a code.
func TestEveryStatusHasItsSentinelAndCode(t *testing.T) {
	if len(sentinels) != lastStatus+1 {
		t.Fatalf("%d sentinels for statuses 0..%d", len(sentinels), lastStatus)
	}
	seen := map[string]int{}
	for s := 1; s <= lastStatus; s++ {
		code := statusCode(s)
		if code == "" || code == "unknown_status" || strings.ToLower(code) != code {
			t.Errorf("status %d has code %q", s, code)
		}
		if other, dup := seen[code]; dup {
			t.Errorf("statuses %d and %d share code %q", other, s, code)
		}
		seen[code] = s
		if err := (&Error{Status: s, Code: code, Message: "m"}); sentinels[s] == nil ||
			!errors.Is(err, sentinels[s]) {
			t.Errorf("status %d (%s) does not match its sentinel", s, code)
		}
	}
	if statusCode(lastStatus+1) != "unknown_status" {
		t.Errorf("a status past the last has code %q", statusCode(lastStatus+1))
	}
}

// The status text's reader on a header in memory (LAYOUT.md §3, lines 5-11): NUL-padded
// text, a text of all 448 bytes without a terminator, and no text while the sequence word
// is odd (a write under way, or a writer that died mid-write).
func TestStatusTextReaderFollowsTheSeqlock(t *testing.T) {
	words := make([]uint64, 4096/8) // 8-byte aligned, as the mapping is
	header := region(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 4096))
	sut := &ring{seg: &segment{header: header}}
	write := func(seq uint64, text string) {
		copy(header[offStatusText:offStatusText+statusTextBytes], make([]byte, statusTextBytes))
		copy(header[offStatusText:], text)
		*header.u64(offStatusTextSeq) = seq
	}
	for _, row := range []struct {
		seq    uint64
		text   string
		want   string
		wantOK bool
	}{
		{0, "", "", true},
		{2, "register memory; last error: …", "register memory; last error: …", true},
		{4, strings.Repeat("é", statusTextBytes/2), strings.Repeat("é", statusTextBytes/2), true},
		{5, "half written", "", false},
	} {
		write(row.seq, row.text)
		got, ok := sut.statusText()
		if got != row.want || ok != row.wantOK {
			t.Fatalf("seq %d, text %q: read %q, %v; want %q, %v", row.seq, row.text, got, ok,
				row.want, row.wantOK)
		}
		if says := daemonSays(sut); (says != "") != (row.want != "") ||
			!strings.HasSuffix(says, row.want) {
			t.Fatalf("daemonSays: %q for %q", says, row.want)
		}
	}
}

// Action is the vocabulary's column (checked against C++ by the conformance suite), and
// ErrUnavailable matches exactly the errors whose action is fail_over.
func TestActionIsTheVocabularysAndErrUnavailableFollowsIt(t *testing.T) {
	if Action(nil) != "none" || Action(errors.New("other")) != "fix_the_host" {
		t.Fatalf("Action(nil) %q, Action(foreign) %q", Action(nil), Action(errors.New("other")))
	}
	for status := 1; status <= lastStatus; status++ {
		err := newError(status, "m")
		if got := Action(err); got != statusActions[status] {
			t.Errorf("%s: Action %q, want %q", err.Code, got, statusActions[status])
		}
		if errors.Is(err, ErrUnavailable) != (Action(err) == "fail_over") {
			t.Errorf("%s: ErrUnavailable %v, action %q", err.Code, errors.Is(err, ErrUnavailable),
				Action(err))
		}
	}
	if Action(fmt.Errorf("wrapped: %w", newError(statusDaemonPaused, "m"))) != "fail_over" {
		t.Error("a wrapped paused error is not fail_over")
	}
	ringEmpty := fmt.Errorf("wrapped: %w", newError(statusRingEmpty, "m"))
	if Action(ringEmpty) != "retry_here" || errors.Is(ringEmpty, ErrUnavailable) ||
		!errors.Is(ringEmpty, ErrRingEmpty) {
		t.Errorf("ring_empty: action %q, ErrUnavailable %v, ErrRingEmpty %v", Action(ringEmpty),
			errors.Is(ringEmpty, ErrUnavailable), errors.Is(ringEmpty, ErrRingEmpty))
	}
}
