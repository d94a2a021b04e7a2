# The completion function; the assignments above (from `jobrt completion zsh`) say what it offers.
_jobrt_runtime_names() {
  "$1" runtimes --json 2>/dev/null | "$_jobrt_node" "$_jobrt_runtimes_reader" 2>/dev/null
}

_jobrt() {
  local cur=${words[CURRENT]} prev=${words[CURRENT-1]} cmd=${words[2]} var
  if (( CURRENT == 2 )); then
    compadd -- ${=_jobrt_commands} --help --version
    return
  fi
  [[ $cmd == [a-z]## && " $_jobrt_commands " == *" $cmd "* ]] || return 1
  if [[ $prev == --runtime ]]; then
    compadd -- ${(f)"$(_jobrt_runtime_names $words[1])"}
    return
  fi
  if [[ " $_jobrt_valued " == *" $prev "* ]]; then
    _files
    return
  fi
  if [[ $cur == -* ]]; then
    var=_jobrt_opts_$cmd
    compadd -- ${=${(P)var}}
    return
  fi
  var=_jobrt_words_$cmd
  if [[ -n ${(P)var} ]]; then
    (( CURRENT == 3 )) && compadd -- ${=${(P)var}}
    return
  fi
  _files
}

compdef _jobrt jobrt
