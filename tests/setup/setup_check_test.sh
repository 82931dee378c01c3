#!/usr/bin/env bash
# scripts/setup --check, the check that every command the build and the tests run comes
# from a package scripts/setup installs: it passes on this machine (where scripts/setup
# ran), it fails naming the command and the package when a package is left off the list,
# and a container test that meets a missing command names its package.
set -uo pipefail
source_dir=$1
work=$2
source "$source_dir/tests/support/script_steps.sh"
mkdir -p "$work"
setup=$source_dir/scripts/setup

step "scripts/setup --check passes after scripts/setup"
"$setup" --check > "$work/check.out" 2>&1 || { cat "$work/check.out"; fail "scripts/setup --check failed"; }
grep -q "commands come from the" "$work/check.out" || { cat "$work/check.out"; fail "no summary line"; }

# Each row: a package to leave off, a command it provides, words the error must carry.
for row in "catatonit|catatonit|pause binary" "etcd-server|etcd|etcd register" \
           "python3-yaml|python3:yaml|tests/container" "uidmap|newuidmap|user namespaces"; do
  IFS='|' read -r package command words <<< "$row"
  step "--without $package fails naming $command and $package"
  if "$setup" --check --without "$package" > "$work/without.out" 2>&1; then
    cat "$work/without.out"; fail "scripts/setup --check passed with $package left off the list"
  fi
  cat "$work/without.out"
  grep -F "$command" "$work/without.out" | grep -F "package $package" | grep -qF "$words" ||
    fail "the error does not name $command, package $package and '$words'"
  grep -q "FAILED: 1 of" "$work/without.out" || fail "leaving off $package should flag one command"
done

step "--without a package that is not in the list is a usage error"
"$setup" --check --without no-such-package > "$work/usage.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "not in scripts/setup's list" "$work/usage.out" ||
  { cat "$work/usage.out"; fail "expected exit 2 naming the list, got $rc"; }

step "a container test's missing command names its package"
printf 'Error: building local pause image: finding pause binary: exec: "catatonit": executable file not found in $PATH\n' \
  > "$work/play.log"
out=$( (fail_with_log "$work/play.log" "podman kube play of the pod") 2>&1 )
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || fail "fail_with_log exited $rc"
grep -q 'FAIL: podman kube play of the pod (catatonit is not installed: it comes from package catatonit' <<< "$out" ||
  fail "the failure does not name catatonit's package"
step "done"
echo "PASS"
