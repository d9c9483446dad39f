# Runs at install time (install(SCRIPT) in cmake/Install.cmake): writes
# examples/daemon/gpufilterd.service with the /usr/local/bin/ of its Exec lines replaced by
# the bin folder of this install's prefix. Given GPUFILTER_UNIT_SOURCE, GPUFILTER_UNIT_DIR and
# GPUFILTER_UNIT_BINDIR (relative to the prefix, or absolute).
foreach(dir GPUFILTER_UNIT_DIR GPUFILTER_UNIT_BINDIR)
  if(IS_ABSOLUTE "${${dir}}")
    set(${dir}_full "${${dir}}")
  else()
    set(${dir}_full "${CMAKE_INSTALL_PREFIX}/${${dir}}")
  endif()
endforeach()
file(READ "${GPUFILTER_UNIT_SOURCE}" unit)
string(REGEX REPLACE "\n(Exec[A-Za-z]*=)/usr/local/bin/" "\n\\1${GPUFILTER_UNIT_BINDIR_full}/" unit "${unit}")
set(destination "$ENV{DESTDIR}${GPUFILTER_UNIT_DIR_full}/gpufilterd.service")
message(STATUS "Installing: ${destination}")
file(WRITE "${destination}" "${unit}")
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${destination}")
