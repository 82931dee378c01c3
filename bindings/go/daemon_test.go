package snowflake

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A snowflaked of its own for one test: runtime, state and machine-lock directories in a
// fresh temporary directory; stopped when the test ends. $SNOWFLAKED names the binary
// (ctest sets it to the build's); without it the test fails, never skips.
type daemon struct {
	t          *testing.T
	root       string
	runtimeDir string
	config     string // the --config file's text; "" runs on the built-in defaults
	cmd        *exec.Cmd
	waited     chan struct{}
}

func newDaemon(t *testing.T) *daemon {
	t.Helper()
	binary := os.Getenv("SNOWFLAKED")
	if binary == "" {
		t.Fatal("SNOWFLAKED must name the snowflaked binary (ctest sets it)")
	}
	// Short: the control socket's path must fit sockaddr_un.
	root, err := os.MkdirTemp("", "sf-go-")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, root: root, runtimeDir: filepath.Join(root, "run")}
	t.Cleanup(func() {
		d.stop()
		os.RemoveAll(root)
	})
	return d
}

func startDaemon(t *testing.T) *daemon {
	d := newDaemon(t)
	d.start()
	d.waitServing()
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
	d.cmd = exec.Command(os.Getenv("SNOWFLAKED"), args...)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	env := []string{"SNOWFLAKE_HOST_LOCK_DIR=" + filepath.Join(d.root, "locks")}
	for _, kv := range os.Environ() {
		if !isSystemdVariable(kv) {
			env = append(env, kv)
		}
	}
	d.cmd.Env = env
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.waited = make(chan struct{})
	go func() {
		d.cmd.Wait()
		close(d.waited)
	}()
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

// waitServing returns once a take succeeds; it fails the test after 30 s.
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
