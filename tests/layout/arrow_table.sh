# shellcheck shell=bash disable=SC2034  # (its variables are read by the scripts that source it)
# Sourced by the layout checks (check_includes.sh, check_links.sh): docs/architecture.md's
# arrow table, and the folder each file of the tree belongs to.
#
# The table is the one under "## The arrows between folders", one row per folder of code:
#   | `folder/` | what it may include from | the targets it builds |
# Folders are named from the top of the tree with a trailing slash (`daemon/http/`); `./`
# is the top itself, whose targets (flags, no code) every target may link. What a folder
# may include from is a list of folders (`shm/`) and single headers (`daemon/core/heartbeat.h`:
# that header of its folder and no other), or —. A file belongs to the folder it is in; a
# public header (`<folder>/include/snowflake/x.h`) to the folder above include/.

layout_doc_section="## The arrows between folders"

# code_files ROOT [--with-tests]: the C and C++ files of the tree, relative to ROOT, one per
# line, sorted: everything but tests/ (unless asked), git's folder, the ignored build, run
# and cache folders, and any other build tree (a folder holding a CMakeCache.txt).
code_files() {
  local root=$1 prune=(-path "$1/.git" -o -path "$1/.cache" -o -path "$1/build" -o -path "$1/run"
                       -o -name node_modules)
  [ "${2:-}" = --with-tests ] || prune+=(-o -path "$root/tests")
  find "$root" \( "${prune[@]}" \) -prune -o -type f \( -name CMakeCache.txt -o -name '*.h' \
    -o -name '*.hh' -o -name '*.hpp' -o -name '*.c' -o -name '*.cc' -o -name '*.cpp' \
    -o -name '*.cxx' -o -name '*.h.in' \) -print |
    sed "s#^$root/##" |
    awk '{ path[NR] = $0 }
         /(^|\/)CMakeCache\.txt$/ { dir = $0; sub(/\/?CMakeCache\.txt$/, "", dir); build[dir] = 1 }
         END {
           for (i = 1; i <= NR; i++) {
             p = path[i]; keep = p !~ /CMakeCache\.txt$/
             for (d = p; keep && sub(/\/[^\/]*$/, "", d);) if (d in build) keep = 0
             if (keep && ("" in build)) keep = 0
             if (keep) print p
           }
         }' | LC_ALL=C sort
}

