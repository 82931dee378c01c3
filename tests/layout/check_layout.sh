#!/usr/bin/env bash
# The daemon's folders are its parts, with the register and the tools it shares with the
# CLI at the top of the tree (register/, base/), and docs/architecture.md is their map.
# Fails, naming each finding, when:
#   - a file of daemon/, register/ or base/ is missing from the parts tables of
#     docs/architecture.md (a file of daemon/ is listed by its path under daemon/, e.g.
#     `core/fill_loop.h/.cc`; one of register/ or base/ by its path from the top), or the
#     tables name a file that does not exist;
#   - an include points up: base/ includes only base/; register/ only base/ and register/
#     (and, like base/, of the rest only the public headers of shm/ and text/); daemon's
#     config/ only base/, register/ and config/; metrics/ only base/ and metrics/ (every
#     part reports into it); core/ nothing of control/, fronts/, http/ or the top (it
#     reports through core/status_sink.h); control/ nothing of fronts/, http/ or the top;
#     fronts/ (what every front shares) nothing of a front (http/) nor of the process;
#   - a file of fronts/ or http/ includes the ring's producer or the generator (fronts only
#     take, through libsnowflake);
#   - daemon/ includes a header of cli/, or cli/ includes any daemon/ header or links a
#     daemon library (the register commands go through register/);
#   - text/ includes anything of the project but itself, or shm/ anything but itself and
#     text/ (the words for shm's states are above it, in protocol/vocabulary.h);
#   - libclient/ includes a header of daemon/, register/, base/ or cli/;
#   - protocol/ (the vocabulary and the control protocol both ends link) includes anything
#     but itself and the public headers of shm/ and text/, or bindings/ includes a header
#     of cli/ or daemon/;
#   - the stages of docs/architecture.md's "Startup and shutdown" table are not kTable's
#     in Daemon::BuildTable() (daemon/daemon.cc), in its order: the code is the one table.
# Usage: check_layout.sh SOURCE_DIR
set -uo pipefail

root=${1:?usage: check_layout.sh SOURCE_DIR}
doc="$root/docs/architecture.md"
findings=0
finding() {
  echo "check_layout: $*"
  findings=$((findings + 1))
}

[ -f "$doc" ] || { echo "check_layout: $doc does not exist"; exit 1; }
# The parts tables: the rows between "## The parts" and the next "## " heading.
table=$(awk 'f && /^## /{exit} /^## The parts/{f=1} f' "$doc" | grep '^|')
[ -n "$table" ] || { echo "check_layout: no parts table under '## The parts' in $doc"; exit 1; }

# Where a name of the parts tables is: register/ and base/ at the top, the rest in daemon/.
located() {
  case "$1" in
    register/* | base/*) echo "$root/$1" ;;
    *) echo "$root/daemon/$1" ;;
  esac
}

# 1. Every file of daemon/ (but the model's, which its own README covers), register/ and
#    base/ is in the tables.
while IFS= read -r path; do
  rel=${path#"$root/daemon/"}
  [[ "$path" == "$root/register/"* || "$path" == "$root/base/"* ]] && rel=${path#"$root/"}
  case "$rel" in model/* | CMakeLists.txt | */CMakeLists.txt) continue ;; esac
  name=${rel##*/}
  stem=${name%%.*}
  prefix=""
  [ "$name" != "$rel" ] && prefix="${rel%/*}/"
  # A pair may be listed as `dir/stem.h/.cc`; a single file by its name.
  if [[ "$table" != *"\`$prefix$stem."* && "$table" != *"\`$prefix$name\`"* ]]; then
    finding "${path#"$root/"} is not in the parts tables of docs/architecture.md (add a row naming \`$prefix$name\`)"
  fi
done < <(find "$root/daemon" "$root/register" "$root/base" -type f 2>/dev/null | sort)

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

# The public headers of the two libraries below everything, by their include names.
text_headers=$(cd "$root/text/include" 2>/dev/null && find snowflake -name '*.h' | sort)
shm_headers=$(cd "$root/shm/include" 2>/dev/null && find snowflake -name '*.h' | sort)

# 2. Includes point down only. A part's includes of the project are named by the folder
#    they reach: base, register, daemon/<folder>, or daemon (its top level).
allowed_below() {
  case "$1" in
    base) echo "base" ;;
    register) echo "base register" ;;
    daemon/config) echo "base register daemon/config" ;;
    daemon/metrics) echo "base daemon/metrics" ;;
    daemon/core) echo "base register daemon/config daemon/metrics daemon/core" ;;
    daemon/control) echo "base register daemon/config daemon/metrics daemon/core daemon/control" ;;
    daemon/fronts) echo "base register daemon/config daemon/metrics daemon/core daemon/control daemon/fronts" ;;
  esac
}
for part in base register daemon/config daemon/metrics daemon/core daemon/control daemon/fronts; do
  allowed=$(allowed_below "$part")
  while IFS=: read -r file _ line; do
    # No subprocess per line: bash's own regex (this runs for every include of a part).
    [[ "$line" =~ \#include\ \"([^\"]*)\" ]] || continue
    included=${BASH_REMATCH[1]}
    case "$included" in
      daemon/*/*) [[ "$included" =~ ^(daemon/[a-z_]+)/ ]] && target=${BASH_REMATCH[1]} ;;
      daemon/*) target="daemon" ;;
      base/* | register/*) target=${included%%/*} ;;
      *)
        # Below the daemon's parts: the base and the register may use only shm/ and text/.
        if [[ "$part" == base || "$part" == register ]] &&
           [[ "$included" == */* ]] && ! grep -qxF "$included" <<<"$shm_headers"$'\n'"$text_headers"; then
          finding "${file#"$root/"} includes \"$included\": $part/ may include only {${allowed// /,}}/ and the public headers of shm/ and text/"
        fi
        continue ;;
    esac
    case " $allowed " in
      *" $target "*) ;;
      *) finding "${file#"$root/"} includes \"$included\": $part/ may include only {${allowed// /,}}/" ;;
    esac
  done < <(grep -rn '#include "' "$root/$part")
