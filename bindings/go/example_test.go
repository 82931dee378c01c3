package snowflake

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The example service (example/, its own module with a replace line, as docs/client.md
// shows a service depending on the package) builds with CGO_ENABLED=0 into a static binary
// (no program interpreter, no dynamic section) that takes IDs from a real daemon.
func TestExampleServiceBuildsStaticAndTakes(t *testing.T) {
	d := startDaemon(t)
	binary := filepath.Join(t.TempDir(), "orders")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binary, ".")
	build.Dir = "example"
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build example: %v\n%s", err, out)
	}
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the example is not static: it has a %v segment", p.Type)
		}
	}
	out, err := exec.Command(binary, "-runtime-dir", d.runtimeDir, "-n", "3").Output()
	if err != nil {
		t.Fatalf("orders: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Fatalf("orders printed %q", out)
	}
	var last uint64
	for _, line := range lines {
		id, err := strconv.ParseUint(strings.Fields(line)[0], 10, 64)
		if err != nil || id <= last {
			t.Fatalf("orders printed %q", out)
		}
		last = id
	}
	// Without a daemon it says what happened and what to do, and fails.
	var stderr bytes.Buffer
	cmd := exec.Command(binary, "-runtime-dir", filepath.Join(d.root, "none"))
	cmd.Stderr = &stderr
	if cmd.Run() == nil || !strings.Contains(stderr.String(), "daemon_not_running") {
		t.Fatalf("orders without a daemon: %q", stderr.String())
	}
}
