#!/usr/bin/env bash
# Every link arrow between the project's CMake targets follows docs/architecture.md's arrow
# table (tests/layout/arrow_table.sh reads it): a target is named in the row of the folder
# it is built from, and may link the targets of its own row, of the folders its row may
# include from (or names a header of) and of the top (`./`: flags only).
# Fails, naming each finding, when:
#   - the table is malformed (as check_includes.sh says);
#   - the build defines a target no row names;
#   - a row names a target that no CMakeLists.txt in its folder or above it mentions;
#   - a target links a target of a folder its row does not allow.
# The arrows are `cmake --graphviz`'s, from a throwaway configure of SOURCE_DIR in WORK_DIR
# (nothing is built): the tests off, everything else the build has on, the benchmarks and
# the bindings included, so every product target is there whatever preset runs the check.
# Only the project's targets are drawn (GRAPHVIZ_EXTERNAL_LIBS off): what a target links
# of the system is the linked-libraries tests' business (tests/cli/).
# Usage: check_links.sh SOURCE_DIR WORK_DIR [CMAKE_ARGUMENT...]
#        (the arguments go to the configure: a generator, -DSNOWFLAKE_BUILD_JAVA=OFF, ...)
set -uo pipefail

root=${1:?usage: check_links.sh SOURCE_DIR WORK_DIR [CMAKE_ARGUMENT...]}
work=${2:?usage: check_links.sh SOURCE_DIR WORK_DIR [CMAKE_ARGUMENT...]}
shift 2
root=${root%/}
# shellcheck source-path=SCRIPTDIR source=arrow_table.sh
source "$(dirname "${BASH_SOURCE[0]}")/arrow_table.sh"
findings=0
finding() {
  echo "check_links: $*"
  findings=$((findings + 1))
}

if ! read_arrow_table "$root"; then
  echo "check_links: $table_error"
  exit 1
fi
if [ -n "$table_problems" ]; then
  while IFS= read -r problem; do finding "$problem"; done <<<"$table_problems"
fi

# The graph. The configure only generates, so the Node.js addon's node-addon-api (fetched by
# npm into a real build) is stood in for by an empty napi.h: the configure checks only that
# the file is there.
rm -rf "$work/build" "$work/napi" "$work/targets.dot" "$work/configure.log"
mkdir -p "$work/build" "$work/napi"
: >"$work/napi/napi.h"
cat >"$work/build/CMakeGraphVizOptions.cmake" <<'OPTIONS'
set(GRAPHVIZ_EXTERNAL_LIBS FALSE)
set(GRAPHVIZ_GENERATE_PER_TARGET FALSE)
set(GRAPHVIZ_GENERATE_DEPENDERS FALSE)
OPTIONS
if ! cmake -S "$root" -B "$work/build" --graphviz="$work/targets.dot" \
       -DSNOWFLAKE_BUILD_TESTS=OFF -DSNOWFLAKE_FUZZ=OFF -DSNOWFLAKE_SANITIZE= \
       -DSNOWFLAKE_BUILD_BENCHMARKS=ON -DSNOWFLAKE_NODE_ADDON_API_DIR="$work/napi" \
       "$@" >"$work/configure.log" 2>&1 || [ ! -s "$work/targets.dot" ]; then
  echo "check_links: configuring $root in $work/build failed, so there is no graph to check:"
  tail -n 20 "$work/configure.log"
  exit 1
fi

# The targets (a node's label: the name, then any alias on a line of its own) and the
# arrows (each edge's comment: `// from -> to`).
mapfile -t targets < <(sed -nE 's/^ *"node[0-9]+" \[ label = "([^"\\]+).*/\1/p' "$work/targets.dot" | LC_ALL=C sort -u)
[ ${#targets[@]} -gt 0 ] || { echo "check_links: no target in $work/targets.dot"; exit 1; }
edges=$(sed -nE 's#^ *"node[0-9]+" -> "node[0-9]+".*// (.+) -> (.+)$#\1 \2#p' "$work/targets.dot")

# The CMakeLists.txt that may define a row's targets: its folder's and those above it.
cmake_text_for() {
  local folder=$1 text=""
  while :; do
    [ -f "$root/$folder/CMakeLists.txt" ] && text+=$(<"$root/$folder/CMakeLists.txt")$'\n'
    [ "$folder" = . ] && break
    [[ "$folder" == */* ]] && folder=${folder%/*} || folder=.
  done
  printf '%s' "$text"
}
for folder in "${table_rows[@]}"; do
  [ -n "${targets_of[$folder]}" ] || continue
  text=$(cmake_text_for "$folder")
  for target in ${targets_of[$folder]}; do
    grep -qE "(^|[^A-Za-z0-9_])${target}([^A-Za-z0-9_]|$)" <<<"$text" ||
      finding "the arrow table names target \`$target\` in the row of \`$folder/\`, but no CMakeLists.txt in $folder/ or above it mentions it (rename or move it)"
  done
done

for target in "${targets[@]}"; do
  [ -n "${row_of_target[$target]:-}" ] ||
    finding "the build defines target $target, which no row of docs/architecture.md's arrow table names (add it to the row of the folder it is built from)"
done

while read -r from to; do
  if [ -z "$from" ] || [ "$from" = "$to" ]; then continue; fi
  from_row=${row_of_target[$from]:-}
  to_row=${row_of_target[$to]:-}
  if [ -z "$from_row" ] || [ -z "$to_row" ]; then continue; fi  # found above: no row
  [ "$to_row" = . ] && continue
  may_reach "$from_row" "$to_row" ||
    finding "$from (in $from_row/) links $to (in $to_row/): $from_row/ may link only targets of the top, of itself$(allowed_text "$from_row"), not of $to_row/ (docs/architecture.md's arrow table)"
done <<<"$edges"

if [ "$findings" -gt 0 ]; then
  echo "check_links: $findings finding(s)"
  exit 1
fi
echo "check_links: ${#targets[@]} targets, $(grep -c . <<<"$edges") arrows: every link follows the arrow table"
