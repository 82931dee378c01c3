#!/bin/bash
# Generates a spin verifier for one configuration of a Promela model, compiles it, runs
# the exhaustive search and checks its verdict against what the test expects.
#
# usage: check_model.sh --spin SPIN --cc CC --model FILE --dir SCRATCH
#                       --expect pass|fail [--pattern REGEX] [--cflags "..."]
#                       [--panflags "..."] [-- SPIN_DEFINES...]
#
# --expect pass: pan must report "errors: 0" after a full state-space search that no
#   depth, memory or hash limit cut short; the state count is printed.
# --expect fail: pan must report errors > 0 and its output must match REGEX (so a
#   broken variant fails for the reason it was built to show, not for another).
set -euo pipefail

spin="" cc="" model="" dir="" expect="" pattern="" cflags="" panflags=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --spin) spin="$2"; shift 2 ;;
    --cc) cc="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --expect) expect="$2"; shift 2 ;;
    --pattern) pattern="$2"; shift 2 ;;
    --cflags) cflags="$2"; shift 2 ;;
    --panflags) panflags="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "check_model.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
defines=("$@")
if [[ -z "$spin" || -z "$cc" || -z "$model" || -z "$dir" ]] ||
   [[ "$expect" != pass && "$expect" != fail ]]; then
  echo "check_model.sh: need --spin, --cc, --model, --dir and --expect pass|fail" >&2
  exit 2
fi

# A fresh scratch directory: a stale pan or trail from an earlier run must not count.
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
cp "$model" model.pml

echo "== spin ${defines[*]} -a $(basename "$model")"
"$spin" "${defines[@]}" -a model.pml
# The generated C is not ours: its warnings are not ours to fix (-w).
# shellcheck disable=SC2086
"$cc" -O2 -w $cflags -o pan pan.c
echo "== pan $panflags"
set +e
# shellcheck disable=SC2086
./pan $panflags > pan.out 2>&1
status=$?
set -e
cat pan.out

errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out | tail -n 1)
if [[ -z "$errors" ]]; then
  echo "FAIL: pan (exit status $status) printed no error count" >&2
  exit 1
fi
states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | tail -n 1)

if [[ "$expect" == pass ]]; then
  if [[ "$errors" != 0 ]]; then
    echo "FAIL: the model violates a property ($errors errors); the trail is in $dir" >&2
    exit 1
  fi
  # A search cut short proves nothing about the states it did not reach.
  for limit in 'max search depth too small' 'out of memory' 'reached -DMEMLIM' \
               'hash table is full' 'search was truncated'; do
    if grep -qi "$limit" pan.out; then
      echo "FAIL: the search was incomplete ($limit)" >&2
      exit 1
    fi
  done
  if ! grep -q 'Full statespace search' pan.out; then
    echo "FAIL: pan did not report a full state-space search" >&2
    exit 1
  fi
  echo "PASS: exhaustive, 0 errors, ${states:-?} states"
else
  if [[ "$errors" == 0 ]]; then
    echo "FAIL: the broken variant passed: the checker does not detect it" >&2
    exit 1
  fi
  if [[ -n "$pattern" ]] && ! grep -Eq "$pattern" pan.out; then
    echo "FAIL: the broken variant failed, but not with /$pattern/" >&2
    exit 1
  fi
  echo "PASS: the broken variant is refuted ($errors error(s), /$pattern/)"
fi
