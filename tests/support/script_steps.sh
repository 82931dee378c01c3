# Shared by the shell tests that run long, named steps (tests/system/, tests/container/):
# skip/fail with the exit codes ctest reads, a step log with timings, and waiting for an
# event with a bound. Source it; the caller may redefine fail() to clean up first.

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# later_than T: true once the clock is past T (seconds since the epoch, fractional).
later_than() { awk -v t="$1" -v n="$(now)" 'BEGIN { exit !(n > t) }'; }
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
