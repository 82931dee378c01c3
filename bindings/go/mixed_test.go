//go:build mixedtakers

package snowflake

// The mixed-takers stress (ctest entry mixed_takers; built only with -tags mixedtakers, so
// the package's own test run does not start it). Property: C++, Python and Go takers in
// several processes on one daemon's ring, some of each kind SIGKILLed at random points,
// and the daemon SIGKILLed and restarted in every round while they take, never receive one
// ID twice, and each taker receives its IDs in strictly increasing order (so the restarted
// daemon's IDs are above every one its predecessor handed out). It asserts its size ($SNOWFLAKE_MIXED_IDS IDs checked, 10 M from ctest) and
// prints its seed, size and kill counts.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

func init() {
	if os.Getenv("SNOWFLAKE_MIXED_WORKER") != "" {
		os.Exit(mixedGoTaker(os.Args[len(os.Args)-4:]))
	}
}

// mixedGoTaker is the Go taker, with mixed_taker's arguments and output:
// RUNTIME_DIR OUT_FILE COUNT SEED.
func mixedGoTaker(args []string) int {
	count, _ := strconv.Atoi(args[2])
	seed, _ := strconv.ParseInt(args[3], 10, 64)
	rng := rand.New(rand.NewSource(seed))
	c, err := Open("mixed", WithRuntimeDir(args[0]), WithTimeout(10*time.Second), WithRemotes())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, err := os.Create(args[1])
	if err != nil {
		return 1
	}
	pending := make([]byte, 0, 9000*8)
	batch := make([]uint64, 1000)
	// A daemon that cannot serve for a moment (two cores shared by it and six takers may
	// delay its heartbeat past its liveness limit) is retried, as a service would.
	retries := 0
	unavailable := func(err error) bool {
		if !errors.Is(err, ErrUnavailable) || retries > 30000 {
			return false
		}
		retries++
		time.Sleep(time.Millisecond)
		return true
	}
	for taken := 0; taken < count; {
		if rng.Intn(2) == 0 {
			id, err := c.Next()
			if err != nil && unavailable(err) {
				continue
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			pending = binary.LittleEndian.AppendUint64(pending, id)
			taken++
		} else {
			want := 1 + rng.Intn(1000)
			if want > count-taken {
				want = count - taken
			}
			n, err := c.NextBatch(batch[:want])
			if err != nil && unavailable(err) {
				continue
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			for _, id := range batch[:n] {
				pending = binary.LittleEndian.AppendUint64(pending, id)
			}
			taken += n
		}
		if len(pending) >= 1024*8 {
			if _, err := out.Write(pending); err != nil {
				return 1
			}
			pending = pending[:0]
		}
	}
	if _, err := out.Write(pending); err != nil {
		return 1
	}
	return 0
}

type mixedWorker struct {
	kind   string
	out    string
	cmd    *exec.Cmd
	victim bool
	err    error
}

func TestMixedTakersShareOneDaemonWithoutDuplicates(t *testing.T) {
	target, err := strconv.Atoi(os.Getenv("SNOWFLAKE_MIXED_IDS"))
	if err != nil || target <= 0 {
		t.Fatal("SNOWFLAKE_MIXED_IDS must give the IDs to check (ctest sets it)")
	}
	cppTaker, pyTaker := os.Getenv("SNOWFLAKE_MIXED_CPP_TAKER"), os.Getenv("SNOWFLAKE_MIXED_PY_TAKER")
	python := os.Getenv("SNOWFLAKE_MIXED_PYTHON")
	if cppTaker == "" || pyTaker == "" || python == "" {
		t.Fatal("SNOWFLAKE_MIXED_CPP_TAKER, SNOWFLAKE_MIXED_PY_TAKER and SNOWFLAKE_MIXED_PYTHON " +
			"must name the takers (ctest sets them)")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("SNOWFLAKE_STRESS_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d (rerun with SNOWFLAKE_STRESS_SEED=%d), size %d IDs", seed, seed, target)
	d := startDaemon(t)
	deadline := time.Now().Add(240 * time.Second)

	kinds := []string{"cpp", "python", "go"}
	perWorker := target / 24
	if perWorker < 5000 {
		perWorker = 5000
	}
	kills := map[string]int{}
	daemonKills := 0
	taken := map[string]int{}
	var all []uint64
	workers := 0
	for round := 0; len(all) < target; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d IDs within the time limit (seed %d)", len(all), target, seed)
		}
		// Two takers of each kind at once; one of each kind is SIGKILLed at a random point.
		// The victim of each kind takes without end, so the kill always lands mid-take.
		var ws []*mixedWorker
		for _, kind := range kinds {
			victim := rng.Intn(2)
			for i := 0; i < 2; i++ {
				out := filepath.Join(d.root, fmt.Sprintf("ids-%d-%s-%d", round, kind, i))
				count := perWorker
				if i == victim {
					count = 1 << 40
				}
				args := []string{d.runtimeDir, out, strconv.Itoa(count),
					strconv.FormatInt(rng.Int63(), 10)}
				var cmd *exec.Cmd
				switch kind {
				case "cpp":
					cmd = exec.Command(cppTaker, args...)
				case "python":
					cmd = exec.Command(python, append([]string{pyTaker}, args...)...)
				case "go":
					cmd = exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
					cmd.Env = append(os.Environ(), "SNOWFLAKE_MIXED_WORKER=1")
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				ws = append(ws, &mixedWorker{kind: kind, out: out, cmd: cmd, victim: i == victim})
				workers++
			}
		}
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func(w *mixedWorker) {
				defer wg.Done()
				w.err = w.cmd.Wait()
			}(w)
		}
		for _, w := range ws {
			w := w // each timer kills its own taker
			if w.victim {
				time.AfterFunc(time.Duration(20+rng.Intn(800))*time.Millisecond, func() {
					w.cmd.Process.Signal(syscall.SIGKILL)
				})
			}
		}
		// The daemon too: SIGKILLed mid-round while every taker takes, and started again on
		// the same directories. Its fresh segment continues above the old one's last
		// published ID; the takers reattach to it (each retries an unavailable daemon).
		time.Sleep(time.Duration(50+rng.Intn(450)) * time.Millisecond)
		d.signal(syscall.SIGKILL)
		<-d.waited
		daemonKills++
		d.start()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Until(deadline) + 10*time.Second):
			for _, w := range ws {
				w.cmd.Process.Kill()
			}
			t.Fatalf("a taker hung (seed %d)", seed)
		}
		for _, w := range ws {
			status, _ := w.cmd.ProcessState.Sys().(syscall.WaitStatus)
			killed := status.Signaled() && status.Signal() == syscall.SIGKILL
			if killed {
				kills[w.kind]++
			} else if w.err != nil || w.victim {
				t.Fatalf("a %s taker failed (seed %d): %v", w.kind, seed, w.err)
			}
			data, err := os.ReadFile(w.out)
			if err != nil && !killed {
				t.Fatal(err)
			}
			ids := make([]uint64, len(data)/8) // a killed taker may leave a partial record
			for i := range ids {
				ids[i] = binary.LittleEndian.Uint64(data[8*i:])
			}
			// The checker's own test: SNOWFLAKE_MIXED_PLANT=order swaps two IDs of the first
			// taker, =duplicate adds a taker of one ID another taker got; either must fail.
			plant := os.Getenv("SNOWFLAKE_MIXED_PLANT")
			if plant == "order" && round == 0 && w == ws[0] && len(ids) > 1 {
				ids[0], ids[1] = ids[1], ids[0]
			}
			if plant == "duplicate" && round == 0 && len(ids) > 0 {
				all = append(all, ids[0])
			}
			for i := range ids {
				if i > 0 && ids[i] <= ids[i-1] {
					t.Fatalf("a %s taker got ID %d after %d (seed %d)", w.kind, ids[i], ids[i-1], seed)
				}
			}
			if !killed && len(ids) != perWorker {
				t.Fatalf("a %s taker wrote %d IDs, want %d (seed %d)", w.kind, len(ids), perWorker, seed)
			}
			taken[w.kind] += len(ids)
			all = append(all, ids...)
			os.Remove(w.out)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d was handed out twice (seed %d)", all[i], seed)
		}
	}
	if len(all) < target {
		t.Fatalf("%d IDs checked, want %d", len(all), target)
	}
	summary := fmt.Sprintf("mixed takers: seed %d, %d IDs checked (target %d) from %d takers; "+
		"IDs by kind cpp %d python %d go %d; SIGKILLed cpp %d python %d go %d, the daemon %d",
		seed, len(all), target, workers, taken["cpp"], taken["python"], taken["go"],
		kills["cpp"], kills["python"], kills["go"], daemonKills)
	t.Log(summary)
	fmt.Println(summary)
	for _, kind := range kinds {
		if kills[kind] == 0 || taken[kind] == 0 {
			t.Fatalf("no %s taker was killed or none took an ID: %s", kind, summary)
		}
	}
	if daemonKills == 0 {
		t.Fatalf("the daemon was never killed: %s", summary)
	}
}
