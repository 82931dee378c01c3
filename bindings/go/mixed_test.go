//go:build mixedtakers

package snowflake

// The mixed-takers stress (ctest entry mixed_takers; built only with -tags mixedtakers, so
// the package's own test run does not start it; the entries are in bindings/CMakeLists.txt).
//
// Property: C++, Python, Go, Java and Node.js takers in several processes on one daemon's
// ring, one of each language SIGKILLed at a random point and one taking to completion in
// every round, and the daemon SIGKILLed and restarted in every round while all five
// languages take,
//   - never receive one ID twice;
//   - each receive their IDs in strictly increasing order (so the restarted daemon's IDs
//     are above every one its predecessor handed out);
//   - and are counted by the daemon, per service name, as they took (each taker has a
//     service name of its own).
//
// The counts. A daemon counts per segment: each client claims a slot in the segment's
// consumer region and counts its takes there, and the daemon reports, under `services`
// of its status, the live slots plus the final counts of finished clients it folded in
// at its last scan, once a second (shm/LAYOUT.md §4; docs/control-protocol.md, "Status
// keys"). A restarted daemon starts a fresh segment; its clients reattach and count on in
// a new slot there, and the old daemon's totals die with it. Every ID of the old segment
// is at or below its last published ID B, read from its ring file after the kill, and
// the new daemon publishes nothing at or below B (LAYOUT.md §6, Restart), so a taker's IDs
// above B are exactly those it took from the new segment. After the round, once a status
// counts a probe ID taken after every taker exited (so that scan folded every taker's
// final count in), for each taker with N_old IDs at or below B and N_new above:
//   - a taker that completed (closed its client, which retires its slots with their final
//     counts): the new daemon's count is exactly N_new;
//   - a SIGKILLed taker: the kill may land between a take and its count (libsnowflake:
//     between the CAS on head and the store to the thread's lane; Go: up to the last
//     10 ms of takes, which its binding publishes every 10 ms, count.go), and after a take
//     but before the taker wrote it (at most mixedMaxUnwritten IDs). An ID is counted at
//     most once, by the taker that won it. So the new daemon's count is at most
//     N_new + mixedMaxUnwritten; for the libsnowflake takers (C++, Python, Java, Node.js),
//     whose count is stored before the take returns and so before the ID is written, at
//     least N_new; and 0 when the taker died before the new daemon started;
//   - the old daemon's status, read just before its kill: at most N_old (+
//     mixedMaxUnwritten for a SIGKILLed taker). Not exact: it is a scan up to a second
//     old, after which the takers took on, and the old daemon's final totals are lost with
//     it; this is the only check of the old segment's counts.
//
// It asserts its size ($SNOWFLAKE_MIXED_IDS IDs checked, 10 M from ctest) and prints its
// seed, sizes, IDs per language and kill counts. SNOWFLAKE_MIXED_PLANT plants a fault into
// what the checker reads, to show it reports it (ctest mixed_takers_plant_*).

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
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// The takers' contract (tests/mixed): a take is one ID or a batch of 1 to 1000, and the
	// IDs are written whenever 1024 or more wait. So at most 1023 wait before a take, and a
	// SIGKILLed taker took at most 1023 + 1000 IDs it never wrote.
	mixedMaxBatch     = 1000
	mixedWriteEvery   = 1024
	mixedMaxUnwritten = mixedWriteEvery - 1 + mixedMaxBatch
)

var mixedKinds = []string{"cpp", "python", "go", "java", "node"}

// countedBeforeReturn: whether a take of this language's binding stores its count in the
// segment before it returns the IDs (libsnowflake's per-thread lanes), so every ID a taker
// wrote was counted. Go's binding publishes its count every 10 ms instead (count.go).
func countedBeforeReturn(kind string) bool { return kind != "go" }

func init() {
	if os.Getenv("SNOWFLAKE_MIXED_WORKER") != "" {
		os.Exit(mixedGoTaker(os.Args[len(os.Args)-5:]))
	}
}

