package snowflake

import (
	"crypto/rand"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks scripts/bench runs (-bench, with SNOWFLAKE_BENCH_RUNTIME_DIR naming a
// serving daemon's runtime directory), each beside its same-run baselines.
//
// As take_bench does, each runs in timed bursts of at most burst calls with an untimed
// pause before each, until the ring holds the burst's IDs (read from the segment): a
// sustained series, or a burst larger than the ring's fill, would measure the layout's
// cap of 4,096 IDs per ms (244 ns per ID) instead of a take. The baselines run in the
// same bursts and pauses.

const (
	burst = 2000 // calls per timed burst (IDs: below the ring's 4,096)
	pause = 3 * time.Millisecond
)

// retry calls take until it succeeds. On a shared machine a loaded daemon may pause
// briefly (a slow reservation renewal); that wait is not a take's cost, so it is
// untimed, and only a longer outage (5 s) or another error fails the benchmark.
func retry(b *testing.B, take func() error) {
	if take() == nil {
		return // the timed path: no clock read
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := take()
		if err == nil {
			return
		}
		if !(errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRingEmpty)) ||
			time.Now().After(deadline) {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(time.Millisecond)
		b.StartTimer()
	}
}

// bursts runs fn b.N times in bursts of at most per calls, pausing (untimed) before
// each; with c, until its ring holds idsPerCall IDs per call of the burst (at most 20 ms).
func bursts(b *testing.B, per int, c *Client, idsPerCall int, fn func()) {
	for i := 0; i < b.N; {
		b.StopTimer()
		time.Sleep(pause)
		n := per
		if c != nil {
			n = awaitFill(b, c, per, idsPerCall)
		}
		b.StartTimer()
		for end := i + n; i < end && i < b.N; i++ {
			fn()
		}
	}
}

// awaitFill returns how many calls of idsPerCall IDs the ring now holds (1..per), waiting
// up to 20 ms for per calls' worth.
func awaitFill(b *testing.B, c *Client, per, idsPerCall int) int {
	deadline := time.Now().Add(20 * time.Millisecond)
	for {
		n := int(c.ringFill()) / idsPerCall
		if n >= per || (time.Now().After(deadline) && n > 0) {
			if n > per {
				n = per
			}
			return n
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			return 1 // an empty ring the daemon does not top up: the take will wait
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func benchClient(b *testing.B) *Client {
	dir := os.Getenv("SNOWFLAKE_BENCH_RUNTIME_DIR")
	if dir == "" {
		b.Fatal("SNOWFLAKE_BENCH_RUNTIME_DIR must name a serving daemon's runtime directory")
	}
	c, err := Open("bench", WithRuntimeDir(dir), WithTimeout(5e9))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func BenchmarkNext(b *testing.B) {
	c := benchClient(b)
	b.ResetTimer()
	bursts(b, burst, c, 1, func() {
		retry(b, func() error {
			_, err := c.Next()
			return err
		})
	})
}

// Per call of 1000 IDs (scripts/bench divides by 1000).
func BenchmarkNextBatch1000(b *testing.B) {
	c := benchClient(b)
	ids := make([]uint64, 1000)
	b.ResetTimer()
	bursts(b, 2, c, 1000, func() {
		for got := 0; got < len(ids); {
			retry(b, func() error {
				n, err := c.NextBatch(ids[got:])
				got += n
				return err
			})
		}
	})
}

// What Go services write instead: a random (version 4) UUID from crypto/rand ...
func BenchmarkUUIDv4CryptoRand(b *testing.B) {
	var u [16]byte
	bursts(b, burst, nil, 0, func() {
		if _, err := rand.Read(u[:]); err != nil {
			b.Fatal(err)
		}
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
	})
}

// ... and a process-local counter.
func BenchmarkAtomicAddUint64(b *testing.B) {
	var n uint64
	bursts(b, burst, nil, 0, func() { atomic.AddUint64(&n, 1) })
}
