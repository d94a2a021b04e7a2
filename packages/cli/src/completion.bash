# The completion function; the assignments above (from `jobrt completion bash`) say what it offers.
_jobrt_runtime_names() {
  "$1" runtimes --json 2>/dev/null | "$_jobrt_node" "$_jobrt_runtimes_reader" 2>/dev/null
}

_jobrt() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]} var
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
    mapfile -t COMPREPLY < <(compgen -W "$_jobrt_commands --help --version" -- "$cur")
    return 0
  fi
  case $cmd in *[!a-z]* | '') return 0 ;; esac
  case " $_jobrt_commands " in *" $cmd "*) ;; *) return 0 ;; esac
  if [ "$prev" = --runtime ]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_jobrt_runtime_names "${COMP_WORDS[0]}")" -- "$cur")
    return 0
  fi
  case " $_jobrt_valued " in *" $prev "*)
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    return 0 ;;
  esac
  case $cur in -*)
    var=_jobrt_opts_$cmd
    mapfile -t COMPREPLY < <(compgen -W "${!var}" -- "$cur")
    return 0 ;;
  esac
  var=_jobrt_words_$cmd
  if [ -n "${!var}" ]; then
    [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "${!var}" -- "$cur")
    return 0
  fi
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}

complete -o filenames -F _jobrt jobrt
