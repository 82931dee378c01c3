package snowflake

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A snowflaked of its own for one test: runtime, state and machine-lock directories in a
// fresh temporary directory; stopped when the test ends. $SNOWFLAKED names the binary
// (ctest sets it to the build's); without it the test fails, never skips.
//
// Each start binds a notify socket of the harness's own in that directory and passes it as
// NOTIFY_SOCKET, as systemd does for a Type=notify service: waitReady returns once the
// daemon sent READY=1 on it, which it does once its ring serves (or, started out of
// service, once it waits for an operator: docs/daemon.md).
type daemon struct {
	t          *testing.T
	root       string
	runtimeDir string
	config     string   // the --config file's text; "" runs on the built-in defaults
	args       []string // more command-line arguments
	env        []string // more environment, after NOTIFY_SOCKET (a test may point it elsewhere)
	cmd        *exec.Cmd
	waited     chan struct{}
	starts     int
	notify     *net.UnixConn // this start's notify socket
	ready      chan struct{} // closed when READY=1 came on it
}

func newDaemon(t *testing.T) *daemon {
	t.Helper()
	binary := os.Getenv("SNOWFLAKED")
	if binary == "" {
		t.Fatal("SNOWFLAKED must name the snowflaked binary (ctest sets it)")
	}
	// Short: the control and notify sockets' paths must fit sockaddr_un.
	root, err := os.MkdirTemp("", "sf-go-")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, root: root, runtimeDir: filepath.Join(root, "run")}
	t.Cleanup(func() {
		d.stop()
		d.closeNotify()
		os.RemoveAll(root)
	})
	return d
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	d := newDaemon(t)
	d.start()
	d.waitReady()
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	for _, dir := range []string{d.runtimeDir, filepath.Join(d.root, "state")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			d.t.Fatal(err)
		}
	}
	log, err := os.Create(filepath.Join(d.root, "daemon.log"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer log.Close()
	args := []string{"--runtime-dir", d.runtimeDir, "--state-dir", filepath.Join(d.root, "state"),
		"--log-level", "warn"}
	if d.config != "" {
		file := filepath.Join(d.root, "snowflaked.toml")
		if err := os.WriteFile(file, []byte(d.config), 0o644); err != nil {
			d.t.Fatal(err)
		}
		args = append(args, "--config", file)
	}
	args = append(args, d.args...)
	notifyPath := d.listen()
	d.cmd = exec.Command(os.Getenv("SNOWFLAKED"), args...)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	env := []string{"SNOWFLAKE_HOST_LOCK_DIR=" + filepath.Join(d.root, "locks")}
	for _, kv := range os.Environ() {
		if !isSystemdVariable(kv) {
			env = append(env, kv)
		}
	}
	// For a key given twice, exec uses the last value: d.env may override these.
	env = append(env, "NOTIFY_SOCKET="+notifyPath)
	d.cmd.Env = append(env, d.env...)
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.waited = make(chan struct{})
	go func() {
		d.cmd.Wait()
		close(d.waited)
	}()
}

// listen binds this start's notify socket (a fresh one per start: a READY=1 of a killed
// predecessor never counts for its successor) and reads it until READY=1 comes.
func (d *daemon) listen() string {
	d.t.Helper()
	d.closeNotify()
	d.starts++
	path := filepath.Join(d.root, fmt.Sprintf("notify-%d", d.starts))
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		d.t.Fatalf("notify socket: %v", err)
	}
	ready := make(chan struct{})
	d.notify, d.ready = conn, ready
	go func() {
		buffer := make([]byte, 64*1024)
		for {
			n, err := conn.Read(buffer)
			if err != nil {
				return // closed by closeNotify
			}
			for _, line := range strings.Split(string(buffer[:n]), "\n") {
				if line == "READY=1" {
					close(ready)
					// Later notifications are refused, which the daemon ignores.
					conn.Close()
					os.Remove(path)
					return
				}
			}
		}
	}()
	return path
}

