# Shared by the shell tests that run long, named steps (tests/system/, tests/container/):
# skip/fail with the exit codes ctest reads, a step log with timings, and waiting for an
# event with a bound. Source it; the caller may redefine fail() to clean up first.

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# later_than T: true once the clock is past T (seconds since the epoch, fractional).
later_than() { awk -v t="$1" -v n="$(now)" 'BEGIN { exit !(n > t) }'; }
# fail_with_log LOG WHAT: shows LOG's tail and fails with WHAT. When the log says a
# command was not found (podman's "executable file not found", a shell's "command not
# found"), the failure names the command and the package that provides it, from
# scripts/setup's table: the fix is then one `scripts/setup` away.
fail_with_log() {
  local log=$1 what=$2 missing package hint=""
  tail -n 30 "$log"
  missing=$(sed -nE 's/.*exec: "([^"]+)": executable file not found.*/\1/p;
                     s/.*[: ]([A-Za-z0-9_.+-]+): (command )?not found$/\1/p' "$log" | head -1)
  if [ -n "$missing" ]; then
    package=$("${source_dir:?}/scripts/setup" --package-of "$missing" 2>/dev/null || true)
    hint=" ($missing is not installed"
    hint+=${package:+: it comes from package $package, which scripts/setup installs; run scripts/setup}
    hint+=")"
  fi
  fail "$what$hint"
}
test_start=$(now)
step_start=$test_start
# step NAME: ends the previous step (printing its time) and starts NAME.
step() {
  [ -n "${step_name:-}" ] && echo "  ok  $step_name ($(elapsed "$step_start") s)"
  step_name=$1
  step_start=$(now)
  echo "---- $step_name"
}
# make_own_cgroups NAME: a cgroup NAME of this script's own in every hierarchy that lets
# it (cgroup v1's unified and systemd, else the v2 root), for systemd-nspawn to start from
# where no host systemd makes a scope. Lists them in the array own_cgroups (empty: none).
make_own_cgroups() {
  own_cgroups=()
  local hierarchy
  for hierarchy in unified systemd; do
    if [ -d "/sys/fs/cgroup/$hierarchy" ] && mkdir -p "/sys/fs/cgroup/$hierarchy/$1" 2>/dev/null; then
      own_cgroups+=("/sys/fs/cgroup/$hierarchy/$1")
    fi
  done
  if [ ${#own_cgroups[@]} -eq 0 ] && [ -f /sys/fs/cgroup/cgroup.procs ] &&
     mkdir -p "/sys/fs/cgroup/$1" 2>/dev/null; then
    own_cgroups+=("/sys/fs/cgroup/$1")
  fi
  return 0
}
# wait_until SECONDS DESCRIPTION COMMAND...: polls every 0.1 s; fails naming DESCRIPTION.
wait_until() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$(awk -v n="$(now)" -v l="$limit" 'BEGIN { printf "%.3f", n + l }')
  until "$@"; do
    later_than "$deadline" && fail "$what: not within $limit s"
    sleep 0.1
  done
}
