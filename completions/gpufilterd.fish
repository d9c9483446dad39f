# fish completion for gpufilterd, installed as
# share/fish/vendor_completions.d/gpufilterd.fish.
complete -c gpufilterd -f
complete -c gpufilterd -l config -r -F -d 'The YAML configuration'
complete -c gpufilterd -l check -d 'Validate the configuration and exit'
complete -c gpufilterd -l help -d 'Display the help text and exit'
complete -c gpufilterd -l version -d 'Display the version and exit'
complete -c gpufilterd -l test-filter -r -d 'A fail2ban filter over a log, as fail2ban-regex' \
  -a '(string replace -r "\.conf\$" "" (path basename /etc/fail2ban/filter.d/*.conf 2>/dev/null))'
complete -c gpufilterd -l fail2ban-dir -r -a '(__fish_complete_directories)' -d 'Where filter.d/ is'
complete -c gpufilterd -s o -l out -x -a 'ip id user msg json' -d 'One line per failure'
complete -c gpufilterd -s d -l datepattern -x -d 'The date pattern, over the filter\'s (--test-filter)'
complete -c gpufilterd -s L -l maxlines -x -d 'Lines a failure may span, over the filter\'s (--test-filter)'
complete -c gpufilterd -l print-all-matched -d 'List every matched line (--test-filter)'
complete -c gpufilterd -l print-all-missed -d 'List every missed line (--test-filter)'
complete -c gpufilterd -l print-all-ignored -d 'List every ignored line (--test-filter)'
complete -c gpufilterd -l print-no-missed -d 'List no missed line (--test-filter)'
complete -c gpufilterd -l print-no-ignored -d 'List no ignored line (--test-filter)'
