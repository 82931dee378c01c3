#!/bin/sh
# Runs `systemd-analyze verify` on the unit as configured for installation
# (<build>/systemd/snowflaked.service, ExecStart=<sbindir>/snowflaked) with ExecStart=
# pointing at the built binary instead, and fails on ANY output: a misspelt key or a bad value only prints
# "...ignoring" and still exits 0. A deliberately broken copy must produce output, so the
# check itself is known to work. --man=no: the Documentation= man pages are checked only
# once installed (the build renders them; see docs/man).
#   verify_unit.sh UNIT BINARY WORK_DIR
set -u
unit=$1 binary=$2 work=$3
mkdir -p "$work"
copy="$work/snowflaked.service"
sed "s|^ExecStart=/[^ ]*/snowflaked |ExecStart=$binary |" "$unit" > "$copy"
if ! grep -q "^ExecStart=$binary " "$copy"; then
  echo "FAIL: no 'ExecStart=/.../snowflaked ...' line in $unit to point at $binary"
  exit 1
fi

broken="$work/broken/snowflaked.service"
mkdir -p "$work/broken"
sed 's/^WatchdogSec=/WatchdogSecs=/' "$copy" > "$broken"
if [ -z "$(systemd-analyze verify --man=no "$broken" 2>&1)" ]; then
  echo "FAIL: systemd-analyze verify printed nothing for a misspelt key: the check cannot fail"
  exit 1
fi

output=$(systemd-analyze verify --man=no "$copy" 2>&1)
status=$?
if [ $status -ne 0 ] || [ -n "$output" ]; then
  echo "FAIL: systemd-analyze verify $copy (exit $status):"
  echo "$output"
  exit 1
fi
echo "ok: systemd-analyze verify printed nothing"
