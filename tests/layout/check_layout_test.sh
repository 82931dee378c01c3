#!/usr/bin/env bash
# The layout checks can fail. On a copy of the tree each passes; then each kind of
# violation, planted alone in a fresh copy, makes its check fail, naming it:
#   - check_includes.sh: an include up from every folder of code, in each form it can be
#     written ("dir/x.h", "snowflake/x.h", <snowflake/x.h>, <dir/x.h>, "../dir/x.h", a
#     bare name found through -I), a header of core/ other than the one header a row
#     names, an internal header of shm/, a header of tests/; a folder of code without a
#     row; a row whose folder does not exist, one whose folder holds no code, one that
#     names a later row (an arrow up), the table gone;
#   - check_links.sh (each plant configures the copy): the CLI linking the daemon's core,
#     a target renamed in the table only;
#   - check_parts.sh: a stage only kTable has, a file renamed, a file no parts table names.
# Usage: check_layout_test.sh SOURCE_DIR WORK_DIR [CMAKE_ARGUMENT...]
#        (the arguments go to check_links.sh's configure)
set -euo pipefail
src=${1:?usage: check_layout_test.sh SOURCE_DIR WORK_DIR [CMAKE_ARGUMENT...]}
work=${2:?usage: check_layout_test.sh SOURCE_DIR WORK_DIR [CMAKE_ARGUMENT...]}
shift 2
cmake_args=("$@")
checks="$src/tests/layout"
failures=0

# The tree once, without git's folder and build trees; each plant starts from a copy of it
# made of hard links (quick), so a file is copied before it is appended to (`unshare`);
# sed -i and mv replace a file rather than write into it.
rm -rf "$work/pristine" "$work/tree" "$work/links"
mkdir -p "$work/pristine"
tar -C "$src" --exclude=./.git --exclude=./build --exclude=./.cache --exclude=./run -cf - . |
  tar -C "$work/pristine" -xf -
fresh_copy() {
  rm -rf "$work/tree"
  cp -al "$work/pristine" "$work/tree"
}
unshare() {
  cp "$1" "$1.copy"
  mv "$1.copy" "$1"
}

# run_check NAME: the check NAME (includes, links or parts) on the copy; its output in `out`.
run_check() {
  case "$1" in
    links) bash "$checks/check_links.sh" "$work/tree" "$work/links" "${cmake_args[@]}" ;;
    *) bash "$checks/check_$1.sh" "$work/tree" ;;
  esac
}

fresh_copy
for check in includes parts links; do
  if ! out=$(run_check "$check" 2>&1); then
    echo "FAIL: check_$check.sh does not pass on the unchanged tree: $out"
    exit 1
  fi
  echo "ok: check_$check.sh passes on the unchanged tree"
done

# expect CHECK WHAT EXPECTED...: after a plant in the copy, CHECK must fail saying each
# EXPECTED.
expect() {
  local check=$1 what=$2 expected
  shift 2
  if out=$(run_check "$check" 2>&1); then
    echo "FAIL: $what passed check_$check.sh"
    failures=$((failures + 1))
    return
  fi
  for expected in "$@"; do
    if ! grep -qF -- "$expected" <<<"$out"; then
      echo "FAIL: $what: check_$check.sh did not say '$expected': $out"
      failures=$((failures + 1))
      return
    fi
  done
  echo "ok: $what is refused: $(grep -F -- "$1" <<<"$out" | head -1)"
}

# include FILE LINE EXPECTED...: FILE (under the tree) gets LINE; check_includes.sh must
# fail saying each EXPECTED.
include() {
  local file=$1 line=$2
  shift 2
  fresh_copy
  mkdir -p "$(dirname "$work/tree/$file")"
  [ ! -e "$work/tree/$file" ] || unshare "$work/tree/$file"
  printf '%s\n' "$line" >>"$work/tree/$file"
  expect includes "$file with '$line'" "$@"
}

