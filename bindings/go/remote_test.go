package snowflake

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A fake HTTP front on 127.0.0.1: each request is answered by the next reply of the list
// (the last one repeats). A reply makes the IDs of one millisecond, offset from now.
type fakeFront struct {
	mu      sync.Mutex
	replies []func(count int) string
	served  int
}

func (f *fakeFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	reply := f.replies[len(f.replies)-1]
	if f.served < len(f.replies) {
		reply = f.replies[f.served]
	}
	f.served++
	f.mu.Unlock()
	var count int
	fmt.Sscan(r.URL.Query().Get("count"), &count)
	if r.URL.Path != "/v1/ids" || r.URL.Query().Get("service") != "orders" || count < 1 {
		http.Error(w, `{"error":{"code":"bad_query"}}`, http.StatusBadRequest)
		return
	}
	fmt.Fprint(w, reply(count))
}

// idsAt makes count IDs of machine 9 at now+offset by epoch, from sequence `first`.
func idsAt(epoch time.Time, offset time.Duration, first int) func(int) string {
	return func(count int) string {
		ms := uint64(time.Now().Add(offset).UnixMilli() - epoch.UnixMilli())
		var b strings.Builder
		for i := 0; i < count; i++ {
			fmt.Fprintf(&b, "%d\n", ms<<22|9<<12|uint64(first+i))
		}
		return b.String()
	}
}

// A Client with only a remote (no local daemon), as a service on a host whose daemon is down.
func remoteClient(t *testing.T, front *fakeFront) *Client {
	t.Helper()
	server := httptest.NewServer(front)
	t.Cleanup(server.Close)
	dir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(dir, 0o755)
	c, err := Open("orders", WithRuntimeDir(dir),
		WithRemotes(strings.TrimPrefix(server.URL, "http://")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestFailoverTakesIncreasingIDsFromARemote(t *testing.T) {
	c := remoteClient(t, &fakeFront{replies: []func(int) string{idsAt(DefaultEpoch, 0, 0)}})
	first, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	// Every reply starts at sequence 0 of its millisecond: within the same millisecond the
	// ID at or below `first` is dropped and the rest returned.
	ids := make([]uint64, 10)
	n, err := c.NextBatch(ids)
	if err != nil || n < 9 {
		t.Fatalf("NextBatch: %d %v", n, err)
	}
	for i, id := range ids[:n] {
		if id <= first || (i > 0 && id <= ids[i-1]) {
			t.Fatalf("NextBatch: %v after %d", ids[:n], first)
		}
	}
}

func TestFailoverNeverReturnsAnIDAtOrBelowTheLastOne(t *testing.T) {
	// The second and every later reply repeats the first millisecond's IDs from sequence 0.
	start := time.Now()
	epochMs := DefaultEpoch.UnixMilli()
	fixed := func(count int) string {
		ms := uint64(start.UnixMilli() - epochMs)
		var b strings.Builder
		for i := 0; i < count; i++ {
			fmt.Fprintf(&b, "%d\n", ms<<22|9<<12|uint64(i))
		}
		return b.String()
	}
	c := remoteClient(t, &fakeFront{replies: []func(int) string{fixed}})
	ids := make([]uint64, 5)
	if n, err := c.NextBatch(ids); err != nil || n != 5 {
		t.Fatalf("%d %v", n, err)
	}
	_, err := c.Next()
	if !errors.Is(err, ErrDaemonNotRunning) || !strings.Contains(err.Error(), "stayed at or below") {
		t.Fatalf("got %v, want a refusal of IDs at or below the last one", err)
	}
}

func TestFailoverRefusesIDsTooFarAhead(t *testing.T) {
	c := remoteClient(t, &fakeFront{replies: []func(int) string{idsAt(DefaultEpoch, 10*time.Second, 0)}})
	_, err := c.Next()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "ahead of this host's clock") {
		t.Fatalf("got %v, want a refusal of an ID 10 s ahead", err)
	}
}

func TestFailoverRefusesIDsOfAnotherEpoch(t *testing.T) {
	// A fleet whose epoch is a year earlier: its IDs of now read a year ahead here.
	c := remoteClient(t, &fakeFront{replies: []func(int) string{
		idsAt(DefaultEpoch.AddDate(-1, 0, 0), 0, 0)}})
	_, err := c.Next()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "its epoch or layout is not this client's") {
		t.Fatalf("got %v, want a refusal of another epoch's IDs", err)
	}
}

func TestFailoverRefusesOldIDs(t *testing.T) {
	c := remoteClient(t, &fakeFront{replies: []func(int) string{idsAt(DefaultEpoch, -10*time.Second, 0)}})
	_, err := c.Next()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "more than remote_max_age") {
		t.Fatalf("got %v, want a refusal of an ID 10 s old", err)
	}
}

// A pool of one remote, front, whose last returned ID is a remote's (machine 9) of this
// millisecond, as right after a failover; and that millisecond.
func poolAfterFailover(t *testing.T, front *fakeFront) (*remotePool, uint64) {
	t.Helper()
	server := httptest.NewServer(front)
	t.Cleanup(server.Close)
	p := newRemotePool("orders", []string{strings.TrimPrefix(server.URL, "http://")}, remoteTLS{},
		DefaultLayout, 0, 0)
	t.Cleanup(p.close)
	lastMs := uint64(time.Now().UnixMilli() - DefaultEpoch.UnixMilli())
	p.last.Store(lastMs<<22 | 9<<12 | 7)
	return p, lastMs
}