done

# 3. No arrow between the CLI and the daemon, either way.
while IFS= read -r hit; do
  finding "${hit#"$root/"}: the daemon includes a header of cli/"
done < <(grep -rnE '#include "(cli/|status_report\.h|control_client\.h|command_error\.h|exit_codes\.h)' "$root/daemon")
while IFS= read -r hit; do
  finding "${hit#"$root/"}: cli/ may include no daemon/ header (the register commands use register/)"
done < <(grep -rnE '#include "daemon/' "$root/cli")
if grep -nE 'snowflake(_|::)daemon_(core|config)' "$root/cli/CMakeLists.txt"; then
  finding "cli/CMakeLists.txt links a library of the daemon"
fi

# 3b. Fronts only take: nothing of fronts/ or http/ reaches the ring's producer side or the
#     generator (docs/architecture.md, invariant 8).
while IFS= read -r hit; do
  finding "${hit#"$root/"}: a front may not include the ring's producer or the generator (fronts only take, through libsnowflake)"
done < <(grep -rnE '#include "(snowflake/ring_producer\.h|daemon/core/(generator|fill_loop)\.h)"' \
           "$root/daemon/fronts" "$root/daemon/http" 2>/dev/null)

# 4a. Below everything: text/ includes nothing of the project but itself; shm/ (formats
#     only) nothing but itself and text/.
while IFS=: read -r file _ line; do
  [[ "$line" =~ \#include\ \"([^\"]*)\" ]] || continue
  grep -qxF "${BASH_REMATCH[1]}" <<<"$text_headers" ||
    finding "${file#"$root/"} includes \"${BASH_REMATCH[1]}\": text/ may include only text/"
done < <(grep -rn '#include "' "$root/text")
while IFS=: read -r file _ line; do
  [[ "$line" =~ \#include\ \"([^\"]*)\" ]] || continue
  included=${BASH_REMATCH[1]}
  case "$included" in
    mapped_segment.h | service_slot_codec.h) continue ;;
  esac
  grep -qxF "$included" <<<"$shm_headers"$'\n'"$text_headers" ||
    finding "${file#"$root/"} includes \"$included\": shm/ may include only shm/ and text/"
done < <(grep -rn '#include "' "$root/shm")

# 4b. libclient/ (libsnowflake and the status model) sits below the daemon, the register
#     and the CLI: it includes none of their headers.
while IFS= read -r hit; do
  finding "${hit#"$root/"}: libclient/ may include only itself, protocol/, shm/ and text/"
done < <(grep -rnE '#include "(daemon/|register/|base/|cli/|command_error\.h|exit_codes\.h)' \
           "$root/libclient" 2>/dev/null)

# 4. The control protocol sits below both of its ends; bindings are clients only.
while IFS=: read -r file _ line; do
  [[ "$line" =~ \#include\ \"([^\"]*)\" ]] || continue
  included=${BASH_REMATCH[1]}
  [[ "$included" == protocol/* ]] && continue
  grep -qxF "$included" <<<"$shm_headers"$'\n'"$text_headers" ||
    finding "${file#"$root/"} includes \"$included\": protocol/ may include only protocol/ and the public headers of shm/ and text/"
done < <(grep -rn '#include "' "$root/protocol")
while IFS= read -r hit; do
  finding "${hit#"$root/"}: bindings/ may not include a header of cli/ or daemon/"
done < <(grep -rnE '#include "(cli/|daemon/|control_client\.h|command_error\.h|exit_codes\.h)' \
           "$root/bindings" 2>/dev/null)

# 5. The start/stop table is the code's; the document describes it stage by stage.
code_stages=$(sed -n '/kTable\[\] = {/,/^  };/p' "$root/daemon/daemon.cc" |
                sed -nE 's/^ *\{"([a-z ]+)", .*/\1/p' | paste -sd, -)
doc_stages=$(awk '/^## Startup and shutdown/{f=1} f && /^## / && !/Startup/{exit} f' "$doc" |
               sed -nE 's/^\| [0-9–]+ \| `([a-z ]+)` \|.*/\1/p' | paste -sd, -)
if [ -z "$code_stages" ] || [ "$code_stages" != "$doc_stages" ]; then
  finding "the stages of docs/architecture.md's \"Startup and shutdown\" table ($doc_stages) are not kTable's in daemon/daemon.cc ($code_stages)"
fi

if [ "$findings" -gt 0 ]; then
  echo "check_layout: $findings finding(s)"
  exit 1
fi
echo "check_layout: every file of daemon/, register/ and base/ is in the parts tables; no include points up"