# doc SED_SCRIPT CHECK WHAT EXPECTED...: docs/architecture.md edited by SED_SCRIPT; CHECK
# must fail saying each EXPECTED.
doc() {
  local script=$1 check=$2 what=$3
  shift 3
  fresh_copy
  sed -i "$script" "$work/tree/docs/architecture.md"
  expect "$check" "$what" "$@"
}

# An include up from each folder of code, in each form.
include base/time_text.cc '#include "snowflake/id_layout.h"' \
  'base/time_text.cc:' "base/ may include only from itself, not from shm/"
include shm/segment.cc '#include "protocol/vocabulary.h"' "shm/ may include only from itself and {base/}, not from protocol/"
include shm/ring_consumer.cc '#include <snowflake/client.h>' \
  "includes <snowflake/client.h> (libclient/include/snowflake/client.h): shm/ may include"
include protocol/control_protocol.cc '#include "daemon/control/status_board.h"' \
  "protocol/control_protocol.cc:" "not from daemon/control/"
include protocol/control_client.cc '#include "libclient/status/status_report.h"' \
  "protocol/ may include only" "not from libclient/status/"
include libclient/client.cc '#include "daemon/core/heartbeat.h"' "libclient/ may include only" "not from daemon/core/"
include libclient/status/status_report.cc '#include "command_error.h"' \
  '(cli/command_error.h): libclient/status/ may include only' "not from cli/"
include util/file_lock.cc '#include "daemon/core/heartbeat.h"' "util/ may include only" "not from daemon/core/"
include util/toml_fields.cc '#include "register/machine_register.h"' "util/ may include only" "not from register/"
include register/file_register.cc '#include "daemon/config/config.h"' "not from daemon/config/"
include register/etcd_client.cc '#include "protocol/vocabulary.h"' "register/ may include only" "not from protocol/"
include daemon/config/config.cc '#include "daemon/core/heartbeat.h"' "daemon/config/ may include only" \
  "not from daemon/core/"
include daemon/metrics/metrics.cc '#include "register/machine_register.h"' "daemon/metrics/ may include only" \
  "not from register/"
include daemon/core/fill_loop.h '#include "daemon/control/status_reporter.h"' "daemon/core/ may include only" \
  "not from daemon/control/"
include daemon/control/status_reporter.h '#include "daemon/daemon.h"' "daemon/control/ may include only" \
  "not from daemon/"
include daemon/control/status_board.cc '#include "cli/command_error.h"' "not from cli/"
include daemon/fronts/ring_services.cc '#include "daemon/core/fill_loop.h"' \
  "daemon/fronts/ may include only" "not from daemon/core/"
include daemon/http/http_handlers.cc '#include "daemon/daemon.h"' \
  "daemon/http/http_handlers.cc:" "daemon/http/ may include only" "not from daemon/"
include daemon/http/http_handlers.cc '#include "snowflake/ring_producer.h"' \
  "(shm/include/snowflake/ring_producer.h): daemon/http/ may include only" "not from shm/"
include daemon/http/audit_log.cc '#include "../core/generator.h"' \
  '"../core/generator.h" (daemon/core/generator.h): daemon/http/ may include only' "not from daemon/core/"
include cli/status_command.cc '#include "daemon/core/fill_loop.h"' "cli/ may include only" "not from daemon/core/"
include cli/register_command.cc '#include <daemon/config/config.h>' \
  "includes <daemon/config/config.h>" "not from daemon/config/"
include bench/ring_bench.cc '#include "exit_codes.h"' "(cli/exit_codes.h): bench/ may include only" "not from cli/"
include bindings/python/module.cc '#include "command_error.h"' "bindings/python/ may include only" "not from cli/"
include bindings/java/jni/snowflake_jni.cc '#include "daemon/control/control_server.h"' \
  "bindings/java/jni/ may include only" "not from daemon/control/"
include bindings/node/addon.cc '#include "register/machine_register.h"' "bindings/node/ may include only" \
  "not from register/"
