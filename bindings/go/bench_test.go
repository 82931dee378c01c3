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
// As take_bench does, each runs in timed bursts of burst calls with an untimed pause
// before each, so the daemon refills the ring: a sustained series would measure the
// layout's cap of 4,096 IDs per ms (244 ns per ID) instead of a take. The baselines run
// in the same bursts and pauses.

const (
	burst = 2000 // calls per timed burst (IDs: below the ring's 4,096)
	pause = 3 * time.Millisecond
)

// retry calls take until it succeeds. On a shared machine a loaded daemon may pause
// briefly (a slow reservation renewal); that wait is not a take's cost, so it is
// untimed, and only a longer outage (5 s) or another error fails the benchmark.
func retry(b *testing.B, take func() error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := take()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(time.Millisecond)
		b.StartTimer()
	}
}

// bursts runs fn b.N times, pausing (untimed) before every `per` calls.
func bursts(b *testing.B, per int, fn func()) {
	for i := 0; i < b.N; i++ {
		if i%per == 0 {
			b.StopTimer()
			time.Sleep(pause)
			b.StartTimer()
		}
		fn()
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
	bursts(b, burst, func() {
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
	bursts(b, 2, func() {
		for got := 0; got < len(ids); {
			retry(b, func() error {
				n, err := c.NextBatch(ids[got:])
				got += n
				return err
			})
		}
	})
}

// The floor of Next: one cgo call of an empty C function.
func BenchmarkBareCgoCall(b *testing.B) {
	bursts(b, burst, bareCall)
}

// What Go services write instead: a random (version 4) UUID from crypto/rand ...
func BenchmarkUUIDv4CryptoRand(b *testing.B) {
	var u [16]byte
	bursts(b, burst, func() {
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
	bursts(b, burst, func() { atomic.AddUint64(&n, 1) })
}
