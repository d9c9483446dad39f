# What `cmake --install` puts where, in the places Debian and other distributions look
# (GNUInstallDirs; each folder below is a cache variable, relative to the prefix):
#   bin/gpufilter, bin/gpufilterd               (cli/ and daemon/ install them)
#   share/man/man1/gpufilter.1, man5/gpufilterd.yaml.5, man8/gpufilterd.8   (scdoc)
#   share/bash-completion/completions/gpufilter (and gpufilterd)
#   share/zsh/vendor-completions/_gpufilter, share/fish/vendor_completions.d/gpufilter{,d}.fish
#   lib/systemd/system/gpufilterd.service       (ExecStart pointing at the installed binary)
#   share/doc/gpufilter/                        README.md, docs/*.md, examples/ (the daemon's)
# tests/install/install_test.sh installs into a scratch prefix and checks each of them.
# gpupermute is not installed: it is an example program (examples/permutations), built
# only with GPUFILTER_BUILD_EXAMPLES, not a tool of the filter.

set(GPUFILTER_BASH_COMPLETION_DIR "${CMAKE_INSTALL_DATADIR}/bash-completion/completions" CACHE STRING
    "Where bash-completion loads completions from, by command name")
set(GPUFILTER_ZSH_COMPLETION_DIR "${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions" CACHE STRING
    "A folder on zsh's fpath (Debian: share/zsh/vendor-completions; upstream: share/zsh/site-functions)")
set(GPUFILTER_FISH_COMPLETION_DIR "${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d" CACHE STRING
    "Where fish loads packaged completions from")
set(GPUFILTER_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where systemd finds system units (under /usr/local too)")

# Man pages: built from docs/man/*.scd when scdoc is there (Debian: scdoc), so that a
# build without it still works; tests/install/install_test.sh is told which it was.
option(GPUFILTER_MAN_PAGES "Build and install the man pages (needs scdoc)" ON)
if(GPUFILTER_MAN_PAGES)
  find_program(GPUFILTER_SCDOC scdoc DOC "scdoc, which turns docs/man/*.scd into man pages")
  if(NOT GPUFILTER_SCDOC)
    message(WARNING "scdoc not found: no man pages (apt-get install scdoc, or -DGPUFILTER_MAN_PAGES=OFF)")
    set(GPUFILTER_MAN_PAGES OFF)
  endif()
endif()
if(GPUFILTER_MAN_PAGES)
  set(man_pages)
  foreach(page gpufilter.1 gpufilterd.8 gpufilterd.yaml.5)
    set(source ${PROJECT_SOURCE_DIR}/docs/man/${page}.scd)
    # Compressed, as Debian installs man pages (gzip -9n: no name or time in the header,
    # so that two builds give the same bytes).
    set(output ${PROJECT_BINARY_DIR}/man/${page}.gz)
    add_custom_command(
      OUTPUT ${output}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND sh -c "\"$0\" < \"$1\" | gzip -9n > \"$2\"" ${GPUFILTER_SCDOC} ${source} ${output}
      DEPENDS ${source}
      COMMENT "Man page ${page}"
      VERBATIM)
    string(REGEX MATCH "[0-9]$" section ${page})
    install(FILES ${output} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
    list(APPEND man_pages ${output})
  endforeach()
  add_custom_target(gpufilter_man ALL DEPENDS ${man_pages})
endif()

# Completions. bash-completion loads a file named after the command, so the one script
# (it completes both) goes in twice; zsh reads the #compdef line, fish wants one per command.
install(FILES completions/gpufilter.bash DESTINATION ${GPUFILTER_BASH_COMPLETION_DIR} RENAME gpufilter)
install(FILES completions/gpufilter.bash DESTINATION ${GPUFILTER_BASH_COMPLETION_DIR} RENAME gpufilterd)
install(FILES completions/_gpufilter DESTINATION ${GPUFILTER_ZSH_COMPLETION_DIR})
install(FILES completions/gpufilter.fish completions/gpufilterd.fish DESTINATION ${GPUFILTER_FISH_COMPLETION_DIR})

# The systemd unit. The example names /usr/local/bin/gpufilterd; the installed copy names
# the binary where this install puts it. That prefix is known only when the install runs
# (`cmake --install --prefix`, cpack's /usr), so cmake/InstallUnit.cmake writes it then.
install(CODE "set(GPUFILTER_UNIT_SOURCE [[${PROJECT_SOURCE_DIR}/examples/daemon/gpufilterd.service]])
set(GPUFILTER_UNIT_DIR [[${GPUFILTER_SYSTEMD_UNIT_DIR}]])
set(GPUFILTER_UNIT_BINDIR [[${CMAKE_INSTALL_BINDIR}]])")
install(SCRIPT cmake/InstallUnit.cmake)

# Documentation and the daemon's examples, in the source tree's layout so that the
# README's links to docs/ still work.
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Debian's copyright file and changelog, which every package carries in its doc folder;
# the changelog's signature is the .deb's Maintainer field (cmake/Packaging.cmake).
set(GPUFILTER_PACKAGE_MAINTAINER "gpufilter maintainers <maintainers@gpufilter.invalid>" CACHE STRING
    "The Maintainer field of the .deb (name <email>)")
configure_file(cmake/deb/changelog.in ${PROJECT_BINARY_DIR}/deb/changelog.Debian @ONLY)
add_custom_command(
  OUTPUT ${PROJECT_BINARY_DIR}/deb/changelog.Debian.gz
  COMMAND gzip -9n -f -k ${PROJECT_BINARY_DIR}/deb/changelog.Debian
  DEPENDS ${PROJECT_BINARY_DIR}/deb/changelog.Debian
  COMMENT "Debian changelog"
  VERBATIM)
add_custom_target(gpufilter_deb_changelog ALL DEPENDS ${PROJECT_BINARY_DIR}/deb/changelog.Debian.gz)
install(FILES cmake/deb/copyright ${PROJECT_BINARY_DIR}/deb/changelog.Debian.gz DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The package is not uploaded to Debian, so there is no ITP bug for its first changelog
# entry to close.
install(FILES cmake/deb/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME gpufilter)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md" PATTERN "man" EXCLUDE)
install(DIRECTORY examples/daemon/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
