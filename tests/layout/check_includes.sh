#!/usr/bin/env bash
# Every #include of the project's own headers follows docs/architecture.md's arrow table
# (tests/layout/arrow_table.sh reads it). Fails, naming each finding, when:
#   - the table is malformed: a row that names no folder, a folder or a target named twice,
#     a row for a folder the tree does not have, an allowed folder without a row, an
#     allowed header that is not there;
#   - a folder holds C or C++ code (outside tests/) and has no row, or a row's folder holds
#     none;
#   - a file includes a header its folder's row does not allow: a header of another folder
#     the row does not name (nor names that header of), or of tests/;
#   - a file includes an internal header of another folder that has public headers (a
#     folder with an include/ folder is used from outside through include/ only).
# An include is read in either form ("…" or <…>) and resolved as the compiler finds it in
# this tree: beside the including file (the "…" form only), then from the top of the
# tree, then under each folder's include/ (where `snowflake/x.h` lives), then as the
# trailing part of a path of the tree (a folder given with -I). What resolves to no file of
# the tree (the system's, a library's, a generated header) is not the project's.
# With --arrows it prints instead the arrows the code has: each folder, then what its
# files include of other folders (a folder, or the one header where its row names only that).
# Usage: check_includes.sh SOURCE_DIR [--arrows]
set -uo pipefail

root=${1:?usage: check_includes.sh SOURCE_DIR [--arrows]}
root=${root%/}
mode=${2:-check}
# shellcheck source-path=SCRIPTDIR source=arrow_table.sh
source "$(dirname "${BASH_SOURCE[0]}")/arrow_table.sh"
findings=0
finding() {
  echo "check_includes: $*"
  findings=$((findings + 1))
}

if ! read_arrow_table "$root"; then
  echo "check_includes: $table_error"
  [ "$mode" = check ] && exit 1
fi
if [ "$mode" = check ] && [ -n "$table_problems" ]; then
  while IFS= read -r problem; do finding "$problem"; done <<<"$table_problems"
fi

# Every file an include may reach (those of tests/ too: nothing outside tests/ may include
# them), by path and by base name; the files scanned; the include/ folders.
declare -A in_tree=() by_base=() has_public=()
include_dirs=() scanned=()
while IFS= read -r path; do
  in_tree[$path]=1
  by_base[${path##*/}]+="$path "
  if [[ "$path" == */include/* ]]; then
    dir=${path%%/include/*}/include
    if [ -z "${has_public[${dir%/include}]:-}" ]; then
      has_public[${dir%/include}]=1
      include_dirs+=("$dir")
    fi
  fi
  [[ "$path" == tests/* ]] || scanned+=("$path")
done < <(code_files "$root" --with-tests)
[ ${#scanned[@]} -gt 0 ] || { echo "check_includes: no C or C++ file under $root"; exit 1; }

# Each folder of code has a row, and each row's folder holds code.
if [ "$mode" = check ]; then
  declare -A code_folder=()
  for path in "${scanned[@]}"; do
    folder_of "$path"
    [ -n "${code_folder[$file_folder]:-}" ] && continue
    code_folder[$file_folder]=1
    [ -n "${may_include[$file_folder]+set}" ] ||
      finding "$file_folder/ holds C or C++ code ($path) but has no row in docs/architecture.md's arrow table (add one: what it may include from, the targets it builds)"
  done
  for folder in "${table_rows[@]}"; do
    [ "$folder" = . ] || [ -n "${code_folder[$folder]:-}" ] || [ ! -d "$root/$folder" ] ||
      finding "the arrow table has a row for \`$folder/\`, which holds no C or C++ file (remove the row)"
  done
fi

# normalize PATH: sets `normal` to PATH without ./ and x/.. steps.
normalize() {
  normal=$1
  while [[ "$normal" == */./* ]]; do normal=${normal//\/.\//\/}; done
  normal=${normal#./}
  while [[ "$normal" =~ ^(.*/)?([^/]+)/\.\./(.*)$ && "${BASH_REMATCH[2]}" != .. ]]; do
    normal="${BASH_REMATCH[1]}${BASH_REMATCH[3]}"
  done
}

# resolve FILE FORM NAME: sets `reached` to the files of the tree that the include NAME
# (FORM `"` or `<`) of FILE reaches: the first found, or every file NAME ends a path of.
resolve() {
  local file=$1 form=$2 name=$3 dir path
  reached=()
  dir=${file%/*}
  [ "$dir" = "$file" ] && dir=.
  if [ "$form" = '"' ]; then
    normalize "$dir/$name"
    [ -n "${in_tree[$normal]:-}" ] && { reached=("$normal"); return; }
  fi
  normalize "$name"
  [ -n "${in_tree[$normal]:-}" ] && { reached=("$normal"); return; }
  local relative=$normal
  for dir in "${include_dirs[@]}"; do
    normalize "$dir/$relative"
    [ -n "${in_tree[$normal]:-}" ] && { reached=("$normal"); return; }
  done
  for path in ${by_base[${relative##*/}]:-}; do
    [[ "$path" == */"$relative" ]] && reached+=("$path")
  done
}

declare -A arrows=()
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  lineno=${rest%%:*}
  text=${rest#*:}
  [[ "$text" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*([\"\<])([^\"\>]+)[\"\>] ]] || continue
  form=${BASH_REMATCH[1]}
  name=${BASH_REMATCH[2]}
  [ "$form" = '"' ] && shown="\"$name\"" || shown="<$name>"
  folder_of "$file"
  from=$file_folder
  resolve "$file" "$form" "$name"
  for header in "${reached[@]}"; do
    folder_of "$header"
    to=$file_folder
    [ "$to" = "$from" ] && continue
    if [ "$mode" != check ]; then
      if [[ " ${may_include_header[$from]:-} " == *" $header "* ]]; then
        arrows[$from]+="$header "
      else
        arrows[$from]+="$to/ "
      fi
      continue
    fi
    [ -n "${may_include[$from]+set}" ] || continue  # found above: the folder has no row
    if [[ "$to" == tests || "$to" == tests/* ]]; then
      finding "$file:$lineno includes $shown ($header): no folder of the product may include a header of tests/"
    elif [ -z "${may_include[$to]+set}" ]; then
      finding "$file:$lineno includes $shown ($header), of $to/, which has no row in the arrow table"
    elif ! may_reach "$from" "$to" "$header"; then
      finding "$file:$lineno includes $shown ($header): $from/ may include only from itself$(allowed_text "$from"), not from $to/ (docs/architecture.md's arrow table)"
    elif [ -n "${has_public[$to]:-}" ] && [[ "$header" != "$to"/include/* ]]; then
      finding "$file:$lineno includes $shown ($header), an internal header of $to/: from outside $to/ include only its public headers, under $to/include/"
    fi
  done
done < <(cd "$root" && grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' -- "${scanned[@]}")

if [ "$mode" = --arrows ]; then
  for from in $(printf '%s\n' "${!arrows[@]}" | LC_ALL=C sort); do
    echo "$from/: $(tr ' ' '\n' <<<"${arrows[$from]}" | grep -v '^$' | LC_ALL=C sort -u | paste -sd' ')"
  done
  exit 0
fi

if [ "$findings" -gt 0 ]; then
  echo "check_includes: $findings finding(s)"
  exit 1
fi
echo "check_includes: ${#scanned[@]} files in ${#table_rows[@]} folders: every include follows the arrow table"
