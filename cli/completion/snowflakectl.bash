# bash completion for snowflakectl (installed as
# share/bash-completion/completions/snowflakectl; bash-completion loads it on first use).
# Completes the commands, each command's options, directories after --runtime-dir, and
# a few useful values (counts after -n, the current time after --from/--to/--epoch/--above),
# the register's subcommands and files after --config.

_snowflakectl() {
  local cur prev
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=""
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}

  local commands="status next decode bounds resume register"
  local global_opts="--help --version --runtime-dir"

  # The command is the first word that is not an option or an option's value; for
  # `register`, the word after it that is not an option is its subcommand.
  local command="" subcommand="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      --runtime-dir | --config) ((i++)) ;;
      -*) ;;
      *)
        if [ -z "$command" ]; then
          command=${COMP_WORDS[i]}
          [ "$command" = register ] || break
        elif [ -z "$subcommand" ]; then
          subcommand=${COMP_WORDS[i]}
          break
        fi
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
    --config)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
      ;;
    --from | --to | --epoch | --above)
      mapfile -t COMPREPLY < <(compgen -W "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(date -u +%s000)" -- "$cur")
      return 0
      ;;
    --service | --remote)
      return 0
      ;;
  esac

  local opts
  case $command in
    "") opts="$commands $global_opts" ;;
    status) opts="--json --runtime-dir --help" ;;
    next) opts="-n --count --service --remote --runtime-dir --help" ;;
    decode) opts="--epoch --json --runtime-dir --help" ;;
    bounds) opts="--from --to --epoch --json --runtime-dir --help" ;;
    resume) opts="--json --runtime-dir --help" ;;
    register)
      case $subcommand in
        "") opts="list show release raise-all --config --help" ;;
        list) opts="--json --all --summary --from --count --config --help" ;;
        show) opts="--json --config --help" ;;
        release) opts="--config --help" ;;
        raise-all) opts="--above --while-running --force-far --config --help" ;;
        *) opts="--help" ;;
      esac
      ;;
    *) opts="--help" ;;
  esac
  mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
  return 0
}

complete -F _snowflakectl snowflakectl