// mixedGoTaker is the Go taker, with mixed_taker's arguments, output and start file:
// RUNTIME_DIR OUT_FILE COUNT SEED SERVICE.
func mixedGoTaker(args []string) int {
	count, err := strconv.Atoi(args[2])
	seed, err2 := strconv.ParseInt(args[3], 10, 64)
	if err != nil || err2 != nil || count < 0 {
		fmt.Fprintln(os.Stderr, "usage: RUNTIME_DIR OUT_FILE COUNT SEED SERVICE (COUNT and SEED "+
			"decimal integers)")
		return 2
	}
	rng := rand.New(rand.NewSource(seed))
	c, err := Open(args[4], WithRuntimeDir(args[0]), WithTimeout(10*time.Second), WithRemotes())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, err := os.Create(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if start := os.Getenv("SNOWFLAKE_MIXED_START_FILE"); start != "" {
		for waited := 0; ; waited++ {
			if _, err := os.Stat(start); err == nil {
				break
			}
			if waited == 60000 {
				fmt.Fprintf(os.Stderr, "no start file %s after 60 s\n", start)
				return 1
			}
			time.Sleep(time.Millisecond)
		}
	}
	pending := make([]byte, 0, (mixedWriteEvery-1+mixedMaxBatch)*8)
	batch := make([]uint64, mixedMaxBatch)
	// A daemon that cannot serve for a moment (two cores shared by it and ten takers may
	// delay its heartbeat past its liveness limit) is retried, as a service would.
	retries := 0
	unavailable := func(err error) bool {
		if !(errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRingEmpty)) || retries > 30000 {
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
			want := 1 + rng.Intn(mixedMaxBatch)
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
		if len(pending) >= mixedWriteEvery*8 {
			if _, err := out.Write(pending); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			pending = pending[:0]
		}
	}
	if _, err := out.Write(pending); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Publishes the last counts and retires the slots: the daemon's count is then exact.
	c.Close()
	return 0
}

// mixedCommands starts the takers of each language, from the paths ctest sets.
type mixedCommands struct {
	cpp, python, pyTaker, java, javaClasspath, jni, node, nodeTaker string
}

func mixedCommandsFromEnv(t *testing.T) mixedCommands {
	m := mixedCommands{
		cpp: os.Getenv("SNOWFLAKE_MIXED_CPP_TAKER"), python: os.Getenv("SNOWFLAKE_MIXED_PYTHON"),
		pyTaker: os.Getenv("SNOWFLAKE_MIXED_PY_TAKER"), java: os.Getenv("SNOWFLAKE_MIXED_JAVA"),
		javaClasspath: os.Getenv("SNOWFLAKE_MIXED_JAVA_CLASSPATH"),
		jni:           os.Getenv("SNOWFLAKE_MIXED_JNI"), node: os.Getenv("SNOWFLAKE_MIXED_NODE"),
		nodeTaker: os.Getenv("SNOWFLAKE_MIXED_NODE_TAKER"),
	}
	if m.cpp == "" || m.python == "" || m.pyTaker == "" || m.java == "" || m.javaClasspath == "" ||
		m.jni == "" || m.node == "" || m.nodeTaker == "" || os.Getenv("SNOWFLAKE_NODE_PACKAGE") == "" {
		t.Fatal("SNOWFLAKE_MIXED_CPP_TAKER, SNOWFLAKE_MIXED_PYTHON, SNOWFLAKE_MIXED_PY_TAKER, " +
			"SNOWFLAKE_MIXED_JAVA, SNOWFLAKE_MIXED_JAVA_CLASSPATH, SNOWFLAKE_MIXED_JNI, " +
			"SNOWFLAKE_MIXED_NODE, SNOWFLAKE_MIXED_NODE_TAKER and SNOWFLAKE_NODE_PACKAGE must name " +
			"the takers and their runtimes (ctest sets them)")
	}
	return m
}

func (m mixedCommands) command(kind string, args []string) *exec.Cmd {
	switch kind {
	case "cpp":
		return exec.Command(m.cpp, args...)
	case "python":
		return exec.Command(m.python, append([]string{m.pyTaker}, args...)...)
	case "go":
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
		cmd.Env = append(os.Environ(), "SNOWFLAKE_MIXED_WORKER=1")
		return cmd
	case "java":
		// Two cores: one GC thread and the first JIT tier only, so the JVM starts sooner; its
		// loop is JNI calls either way.
		return exec.Command(m.java, append([]string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dsnowflake.jni.path=" + m.jni, "-cp", m.javaClasspath, "MixedTaker"}, args...)...)
	case "node":
		return exec.Command(m.node, append([]string{m.nodeTaker}, args...)...)
	}
	panic("unknown taker kind " + kind)
}

type mixedWorker struct {
	kind, service, out string
	victim             bool
	cmd                *exec.Cmd
	done               chan struct{} // closed once cmd.Wait returned
	err                error         // cmd.Wait's; read after done
	exited             time.Time     // when cmd.Wait returned; read after done
}

func (w *mixedWorker) hasExited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// waitAllWrote returns once every taker's file holds at least `bytes` bytes (0: exists),
// or the taker exited.
func waitAllWrote(t *testing.T, ws []*mixedWorker, bytes int64, what string, deadline time.Time,
	seed int64) {
	t.Helper()
	for {
		waiting := ""
		for _, w := range ws {
			if info, err := os.Stat(w.out); (err != nil || info.Size() < bytes) && !w.hasExited() {
				waiting = w.kind
				break
			}
		}
		if waiting == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a %s taker never %s within the time limit (seed %d)", waiting, what, seed)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAnyCompleterWrote returns once a completing taker's file holds `ids` IDs or more,
// or every completing taker exited.
func waitAnyCompleterWrote(t *testing.T, ws []*mixedWorker, ids int64, deadline time.Time,
	seed int64) {
	t.Helper()
	for {
		running := false
		for _, w := range ws {
			if w.victim {
				continue
			}
			if info, err := os.Stat(w.out); err == nil && info.Size() >= 8*ids {
				return
			}
			running = running || !w.hasExited()
		}
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completing taker wrote %d IDs within the time limit (seed %d)", ids, seed)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lastPublishedID is the largest ID the segment at runtimeDir ever published, read from
// its ring file once its daemon is dead: max(last_published_id, the slot of ticket
// tail - 1), what the next daemon continues above (shm/LAYOUT.md §6, Restart).
func lastPublishedID(runtimeDir string) (uint64, error) {
	s, e := openRing(runtimeDir)
	if e != nil {
		return 0, e
	}
	defer s.unmap()
	last := loadU64(s.header, offLastPublished)
	if tail := loadU64(s.header, offTail); tail > 0 {
		if id := newRing(s).slot(tail - 1); id > last {
			last = id
		}
	}
	return last, nil
}

// probeTake takes one ID as `service` through the C++ taker, which closes its client: a
// probe independent of the Go binding's counting.
func probeTake(commands mixedCommands, runtimeDir, service, out string) (uint64, error) {
	cmd := commands.command("cpp", []string{runtimeDir, out, "1", "1", service})
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, err
	}
	data, err := os.ReadFile(out)
	if err != nil || len(data) != 8 {
		return 0, fmt.Errorf("the probe wrote %d bytes, not one ID (%v)", len(data), err)
	}
	os.Remove(out)
	return binary.LittleEndian.Uint64(data), nil
}

// statusAfterProbe is the daemon's status once it counts the probe's ID: that service scan
// ran after the probe's take, so after every taker of the round exited, and folded each
// one's final count in. The daemon scans once a second; it waits up to 15 s.
func statusAfterProbe(runtimeDir, probe string) (*ControlStatus, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := queryControl(runtimeDir)
		if err == nil && s.Services[probe] >= 1 {
			return s, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("the status did not count the probe's ID under %q within 15 s",
					probe)
			}
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMixedTakersShareOneDaemonWithoutDuplicates(t *testing.T) {
	target, err := strconv.Atoi(os.Getenv("SNOWFLAKE_MIXED_IDS"))
	if err != nil || target <= 0 {
		t.Fatal("SNOWFLAKE_MIXED_IDS must give the IDs to check (ctest sets it)")
	}
	commands := mixedCommandsFromEnv(t)
	plant := os.Getenv("SNOWFLAKE_MIXED_PLANT")
	if plant != "" && plant != "order" && plant != "duplicate" && plant != "count" {
		t.Fatalf("SNOWFLAKE_MIXED_PLANT is %q: give order, duplicate or count, or leave it unset", plant)
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("SNOWFLAKE_STRESS_SEED"); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SNOWFLAKE_STRESS_SEED is %q: give a decimal integer", s)
		}
	}
	rng := rand.New(rand.NewSource(seed))
	// Each round: one taker of each language takes perWorker IDs and closes, one takes until
	// SIGKILLed.
	perWorker := target / 50
	if perWorker < 200000 {
		perWorker = 200000
	}
	t.Logf("seed %d (rerun with SNOWFLAKE_STRESS_SEED=%d), size %d IDs, %d IDs per completing taker",
		seed, seed, target, perWorker)
	d := startDaemon(t)
	deadline := time.Now().Add(240 * time.Second)

	kills := map[string]int{}
	completed := map[string]int{}
	spanned := map[string]int{} // completing takers that took from both daemons of a round
	taken := map[string]int{}
	daemonKills := 0
	killedAfterRestart := 0 // SIGKILLed takers that outlived their round's daemon kill
	var all []uint64
	workers := 0
	for round := 0; len(all) < target; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d IDs within the time limit (seed %d)", len(all), target, seed)
		}
		d.waitServing()
		var ws []*mixedWorker
		// Every taker opens its client and its file, then waits for the start file: a JVM
		// takes a second or more to start here, and a fast taker started beside it could
		// complete before it took its first ID.
		start := filepath.Join(d.root, fmt.Sprintf("start-%d", round))
		for _, kind := range mixedKinds {
			victim := rng.Intn(2)
			for i := 0; i < 2; i++ {
				w := &mixedWorker{kind: kind, victim: i == victim, done: make(chan struct{}),
					service: fmt.Sprintf("mixed-%d-%s-%d", round, kind, i),
					out:     filepath.Join(d.root, fmt.Sprintf("ids-%d-%s-%d", round, kind, i))}
				count := perWorker
				if w.victim {
					count = 1 << 40 // takes without end, so the kill always lands mid-take
				}
				w.cmd = commands.command(kind, []string{d.runtimeDir, w.out, strconv.Itoa(count),
					strconv.FormatInt(rng.Int63(), 10), w.service})
				w.cmd.Env = append(w.cmd.Environ(), "SNOWFLAKE_MIXED_START_FILE="+start)
				w.cmd.Stderr = os.Stderr
				if err := w.cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go func() {
					w.err = w.cmd.Wait()
					w.exited = time.Now()
					close(w.done)
				}()
				ws = append(ws, w)
				workers++
			}
		}
		waitAllWrote(t, ws, 0, "opened its client", deadline, seed)
		if err := os.WriteFile(start, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitAllWrote(t, ws, 8, "wrote its first IDs", deadline, seed)
		// One taker of each language SIGKILLed at a random point.
		for _, w := range ws {
			w := w
			if w.victim {
				time.AfterFunc(time.Duration(20+rng.Intn(800))*time.Millisecond, func() {
					w.cmd.Process.Signal(syscall.SIGKILL)
				})
			}
		}
		// The daemon too: SIGKILLed mid-round while every taker takes, and started again on
		// the same directories. Its fresh segment continues above the old one's last
		// published ID; the takers reattach to it (each retries an unavailable daemon).
		// It lands once the furthest of the completing takers wrote a random 10-60 % of its
		// IDs, so while every completing taker takes.
		waitAnyCompleterWrote(t, ws, int64(float64(perWorker)*(0.1+0.5*rng.Float64())), deadline, seed)
		before, err := queryControl(d.runtimeDir)
		if err != nil {
			t.Fatalf("the daemon's status before its SIGKILL: %v (seed %d)", err, seed)
		}
		d.signal(syscall.SIGKILL)
		<-d.waited
		daemonKills++
		bound, err := lastPublishedID(d.runtimeDir)
		if err != nil {
			t.Fatalf("the killed daemon's last published ID: %v (seed %d)", err, seed)
		}
		restarted := time.Now()
		d.start()
		for _, w := range ws {
			select {
			case <-w.done:
			case <-time.After(time.Until(deadline) + 10*time.Second):
				for _, w := range ws {
					w.cmd.Process.Kill()
				}
				t.Fatalf("a %s taker hung (seed %d)", w.kind, seed)
			}
		}
		probe := fmt.Sprintf("probe-%d", round)
		probeID, err := probeTake(commands, d.runtimeDir, probe, filepath.Join(d.root, probe))
		if err != nil {
			t.Fatalf("the probe's take: %v (seed %d)", err, seed)
		}
		all = append(all, probeID)
		after, err := statusAfterProbe(d.runtimeDir, probe)
		if err != nil {
			t.Fatalf("the restarted daemon's status: %v (seed %d)", err, seed)
		}

		for wi, w := range ws {
			status, _ := w.cmd.ProcessState.Sys().(syscall.WaitStatus)
			killed := status.Signaled() && status.Signal() == syscall.SIGKILL
			switch {
			case w.victim && killed:
				kills[w.kind]++
				if w.exited.After(restarted) {
					killedAfterRestart++
				}
			case !w.victim && w.err == nil:
				completed[w.kind]++
			default:
				t.Fatalf("a %s taker (%s) failed (seed %d): %v", w.kind, w.service, seed, w.err)
			}
			data, err := os.ReadFile(w.out)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]uint64, len(data)/8) // a killed taker may leave a partial record
			for i := range ids {
				ids[i] = binary.LittleEndian.Uint64(data[8*i:])
			}
			// The checker's own test: =order swaps two IDs of the first taker, =duplicate
			// adds one ID of each taker twice; =count is planted below.
			if plant == "order" && round == 0 && wi == 0 && len(ids) > 1 {
				ids[0], ids[1] = ids[1], ids[0]
			}
			if plant == "duplicate" && round == 0 && len(ids) > 0 {
				all = append(all, ids[0])
			}
			for i := range ids {
				if i > 0 && ids[i] <= ids[i-1] {
					t.Fatalf("a %s taker got ID %d after %d (its IDs %d and %d of %d, service %s; the "+
						"killed daemon's last ID %d) (seed %d)", w.kind, ids[i], ids[i-1], i, i-1, len(ids),
						w.service, bound, seed)
				}
			}
			if !w.victim && len(ids) != perWorker {
				t.Fatalf("a %s taker wrote %d IDs, want %d (seed %d)", w.kind, len(ids), perWorker, seed)
			}
			checkMixedCounts(t, w, ids, bound, before, after, restarted, plant == "count" && round == 0, seed)
			if !w.victim && ids[0] <= bound && ids[len(ids)-1] > bound {
				spanned[w.kind]++
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
	var byKind, killed, complete []string
	for _, kind := range mixedKinds {
		byKind = append(byKind, fmt.Sprintf("%s %d", kind, taken[kind]))
		killed = append(killed, fmt.Sprintf("%s %d", kind, kills[kind]))
		complete = append(complete, fmt.Sprintf("%s %d (%d across the restart)", kind,
			completed[kind], spanned[kind]))
	}
	summary := fmt.Sprintf("mixed takers: seed %d, %d IDs checked (target %d) from %d takers, "+
		"%d IDs per completing taker; IDs by language %s; SIGKILLed takers %s (%d of them after "+
		"the daemon's restart), the daemon %d; completed and counted exactly %s", seed, len(all),
		target, workers, perWorker, strings.Join(byKind, ", "), strings.Join(killed, ", "),
		killedAfterRestart, daemonKills, strings.Join(complete, ", "))
	t.Log(summary)
	fmt.Println(summary)
	for _, kind := range mixedKinds {
		if kills[kind] == 0 || completed[kind] == 0 || taken[kind] == 0 {
			t.Fatalf("no %s taker was killed, completed or took an ID: %s", kind, summary)
		}
		// The start file and the moment of the daemon's kill make this the rule.
		if spanned[kind] == 0 {
			t.Fatalf("no completing %s taker took from both daemons of a round: %s", kind, summary)
		}
	}
	if daemonKills == 0 {
		t.Fatalf("the daemon was never killed: %s", summary)
	}
}

// checkMixedCounts holds the daemons' counts of w's service to the IDs w wrote (ids, in
// order): `before` is the status of the daemon killed mid-round, read just before its
// kill, `after` the restarted daemon's once every taker exited, `bound` the killed
// daemon's last published ID and `restarted` when the new daemon was started. The file
// comment says what each check allows and why. plantCount adds one ID to the new daemon's
// count of w, if w completed.
func checkMixedCounts(t *testing.T, w *mixedWorker, ids []uint64, bound uint64,
	before, after *ControlStatus, restarted time.Time, plantCount bool, seed int64) {
	t.Helper()
	nOld := uint64(sort.Search(len(ids), func(i int) bool { return ids[i] > bound }))
	nNew := uint64(len(ids)) - nOld
	countBefore, countAfter := before.Services[w.service], after.Services[w.service]
	slack := uint64(0)
	if w.victim {
		slack = mixedMaxUnwritten
	}
	if countBefore > nOld+slack {
		t.Fatalf("the daemon counted %d IDs of service %s (a %s taker) before its SIGKILL, more "+
			"than the %d the taker took from it (plus %d it may not have written) (seed %d)",
			countBefore, w.service, w.kind, nOld, slack, seed)
	}
	if !w.victim {
		if plantCount {
			countAfter++
		}
		if countAfter != nNew {
			t.Fatalf("the daemon counted %d IDs of service %s (a %s taker that completed) after its "+
				"restart; the taker took %d from it (%d from the daemon before) (seed %d)",
				countAfter, w.service, w.kind, nNew, nOld, seed)
		}
		return
	}
	switch {
	case w.exited.Before(restarted) && countAfter != 0:
		t.Fatalf("the restarted daemon counted %d IDs of service %s, whose %s taker was killed "+
			"before it started (seed %d)", countAfter, w.service, w.kind, seed)
	case countAfter > nNew+slack:
		t.Fatalf("the restarted daemon counted %d IDs of service %s (a SIGKILLed %s taker), more "+
			"than the %d it wrote plus %d it may have taken unwritten (seed %d)",
			countAfter, w.service, w.kind, nNew, slack, seed)
	case countedBeforeReturn(w.kind) && countAfter < nNew:
		t.Fatalf("the restarted daemon counted %d IDs of service %s (a SIGKILLed %s taker), fewer "+
			"than the %d it wrote, each counted before its take returned (seed %d)",
			countAfter, w.service, w.kind, nNew, seed)
	}
}
