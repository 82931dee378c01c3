#!/usr/bin/env bash
# run_fuzzer.sh FUZZER SEED_CORPUS WORK_DIR SECONDS [SEED]
# Fuzzes for SECONDS starting from the seed corpus (read only: new inputs go to
# WORK_DIR/corpus), prints the seed and a one-line summary, and fails on any crash, leak,
# timeout or out-of-memory (the input is left in WORK_DIR/crash-*, and is a regression
# test to add to SEED_CORPUS once fixed).
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
seed=${5:-${SNOWFLAKE_FUZZ_SEED:-$(( (RANDOM << 15) | RANDOM ))}}
mkdir -p "$work/corpus"
echo "fuzz $(basename "$fuzzer"): ${seconds}s, seed $seed (rerun: SNOWFLAKE_FUZZ_SEED=$seed)"
status=0
"$fuzzer" -seed="$seed" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=16384 -print_final_stats=1 -artifact_prefix="$work/" \
  "$work/corpus" "$seeds" >"$work/fuzz.log" 2>&1 || status=$?
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|cov: ' \
  "$work/fuzz.log" | tail -4 || true
if [ "$status" -ne 0 ]; then
  tail -60 "$work/fuzz.log"
  echo "fuzz $(basename "$fuzzer") FAILED (exit $status, seed $seed); input: $(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | head -1)"
  exit 1
fi