func (d *daemon) closeNotify() {
	if d.notify != nil {
		d.notify.Close()
		os.Remove(d.notify.LocalAddr().String())
		d.notify = nil
	}
}

// readyWithin waits for READY=1 from the daemon last started; the error says why it did
// not come (the daemon exited, or timeout passed) and carries the daemon's output.
func (d *daemon) readyWithin(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-d.ready:
		return nil
	case <-d.waited:
		select {
		case <-d.ready: // sent before it exited
			return nil
		default:
		}
		return fmt.Errorf("snowflaked exited (%v) before READY=1; its output:\n%s",
			d.cmd.ProcessState, d.log())
	case <-timer.C:
		select {
		case <-d.ready: // at the bound
			return nil
		default:
		}
		return fmt.Errorf("snowflaked (pid %d, running) sent no READY=1 within %v on %s; "+
			"its output:\n%s", d.cmd.Process.Pid, timeout, d.notify.LocalAddr(), d.log())
	}
}

// waitReady returns once the daemon sent READY=1; it fails the test, with the daemon's
// output, if the daemon exits first or sends none within 30 s.
func (d *daemon) waitReady() {
	d.t.Helper()
	if err := d.readyWithin(30 * time.Second); err != nil {
		d.t.Fatal(err)
	}
}

func isSystemdVariable(kv string) bool {
	for _, name := range []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=",
		"LISTEN_FDS=", "LISTEN_PID=", "SNOWFLAKE_REMOTES=", "SNOWFLAKE_RUNTIME_DIR=",
		"SNOWFLAKE_HOST_LOCK_DIR="} {
		if len(kv) >= len(name) && kv[:len(name)] == name {
			return true
		}
	}
	return false
}

func (d *daemon) log() string {
	data, _ := os.ReadFile(filepath.Join(d.root, "daemon.log"))
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

// waitServing, for a daemon that has served and may be held up (SIGSTOP, a pause),
// returns once a take succeeds; it fails the test after 30 s. A start waits with
// waitReady.
func (d *daemon) waitServing() {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-d.waited:
			d.t.Fatalf("snowflaked exited: %v\n%s", d.cmd.ProcessState, d.log())
		default:
		}
		c, err := Open("readiness", WithRuntimeDir(d.runtimeDir))
		if err == nil {
			_, err = c.Next()
			c.Close()
			if err == nil {
				return
			}
		}
		last = err
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrRingEmpty) {
			d.t.Fatalf("waiting for snowflaked: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatalf("snowflaked not serving after 30 s (%v)\n%s", last, d.log())
}

func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
}

// stop sends SIGTERM (SIGKILL after 10 s) and waits for the exit.
func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	select {
	case <-d.waited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGCONT)
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.waited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.waited
	}
}

func TestHarnessReportsADaemonThatExitsBeforeReadyWithItsOutput(t *testing.T) {
	d := newDaemon(t)
	missing := filepath.Join(d.root, "missing.toml")
	d.args = []string{"--config", missing}
	d.start()

	err := d.readyWithin(30 * time.Second)

	if err == nil || !strings.Contains(err.Error(), "snowflaked exited (exit status 2) before READY=1") ||
		!strings.Contains(err.Error(), missing) {
		t.Fatalf("want the exit and the daemon's words naming %s, got %v", missing, err)
	}
	t.Logf("the harness says: %v", err)
}

func TestHarnessReportsADaemonThatSendsNoReadyWithItsOutput(t *testing.T) {
	d := newDaemon(t)
	// NOTIFY_SOCKET where nobody listens: the daemon serves, and its READY=1 is lost.
	d.env = []string{"NOTIFY_SOCKET=" + filepath.Join(d.root, "nobody")}
	d.start()

	err := d.readyWithin(2 * time.Second)

	if err == nil || !strings.Contains(err.Error(), "running) sent no READY=1 within 2s") ||
		!strings.Contains(err.Error(), "its output:") {
		t.Fatalf("want a timeout naming the wait, got %v", err)
	}
	t.Logf("the harness says: %v", err)
}
