#!/usr/bin/env bash
# Sources snowflakectl's bash completion and calls its function the way bash does
# (COMP_WORDS / COMP_CWORD in, COMPREPLY out), checking what it offers.
#   completion_test.sh path/to/snowflakectl.bash
set -euo pipefail
# shellcheck source=/dev/null
source "$1"
failures=0

# complete WORD... : the words typed so far, the last one being completed.
complete_words() {
  COMP_WORDS=(snowflakectl "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  _snowflakectl
  echo "${COMPREPLY[*]}"
}

expect() {  # expect "description" "got" "wanted"
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1: got '$2', wanted '$3'" >&2
    failures=$((failures + 1))
  fi
}

[ "$(complete -p snowflakectl)" = "complete -F _snowflakectl snowflakectl" ] ||
  { echo "FAIL: not registered for snowflakectl" >&2; failures=$((failures + 1)); }
expect "commands" "$(complete_words "")" "status next decode bounds resume register --help --version --runtime-dir"
expect "a prefix" "$(complete_words st)" "status"
expect "b" "$(complete_words b)" "bounds"
expect "bounds options" "$(complete_words bounds --)" "--from --to --epoch --json --runtime-dir --help"
expect "next options" "$(complete_words next -)" "-n --count --service --remote --runtime-dir --help"
expect "register subcommands" "$(complete_words register "")" "list show release raise-all --config --help"
expect "after register --config FILE" "$(complete_words register --config /etc/s.toml r)" "release raise-all"
expect "raise-all options" "$(complete_words register raise-all --)" "--above --while-running --force-far --config --help"
expect "list options" "$(complete_words register list --j)" "--json"
expect "list page options" "$(complete_words register list --c)" "--count --config"
expect "after the global --runtime-dir" "$(complete_words --runtime-dir /tmp status --j)" "--json"
expect "counts" "$(complete_words next -n 10)" "10 100 1000"
dir=$(mktemp -d)
mkdir "$dir/alpha" "$dir/beta"
expect "directories" "$(complete_words status --runtime-dir "$dir/al")" "$dir/alpha"
rm -r "$dir"
above=$(complete_words register raise-all --above "")
[[ $above =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z\ [0-9]+$ ]] ||
  { echo "FAIL: --above offers '$above'" >&2; failures=$((failures + 1)); }
from=$(complete_words bounds --from "")
[[ $from =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z\ [0-9]+$ ]] ||
  { echo "FAIL: --from offers '$from'" >&2; failures=$((failures + 1)); }

if [ "$failures" -ne 0 ]; then
  echo "$failures completion check(s) failed" >&2
  exit 1
fi
echo "completion ok"