# A row naming one header of a folder allows that header only: the fronts' row given
# core/'s heartbeat.h, then a front including the fill loop.
fresh_copy
sed -i 's/^| `daemon\/fronts\/` | /| `daemon\/fronts\/` | `daemon\/core\/heartbeat.h`, /' "$work/tree/docs/architecture.md"
unshare "$work/tree/daemon/fronts/ring_services.cc"
printf '%s\n' '#include "daemon/core/fill_loop.h"' >>"$work/tree/daemon/fronts/ring_services.cc"
expect includes "a front including core/'s fill loop when its row names core/'s heartbeat.h" \
  "daemon/fronts/ may include only" "daemon/core/heartbeat.h}" "not from daemon/core/"
# A header shm/ keeps to itself, and one of tests/.
include register/machine_lock.cc '#include "shm/mapped_segment.h"' "an internal header of shm/"
include register/etcd_register.cc '#include "tests/support/wait_until.h"' "a header of tests/"

# Folders and rows.
include daemon/grpc/grpc_front.cc '// a front the arrow table has no row for' \
  "daemon/grpc/ holds C or C++ code (daemon/grpc/grpc_front.cc) but has no row"
doc '/^| `daemon\/http\/` |/a | `daemon/gone/` | `daemon/core/` | — |' includes "a row for a folder that is not there" \
  "has a row for \`daemon/gone/\`, but the tree has no folder daemon/gone/"
doc '/^| `daemon\/http\/` |/a | `register/model/` | — | — |' includes "a row for a folder without code" \
  "has a row for \`register/model/\`, which holds no C or C++ file"
doc '/^| `daemon\/http\/` |/d' includes "a folder's row removed" \
  "daemon/http/ holds C or C++ code" "lets \`daemon/\` include from \`daemon/http/\`, which has no row"
doc 's/^| `daemon\/core\/` | `daemon\/metrics\/`, /| `daemon\/core\/` | `daemon\/control\/`, `daemon\/metrics\/`, /' \
  includes "a row naming a later row" \
  "lets \`daemon/core/\` include from \`daemon/control/\`, whose row does not come before its own"
doc 's/^## The arrows between folders/## Arrows/' includes "the table's heading renamed" \
  "no table under '## The arrows between folders'"

# Links: each plant configures the copy.
fresh_copy
unshare "$work/tree/cli/CMakeLists.txt"
printf '%s\n' 'target_link_libraries(snowflakectl_commands PRIVATE snowflake_daemon_core)' \
  >>"$work/tree/cli/CMakeLists.txt"
expect links "the CLI linking the daemon's core" \
  "snowflakectl_commands (in cli/) links snowflake_daemon_core (in daemon/): cli/ may link only"
doc 's/^| `shm\/` | `base\/` | `snowflake_shm` |/| `shm\/` | `base\/` | `snowflake_shmem` |/' links \
  "a target renamed in the table only" \
  "the build defines target snowflake_shm, which no row" \
  "names target \`snowflake_shmem\` in the row of \`shm/\`, but no CMakeLists.txt"

# The parts tables and the start/stop table.
fresh_copy
sed -i 's/{"heartbeat", /{"heartbeat", \&Daemon::StartHeartbeat, \&Daemon::StopHeartbeat},\n      {"pulse", /' \
  "$work/tree/daemon/daemon.cc"
expect parts "a stage added to kTable only" "are not kTable's"
fresh_copy
mv "$work/tree/daemon/core/heartbeat.cc" "$work/tree/daemon/core/beat.cc"
expect parts "daemon/core/heartbeat.cc renamed" \
  "name \`core/heartbeat.h/.cc\`, but daemon/core/heartbeat.cc does not exist" \
  "daemon/core/beat.cc is not in the parts tables"
fresh_copy
printf '%s\n' '// a file no table names' >"$work/tree/register/new_backend.cc"
expect parts "a file no parts table names" "register/new_backend.cc is not in the parts tables"

[ "$failures" -eq 0 ] || { echo "FAIL: $failures planted violation(s) not caught"; exit 1; }
echo "every planted violation was caught"
