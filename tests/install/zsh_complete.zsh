#!/usr/bin/env zsh
# Completes a few command lines in an interactive zsh (on a pseudo-terminal, zsh/zpty)
# with the installed _gpufilter on fpath, and checks what the line or the list becomes.
# Nothing is run: no line is ever entered.
#   zsh -f zsh_complete.zsh ZSH_COMPLETION_DIR
zmodload zsh/zpty || exit 1
setopt extendedglob
dir=$1
zpty z zsh -f -i
zpty -w z "PS1='> '; fpath=($dir \$fpath); autoload -U compinit; compinit -u -D"

# expect TYPED TEXT: type TYPED and a tab; TEXT must then appear on the terminal.
expect() {
  local out= chunk= i
  zpty -w -n z $'\C-u'"$1"$'\t'
  for i in {1..100}; do
    while zpty -r -t z chunk; do out+=$chunk; done
    # What a reader sees: no terminal escapes (zle shows the suffix '=' in bold).
    out=${out//$'\e'\[[0-9;?]#[a-zA-Z]/}
    [[ $out == *"$2"* ]] && return 0
    sleep 0.1
  done
  print -r -- "zsh completed '$1' without showing '$2'; the terminal showed: ${(q)out}" >&2
  zpty -d z
  exit 1
}
expect 'gpufilter --engi' '--engine='
expect 'gpufilter --binary-files=' 'without-match'
expect 'gpufilter --engine=h' '--engine=host'
expect 'gpufilterd --con' '--config='
expect 'gpufilter --pattern-c' '--pattern-counts'
zpty -d z
