#!/usr/bin/env bash
# snowflakectl is a client of the daemon, never a copy of it: it must not need the
# libraries only the daemon's core uses (libsystemd for sd_notify, spdlog, prometheus-cpp).
# Fails, naming each, when the binary's dynamic section lists one.
# Usage: linked_libraries_test.sh PATH_TO_SNOWFLAKECTL
set -uo pipefail
binary=${1:?usage: linked_libraries_test.sh PATH_TO_SNOWFLAKECTL}
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') || {
  echo "linked_libraries_test: readelf could not read $binary"
  exit 1
}
[ -n "$needed" ] || { echo "linked_libraries_test: $binary lists no NEEDED library"; exit 1; }
bad=$(grep -E '^lib(systemd|spdlog|prometheus)' <<<"$needed")
if [ -n "$bad" ]; then
  echo "linked_libraries_test: $binary needs daemon-only libraries:" $bad
  echo "linked_libraries_test: something in cli/ links the daemon's core (snowflake::daemon_core)"
  exit 1
fi
echo "linked_libraries_test: snowflakectl needs only:" $needed
