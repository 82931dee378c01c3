#!/usr/bin/env bash
# docs/architecture.md's tables of the daemon's parts and of its start and stop are the
# tree's and the code's. Fails, naming each finding, when:
#   - a file of daemon/, register/ or util/ is missing from the parts tables of
#     docs/architecture.md (a file of daemon/ is listed by its path under daemon/, e.g.
#     `core/fill_loop.h/.cc`; one of register/ or util/ by its path from the top), or the
#     tables name a file that does not exist;
#   - the stages of docs/architecture.md's "Startup and shutdown" table are not kTable's
#     in Daemon::BuildTable() (daemon/daemon.cc), in its order: the code is the one table.
# (Where the parts may include from and link is the arrow table's business:
# check_includes.sh and check_links.sh.)
# Usage: check_parts.sh SOURCE_DIR
set -uo pipefail

root=${1:?usage: check_parts.sh SOURCE_DIR}
doc="$root/docs/architecture.md"
findings=0
finding() {
  echo "check_parts: $*"
  findings=$((findings + 1))
}

[ -f "$doc" ] || { echo "check_parts: $doc does not exist"; exit 1; }
# The parts tables: the rows between "## The parts" and the next "## " heading.
table=$(awk 'f && /^## /{exit} /^## The parts/{f=1} f' "$doc" | grep '^|')
[ -n "$table" ] || { echo "check_parts: no parts table under '## The parts' in $doc"; exit 1; }

# Where a name of the parts tables is: register/ and util/ at the top, the rest in daemon/.
located() {
  case "$1" in
    register/* | util/*) echo "$root/$1" ;;
    *) echo "$root/daemon/$1" ;;
  esac
}

# 1. Every file of daemon/ (but the model's, which its own README covers), register/ and
#    util/ is in the tables.
while IFS= read -r path; do
  rel=${path#"$root/daemon/"}
  [[ "$path" == "$root/register/"* || "$path" == "$root/util/"* ]] && rel=${path#"$root/"}
  case "$rel" in model/* | CMakeLists.txt | */CMakeLists.txt) continue ;; esac
  name=${rel##*/}
  stem=${name%%.*}
  prefix=""
  [ "$name" != "$rel" ] && prefix="${rel%/*}/"
  # A pair may be listed as `dir/stem.h/.cc`; a single file by its name.
  if [[ "$table" != *"\`$prefix$stem."* && "$table" != *"\`$prefix$name\`"* ]]; then
    finding "${path#"$root/"} is not in the parts tables of docs/architecture.md (add a row naming \`$prefix$name\`)"
  fi
done < <(find "$root/daemon" "$root/register" "$root/util" -type f 2>/dev/null | sort)

# 1b. Every file the tables name exists: `dir/stem.h/.cc` names two files, `dir/` a folder,
#     and a name in the row of a folder (`model/` (`fencing.pml`, ...)) a file in it.
while IFS= read -r cell; do
  folder=""
  [[ "$cell" =~ ^\ *\`([a-z_]+/)\` ]] && folder=${BASH_REMATCH[1]}
  rest=$cell
  while [[ "$rest" =~ \`([^\`]+)\`(.*) ]]; do
    name=${BASH_REMATCH[1]}
    rest=${BASH_REMATCH[2]}
    if [[ "$name" == */ ]]; then
      paths=("$name")
    elif [[ "$name" == *.h/.cc ]]; then
      paths=("${name%/.cc}" "${name%.h/.cc}.cc")
    else
      paths=("$folder$name")
      [ "$name" = "$folder" ] && paths=("$name")
    fi
    for path in "${paths[@]}"; do
      where=$(located "$path")
      [ -e "$where" ] ||
        finding "docs/architecture.md's parts tables name \`$name\`, but ${where#"$root/"} does not exist"
    done
  done
done < <(cut -d'|' -f2 <<<"$table")

# 2. The start/stop table is the code's; the document describes it stage by stage.
code_stages=$(sed -n '/kTable\[\] = {/,/^  };/p' "$root/daemon/daemon.cc" |
                sed -nE 's/^ *\{"([a-z ]+)", .*/\1/p' | paste -sd, -)
doc_stages=$(awk '/^## Startup and shutdown/{f=1} f && /^## / && !/Startup/{exit} f' "$doc" |
               sed -nE 's/^\| [0-9–]+ \| `([a-z ]+)` \|.*/\1/p' | paste -sd, -)
if [ -z "$code_stages" ] || [ "$code_stages" != "$doc_stages" ]; then
  finding "the stages of docs/architecture.md's \"Startup and shutdown\" table ($doc_stages) are not kTable's in daemon/daemon.cc ($code_stages)"
fi

if [ "$findings" -gt 0 ]; then
  echo "check_parts: $findings finding(s)"
  exit 1
fi
echo "check_parts: every file of daemon/, register/ and util/ is in the parts tables; the stages are kTable's"
