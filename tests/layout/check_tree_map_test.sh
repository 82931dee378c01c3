#!/usr/bin/env bash
# The map check can fail: it passes on the repository's own files, then a renamed file, a
# file in a folder the map does not cover, and a name written twice (one at a time) make it
# fail, naming what is wrong; a new file in a folder the map names as a whole passes.
# Usage: check_tree_map_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=${1:?usage: check_tree_map_test.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: check_tree_map_test.sh SOURCE_DIR WORK_DIR}
check="$src/tests/layout/check_tree_map.sh"
failures=0

rm -rf "$work"
mkdir -p "$work/tree/docs"
cp "$src/docs/architecture.md" "$work/tree/docs/"
git -C "$src" ls-files >"$work/files"

# expect pass|fail LIST EXPECTED...: the check on the tree and LIST must end as said and,
# when it fails, say each EXPECTED.
expect() {
  local verdict=$1 list=$2 what=$3
  shift 3
  local out rc=0
  out=$(bash "$check" "$work/tree" "$list" 2>&1) || rc=$?
  if [ "$verdict" = pass ] && [ "$rc" -ne 0 ]; then
    echo "FAIL: $what: the check failed: $out"
    failures=$((failures + 1))
    return
  fi
  if [ "$verdict" = fail ] && [ "$rc" -eq 0 ]; then
    echo "FAIL: $what: the check passed"
    failures=$((failures + 1))
    return
  fi
  for expected in "$@"; do
    if ! grep -qF -- "$expected" <<<"$out"; then
      echo "FAIL: $what: the check did not say '$expected': $out"
      failures=$((failures + 1))
      return
    fi
  done
  echo "ok: $what: $verdict${*:+, saying: $*}"
}

expect pass "$work/files" "the repository as it is"

sed 's#^shm/futex\.cc$#shm/futex_wait.cc#' "$work/files" >"$work/renamed"
expect fail "$work/renamed" "shm/futex.cc renamed" \
  "shm/futex_wait.cc is not in docs/architecture.md's map" \
  "names \`shm/futex.cc\`, but the repository holds no such file"

{ cat "$work/files"; echo "protocol/new_part.cc"; } >"$work/added"
expect fail "$work/added" "a file no table names" "protocol/new_part.cc is not in"

{ cat "$work/files"; echo "tests/daemon/new_part_test.cc"; } >"$work/covered"
expect pass "$work/covered" "a new file in a folder the map names as a whole"

grep -v '^tests/model/' "$work/files" >"$work/no_models"
expect fail "$work/no_models" "a folder emptied" \
  "names \`tests/model/\`, but the repository holds no file under it"

printf '| `shm/futex.cc` | the same file again |\n' >>"$work/tree/docs/architecture.md"
expect fail "$work/files" "a name written twice" "names \`shm/futex.cc\` twice"

if [ "$failures" -gt 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "every change to the tree was caught"
