#!/usr/bin/env bash
# check_layout_constants.sh can fail: each kind of default-layout assumption, planted in a
# scratch file beside the tree, is named; an allowed line and a test file are not.
# Usage: check_layout_constants_test.sh SOURCE_DIR SCRATCH_DIR
set -uo pipefail
root=${1:?usage: check_layout_constants_test.sh SOURCE_DIR SCRATCH_DIR}
scratch=${2:?usage: check_layout_constants_test.sh SOURCE_DIR SCRATCH_DIR}
check="$root/tests/layout/check_layout_constants.sh"
rm -rf "$scratch" && mkdir -p "$scratch" || exit 1
failures=0

# The tree as it is passes.
if ! out=$(bash "$check" "$root"); then
  echo "FAIL: the tree itself: $out"
  failures=$((failures + 1))
fi

# One plant per kind, each in a file of its own under the scratch copy's tree.
plant() {  # NAME FILE LINE: expect a finding naming FILE
  local name=$1 file=$2 line=$3
  mkdir -p "$scratch/tree/$(dirname "$file")"
  printf '%s\n' "$line" >"$scratch/tree/$file"
  printf '%s\n' "$file" >"$scratch/list"
  if out=$(bash "$check" "$scratch/tree" "$scratch/list"); then
    echo "FAIL: $name was not found: $line"
    failures=$((failures + 1))
  elif [[ "$out" != *"$file:1:"* ]]; then
    echo "FAIL: $name was found but not named: $out"
    failures=$((failures + 1))
  fi
  rm -rf "$scratch/tree"
}
plant "an old constant" daemon/x.cc 'uint32_t cap = kIdsPerMs;'
plant "the largest machine" bindings/python/x.py 'machine = (id >> 12) & 1023'
plant "the largest sequence" libclient/x.cc 'if (sequence > 4095) return;'
plant "a shift by the time position" bindings/go/x.go 'ms := int64(id >> 22)'
plant "a BigInt shift" bindings/node/x.js 'const ms = id >> 22n;'
plant "a mask" cli/x.cc 'return id & 0xfff;'
plant "the cap per ms in words" daemon/x.h '// at most 4,096 IDs per ms'
plant "a Go time shift constant" bindings/go/y.go 'const timeShift = 22'

# What may stay: a test, and an allowed line.
mkdir -p "$scratch/tree/tests/x" "$scratch/tree/register"
printf 'id >> 22\n' >"$scratch/tree/tests/x/t.cc"
printf '    out += kAlphabet[(v >> 12) & 63];\n' >"$scratch/tree/register/etcd_json.cc"
printf 'tests/x/t.cc\nregister/etcd_json.cc\n' >"$scratch/list"
if ! out=$(bash "$check" "$scratch/tree" "$scratch/list"); then
  echo "FAIL: a test file or an allowed line was reported: $out"
  failures=$((failures + 1))
fi

[ "$failures" = 0 ] && echo "check_layout_constants_test: every plant was found" || exit 1
