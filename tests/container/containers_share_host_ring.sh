#!/usr/bin/env bash
# Containers take IDs from the host's daemon: one machine number per host, shared through
# the host's runtime directory, never one per container.
#
#   containers_share_host_ring.sh SOURCE_DIR WORK_DIR DEBS_DIR SNOWFLAKED SNOWFLAKECTL \
#                                 TAKE_IDS PYTHONPATH [GO_EXAMPLE]
#
# DEBS_DIR holds the output of scripts/package (version N, as the system test builds it).
# Part 1 (the ring): a snowflaked on the host (the build's binary, a runtime directory on
# tmpfs, group 4101 = the image's snowflaked group); containers of the image
# deploy/Containerfile builds take IDs through the bind-mounted directory with
# snowflakectl, a C ABI program (TAKE_IDS) and Python while the host takes too; every ID
# of the union is unique and carries the host daemon's machine number; a container user
# not in the group, and a user namespace that does not map the group, are refused with
# the client's permission_denied error naming the group; a daemon restart on the host
# (with a new segment) is reported inside at once and taking continues from the new
# segment. GO_EXAMPLE (bindings/go/example built with CGO_ENABLED=0: a static binary; ""
# or absent where the build has no Go) runs in an image that holds that binary and
# nothing else, taking beside the others; its IDs join the union.
# Part 2 (Kubernetes): deploy/kubernetes/snowflaked.yaml's DaemonSet pod template, played
# as a Pod with `podman kube play` (podman 4.3 plays no DaemonSet) against a real etcd on
# 127.0.0.1, and deploy/kubernetes/example-app.yaml's Deployment beside it; the app takes
# IDs through the hostPath, the front answers on the liveness probe's path.
#
# Images are made offline: the system test's cached Debian 12 tree (debootstrap) is
# imported as localhost/debian:bookworm, and `podman build` makes
# localhost/snowflaked:VERSION from deploy/Containerfile with the .debs; nothing is ever
# pulled (--pull=never, no registries configured). podman keeps its images under
# $SNOWFLAKE_NSPAWN_CACHE_ROOT/podman (default /var/cache/snowflake-test/podman), apart
# from the host's own podman storage.
#
# If podman cannot run a container here (checked with `podman run` of the imported image,
# with crun and then runc), or SNOWFLAKE_CONTAINER_ENGINE=nspawn (ctest's
# container_ids_from_host_daemon_nspawn), the test says why and runs the same checks in
# systemd-nspawn containers of the same tree with the packages installed (made once per
# package build, cached under $SNOWFLAKE_NSPAWN_CACHE_ROOT/nspawn), each with the host's
# boot id (nspawn_boot_id_fix), except the namespace mapping only the group (nspawn maps
# one range) and the Go example's take (a tree of the binary alone cannot unmount nspawn's
# boot id: that sub-step checks the refusal instead and says it skipped the take). Part 2
# then runs the nspawn stand-in for `podman kube play`: every container of the same pod
# specs, as kube_pods.py writes them into nspawn.json.
#
# Exit 0: every check passed. 77 (ctest SKIP_RETURN_CODE): neither podman nor nspawn can
# run here (not root, tools missing, no tree); the reason is printed. Else a check failed.
set -uo pipefail

source_dir=$1
work=$2
debs=$3
snowflaked=$4
snowflakectl=$5
take_ids=$6
pythonpath=$7
go_example=${8:-}
cache_root=${SNOWFLAKE_NSPAWN_CACHE_ROOT:-/var/cache/snowflake-test}
tree=$cache_root/bookworm
podman_root=$cache_root/podman
engine=${SNOWFLAKE_CONTAINER_ENGINE:-auto}   # auto, podman or nspawn (to test the fallback)
group_id=4101                                # the image's snowflaked group (Containerfile)
app_uid=1000

