#!/usr/bin/env bash
# The layout check can fail: on a copy of the tree it passes, then each planted upward
# include, a stage only the code has, a renamed file and a file no table names (one at a
# time) make it fail, naming what is wrong.
# Usage: check_layout_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=${1:?usage: check_layout_test.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: check_layout_test.sh SOURCE_DIR WORK_DIR}
check="$src/tests/layout/check_layout.sh"
failures=0

fresh_copy() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree/docs"
  cp -r "$src/daemon" "$src/register" "$src/base" "$src/cli" "$src/protocol" "$src/bindings" \
    "$src/shm" "$src/text" "$src/libclient" "$work/tree/"
  cp "$src/docs/architecture.md" "$work/tree/docs/"
}

fresh_copy
if ! out=$(bash "$check" "$work/tree" 2>&1); then
  echo "FAIL: the unchanged tree does not pass: $out"
  exit 1
fi

# plant FILE LINE EXPECTED: FILE (under the tree) gets LINE; the check must fail saying EXPECTED.
plant() {
  local file=$1 line=$2 expected=$3
  fresh_copy
  mkdir -p "$(dirname "$work/tree/$file")"
  printf '%s\n' "$line" >>"$work/tree/$file"
  if out=$(bash "$check" "$work/tree" 2>&1); then
    echo "FAIL: $file with '$line' passed the check"
    failures=$((failures + 1))
  elif ! grep -qF -- "$expected" <<<"$out"; then
    echo "FAIL: $file with '$line': the check did not say '$expected': $out"
    failures=$((failures + 1))
  else
    echo "ok: $file with '$line' is refused: $(grep -F -- "$expected" <<<"$out" | head -1)"
  fi
}

plant text/time_text.cc '#include "snowflake/id_layout.h"' "text/ may include only text/"
plant shm/segment.cc '#include "protocol/vocabulary.h"' "shm/ may include only shm/ and text/"
plant shm/ring_consumer.cc '#include "snowflake/client.h"' "shm/ may include only shm/ and text/"
plant libclient/client.cc '#include "daemon/core/clock.h"' "libclient/ may include only"
plant libclient/status/status_report.cc '#include "command_error.h"' "libclient/ may include only"
plant protocol/control_protocol.cc '#include "daemon/control/status_board.h"' \
  "protocol/control_protocol.cc"
plant protocol/control_client.cc '#include "libclient/status/status_report.h"' \
  "protocol/ may include only"
plant protocol/vocabulary.cc '#include "snowflake/client.h"' "protocol/ may include only"
plant bindings/python/module.cc '#include "command_error.h"' "bindings/ may not include"
plant bindings/python/module.cc '#include "daemon/control/control_server.h"' \
  "bindings/ may not include"
plant base/file_lock.cc '#include "daemon/core/clock.h"' "base/ may include only"
plant base/toml_fields.cc '#include "register/machine_register.h"' "base/ may include only"
plant register/file_register.cc '#include "daemon/config/config.h"' "register/ may include only"
plant register/etcd_client.cc '#include "protocol/vocabulary.h"' "register/ may include only"
plant daemon/metrics/metrics.cc '#include "register/machine_register.h"' \
  "daemon/metrics/ may include only"
plant daemon/control/status_board.cc '#include "cli/command_error.h"' \
  "the daemon includes a header of cli/"
plant daemon/core/fill_loop.h '#include "daemon/control/status_reporter.h"' \
  "daemon/core/ may include only"
plant daemon/control/status_reporter.h '#include "daemon/daemon.h"' \
  "daemon/control/ may include only"
plant daemon/http/http_handlers.cc '#include "snowflake/ring_producer.h"' \
  "a front may not include the ring's producer"
plant daemon/fronts/ring_services.cc '#include "daemon/core/generator.h"' \
  "a front may not include the ring's producer"
plant cli/status_command.cc '#include "daemon/core/fill_loop.h"' "cli/ may include no daemon/"
plant cli/register_command.cc '#include "daemon/config/config.h"' "cli/ may include no daemon/"
# A stage the code has and the document does not (as if added to kTable): the stage table
# check must notice. Planted by editing a copy of daemon.cc.
fresh_copy
sed -i 's/{"heartbeat", /{"heartbeat", \&Daemon::StartHeartbeat, \&Daemon::StopHeartbeat},\n      {"pulse", /' \
  "$work/tree/daemon/daemon.cc"
if out=$(bash "$check" "$work/tree" 2>&1) || ! grep -q "are not kTable's" <<<"$out"; then
  echo "FAIL: a stage added to kTable only was not caught: $out"
  failures=$((failures + 1))
else
  echo "ok: a stage added to kTable only is refused"
fi

# A renamed file: the table still names the old name.
fresh_copy
mv "$work/tree/daemon/core/clock.cc" "$work/tree/daemon/core/wall_clock.cc"
if out=$(bash "$check" "$work/tree" 2>&1) ||
   ! grep -q "name \`core/clock.h/.cc\`, but daemon/core/clock.cc does not exist" <<<"$out"; then
  echo "FAIL: a renamed file was not caught: $out"
  failures=$((failures + 1))
else
  echo "ok: a renamed file is refused: $(grep 'does not exist' <<<"$out" | head -1)"
fi

plant daemon/core/new_part.cc '// a file no table names' "daemon/core/new_part.cc is not in the parts tables"
plant register/new_backend.cc '// a file no table names' "register/new_backend.cc is not in the parts tables"

[ "$failures" -eq 0 ] || { echo "FAIL: $failures planted arrow(s) not caught"; exit 1; }
echo "every planted arrow was caught"
