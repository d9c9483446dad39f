# `cpack -G DEB` in the build folder: a .deb of what cmake/Install.cmake installs, under
# /usr, for Debian 12. Its library dependencies are read off the binaries by
# dpkg-shlibdeps (Debian: dpkg-dev), so they match what was linked (OpenCL's ICD loader,
# Hyperscan, yaml-cpp, libpcap, PCRE2, ...). No OpenCL driver is a dependency: the host
# engine runs without one, so a driver is recommended (PoCL on the CPU, or a GPU
# vendor's, which provide opencl-icd).

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpufilter)
set(CPACK_PACKAGE_VENDOR "the gpufilter authors")
set(CPACK_PACKAGE_CONTACT "${GPUFILTER_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "grep-compatible search with the literal matching on the GPU (OpenCL)")
# Lines of at most 80 characters (lintian: extended-description-line-too-long).
set(CPACK_PACKAGE_DESCRIPTION
    "gpufilter searches files, pipes, followed logs, sockets and packet captures
as GNU grep 3.8 does (-F, -G, -E, -P; same output and exit status), with the
literal search in OpenCL kernels on a GPU, on PoCL, or on every core through
Hyperscan. gpufilterd is its alert daemon: YAML rules with thresholds,
Alertmanager and webhook outputs, Prometheus metrics and a systemd unit.")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/gpufilter/gpufilter")
# Install with DESTDIR and the real prefix, /usr, so that cmake/InstallUnit.cmake writes
# /usr/bin/gpufilterd into the unit, not the staging folder. (With CPACK_SET_DESTDIR the
# prefix is CPACK_INSTALL_PREFIX, whatever the build was configured with.)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)          # gpufilter_VERSION-1_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# useradd, for the unit's user (postinst); libpcap and the decompressors, which the
# programs load when a capture or a compressed input needs them (not linked, so
# dpkg-shlibdeps does not see them).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd, libpcap0.8 (>= 1.5.1), zlib1g, libzstd1, liblzma5, libbz2-1.0, liblz4-1")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "pocl-opencl-icd | opencl-icd")
# journalctl, for journal sources and fail2ban jails with backend = systemd.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "clinfo, systemd")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/cmake/deb/postinst;${PROJECT_SOURCE_DIR}/cmake/deb/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
