#!/usr/bin/env bash
# No tool assumes the default ID layout (41/10/12). A platform chooses its layout
# (docs/id-layout.md), so everything that takes apart, builds or bounds an ID asks an
# IdLayout (C++, the C ABI) or reads the segment header's id_bits (the Go taker); only the
# layout's own files know the default's figures. Fails, naming each line, when a source
# file outside tests holds one of them:
#   - the old constants of snowflake/id_layout.h (kMachineBits, kTimeShift, kIdsPerMs, ...);
#   - 1023 or 4095 (the default's largest machine number and sequence);
#   - a shift by 12, 22 or 41, or a mask 0x3ff / 0xfff (the default's field positions),
#     also as a JavaScript BigInt (12n, 22n);
#   - "4096 IDs per ms" or "41-bit" (the default's cap per millisecond and time width).
# A line the allow-list below names (file and text, each with its reason) is not a finding.
# The files checked are `git ls-files`, or the lines of FILE_LIST (the test plants a file
# this way).
# Usage: check_layout_constants.sh SOURCE_DIR [FILE_LIST]
set -uo pipefail

root=${1:?usage: check_layout_constants.sh SOURCE_DIR [FILE_LIST]}
if [ $# -ge 2 ]; then
  files=$(grep -v '^$' "$2")
else
  files=$(git -C "$root" ls-files) ||
    { echo "check_layout_constants: $root is not a git checkout: give FILE_LIST"; exit 1; }
fi

# Source files of the tools: code in every language, not tests (they test the default
# layout on purpose), not docs, not packaging.
sources=$(printf '%s\n' "$files" |
  grep -E '\.(cc|h|c|go|py|java|js|ts|mjs|in)$' |
  grep -vE '^tests/|/tests/|_test\.go$|^docs/|^debian/|^deploy/|^monitoring/')

# The layout's own files: the only ones that know the default.
own='^(shm/include/snowflake/id_layout\.h|shm/id_layout\.cc):'

patterns='\b(kMachineBits|kSequenceBits|kTimeBits|kTimeShift|kMachineShift|kSequenceShift|kMaxMachine|kMaxSequence|kIdsPerMs|kMaxTimeOffsetMs)\b'
patterns+='|\b(1023|4095)\b'
patterns+='|(<<|>>)[ ]*(12|22|41)\b|\b(12|22)n\b|\b0x(3ff|fff)\b'
patterns+='|4,?096 (IDs )?per (ms|milli)|41-bit'
patterns+='|\b(time_?[Ss]hift|TIME_SHIFT)[ ]*=[ ]*22\b'

# file|text (an ERE the line must match)|why it may stay.
allowed=(
  'register/etcd_json.cc|v >> 12|base64: a 24-bit group split into 6-bit digits, not an ID'
  'register/etcd_json.cc|<< 12|base64: four 6-bit digits joined into a 24-bit group, not an ID'
  "protocol/vocabulary.h|the epoch's 41-bit time range is used up|the time_range_exhausted reason's words, shared byte for byte by every binding's copy of the vocabulary"
  "bindings/go/ring.go|the epoch's 41-bit time range is used up|Go's copy of that vocabulary text (conformance compares them)"
  'bench/|4,?096 IDs per ms|a benchmark describing what it measures on the default layout'
  'bench/report.py|< 4096 IDs|the sustained benchmark runs the default layout; its report names that cap'
  'bench/report.py|4,096 IDs per ms|the sustained benchmark runs the default layout; its report names that cap'
)

findings=0
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  [[ "$hit" =~ $own ]] && continue
  file=${hit%%:*}
  ok=0
  for entry in "${allowed[@]}"; do
    IFS='|' read -r where text _ <<<"$entry"
    if [[ "$file" == "$where"* ]] && printf '%s\n' "$hit" | grep -qE -- "$text"; then
      ok=1
      break
    fi
  done
  if [ "$ok" = 0 ]; then
    echo "check_layout_constants: $hit"
    findings=$((findings + 1))
  fi
done < <(cd "$root" && printf '%s\n' "$sources" | while IFS= read -r f; do
  [ -f "$f" ] && grep -HnE "$patterns" -- "$f"
done)

if [ "$findings" -gt 0 ]; then
  echo "check_layout_constants: $findings line(s) assume the default ID layout 41/10/12:"
  echo "  ask an IdLayout (its bits(), time_shift(), max_machine(), ids_per_ms()), the"
  echo "  client's layout() or the segment header's id_bits instead; or, if the line must"
  echo "  stay, allow it in tests/layout/check_layout_constants.sh with its reason"
  exit 1
fi
echo "check_layout_constants: no tool assumes the default layout"
