#!/usr/bin/env bash
# docs/architecture.md's "The map of the tree" names every file of the repository once.
# Fails, naming each finding, when:
#   - a file the repository holds is neither named in the map nor under a folder the map
#     names (a name ending in "/", such as `tests/daemon/`);
#   - a name appears in the map more than once;
#   - the map names a file or folder the repository does not hold.
# The map's names are the `backticked` paths in the first cell of its tables' rows; a pair
# may be written `dir/name.h/.cc` (two files). The repository's files are `git ls-files`,
# or the lines of FILE_LIST (the test gives a changed list this way).
# Usage: check_tree_map.sh SOURCE_DIR [FILE_LIST]
set -uo pipefail

root=${1:?usage: check_tree_map.sh SOURCE_DIR [FILE_LIST]}
doc="$root/docs/architecture.md"
findings=0
finding() {
  echo "check_tree_map: $*"
  findings=$((findings + 1))
}

[ -f "$doc" ] || { echo "check_tree_map: $doc does not exist"; exit 1; }
if [ $# -ge 2 ]; then
  files=$(grep -v '^$' "$2")
else
  files=$(git -C "$root" ls-files) ||
    { echo "check_tree_map: $root is not a git checkout: give the file list as FILE_LIST"; exit 1; }
fi
[ -n "$files" ] || { echo "check_tree_map: no files to check"; exit 1; }

map=$(awk 'f && /^## /{exit} /^## The map of the tree/{f=1} f' "$doc" | grep '^|')
[ -n "$map" ] || { echo "check_tree_map: no table under '## The map of the tree' in $doc"; exit 1; }

# The names, one per line, pairs expanded.
names=()
while IFS= read -r cell; do
  rest=$cell
  while [[ "$rest" =~ \`([^\`]+)\`(.*) ]]; do
    name=${BASH_REMATCH[1]}
    rest=${BASH_REMATCH[2]}
    if [[ "$name" == *.h/.cc ]]; then
      names+=("${name%/.cc}" "${name%.h/.cc}.cc")
    else
      names+=("$name")
    fi
  done
done < <(cut -d'|' -f2 <<<"$map")
[ ${#names[@]} -gt 0 ] || { echo "check_tree_map: the map names nothing"; exit 1; }

declare -A is_file named folders_named
while IFS= read -r f; do is_file[$f]=1; done <<<"$files"
for name in "${names[@]}"; do
  if [ -n "${named[$name]:-}" ]; then
    finding "docs/architecture.md's map names \`$name\` twice (name each file once)"
  fi
  named[$name]=1
  if [[ "$name" == */ ]]; then
    folders_named[$name]=1
    awk -v p="$name" 'index($0, p) == 1 { found = 1; exit } END { exit !found }' <<<"$files" ||
      finding "docs/architecture.md's map names \`$name\`, but the repository holds no file under it"
  elif [ -z "${is_file[$name]:-}" ]; then
    finding "docs/architecture.md's map names \`$name\`, but the repository holds no such file"
  fi
done

while IFS= read -r f; do
  [ -n "${named[$f]:-}" ] && continue
  covered=""
  dir=$f
  while [[ "$dir" == */* ]]; do
    dir=${dir%/*}
    if [ -n "${folders_named[$dir/]:-}" ]; then
      covered=1
      break
    fi
  done
  [ -n "$covered" ] ||
    finding "$f is not in docs/architecture.md's map of the tree (add it to its folder's table)"
done <<<"$files"

if [ "$findings" -gt 0 ]; then
  echo "check_tree_map: $findings finding(s)"
  exit 1
fi
echo "check_tree_map: ${#names[@]} names, $(wc -l <<<"$files") files: every file named once"
