#!/usr/bin/env bash
# The Debian packages under a real systemd: builds version N and N+1 with scripts/package,
# boots a Debian 12 tree with systemd-nspawn (never the host's root), installs them with
# apt and checks start/READY, STATUS=, the journal, group access (also from Python, through
# python3-snowflake, and from Java, through libsnowflake-java), restart after SIGKILL, the watchdog after SIGSTOP, a clean stop seen
# by a waiting client, an upgrade, remove, purge and `systemd-analyze security`.
#
#   packages_under_systemd.sh SOURCE_DIR WORK_DIR
#
# Under ctest the packages come from the fixture snowflake_debs (build_packages.sh, shared
# with tests/container/) through SNOWFLAKE_SYSTEM_TEST_DEBS; run alone, it builds them.
#
# Exit 0: every check passed. Exit 77 (ctest SKIP_RETURN_CODE): nspawn is impossible here
# (not root, no systemd-nspawn, no cgroups, no cached tree and no way to make one); the
# reason is printed. Anything else: a check failed.
#
# The Debian tree is made once with `debootstrap --variant=minbase --include=systemd,dbus
# bookworm` from the host's configured Debian mirror and kept in
# $SNOWFLAKE_NSPAWN_CACHE_ROOT/bookworm (default /var/cache/snowflake-test); it is booted with
# --volatile=overlay, so it stays untouched. Downloaded .debs (runtime dependencies) are
# kept in .../apt-archives. Only processes this script started are stopped.
set -uo pipefail

source_dir=$1
work=$2
cache_root=${SNOWFLAKE_NSPAWN_CACHE_ROOT:-/var/cache/snowflake-test}
tree=$cache_root/bookworm
machine=sfsystest$$

# skip, fail, step, wait_until and the clock helpers
source "$source_dir/tests/support/script_steps.sh"

# ---- Can nspawn run here at all?
[ "$(id -u)" -eq 0 ] || skip "systemd-nspawn needs root (running as uid $(id -u))"
for tool in systemd-nspawn nsenter; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/setup installs it)"
done
[ -d /sys/fs/cgroup ] || skip "no /sys/fs/cgroup: cannot run a container"

rm -rf "$work"
mkdir -p "$work"