# skip, fail, step, wait_until and the clock helpers
source "$source_dir/tests/support/script_steps.sh"
# boot_id_verdict FILE...: fails, saying why, if a client in a container refused the host's
# segment as another boot's: the container does not see the host's boot id.
boot_id_verdict() {
  grep -h "earlier boot" "$@" 2>/dev/null | head -1 | grep . &&
    fail "a client in a container took the host's segment for one of an earlier boot: the" \
      "container's boot id is not the host's ($(cat /proc/sys/kernel/random/boot_id));" \
      "under systemd-nspawn its own must be unmounted first (docs/kubernetes.md, Other container engines)"
  return 0
}
# machines FILES...: the distinct machine numbers in the IDs (bits 12-21) of the files.
machines() { cat "$@" | grep -h '^[0-9]' | python3 -c 'import sys; print(" ".join(sorted({str((int(l) >> 12) & 1023) for l in sys.stdin})))'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

[ "$(id -u)" -eq 0 ] || skip "containers need root (running as uid $(id -u))"
[ -x "$tree/lib/systemd/systemd" ] || skip "no cached Debian tree at $tree: the system test" \
  "(system_packages_under_systemd) makes it with debootstrap; run it once"
version=$(sed -n 's/^project([^)]*VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
arch=$(dpkg --print-architecture)
image=localhost/snowflaked:$version
for p in snowflaked libsnowflake0 python3-snowflake; do
  [ -f "$debs/${p}_${version}_$arch.deb" ] || fail "no $debs/${p}_${version}_$arch.deb (scripts/package)"
done

rm -rf "$work"
mkdir -p "$work"
run_dir=$(mktemp -d /dev/shm/snowflake-container-test.XXXXXX)   # tmpfs, as /run is
# The kube node's host paths: short, since a client reaches the control socket by its path
# (an AF_UNIX path holds at most 107 bytes, which the build directory's may exceed).
kube_node=$(mktemp -d /dev/shm/snowflake-kube-node.XXXXXX)
daemon_pid=""
etcd_pid=""
podman_used=""
nspawn_cgroups=()
declare -A kube_pids=()   # POD/CONTAINER -> the pid of its systemd-nspawn (nspawn stand-in)
cleanup() {
  local status=$?
  [ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  if [ -n "$podman_used" ]; then
    pm pod rm -f -t 2 -a > /dev/null 2>&1
    pm rm -f -t 2 -a > /dev/null 2>&1
    pm secret rm -a > /dev/null 2>&1
  fi
  for ct in "${!kube_pids[@]}"; do
    kill -TERM "${kube_pids[$ct]}" 2>/dev/null && wait "${kube_pids[$ct]}" 2>/dev/null
  done
  [ -n "$etcd_pid" ] && kill -TERM "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
  # This shell leaves its cgroups first (the hierarchies' roots, where make_own_cgroups
  # made them): a cgroup with a process in it cannot be removed.
  for ((i = ${#nspawn_cgroups[@]} - 1; i >= 0; i--)); do
    echo $$ > "${nspawn_cgroups[$i]%/*}/cgroup.procs"
    find "${nspawn_cgroups[$i]}" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$run_dir" "$kube_node"
  [ -n "${podman_lock_fd:-}" ] && flock -u "$podman_lock_fd"
  echo "---- total $(elapsed "$test_start") s"
  exit $status
}
trap cleanup EXIT

# ---- podman, with storage and configuration of the test's own.
pm() {
  CONTAINERS_CONF=$work/containers.conf CONTAINERS_REGISTRIES_CONF=$work/registries.conf \
    podman --root "$podman_root/storage" --runroot "$podman_root/run" "$@"
}
podman_why=""
podman_can_run() {
  command -v podman > /dev/null || { podman_why="podman is not installed (scripts/setup installs it)"; return 1; }
  mkdir -p "$podman_root"
  exec {podman_lock_fd}>"$podman_root/.lock"
  flock "$podman_lock_fd"
  podman_used=1
  # No registry at all: an image that is not here is an error, never a pull.
  printf 'unqualified-search-registries = []\n' > "$work/registries.conf"
  # The container's limits are the host's own: crun/runc may not raise them above the
  # hard limits (no CAP_SYS_RESOURCE in a container), and podman lowers its own nproc.
  local nofile nproc
  nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] && nofile=1048576
  { [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
  write_containers_conf() {
    printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n[engine]\nruntime = "%s"\n' \
      "$nofile" "$nofile" "$nproc" "$nproc" "$1" > "$work/containers.conf"
  }
  write_containers_conf crun
  pm pod rm -f -a > /dev/null 2>&1; pm rm -f -a > /dev/null 2>&1
  # The base image: the cached tree, imported once per change of the tree.
  local key
  key=$(stat -c %Y "$tree/var/lib/dpkg/status")-$(stat -c %Y "$tree")
  if [ "$(pm image inspect --format '{{index .Labels "snowflake.tree"}}' localhost/debian:bookworm 2>/dev/null)" != "$key" ]; then
    echo "importing $tree as localhost/debian:bookworm"
    tar -C "$tree" -c . | pm import --change "LABEL snowflake.tree=$key" - localhost/debian:bookworm \
      > "$work/import.log" 2>&1 || { cat "$work/import.log"; podman_why="podman import failed"; return 1; }
  else
    echo "localhost/debian:bookworm is the cached tree's import ($key)"
  fi
  local runtime out
  for runtime in crun runc; do
    command -v "$runtime" > /dev/null || { podman_why+="$runtime: not installed; "; continue; }
    write_containers_conf "$runtime"
    if out=$(pm run --rm --pull=never --network none localhost/debian:bookworm true 2>&1); then
      echo "podman $(pm version --format '{{.Client.Version}}') runs containers here with $runtime"
      return 0
    fi
    echo "podman run with $runtime failed: $out"
    podman_why+="$runtime: $out; "
  done
  return 1
}

# ---- systemd-nspawn: the cached tree with the packages installed, kept under
# $cache_root/nspawn keyed by what made it (the tree, the .debs, nspawn_install itself),
# so a tree of other packages is never used. Each run holds a shared lock on its tree;
# a tree of another key is removed only when no run holds it.
nspawn_install() {   # nspawn_install DIR: the packages into the copy DIR, as the image has them
  groupadd -R "$1" --system --gid "$group_id" snowflaked &&
    useradd -R "$1" --system --uid "$group_id" --gid snowflaked --no-create-home \
      --home-dir /var/lib/snowflaked --shell /usr/sbin/nologin snowflaked &&
    systemd-nspawn -q --register=no --keep-unit -D "$1" --pipe \
      --bind="$cache_root/apt-archives:/var/cache/apt/archives" --bind-ro="$debs:/mnt/debs" \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      /mnt/debs/snowflaked_"${version}_$arch.deb" /mnt/debs/libsnowflake0_"${version}_$arch.deb" \
      /mnt/debs/python3-snowflake_"${version}_$arch.deb"
}
nspawn_prepare() {
  command -v systemd-nspawn > /dev/null || skip "podman cannot run containers ($podman_why) and systemd-nspawn is not installed"
  make_own_cgroups "sfctest$$"
  nspawn_cgroups+=("${own_cgroups[@]}")
  [ ${#nspawn_cgroups[@]} -gt 0 ] || skip "podman cannot run containers ($podman_why) and no cgroup for nspawn"
  # nspawn is started from a cgroup of our own (there is no host systemd to make a scope).
  for cg in "${nspawn_cgroups[@]}"; do echo $$ > "$cg/cgroup.procs"; done
  local trees=$cache_root/nspawn key old
  key=$( { sha256sum "$tree/var/lib/dpkg/status"; stat -c %Y "$tree"
           sha256sum "$debs"/{snowflaked,libsnowflake0,python3-snowflake}_"${version}_$arch.deb" | cut -d' ' -f1
           declare -f nspawn_install; } | sha256sum | cut -c1-16)
  nspawn_tree=$trees/snowflaked-$key
  mkdir -p "$trees" "$cache_root/apt-archives"
  exec {trees_lock_fd}>"$trees/.lock"
  flock "$trees_lock_fd"
  if [ -x "$nspawn_tree/usr/sbin/snowflaked" ]; then
    echo "$nspawn_tree: the cached tree with these packages"
  else
    echo "making $nspawn_tree: the tree with the packages installed (apt log: $work/nspawn-apt.log)"
    rm -rf "$nspawn_tree.new"
    cp -a "$tree" "$nspawn_tree.new"
    nspawn_install "$nspawn_tree.new" > "$work/nspawn-apt.log" 2>&1 ||
      { tail -20 "$work/nspawn-apt.log"; rm -rf "$nspawn_tree.new"; flock -u "$trees_lock_fd"; fail "apt install in the nspawn tree"; }
    grep -E "^(Get:|Fetched)" "$work/nspawn-apt.log" | tail -2
    mv "$nspawn_tree.new" "$nspawn_tree"
  fi
  exec {tree_lock_fd}>"$nspawn_tree.lock"
  flock -s "$tree_lock_fd"
  for old in "$trees"/snowflaked-*.lock; do
    [ -f "$old" ] && [ "$old" != "$nspawn_tree.lock" ] || continue
    # A tree some run uses (it holds a shared lock) is left alone.
    if exec {old_fd}<>"$old" && flock -n -x "$old_fd"; then
      echo "removing the cached tree of other packages ${old%.lock}"
      rm -rf "${old%.lock}" "${old%.lock}.new" "$old"
    fi
    [ -n "${old_fd:-}" ] && exec {old_fd}>&-
  done
  flock -u "$trees_lock_fd"
}

if [ "$engine" != nspawn ] && { step "can podman run containers here?"; podman_can_run; }; then
  engine=podman
else
  [ "$engine" = nspawn ] && podman_why="SNOWFLAKE_CONTAINER_ENGINE=nspawn"
  [ "$engine" = podman ] && fail "podman cannot run containers here: $podman_why"
  echo "NOTE: podman cannot run containers here ($podman_why); running the same checks with systemd-nspawn"
  engine=nspawn
  step "nspawn: the tree with the packages installed"
  nspawn_prepare
fi

# The boot id. A client refuses a segment whose boot id (shm/LAYOUT.md) is not its own
# host's, "left by an earlier boot". nspawn mounts a fresh id of its own over the kernel's
# /proc/sys/kernel/random/boot_id (systemd 252: a file it deletes at once, mounted twice:
# on /proc and, once /proc/sys is made read-only, again there), so a bind over it fails
# (ENOENT: the kernel mounts nothing on a deleted file) and --bind= cannot reach /proc
# (mounted after the binds). The kernel's file below is the host's boot id, the one
# podman and Kubernetes show: each container's command runs in a mount namespace of its
# own (unshare -m, as docs/kubernetes.md tells users) where nspawn's mounts are unmounted
# until the file is procfs's own again (same device as its directory).
nspawn_boot_id_fix='f=/proc/sys/kernel/random/boot_id
n=0
while [ "$(stat -c %d "$f")" != "$(stat -c %d "${f%/*}")" ]; do
  n=$((n + 1))
  if [ "$n" -gt 4 ] || ! umount "$f"; then
    echo "nspawn_ct: $f is still not the kernel'"'"'s after $((n - 1)) umounts" >&2; exit 125
  fi
done
if [ "$1" = ro ]; then
  mount -o remount,bind,ro / || exit 125
fi
shift
exec "$@"'
# nspawn_ct [OPTION]... -- CMD...: runs CMD in a fresh nspawn container of the tree (an
# overlay: the cached tree stays as it is), on the host's network, with the host's boot
# id. Options: --bind=SRC:DST and --bind-ro=SRC:DST (nspawn's), --kill-signal=SIG (what
# nspawn sends its container on SIGTERM), --user UID:GID and --groups G,G (- for none;
# default root), --env K=V, --nnp (no new privileges), --read-only-root, --userns (a user
# namespace mapping 200000-265535 to 0-65535: none of the host's ids), --exec (the shell
# becomes systemd-nspawn: started with &, $! is then nspawn's pid, to stop it and to find
# the container's PID 1, its child).
nspawn_ct() {
  # A machine name per container (the shell's pid: containers started at once run in
  # subshells of their own): nspawn keeps per-name state under /run/systemd/nspawn.
  local opts=(-q --register=no --keep-unit -D "$nspawn_tree" --volatile=overlay --pipe
              -M "sfc$BASHPID")
  local user=0:0 groups=- envs=() nnp=() root=rw exec=()
  while [ "$1" != -- ]; do
    case $1 in
      --bind=*|--bind-ro=*|--kill-signal=*) opts+=("$1");;
      --user) user=$2; shift;;
      --groups) groups=$2; shift;;
      --env) envs+=("$2"); shift;;
      --nnp) nnp=(--no-new-privs);;
      --read-only-root) root=ro;;
      --exec) exec=(exec);;
      # Files of the tree show as nobody's (ownership off): nspawn's id-mapped mounts do
      # not work on its overlay root.
      --userns) opts+=(--private-users=200000:65536 --private-users-ownership=off);;
      *) echo "nspawn_ct: unknown option $1" >&2; return 99;;
    esac
    shift
  done
  shift
  local priv=(setpriv --reuid="${user%:*}" --regid="${user#*:}" "${nnp[@]}")
  if [ "$groups" = - ]; then priv+=(--clear-groups); else priv+=(--groups="$groups"); fi
  "${exec[@]}" systemd-nspawn "${opts[@]}" env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 "${envs[@]}" unshare -m sh -c "$nspawn_boot_id_fix" sh "$root" \
    "${priv[@]}" -- "$@"
}

# in_ct [--no-group] [--userns] [--env K=V] CMD...: runs CMD as uid 1000 in a fresh
# container with the host's runtime directory at /run/snowflaked and TAKE_IDS as
# /usr/local/bin/take_ids; with the daemon's group unless --no-group; in a user
# namespace that maps neither the host's root nor its group 4101 with --userns, or one that
# maps exactly the group with --userns-map-group.
in_ct() {
  local groups=yes userns="" envs=()
  while [[ ${1:-} == --* ]]; do
    case $1 in
      --no-group) groups="";;
      --userns) userns=unmapped;;
      --userns-map-group) userns=mapped;;
      --env) envs+=("$2"); shift;;
    esac
    shift
  done
  if [ "$engine" = podman ]; then
    local args=(run --rm --pull=never --network none --user "$app_uid:$app_uid"
                -v "$run_dir:/run/snowflaked:ro")
    [ -n "$groups" ] && args+=(--group-add "$group_id")
    for e in "${envs[@]}"; do args+=(--env "$e"); done
    if [ -n "$userns" ]; then
      # podman's id-shifted copy of the image's layers fails on some hosts (overlay on
      # overlay: EPERM), so the user-namespace runs use the mounted image as an overlay
      # root; /run is a fresh tmpfs the namespace's root owns (mount points go there).
      args+=(--uidmap 0:200000:65536 --mount type=tmpfs,destination=/run,notmpcopyup
             -v "$take_ids:/run/bin/take_ids:ro" --env PATH=/run/bin:/usr/bin:/bin)
      if [ "$userns" = mapped ]; then
        args+=(--gidmap "0:200000:$group_id" --gidmap "$group_id:$group_id:1"
               --gidmap "$((group_id + 1)):$((200000 + group_id + 1)):$((65536 - group_id - 1))")
      else
        args+=(--gidmap 0:200000:65536)
      fi
      args+=(--rootfs "$image_mount:O" "$@")
    else
      args+=(-v "$take_ids:/usr/local/bin/take_ids:ro" --entrypoint "$1" "$image" "${@:2}")
    fi
    pm "${args[@]}"
  else
    local args=(--bind-ro="$run_dir:/run/snowflaked" --bind-ro="$take_ids:/usr/local/bin/take_ids"
                --user "$app_uid:$app_uid" --groups -)
    [ -n "$groups" ] && args[-1]=$group_id
    if [ "$userns" = unmapped ]; then
      args+=(--userns)
    elif [ "$userns" = mapped ]; then
      echo "nspawn maps one contiguous range only: the group cannot be mapped alone" >&2
      return 99
    fi
    for e in "${envs[@]}"; do args+=(--env "$e"); done
    nspawn_ct "${args[@]}" -- "$@"
  fi
}

if [ "$engine" = podman ]; then
  step "podman build -f deploy/Containerfile (base localhost/debian:bookworm, the .debs of $version)"
  mkdir -p "$work/context" "$cache_root/apt-archives"
  cp "$debs"/snowflaked_"${version}_$arch.deb" "$debs"/libsnowflake0_"${version}_$arch.deb" \
     "$debs"/python3-snowflake_"${version}_$arch.deb" "$work/context/"
  # The apt cache the system test fills: the packages' dependencies come from it (or, once,
  # from the tree's Debian mirror), never from an image registry.
  pm build --pull=never -f "$source_dir/deploy/Containerfile" \
    --build-arg BASE=localhost/debian:bookworm -v "$cache_root/apt-archives:/var/cache/apt/archives" \
    -t "$image" "$work/context" > "$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; fail "podman build of deploy/Containerfile"; }
  grep -E "^(Get:|Fetched)" "$work/build.log" | tail -2
  [ "$(pm run --rm --pull=never --network none "$image" --version)" = "snowflaked $version" ] ||
    fail "$image does not run snowflaked $version"
  pm image inspect --format '{{.Config.User}} {{.Config.Entrypoint}}' "$image"
  [ "$(pm run --rm --pull=never --network none --entrypoint getent "$image" group snowflaked | cut -d: -f3)" = "$group_id" ] ||
    fail "the image's group snowflaked is not gid $group_id"
  image_mount=$(pm image mount "$image") || fail "podman image mount $image"
fi

# ---- The Go example service (static, CGO_ENABLED=0) with nothing else beside it: under
# podman an image whose one layer holds only the binary (podman then adds, in the
# container's own layer, the mount points /proc, /dev, /sys, /run/snowflaked, the files
# it binds, /etc/hosts, /etc/hostname and /run/.containerenv, and /etc/passwd and
# /etc/group lines for --user); under nspawn a tree of the binary and an empty /usr
# (systemd-nspawn refuses a directory without /usr as "no OS tree").
go_image=localhost/snowflake-go-example:$version
if [ -z "$go_example" ]; then
  echo "this build has no Go binding: no scratch-image taker"
else
  step "an image of the Go example alone ($go_example)"
  [ -x "$go_example" ] || fail "no Go example binary at $go_example (bindings/go builds it)"
  mkdir -p "$work/scratch/usr"
  cp "$go_example" "$work/scratch/orders"
  if [ "$engine" = podman ]; then
    tar -C "$work/scratch" -c orders |
      pm import --change 'ENTRYPOINT ["/orders"]' - "$go_image" > "$work/go-import.log" 2>&1 ||
      fail_with_log "$work/go-import.log" "podman import of the Go example"
    go_mount=$(pm image mount "$go_image") || fail "podman image mount $go_image"
    content=$(cd "$go_mount" && find . -mindepth 1 | tr '\n' ' ')
    pm image unmount "$go_image" > /dev/null
    echo "$go_image holds: $content"
    [ "$content" = "./orders " ] || fail "$go_image holds more than the binary: $content"
  fi
fi
# in_scratch ARG...: the Go example with ARGs as uid 1000 with the daemon's group, the
# host's runtime directory at /run/snowflaked (under nspawn as root: nspawn's --user looks
# the user up with getent inside, which a tree of one binary does not have).
in_scratch() {
  if [ "$engine" = podman ]; then
    pm run --rm --pull=never --network none --user "$app_uid:$app_uid" --group-add "$group_id" \
      -v "$run_dir:/run/snowflaked" "$go_image" "$@"
  else
    systemd-nspawn -q --register=no --keep-unit -D "$work/scratch" --volatile=overlay --pipe \
      -M "sfc$BASHPID" --bind="$run_dir:/run/snowflaked" /orders "$@"
  fi
}

# ---- Part 1: the host's daemon, containers and host processes share its ring.
step "the host's snowflaked (group $group_id, runtime dir $run_dir)"
mkdir -p "$work/host/state" "$work/host/lock"
chgrp "$group_id" "$run_dir" && chmod 0750 "$run_dir"
# Machine numbers 700-709: the Kubernetes part's daemon claims 0 from its own register, so
# the two daemons' IDs can be told apart by their machine number.
# A liveness of 500 ms, not the default 50: six takers start at once beside the container
# runtime on two cores, and a heartbeat 56 ms old once made a container's snowflakectl
# report the daemon hung (as it must). This test is about sharing the ring across the
# container boundary; reporting a stalled daemon at once has tests of its own.
write_host_config() {
  printf '[daemon]\nruntime_dir = "%s"\nstate_dir = "%s"\ngroup = "%s"\nliveness_ms = 500\n[register]\nmachines = "700-709"\n[ring]\ncapacity = %s\n' \
    "$run_dir" "$work/host/state" "$group_id" "$1" > "$work/host.toml"
}
# At nice -10, as the unit runs it (Nice=-10): its heartbeat stays on time on a busy host.
start_daemon() {
  SNOWFLAKE_HOST_LOCK_DIR=$work/host/lock nice -n -10 "$snowflaked" --config "$work/host.toml" \
    >> "$work/daemon.log" 2>&1 &
  daemon_pid=$!
  wait_until 20 "the host daemon serving" \
    sh -c "'$snowflakectl' --runtime-dir '$run_dir' status --json 2>/dev/null | grep -q '\"state\": *\"serving\"'"
}
write_host_config 4096
start_daemon
host_machine=$("$snowflakectl" --runtime-dir "$run_dir" status --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["machine"])')
echo "host daemon pid $daemon_pid serves machine $host_machine"

step "takes at once: host (snowflakectl, C, Python) and containers (snowflakectl, C, Python)"
ids=$work/ids
mkdir -p "$ids"
py_take='import sys, snowflake
with snowflake.Client("py") as c:
    batch = c.next_batch(int(sys.argv[1]))
    print("\n".join(map(str, batch)))
    print("machine", c.decode(batch[-1]).machine)'
export SNOWFLAKE_RUNTIME_DIR=$run_dir
"$snowflakectl" next -n 20000 > "$ids/host-ctl" 2> "$work/host-ctl.err" &
host_jobs=($!)
"$take_ids" host-c 20000 > "$ids/host-c" 2> "$work/host-c.err" &
host_jobs+=($!)
if [ -n "$pythonpath" ]; then
  PYTHONPATH=$pythonpath python3 -c "$py_take" 20000 > "$ids/host-py" 2> "$work/host-py.err" &
  host_jobs+=($!)
else
  echo "this build has no Python module: the host takes with snowflakectl and C only"
fi
in_ct snowflakectl next -n 20000 > "$ids/ct-ctl" 2> "$work/ct-ctl.err" &
ct_jobs=($!)
in_ct take_ids ct-c 20000 > "$ids/ct-c" 2> "$work/ct-c.err" &
ct_jobs+=($!)
in_ct python3 -c "$py_take" 20000 > "$ids/ct-py" 2> "$work/ct-py.err" &
ct_jobs+=($!)
if [ -n "$go_example" ] && [ "$engine" = podman ]; then
  in_scratch -n 20000 > "$work/ct-go.out" 2> "$work/ct-go.err" &
  ct_jobs+=($!)
fi
for job in "${host_jobs[@]}" "${ct_jobs[@]}"; do
  wait "$job" || { tail -n 5 "$work"/*.err; boot_id_verdict "$work"/*.err; fail "a taker failed (job $job)"; }
done
# The example prints "ID TIME" per line.
[ -f "$work/ct-go.out" ] && cut -d' ' -f1 "$work/ct-go.out" > "$ids/ct-go"
for f in "$ids"/*; do
  n=$(grep -c '^[0-9]' "$f")
  [ "$n" -eq 20000 ] || { head -3 "$f"; fail "$(basename "$f"): $n IDs, expected 20000"; }
  grep '^[0-9]' "$f" | sort -n -c 2>/dev/null || fail "$(basename "$f"): IDs not increasing"
  echo "$(basename "$f"): $n IDs, $(head -1 "$f") .. $(grep '^[0-9]' "$f" | tail -1)"
done

expected=$(( $(ls "$ids" | wc -l) * 20000 ))
step "all $expected IDs are unique and carry the host's machine number $host_machine"
all=$(cat "$ids"/* | grep -c '^[0-9]')
unique=$(cat "$ids"/* | grep '^[0-9]' | sort -u | wc -l)
echo "union: $all IDs, $unique distinct"
[ "$all" -eq "$expected" ] && [ "$unique" -eq "$all" ] || fail "duplicates: $all IDs, $unique distinct"
machines=$(machines "$ids"/*)
echo "machine numbers in the IDs: $machines"
[ "$machines" = "$host_machine" ] || fail "IDs carry machine numbers '$machines', expected $host_machine"
for f in ct-c ct-py host-c ${pythonpath:+host-py}; do
  grep -qx "machine $host_machine" "$ids/$f" || fail "$f decodes machine $(grep machine "$ids/$f")"
done
ct_status=$(in_ct snowflakectl status --json) || fail "snowflakectl status in a container"
ct_machine=$(echo "$ct_status" | python3 -c 'import json, sys; print(json.load(sys.stdin)["machine"])')
echo "snowflakectl status inside: machine $ct_machine"
[ "$ct_machine" = "$host_machine" ] || fail "the container sees machine $ct_machine, the host $host_machine"

if [ -n "$go_example" ] && [ "$engine" = nspawn ]; then
  step "nspawn: the Go example in a tree of itself and an empty /usr"
  # nspawn mounts a boot id of its own over the kernel's, and only a program in the tree
  # (nspawn_boot_id_fix: sh, umount) can unmount it: the client then refuses the host's
  # segment as an earlier boot's, which is checked here instead of a take.
  if in_scratch -n 1 > "$work/nspawn-go.out" 2> "$work/nspawn-go.err"; then
    fail "the Go example took an ID under nspawn's boot id: $(cat "$work/nspawn-go.out")"
  fi
  cat "$work/nspawn-go.err"
  grep -q "^snowflake: daemon_not_running: .*earlier boot of this host" "$work/nspawn-go.err" ||
    fail "the Go example under nspawn did not fail as a client seeing another boot id"
  echo "SKIP (this sub-step only): no IDs from the Go example under nspawn: a tree of one" \
    "binary cannot unmount nspawn's boot id; under podman it takes 20000 beside the others"
fi

step "a container user not in group $group_id is refused, with the group named"
if in_ct --no-group snowflakectl next > "$work/nogroup.out" 2> "$work/nogroup.err"; then
  fail "a user without the group took an ID: $(cat "$work/nogroup.out")"
fi
cat "$work/nogroup.err"
grep -q "group snowflaked (gid $group_id)" "$work/nogroup.err" ||
  fail "snowflakectl's error does not name group snowflaked (gid $group_id)"
in_ct --no-group take_ids c 1 > "$work/nogroup-c.out" 2>&1 && fail "the C program took an ID without the group"
cat "$work/nogroup-c.out"
grep -q "^error permission_denied: .*snowflaked" "$work/nogroup-c.out" || fail "the C error is not permission_denied naming the group"
py_refused='import snowflake
try:
    snowflake.Client("py")
except snowflake.PermissionDeniedError as e:
    print(e.code, e.message)
else:
    raise SystemExit("opened")'
in_ct --no-group python3 -c "$py_refused" > "$work/nogroup-py.out" 2>&1 ||
  { cat "$work/nogroup-py.out"; fail "Python without the group: no PermissionDeniedError"; }
grep -q "^permission_denied .*snowflaked" "$work/nogroup-py.out" || fail "the Python error does not name the group"

step "a user namespace that does not map group $group_id is refused (as with --userns=auto)"
if in_ct --userns snowflakectl next > "$work/userns.out" 2> "$work/userns.err"; then
  fail "a container in a user namespace without the group took an ID: $(cat "$work/userns.out")"
fi
cat "$work/userns.err"
# Inside such a namespace the directory's group shows as the overflow group.
grep -q "permission denied entering runtime directory /run/snowflaked .*(gid 65534)" "$work/userns.err" ||
  fail "the error does not say the runtime directory's group is unmapped (gid 65534)"
# ... and the advice is to map the group: joining one inside the namespace cannot help.
grep -q "user namespace that does not map the daemon's group" "$work/userns.err" ||
  fail "the CLI's error does not say the namespace must map the group"
grep -q "usermod" "$work/userns.err" && fail "the CLI advises usermod inside a user namespace"
in_ct --userns take_ids c 1 > "$work/userns-c.out" 2>&1 && fail "the C program took an ID in the user namespace"
grep -q "^error permission_denied: " "$work/userns-c.out" || { cat "$work/userns-c.out"; fail "the C error is not permission_denied"; }
grep -q "user namespace that does not map the daemon's group" "$work/userns-c.out" ||
  { cat "$work/userns-c.out"; fail "the C error does not say the namespace must map the group"; }
if [ "$engine" = podman ]; then
  step "a user namespace that maps group $group_id to itself takes IDs"
  in_ct --userns-map-group take_ids c 10 > "$ids/ct-userns" 2> "$work/userns-mapped.err" ||
    { cat "$ids/ct-userns" "$work/userns-mapped.err"; fail "the mapped user namespace could not take"; }
  grep -qx "machine $host_machine" "$ids/ct-userns" || fail "mapped user namespace: $(tail -1 "$ids/ct-userns")"
  echo "10 IDs, $(head -1 "$ids/ct-userns") .. ($(tail -1 "$ids/ct-userns"))"
fi

step "a restart on the host (new segment: another ring capacity) is seen inside at once"
old_inode=$(stat -c %i "$run_dir/snowflake.ring")
in_ct take_ids watcher watch > "$work/watch.out" 2> "$work/watch.err" &
watcher=$!
wait_until 60 "the container's watcher taking IDs" grep -q ready "$work/watch.err"
kill -TERM "$daemon_pid"; wait "$daemon_pid"
daemon_pid=""
write_host_config 2048
start_daemon
new_inode=$(stat -c %i "$run_dir/snowflake.ring")
[ "$new_inode" != "$old_inode" ] || fail "the restarted daemon reused the segment (inode $old_inode)"
wait "$watcher" || { tail -5 "$work/watch.out" "$work/watch.err"; fail "the container's watcher did not see the restart"; }
grep '^error' "$work/watch.out"
grep -q '^error daemon_stopped' "$work/watch.out" || fail "the watcher was not told daemon_stopped"
grep '^[0-9]' "$work/watch.out" > "$ids/ct-watch"
sort -n -c "$ids/ct-watch" 2>/dev/null || fail "the watcher's IDs went backwards across the restart"
echo "ring file inode $old_inode -> $new_inode; the watcher took $(wc -l < "$ids/ct-watch") IDs, 100 of them after the restart"
all=$(cat "$ids"/* | grep -c '^[0-9]'); unique=$(cat "$ids"/* | grep '^[0-9]' | sort -u | wc -l)
[ "$unique" -eq "$all" ] || fail "duplicates after the restart: $all IDs, $unique distinct"
kill -TERM "$daemon_pid"; wait "$daemon_pid"
daemon_pid=""
unset SNOWFLAKE_RUNTIME_DIR

# ---- Part 2: the DaemonSet's pod and the example Deployment.
step "a real etcd on 127.0.0.1 for the DaemonSet's register"
client_port=$(free_port); peer_port=$(free_port); http_port=$(free_port)
etcd --name ct --data-dir "$work/etcd" --listen-client-urls "http://127.0.0.1:$client_port" \
  --advertise-client-urls "http://127.0.0.1:$client_port" --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "ct=http://127.0.0.1:$peer_port" --logger=zap > "$work/etcd.log" 2>&1 &
etcd_pid=$!
wait_until 20 "etcd healthy" sh -c "curl -sf http://127.0.0.1:$client_port/health | grep -q true"

step "deploy/kubernetes: the DaemonSet's pod template as a Pod, hostPaths under the test's directory"
kube=$work/kube
python3 "$source_dir/tests/container/kube_pods.py" "$source_dir/deploy/kubernetes" "$kube" \
  --host-root "$kube_node" --version "$version" --etcd "http://127.0.0.1:$client_port" \
  --http-port "$http_port" || fail "deploy/kubernetes does not hold what the test expects"
mkdir -p "$kube_node/etc"
python3 -c 'import uuid; print(uuid.uuid4().hex)' > "$kube_node/etc/machine-id"
fact() { python3 -c 'import json, sys; print(eval("f" + sys.argv[2], {"f": json.load(open(sys.argv[1]))}))' "$kube/facts.json" "$1"; }
node_run=$(fact '["host_paths"]["runtime"]["test"]')
daemon_pod=$(fact '["daemon_pod"]')
app_pod=$(fact '["app_deployment"]')
if [ "$engine" = podman ]; then
  pm kube play "$kube/secret.yaml" > "$work/play-secret.log" 2>&1 ||
    fail_with_log "$work/play-secret.log" "podman kube play of the Secret"
  pm kube play --network host --configmap "$kube/configmap.yaml" "$kube/daemon-pod.yaml" \
    > "$work/play-daemon.log" 2>&1 || fail_with_log "$work/play-daemon.log" "podman kube play of the DaemonSet's pod"
  daemon_ctr=$daemon_pod-$(fact '["daemon_container"]')
  daemon_logs() { pm logs "$daemon_ctr" 2>&1; }
else
  echo "nspawn stand-in for podman kube play: each container of the same pod specs" \
    "(init containers first) in an nspawn container, hostPaths, the ConfigMap and the Secret bound"
  # kube_spec POD CONTAINER FIELD: the field of nspawn.json's container (kube_pods.py),
  # NUL-separated: args (nspawn_ct's) or host_paths (type and path, in pairs).
  kube_spec() {
    python3 -c 'import json, sys
c = [c for c in json.load(open(sys.argv[1])) if (c["pod"], c["name"]) == (sys.argv[2], sys.argv[3])]
if len(c) != 1: sys.exit(f"nspawn.json: {len(c)} containers {sys.argv[3]} in pod {sys.argv[2]}")
f = c[0][sys.argv[4]]
print("\0".join(f if sys.argv[4] == "args" else [x for h in f for x in (h["type"], h["path"])]), end="")' \
      "$kube/nspawn.json" "$@"
  }
  # kube_ct POD CONTAINER [NSPAWN_OPTION]...: runs the container as the kubelet would, with
  # its hostPaths made (DirectoryOrCreate) or checked (Directory, File) first.
  kube_ct() {
    local pod=$1 name=$2 args hp i
    shift 2
    mapfile -d '' hp < <(kube_spec "$pod" "$name" host_paths) || return 1
    for ((i = 0; i < ${#hp[@]}; i += 2)); do
      case ${hp[i]} in
        DirectoryOrCreate) mkdir -p "${hp[i + 1]}";;
        Directory) [ -d "${hp[i + 1]}" ] || { echo "hostPath ${hp[i + 1]}: no such directory" >&2; return 1; };;
        File) [ -f "${hp[i + 1]}" ] || { echo "hostPath ${hp[i + 1]}: no such file" >&2; return 1; };;
        *) echo "hostPath ${hp[i + 1]}: type '${hp[i]}' is not one the stand-in takes" >&2; return 1;;
      esac
    done
    mapfile -d '' args < <(kube_spec "$pod" "$name" args) || return 1
    nspawn_ct "$@" "${args[@]}"
  }
  # kube_exec POD CONTAINER CMD...: CMD inside the running container (podman exec): its
  # namespaces, user, groups and environment.
  kube_exec() {
    local pod=$1 name=$2 args leader user=0:0 groups=- envs=() i
    shift 2
    mapfile -d '' args < <(kube_spec "$pod" "$name" args) || return 1
    for ((i = 0; i < ${#args[@]}; i++)); do
      case ${args[i]} in
        --user) user=${args[i + 1]};;
        --groups) groups=${args[i + 1]};;
        --env) envs+=("${args[i + 1]}");;
        --) break;;
      esac
    done
    # The container's PID 1: the child of its systemd-nspawn that is pid 1 in its own pid
    # namespace (nspawn has helper children too, some short-lived).
    local nspawn_pid=${kube_pids[$pod/$name]} child
    for child in $(cat "/proc/$nspawn_pid/task/$nspawn_pid/children" 2>/dev/null); do
      grep -qP '^NSpid:\t\d+\t1$' "/proc/$child/status" 2>/dev/null && leader=$child
    done
    [ -n "$leader" ] || { echo "no PID 1 of container $pod/$name among nspawn's children" >&2; return 1; }
    local priv=(setpriv --reuid="${user%:*}" --regid="${user#*:}" --no-new-privs)
    if [ "$groups" = - ]; then priv+=(--clear-groups); else priv+=(--groups="$groups"); fi
    # Its namespaces (-a) and root directory (-r): what podman exec gives.
    nsenter -t "$leader" -a -r env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 "${envs[@]}" "${priv[@]}" -- "$@"
  }
  while IFS= read -r init; do
    kube_ct "$daemon_pod" "$init" > "$work/kube-init-$init.log" 2>&1 ||
      { cat "$work/kube-init-$init.log"; fail "init container $init of pod $daemon_pod"; }
    echo "init container $init: exit 0"
  done < <(python3 -c 'import json, sys
print("\n".join(c["name"] for c in json.load(open(sys.argv[1])) if c["pod"] == sys.argv[2] and c["init"]))' \
    "$kube/nspawn.json" "$daemon_pod")
  # SIGTERM, as the kubelet stops a container (nspawn's default is SIGKILL).
  kube_ct "$daemon_pod" "$(fact '["daemon_container"]')" --exec --kill-signal=SIGTERM \
    > "$work/kube-daemon.log" 2>&1 &
  kube_pids[$daemon_pod/$(fact '["daemon_container"]')]=$!
  daemon_logs() { cat "$work/kube-daemon.log"; }
fi
healthz() { curl -sf "http://127.0.0.1:$http_port$(fact '["liveness_path"]')" > "$work/healthz.json" 2>/dev/null; }
wait_until 60 "the DaemonSet's daemon answering its liveness probe" healthz
cat "$work/healthz.json"; echo
[ "$(stat -c %u:%g:%a "$node_run")" = "$(fact '["daemon_user"]'):$group_id:750" ] ||
  fail "the node's runtime directory is $(stat -c %u:%g:%a "$node_run")"
kube_machine=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["machine"])' "$work/healthz.json")
[ "$kube_machine" != "$host_machine" ] ||
  fail "the DaemonSet's daemon serves machine $kube_machine, the host's daemon's own: their IDs cannot be told apart"
daemon_logs | grep -m1 "claimed machine\|from the etcd register" || true

step "the example Deployment takes IDs through the hostPath (supplementalGroups $group_id)"
app_container=$(fact '["app_container"]')
if [ "$engine" = podman ]; then
  pm kube play --network host "$kube/app.yaml" > "$work/play-app.log" 2>&1 ||
    fail_with_log "$work/play-app.log" "podman kube play of the example Deployment"
  app_ctr=$(pm ps --format '{{.Names}}' | grep "^$app_pod-pod.*-$app_container$" | head -1)
  [ -n "$app_ctr" ] || { pm ps -a; fail "no container of the example Deployment"; }
  app_logs() { pm logs "$app_ctr" 2>/dev/null; }
  app_errors() { pm logs "$app_ctr" 2>&1 >/dev/null; }
  app_exec() { pm exec "$app_ctr" "$@"; }
else
  kube_ct "$app_pod" "$app_container" --exec --kill-signal=SIGTERM > "$work/kube-app.log" 2> "$work/kube-app.err" &
  kube_pids[$app_pod/$app_container]=$!
  app_logs() { cat "$work/kube-app.log"; }
  app_errors() { cat "$work/kube-app.err"; }
  app_exec() { kube_exec "$app_pod" "$app_container" "$@"; }
fi
app_ids() { [ "$(app_logs | grep -c '^[0-9]')" -ge 3 ]; }
app_ids_or_boot_id() {
  app_ids && return 0
  app_errors > "$work/app-errors.log" 2>&1
  boot_id_verdict "$work/app-errors.log"
  return 1
}
wait_until 30 "the example app printing 3 IDs" app_ids_or_boot_id
app_exec id
app_exec snowflakectl next -n 5000 > "$ids/kube-app" || fail "snowflakectl in the app's pod"
app_logs | grep '^[0-9]' > "$ids/kube-app-log"
SNOWFLAKE_RUNTIME_DIR=$node_run "$snowflakectl" next -n 5000 > "$ids/kube-host" || fail "the node takes"
curl -sf "http://127.0.0.1:$http_port/v1/ids?service=remote&count=100" |
  python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["ids"]))' > "$ids/kube-front" ||
  fail "GET /v1/ids from the front (the Service's target)"
all=$(cat "$ids"/kube-* | grep -c '^[0-9]'); unique=$(cat "$ids"/kube-* | grep '^[0-9]' | sort -u | wc -l)
machines=$(machines "$ids"/kube-*)
echo "app pod, app log, node and front: $all IDs, $unique distinct, machine numbers: $machines"
[ "$unique" -eq "$all" ] || fail "duplicates among the pods' IDs"
[ "$machines" = "$kube_machine" ] || fail "the pods' IDs carry '$machines', the daemon serves $kube_machine"

step "removing the pods"
if [ "$engine" = podman ]; then
  pm pod rm -f -t 10 -a > /dev/null || fail "podman pod rm"
else
  for ct in "${!kube_pids[@]}"; do
    kill -TERM "${kube_pids[$ct]}"
    wait "${kube_pids[$ct]}" || fail "container $ct did not stop cleanly on SIGTERM"
    unset "kube_pids[$ct]"
  done
fi
step_name="removing the pods"
echo "  ok  $step_name ($(elapsed "$step_start") s)"
echo "PASS: containers ($engine) take from the host's ring; deploy/kubernetes runs in $(elapsed "$test_start") s"
