# fish completion for gpufilterd, installed as
# share/fish/vendor_completions.d/gpufilterd.fish.
complete -c gpufilterd -f
complete -c gpufilterd -l config -r -F -d 'The YAML configuration'
complete -c gpufilterd -l check -d 'Validate the configuration and exit'
complete -c gpufilterd -l help -d 'Display the help text and exit'
complete -c gpufilterd -l version -d 'Display the version and exit'
