# bash completion for snowflakectl (installed as
# share/bash-completion/completions/snowflakectl; bash-completion loads it on first use).
# Completes the commands, each command's options, directories after --runtime-dir, and
# a few useful values (counts after -n, the current time after --from/--to/--epoch).

_snowflakectl() {
  local cur prev
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=""
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}

  local commands="status next decode bounds resume"
  local global_opts="--help --version --runtime-dir"

  # The command is the first word that is not an option or the value of --runtime-dir.
  local command="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      --runtime-dir) ((i++)) ;;
      -*) ;;
      *)
        command=${COMP_WORDS[i]}
        break
        ;;
    esac
  done

  case $prev in
    --runtime-dir)
      mapfile -t COMPREPLY < <(compgen -d -- "$cur")
      return 0
      ;;
    -n | --count)
      mapfile -t COMPREPLY < <(compgen -W "1 10 100 1000" -- "$cur")
      return 0
      ;;
    --from | --to | --epoch)
      mapfile -t COMPREPLY < <(compgen -W "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(date -u +%s000)" -- "$cur")
      return 0
      ;;
    --service)
      return 0
      ;;
  esac

  local opts
  case $command in
    "") opts="$commands $global_opts" ;;
    status) opts="--json --runtime-dir --help" ;;
    next) opts="-n --count --service --runtime-dir --help" ;;
    decode) opts="--epoch --json --runtime-dir --help" ;;
    bounds) opts="--from --to --epoch --json --runtime-dir --help" ;;
    resume) opts="--json --runtime-dir --help" ;;
    *) opts="--help" ;;
  esac
  mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
  return 0
}

complete -F _snowflakectl snowflakectl