# folder_of FILE: sets `file_folder` to the folder FILE belongs to: its directory, above any
# include/ folder; `.` for the top. (A variable, not output: it runs for every include.)
folder_of() {
  file_folder=${1%/*}
  [ "$file_folder" = "$1" ] && file_folder=.
  case "$file_folder" in
    include | include/*) file_folder=. ;;
    */include | */include/*) file_folder=${file_folder%%/include/*} file_folder=${file_folder%/include} ;;
  esac
}

# read_arrow_table ROOT: fills
#   table_rows                the folders, in the table's order (`.` for the top)
#   may_include[folder]       the folders it may include from, space-separated
#   may_include_header[folder] the single headers it may include, space-separated
#   targets_of[folder]        the targets it builds, space-separated
#   row_of_target[target]     the folder whose row names the target
# and table_problems: one finding per line about the table itself (a malformed row, a
# folder or target named twice, a row for a folder the tree does not have, an allowed
# folder without a row or not in an earlier row, an allowed header that is not there).
# When there is no table at all it returns 1 and says why in table_error.
declare -a table_rows=()
declare -A may_include=() may_include_header=() targets_of=() row_of_target=()
table_problems=""
table_error=""
read_arrow_table() {
  local root=$1 doc="$1/docs/architecture.md"
  if [ ! -f "$doc" ]; then
    table_error="$doc does not exist"
    return 1
  fi
  local rows
  # The rows: the section's table lines but its header and separator.
  rows=$(awk -v h="$layout_doc_section" 'f && /^## /{exit} index($0, h) == 1 {f=1; next} f' "$doc" |
           grep '^|' | grep -v '^|[-: |]*$' | tail -n +2)
  if [ -z "$rows" ]; then
    table_error="no table under '$layout_doc_section' in docs/architecture.md"
    return 1
  fi
  local line folder_cell allow_cell target_cell folder name problems=()
  while IFS= read -r line; do
    IFS='|' read -r _ folder_cell allow_cell target_cell _ <<<"$line"
    if ! [[ "$folder_cell" =~ ^\ *\`([^\`]+)/\`\ *$ ]]; then
      problems+=("the arrow table's row '$line' does not start with one folder (\`name/\`)")
      continue
    fi
    folder=${BASH_REMATCH[1]}
    if [ -n "${may_include[$folder]+set}" ]; then
      problems+=("the arrow table has two rows for \`$folder/\` (one row per folder)")
      continue
    fi
    table_rows+=("$folder")
    may_include[$folder]=""
    may_include_header[$folder]=""
    targets_of[$folder]=""
    while [[ "$allow_cell" =~ \`([^\`]+)\`(.*) ]]; do
      name=${BASH_REMATCH[1]}
      allow_cell=${BASH_REMATCH[2]}
      if [[ "$name" == */ ]]; then
        may_include[$folder]+="${name%/} "
      else
        may_include_header[$folder]+="$name "
      fi
    done
    while [[ "$target_cell" =~ \`([^\`]+)\`(.*) ]]; do
      name=${BASH_REMATCH[1]}
      target_cell=${BASH_REMATCH[2]}
      if [ -n "${row_of_target[$name]:-}" ]; then
        problems+=("the arrow table names target \`$name\` in the rows of \`${row_of_target[$name]}/\` and \`$folder/\` (name it once, in the row of the folder it is built from)")
        continue
      fi
      row_of_target[$name]=$folder
      targets_of[$folder]+="$name "
    done
  done <<<"$rows"
  # Each row names only what earlier rows hold: the order is one in which every arrow
  # points down, so none points up and there is no cycle.
  local -A row_index=()
  local i=0
  for folder in "${table_rows[@]}"; do row_index[$folder]=$((i++)); done
  for folder in "${table_rows[@]}"; do
    [ -d "$root/$folder" ] ||
      problems+=("the arrow table has a row for \`$folder/\`, but the tree has no folder $folder/ (remove or rename the row)")
    for name in ${may_include[$folder]}; do
      if [ -z "${row_index[$name]:-}" ]; then
        problems+=("the arrow table lets \`$folder/\` include from \`$name/\`, which has no row of its own")
      elif [ "${row_index[$name]}" -ge "${row_index[$folder]}" ]; then
        problems+=("the arrow table lets \`$folder/\` include from \`$name/\`, whose row does not come before its own: the rows go from the lowest part to the highest, so that would be an arrow up or a cycle")
      fi
    done
    for name in ${may_include_header[$folder]}; do
      [ -f "$root/$name" ] ||
        problems+=("the arrow table lets \`$folder/\` include \`$name\`, which is not a file of the tree")
      folder_of "$name"
      if [ -z "${row_index[$file_folder]:-}" ]; then
        problems+=("the arrow table lets \`$folder/\` include \`$name\`, whose folder $file_folder/ has no row")
      elif [ "${row_index[$file_folder]}" -ge "${row_index[$folder]}" ]; then
        problems+=("the arrow table lets \`$folder/\` include \`$name\`, whose folder's row does not come before its own: the rows go from the lowest part to the highest, so that would be an arrow up or a cycle")
      fi
    done
  done
  table_problems=""
  [ ${#problems[@]} -eq 0 ] || table_problems=$(printf '%s\n' "${problems[@]}")
  return 0
}

# may_reach FROM TO [HEADER]: whether a file of folder FROM may include HEADER of folder TO
# (without HEADER: whether a target of FROM may link a target of TO): TO is FROM, or FROM's
# row names TO or, for a link, one of TO's headers (using a header means linking its target).
may_reach() {
  local from=$1 to=$2 header=${3:-} name
  [ "$from" = "$to" ] && return 0
  [[ " ${may_include[$from]:-} " == *" $to "* ]] && return 0
  for name in ${may_include_header[$from]:-}; do
    if [ -n "$header" ]; then
      [ "$name" = "$header" ] && return 0
    else
      folder_of "$name"
      [ "$file_folder" = "$to" ] && return 0
    fi
  done
  return 1
}

# allowed_text FOLDER: what FOLDER's row names, for a message: " and {base/, shm/,
# daemon/core/heartbeat.h}", or nothing when it names nothing.
allowed_text() {
  local names=() name
  for name in ${may_include[$1]:-}; do names+=("$name/"); done
  for name in ${may_include_header[$1]:-}; do names+=("$name"); done
  [ ${#names[@]} -gt 0 ] || return 0
  local IFS=,
  echo " and {${names[*]}}" | sed 's/,/, /g'
}