// A local ring a few milliseconds below the last ID a remote gave (right after a failover,
// or a local clock a little behind) is waited for on the ring, not left for the remote:
// asking the remote puts the last ID ahead of the ring again, and a client that did so
// stayed on its remotes for good. Here the ring's IDs are 5 ms below for 3 ms, then above;
// the front fails the test if it is asked at all.
func TestFailoverWaitsForARingAFewMillisecondsBehindInsteadOfAskingTheRemote(t *testing.T) {
	front := &fakeFront{replies: []func(int) string{idsAt(DefaultEpoch, 0, 0)}}
	p, lastMs := poolAfterFailover(t, front)

	caughtUpAt := time.Now().Add(3 * time.Millisecond)
	seq := uint64(0)
	takes := 0
	local := func(out []uint64) (int, error) {
		takes++
		ms := lastMs - 5
		if time.Now().After(caughtUpAt) {
			ms = lastMs + 1
		}
		for i := range out {
			out[i] = ms<<22 | 1<<12 | seq
			seq++
		}
		return len(out), nil
	}
	ids := make([]uint64, 8)
	n, err := p.take(ids, local)
	if err != nil || n < 1 {
		t.Fatalf("take: %d %v", n, err)
	}
	if got := ids[0] >> 22; got != lastMs+1 {
		t.Fatalf("the first ID is of ms %d, want the ring's %d once caught up", got, lastMs+1)
	}
	front.mu.Lock()
	defer front.mu.Unlock()
	if front.served != 0 {
		t.Fatalf("the remote was asked %d times while the ring was 5 ms behind", front.served)
	}
	t.Logf("caught up after %d takes of the ring", takes)
}

// Further behind than 10 ms (a local clock well behind the remote's), the remote serves.
func TestFailoverAsksTheRemoteWhenTheRingIsFarBehind(t *testing.T) {
	front := &fakeFront{replies: []func(int) string{idsAt(DefaultEpoch, 0, 0)}}
	p, lastMs := poolAfterFailover(t, front)
	local := func(out []uint64) (int, error) {
		out[0] = (lastMs-50)<<22 | 1<<12
		return 1, nil
	}
	ids := make([]uint64, 1)
	if n, err := p.take(ids, local); err != nil || n != 1 {
		t.Fatalf("take: %d %v", n, err)
	}
	if d, _ := Decode(ids[0]); d.Machine != 9 {
		t.Fatalf("got an ID of machine %d, want the remote's (9)", d.Machine)
	}
}

// A remote that refuses with Retry-After (the front's 429 `throttled`, its 503s) is skipped
// until then, not only for the breaker's first backoff (25-75 ms): asking sooner only adds
// to its load. A Retry-After past a minute counts as a minute.
func TestFailoverSkipsARemoteUntilItsRetryAfter(t *testing.T) {
	for _, row := range []struct {
		header string
		skip   time.Duration // at least
		most   time.Duration
	}{{"3", 2900 * time.Millisecond, 3 * time.Second}, {"86400", 59 * time.Second, time.Minute}} {
		var asked sync.Mutex
		served := 0
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked.Lock()
			served++
			asked.Unlock()
			w.Header().Set("Retry-After", row.header)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"code":"throttled","message":"over this client's rate"}}`)
		}))
		p := newRemotePool("orders", []string{strings.TrimPrefix(server.URL, "http://")},
			remoteTLS{}, DefaultLayout, 5*time.Second, 10*time.Second)
		ids := make([]uint64, 1)
		_, err := p.takeRemote(ids, newError(statusDaemonNotRunning, "no daemon"))
		if err == nil || !strings.Contains(err.Error(), "HTTP 429 throttled (Retry-After "+row.header+" s)") {
			t.Fatalf("Retry-After %s: got %v, want the 429 and its Retry-After named", row.header, err)
		}
		p.mu.Lock()
		skip := time.Until(p.endpoints[0].openUntil)
		p.mu.Unlock()
		if skip < row.skip || skip > row.most {
			t.Fatalf("Retry-After %s: the remote is skipped for %v, want %v to %v",
				row.header, skip, row.skip, row.most)
		}
		// The next take does not ask it.
		_, err = p.takeRemote(ids, newError(statusDaemonNotRunning, "no daemon"))
		asked.Lock()
		if served != 1 || err == nil || !strings.Contains(err.Error(), "skipped for") {
			t.Fatalf("Retry-After %s: asked %d times, then %v; want it skipped", row.header, served, err)
		}
		asked.Unlock()
		p.close()
		server.Close()
	}
}

// A Retry-After that is not delay-seconds (an HTTP-date, a sign, garbage) is ignored: the
// breaker's backoff applies.
func TestRetryAfterIsDelaySecondsOnly(t *testing.T) {
	for header, want := range map[string]time.Duration{
		"": 0, "0": 0, "-5": 0, "+5": 0, "5": 5 * time.Second, "2.5": 0, "x": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, "999999999": 86400 * time.Second,
	} {
		resp := &http.Response{Header: http.Header{}}
		if header != "" {
			resp.Header.Set("Retry-After", header)
		}
		if got := retryAfterOf(resp); got != want {
			t.Errorf("Retry-After %q: %v, want %v", header, got, want)
		}
	}
}

func TestOpenRefusesNegativeAndSubMillisecondRemoteTimeouts(t *testing.T) {
	_, err := Open("orders", WithRuntimeDir(t.TempDir()), WithRemotes("127.0.0.1:1"),
		WithRemoteTimeouts(-time.Millisecond, 0))
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "remote attempt timeout") {
		t.Fatalf("got %v, want the negative attempt timeout refused", err)
	}
	// Below a millisecond it would have become 0, the default 50 ms.
	_, err = Open("orders", WithRuntimeDir(t.TempDir()), WithRemotes("127.0.0.1:1"),
		WithRemoteTimeouts(0, 500*time.Microsecond))
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "at least 1 ms, not 500µs") {
		t.Fatalf("got %v, want a deadline under 1 ms refused", err)
	}
}