# ---- Packages: version N from the tree, N+1 rebuilt with the patch number bumped.
version=$(sed -n 's/^project([^)]*VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
next_version=${version%.*}.$(( ${version##*.} + 1 ))
arch=$(dpkg --print-architecture)
if [ -n "${SNOWFLAKE_SYSTEM_TEST_DEBS:-}" ]; then
  # Packages built before (e.g. while working on the test): DIR/n and DIR/n1 hold the
  # output of `scripts/package DIR/n` and `SNOWFLAKE_PACKAGE_VERSION=N+1 scripts/package DIR/n1`.
  step "packages N and N+1 from $SNOWFLAKE_SYSTEM_TEST_DEBS"
  mkdir -p "$work/debs"
  cp -r "$SNOWFLAKE_SYSTEM_TEST_DEBS/n" "$SNOWFLAKE_SYSTEM_TEST_DEBS/n1" "$work/debs/"
else
  step "build packages N and N+1 (scripts/package)"
  # No -dbgsym packages (not installed here); N+1 is linted already as N. Both compile
  # through one ccache (scripts/test's, which outlives the run, or a fresh one), so N+1
  # recompiles only the files the version is in.
  export DEB_BUILD_OPTIONS="noautodbgsym ${DEB_BUILD_OPTIONS:-}"
  export SNOWFLAKE_PACKAGE_CCACHE="${SNOWFLAKE_PACKAGE_CCACHE_DIR:-$work/ccache}"
  "$source_dir/scripts/package" "$work/debs/n" > "$work/package-n.log" 2>&1 ||
    { tail -40 "$work/package-n.log"; fail "scripts/package (version $version)"; }
  SNOWFLAKE_PACKAGE_VERSION=$next_version SNOWFLAKE_PACKAGE_LINTIAN=no \
    "$source_dir/scripts/package" "$work/debs/n1" > "$work/package-n1.log" 2>&1 ||
    { tail -40 "$work/package-n1.log"; fail "scripts/package (version $next_version)"; }
  grep -h "^package:" "$work/package-n.log" "$work/package-n1.log"
fi

# ---- The Java taker (tests/system/PackagedTake.java), compiled here against package N's
# jar. The tree has no JVM: the container runs the host's (scripts/setup installs
# openjdk-17-jdk-headless; the same Debian 12), bound read-only, so no JRE is downloaded.
step "the Java taker, compiled against libsnowflake-java $version's jar"
mkdir -p "$work/java/deb" "$work/java/classes"
dpkg-deb -x "$work/debs/n/libsnowflake-java_${version}_$arch.deb" "$work/java/deb" ||
  fail "cannot unpack libsnowflake-java_${version}_$arch.deb"
javac --release 17 -cp "$work/java/deb/usr/share/java/snowflake.jar" -d "$work/java/classes" \
  "$source_dir/tests/system/PackagedTake.java" > "$work/javac.log" 2>&1 ||
  { cat "$work/javac.log"; fail "javac PackagedTake.java against the packaged jar"; }
java_home=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
java_binds=(--bind-ro="$java_home" --bind-ro="$work/java/classes:/mnt/java")
# The JVM's conf/ links into /etc/java-17-openjdk.
[ -d /etc/java-17-openjdk ] && java_binds+=(--bind-ro=/etc/java-17-openjdk)
echo "the container's JVM: $java_home"

# ---- The cached Debian 12 tree.
step "Debian 12 tree ($tree)"
mkdir -p "$cache_root/apt-archives"
exec 9>"$cache_root/.lock"
flock 9
if [ ! -x "$tree/lib/systemd/systemd" ]; then
  command -v debootstrap >/dev/null || skip "no cached tree at $tree and debootstrap is missing"
  mirror=$(sed -n 's/^URIs: *\([^ ]*\/debian\)\/*$/\1/p; s/^deb \(\[[^]]*\] \)\?\([^ ]*\/debian\)\/* .*/\2/p' \
             /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
             2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "making the tree once: debootstrap from $mirror (about 3 minutes)"
  rm -rf "$tree.partial"
  if ! debootstrap --variant=minbase --include=systemd,dbus bookworm "$tree.partial" "$mirror" \
       > "$work/debootstrap.log" 2>&1; then
    tail -20 "$work/debootstrap.log"
    rm -rf "$tree.partial"
    skip "debootstrap from $mirror failed (no network or mirror?), so no tree to boot"
  fi
  # Package lists inside the tree let apt resolve the .debs' dependencies.
  chroot "$tree.partial" apt-get update > "$work/apt-update.log" 2>&1 ||
    { rm -rf "$tree.partial"; skip "apt-get update inside the new tree failed"; }
  chroot "$tree.partial" apt-get clean
  mv "$tree.partial" "$tree"
fi
flock -u 9

# ---- Boot it. nspawn is started from a cgroup of our own (there is no host systemd to
# make a scope), as a child of this script only.
step "boot the tree with systemd-nspawn"
make_own_cgroups "$machine"
cgroups=("${own_cgroups[@]}")
[ ${#cgroups[@]} -gt 0 ] || skip "cannot create a cgroup for the container under /sys/fs/cgroup"

nspawn_pid=""
cleanup() {
  local status=$?
  if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
    kill -TERM "$nspawn_pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$nspawn_pid" 2>/dev/null && kill -KILL "$nspawn_pid" 2>/dev/null
    wait "$nspawn_pid" 2>/dev/null
  fi
  for ((i = ${#cgroups[@]} - 1; i >= 0; i--)); do
    find "${cgroups[$i]}" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  echo "---- total $(elapsed "$test_start") s"
  exit $status
}
trap cleanup EXIT

(
  for cg in "${cgroups[@]}"; do echo $BASHPID > "$cg/cgroup.procs"; done
  exec systemd-nspawn --keep-unit --register=no --console=pipe -q -D "$tree" \
    --volatile=overlay -b -M "$machine" \
    --bind-ro="$work/debs:/mnt/debs" --bind="$cache_root/apt-archives:/var/cache/apt/archives" \
    "${java_binds[@]}" < /dev/null > "$work/console.log" 2>&1
) &
nspawn_pid=$!

leader=""
for _ in $(seq 300); do
  kill -0 "$nspawn_pid" 2>/dev/null ||
    { cat "$work/console.log"; skip "systemd-nspawn exited at once: cannot run a container here"; }
  leader=$(cat /proc/"$nspawn_pid"/task/*/children 2>/dev/null | awk '{print $1}' | head -1)
  [ -n "$leader" ] && [ -S "/proc/$leader/root/run/systemd/private" ] && break
  sleep 0.1
done
[ -n "$leader" ] && [ -S "/proc/$leader/root/run/systemd/private" ] ||
  { tail -30 "$work/console.log"; fail "the container's systemd did not come up within 30 s"; }

# Runs a command inside the container (all its namespaces), with a clean environment.
ct() {
  nsenter -t "$leader" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}
state=$(timeout 60 nsenter -t "$leader" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
          systemctl is-system-running --wait 2>&1)
echo "system state: $state ($(ct systemctl --version | head -1))"

show() { ct systemctl show -p "$1" --value snowflaked; }
is_active() { [ "$(show ActiveState)" = active ]; }
main_pid_is_not() { local p; p=$(show MainPID); [ "$p" != 0 ] && [ "$p" != "$1" ] && is_active; }
# take_max N: N IDs as alice, checks they increase, prints the last.
take_max() {
  local ids
  ids=$(ct runuser -u alice -- snowflakectl next -n "$1") || fail "snowflakectl next -n $1 as alice"
  [ "$(echo "$ids" | wc -l)" -eq "$1" ] || fail "asked for $1 IDs, got: $ids"
  echo "$ids" | sort -n -c 2>/dev/null || fail "IDs out of order"
  echo "$ids" | tail -1
}

# ---- Install N.
step "apt install version $version"
ct apt-get install -y -q --no-install-recommends /mnt/debs/n/snowflaked_"${version}_$arch.deb" \
  /mnt/debs/n/libsnowflake0_"${version}_$arch.deb" /mnt/debs/n/libsnowflake-dev_"${version}_$arch.deb" \
  /mnt/debs/n/python3-snowflake_"${version}_$arch.deb" /mnt/debs/n/libsnowflake-java_"${version}_$arch.deb" \
  > "$work/apt-install-n.log" 2>&1 || { tail -30 "$work/apt-install-n.log"; fail "apt install $version"; }
ct getent group snowflaked > /dev/null || fail "no group snowflaked after install (sysusers)"
[ "$(ct stat -c %U:%G:%a /var/lib/snowflaked)" = snowflaked:snowflaked:750 ] ||
  fail "/var/lib/snowflaked is $(ct stat -c %U:%G:%a /var/lib/snowflaked)"
[ "$(ct systemctl is-enabled snowflaked)" = enabled ] || fail "snowflaked.service not enabled"
ct dpkg-query -W -f '${Conffiles}\n' snowflaked | grep /etc/snowflaked.toml > /dev/null ||
  fail "/etc/snowflaked.toml is not a conffile"
ct test -f /usr/share/man/man8/snowflaked.8.gz || fail "no snowflaked(8)"

step "systemctl start: active after READY=1, STATUS= shown, journal"
ct systemctl stop snowflaked
start=$(now)
ct systemctl start snowflaked || fail "systemctl start snowflaked"
echo "systemctl start returned after $(elapsed "$start") s"
[ "$(show ActiveState)/$(show SubState)" = active/running ] ||
  fail "after start: $(show ActiveState)/$(show SubState)"
status_text=$(show StatusText)
echo "StatusText: $status_text"
[[ $status_text == serving:* ]] || fail "STATUS= is '$status_text', expected serving: ..."
ct systemctl status --no-pager snowflaked > "$work/status.txt" 2>&1
grep -q "Status: \"serving:" "$work/status.txt" || { cat "$work/status.txt"; fail "systemctl status shows no STATUS= text"; }
ct journalctl -u snowflaked -o cat --no-pager > "$work/journal.txt"
grep -q "snowflaked $version starting" "$work/journal.txt" &&
  grep -q "claimed machine" "$work/journal.txt" ||
  { cat "$work/journal.txt"; fail "journalctl -u snowflaked lacks the start-up lines"; }
grep -m 2 "starting\|claimed machine" "$work/journal.txt"
# The host marks' copy on disk (tmpfiles.d): made as the lock directory is, and written by
# the daemon under ProtectSystem=strict (ReadWritePaths=).
[ "$(ct stat -c %U:%G:%a /var/lib/snowflaked-host)" = root:snowflaked-lock:1770 ] ||
  fail "/var/lib/snowflaked-host is $(ct stat -c %U:%G:%a /var/lib/snowflaked-host)"
ct sh -c 'ls /var/lib/snowflaked-host/machine-*.high-water' > /dev/null 2>&1 ||
  fail "the daemon wrote no host mark to /var/lib/snowflaked-host: $(ct ls -la /var/lib/snowflaked-host)"

step "group access: a member takes IDs, a non-member is told the group"
ct useradd -m -G snowflaked alice
ct useradd -m bob
before_kill=$(take_max 100)
if ct runuser -u bob -- snowflakectl next > "$work/bob.out" 2> "$work/bob.err"; then
  fail "bob (not in group snowflaked) took an ID: $(cat "$work/bob.out")"
fi
cat "$work/bob.err"
grep -q "not in group snowflaked" "$work/bob.err" || fail "bob's error does not name group snowflaked"

step "python3-snowflake: a member takes IDs from Python, a non-member gets PermissionDeniedError"
py_take='import snowflake
with snowflake.Client("packaged") as c:
    a = c.next(); b = c.next_batch(3)
    assert a < b[0] < b[1] < b[2], (a, list(b))
    assert c.status()["state"] == "serving"
    print(a, snowflake.decode(a).time.isoformat())'
ct runuser -u alice -- python3 -c "$py_take" > "$work/py-alice.out" 2>&1 ||
  { cat "$work/py-alice.out"; fail "alice could not take IDs with import snowflake"; }
cat "$work/py-alice.out"
py_refused='import snowflake
try:
    snowflake.Client("packaged")
except snowflake.PermissionDeniedError as e:
    print(e.code, e.message)
else:
    raise SystemExit("opened")'
ct runuser -u bob -- python3 -c "$py_refused" > "$work/py-bob.out" 2>&1 ||
  { cat "$work/py-bob.out"; fail "bob was not refused with PermissionDeniedError in Python"; }
grep -q "snowflaked" "$work/py-bob.out" || fail "bob's Python error does not name group snowflaked"

step "libsnowflake-java: a member takes IDs from Java, a non-member gets permission_denied"
ct test -f /usr/share/java/snowflake.jar || fail "no /usr/share/java/snowflake.jar"
ct sh -c 'test -f /usr/lib/*/jni/libsnowflake_jni.so' || fail "no libsnowflake_jni.so in /usr/lib/<triplet>/jni"
# java_take USER take|refused: the packaged jar and JNI library, found as a service finds them.
java_take() {
  ct runuser -u "$1" -- "$java_home/bin/java" -cp /usr/share/java/snowflake.jar:/mnt/java \
    PackagedTake "$2"
}
java_take alice take > "$work/java-alice.out" 2>&1 ||
  { cat "$work/java-alice.out"; fail "alice could not take IDs with libsnowflake-java"; }
cat "$work/java-alice.out"
java_take bob refused > "$work/java-bob.out" 2>&1 ||
  { cat "$work/java-bob.out"; fail "bob was not refused with permission_denied in Java"; }
cat "$work/java-bob.out"

step "SIGKILL: systemd restarts the daemon, IDs continue above"
pid=$(show MainPID); restarts=$(show NRestarts)
ct systemctl kill --kill-who=main -s SIGKILL snowflaked
wait_until 30 "a new daemon after SIGKILL" main_pid_is_not "$pid"
[ "$(show NRestarts)" -gt "$restarts" ] || fail "NRestarts did not grow"
after_kill=$(take_max 100)
[ "$after_kill" -gt "$before_kill" ] || fail "after SIGKILL $after_kill <= $before_kill"
echo "pid $pid -> $(show MainPID); last ID before $before_kill, after $after_kill"

step "SIGSTOP: the watchdog kills and restarts it (WatchdogSec=$(show WatchdogUSec))"
pid=$(show MainPID)
ct systemctl kill --kill-who=main -s SIGSTOP snowflaked
stopped_at=$(now)
process_gone() { ! ct test -d "/proc/$1"; }
wait_until 30 "the watchdog killing the stopped daemon" process_gone "$pid"
killed_after=$(elapsed "$stopped_at")
wait_until 30 "a new daemon after SIGSTOP" main_pid_is_not "$pid"
echo "killed $killed_after s after SIGSTOP (WatchdogSec=5s), serving again after $(elapsed "$stopped_at") s (+ RestartSec=1s + start)"
# The property: it was the watchdog, within WatchdogSec (10 s allows for a loaded host).
awk -v k="$killed_after" 'BEGIN { exit !(k <= 10) }' || fail "killed only after $killed_after s"
# journald writes asynchronously: under load the line may come a moment after the restart.
# grep reads the whole journal (no -q): leaving at the match would close the pipe under
# journalctl, and pipefail would turn its SIGPIPE into a failure.
journal_says_watchdog() { ct journalctl -u snowflaked -o cat --no-pager | grep "Watchdog timeout" > /dev/null; }
wait_until 15 "the journal saying the watchdog fired" journal_says_watchdog
after_stop=$(take_max 100)
[ "$after_stop" -gt "$after_kill" ] || fail "after the watchdog $after_stop <= $after_kill"

step "systemctl stop: a waiting client is told \"stopped\" at once"
ct runuser -u alice -- sh -c \
  'snowflakectl next -n 1000000000 > /dev/null 2> /tmp/waiter.err; echo $? > /tmp/waiter.rc
   date +%s.%N > /tmp/waiter.exit' &
waiter=$!
wait_until 10 "the waiting client taking IDs" \
  ct sh -c 'snowflakectl status --json | grep -q "\"taken_total\": *[1-9][0-9]\{5,\}"'
stop_start=$(now)
ct systemctl stop snowflaked
stop_took=$(elapsed "$stop_start")
wait_until 5 "the waiting client's exit after the stop" ct test -s /tmp/waiter.exit
wait "$waiter"
told_after=$(awk -v a="$stop_start" -v b="$(ct cat /tmp/waiter.exit)" 'BEGIN { printf "%.2f", b - a }')
echo "systemctl stop took $stop_took s; the client exited $told_after s after the stop began," \
     "status $(ct cat /tmp/waiter.rc): $(ct cat /tmp/waiter.err)"
[ "$(ct cat /tmp/waiter.rc)" = 1 ] || fail "the waiting client exited $(ct cat /tmp/waiter.rc), expected 1"
ct grep -q stopped /tmp/waiter.err || fail "the waiting client was not told \"stopped\""

step "systemd-analyze security snowflaked: exposure <= 1.0"
ct systemctl start snowflaked
exposure=$(ct systemd-analyze security --no-pager snowflaked | sed -n 's/.*Overall exposure level for snowflaked.service: \([0-9.]*\).*/\1/p')
echo "overall exposure: $exposure"
[ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 1.0) }' || fail "exposure '$exposure' > 1.0"

step "upgrade $version -> $next_version: the daemon restarts, IDs continue above"
before_upgrade=$(take_max 100)
pid=$(show MainPID)
ct apt-get install -y -q --no-install-recommends /mnt/debs/n1/snowflaked_"${next_version}_$arch.deb" \
  /mnt/debs/n1/libsnowflake0_"${next_version}_$arch.deb" /mnt/debs/n1/libsnowflake-dev_"${next_version}_$arch.deb" \
  /mnt/debs/n1/python3-snowflake_"${next_version}_$arch.deb" \
  /mnt/debs/n1/libsnowflake-java_"${next_version}_$arch.deb" \
  > "$work/apt-install-n1.log" 2>&1 || { tail -30 "$work/apt-install-n1.log"; fail "apt install $next_version"; }
[ "$(ct dpkg-query -W -f '${Version}' snowflaked)" = "$next_version" ] || fail "not upgraded"
[ "$(ct snowflaked --version)" = "snowflaked $next_version" ] || fail "snowflaked --version: $(ct snowflaked --version)"
main_pid_is_not "$pid" || fail "the daemon was not restarted by the upgrade (pid $pid)"
ct journalctl -u snowflaked -o cat --no-pager | grep "snowflaked $next_version starting" > /dev/null ||
  fail "the journal has no start of $next_version"
after_upgrade=$(take_max 100)
[ "$after_upgrade" -gt "$before_upgrade" ] || fail "after upgrade $after_upgrade <= $before_upgrade"
echo "pid $pid -> $(show MainPID); last ID before $before_upgrade, after $after_upgrade"
[ "$(ct dpkg-query -W -f '${Version}' libsnowflake-java)" = "$next_version" ] ||
  fail "libsnowflake-java not upgraded"
java_take alice take > "$work/java-upgraded.out" 2>&1 ||
  { cat "$work/java-upgraded.out"; fail "Java could not take IDs after the upgrade"; }
echo "Java after the upgrade: $(cat "$work/java-upgraded.out")"

step "apt remove keeps the state; purge removes it and a reinstall continues above"
ct apt-get remove -y -q snowflaked > "$work/apt-remove.log" 2>&1 || fail "apt remove"
ct test -f /var/lib/snowflaked/high-water.json || fail "remove deleted /var/lib/snowflaked/high-water.json"
ct test -f /etc/snowflaked.toml || fail "remove deleted the conffile"
ct test -e /usr/sbin/snowflaked && fail "remove left /usr/sbin/snowflaked"
ct apt-get purge -y -q snowflaked > "$work/apt-purge.log" 2>&1 || fail "apt purge"
ct test -e /var/lib/snowflaked && fail "purge left /var/lib/snowflaked"
ct test -e /etc/snowflaked.toml && fail "purge left /etc/snowflaked.toml"
ct getent passwd snowflaked > /dev/null || fail "purge removed the system user (Debian keeps it)"
ct apt-get install -y -q --no-install-recommends /mnt/debs/n1/snowflaked_"${next_version}_$arch.deb" \
  > "$work/apt-reinstall.log" 2>&1 || fail "apt install after purge"
after_purge=$(take_max 100)
[ "$after_purge" -gt "$after_upgrade" ] || fail "after purge+reinstall $after_purge <= $after_upgrade"

step "power off"
kill -TERM "$nspawn_pid"
wait_until 20 "the container's power-off" eval '! kill -0 '"$nspawn_pid"' 2>/dev/null'
wait "$nspawn_pid" 2>/dev/null
nspawn_pid=""
step_name="power off"
echo "  ok  $step_name ($(elapsed "$step_start") s)"
echo "PASS: packages $version and $next_version under systemd in $(elapsed "$test_start") s"
