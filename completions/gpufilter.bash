# bash completion for gpufilter and gpufilterd.
# Installed as share/bash-completion/completions/gpufilter (and a copy named gpufilterd,
# since bash-completion loads a file by the command's name). It needs nothing from the
# bash-completion package, so it also works when sourced by hand.
# Every option of `gpufilter --help` must be listed here: tests/install/options_documented.sh
# checks it, with the man page and the zsh and fish completions.

# The word being completed and the option before it, with "--opt=value" split whichever
# way the shell cut it: with '=' in COMP_WORDBREAKS (the default) it arrives as
# "--opt" "=" "value", else as one word. Sets cur, prev and prefix (what to put back in
# front of a completed value given as one word).
_gpufilter_words() {
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=
  prefix=
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  if [[ $cur == = ]]; then
    cur=
  elif [[ $prev == = && COMP_CWORD -gt 1 ]]; then
    prev=${COMP_WORDS[COMP_CWORD - 2]}
  elif [[ $cur == --*=* ]]; then
    prev=${cur%%=*}
    prefix=$prev=
    cur=${cur#*=}
  fi
}

# COMPREPLY from a word list, each with $prefix in front.
_gpufilter_choices() {
  local w
  COMPREPLY=()
  for w in $(compgen -W "$1" -- "$cur"); do COMPREPLY+=("$prefix$w"); done
}

_gpufilter_files() {
  compopt -o filenames 2>/dev/null
  local IFS=$'\n' w
  COMPREPLY=()
  for w in $(compgen -f -- "$cur"); do COMPREPLY+=("$prefix$w"); done
}

_gpufilter() {
  local cur prev prefix
  _gpufilter_words
  case $prev in
    -f | --file | --exclude-from | --state | --pcap | --pcap-out)
      _gpufilter_files; return ;;
    --time)
      _gpufilter_choices "absolute relative delta epoch"; return ;;
    --color | --colour)
      _gpufilter_choices "always never auto"; return ;;
    -d | --directories)
      _gpufilter_choices "read recurse skip"; return ;;
    -D | --devices)
      _gpufilter_choices "read skip"; return ;;
    --binary-files)
      _gpufilter_choices "binary text without-match"; return ;;
    --engine)
      _gpufilter_choices "auto opencl gpu host cpu both"; return ;;
    --device)
      # PLATFORM:DEVICE as --list-devices prints it; asking OpenCL here would be slow.
      _gpufilter_choices "gpu cpu all"; return ;;
    --interface)
      _gpufilter_choices "$(command ls /sys/class/net 2>/dev/null) any"; return ;;
    --listen)
      _gpufilter_choices "tcp:// udp:// unix:"; compopt -o nospace 2>/dev/null; return ;;
    --kafka)
      _gpufilter_choices "kafka://"; compopt -o nospace 2>/dev/null; return ;;
    -e | --regexp | -m | --max-count | -A | --after-context | -B | --before-context | \
    -C | --context | --label | --group-separator | --include | --exclude | --exclude-dir | \
    --chunk-size | --slots | -j | --threads | --batch-timeout | --host-scan-below | --poll-interval | \
    --max-line-bytes | --max-connections | --bpf)
      [[ -z $prefix ]] && return  # a value of the user's own
      ;;
  esac
  if [[ $cur == -* && -z $prefix ]]; then
    # Options that take a value end in '=': no space after them.
    COMPREPLY=($(compgen -W "
      -E --extended-regexp -F --fixed-strings -G --basic-regexp -P --perl-regexp
      -e --regexp= -f --file= -i -y --ignore-case --no-ignore-case -w --word-regexp
      -x --line-regexp -s --no-messages -v --invert-match -V --version --help -U --binary
      -m --max-count= -b --byte-offset -n --line-number --line-buffered -H --with-filename
      -h --no-filename --label= -o --only-matching -q --quiet --silent --binary-files=
      -a --text -I -d --directories= -D --devices= -r --recursive -R --dereference-recursive
      --include= --exclude= --exclude-from= --exclude-dir= -L --files-without-match
      -l --files-with-matches -c --count -T --initial-tab -Z --null
      -B --before-context= -A --after-context= -C --context= --group-separator=
      --no-group-separator --color --color= --colour --colour=
      --pattern-counts --list-devices --device= --chunk-size= --slots= --engine= --stats
      --batch-timeout= --host-scan-below= --json --no-progress -j --threads= --decompress -z --null-data
      -u --unix-byte-offsets
      --follow --from-start --state= --poll-interval= --listen= --kafka= --max-line-bytes=
      --max-connections=
      --pcap= --interface= --bpf= --match-frame --stream -X --hex --escapes --pcap-out=
      --hexdump --byline --time= --max-packets=" -- "$cur"))
    [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
    return
  fi
  _gpufilter_files
}

_gpufilterd() {
  local cur prev prefix
  _gpufilter_words
  case $prev in
    --config)
      compopt -o filenames 2>/dev/null
      local IFS=$'\n' w
      COMPREPLY=()
      # YAML files and folders to descend into.
      for w in $(compgen -d -- "$cur") $(compgen -f -X '!*.y*ml' -- "$cur"); do
        COMPREPLY+=("$prefix$w")
      done
      return ;;
    --test-filter)
      # fail2ban's filters, by name.
      COMPREPLY=($(compgen -W "$(ls /etc/fail2ban/filter.d 2>/dev/null | sed -n 's/\.conf$//p')" -- "$cur"))
      return ;;
    --out|-o)
      COMPREPLY=($(compgen -W "ip id user msg json" -- "$cur"))
      return ;;
    --fail2ban-dir)
      compopt -o dirnames 2>/dev/null
      COMPREPLY=($(compgen -d -- "$cur"))
      return ;;
  esac
  COMPREPLY=($(compgen -W "--config --check --test-filter --fail2ban-dir --out --datepattern --maxlines --print-all-matched --print-all-missed
    --print-all-ignored --print-no-missed --print-no-ignored --help --version" -- "$cur"))
}

complete -F _gpufilter gpufilter
complete -F _gpufilterd gpufilterd
