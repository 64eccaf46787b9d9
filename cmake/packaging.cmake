# .deb packages with CPack (scripts/package.sh runs it): one package per install component.
#   libzklock0      runtime  the shared library (libzklock.so.0)
#   libzklock-dev   dev      headers, libzklock.a, the libzklock.so link, CMake and pkg-config files
#   zklock          cli      the zklock program and zklock(1)
# Binaries are stripped; their debug information goes to -dbgsym packages (.ddeb), as Debian's
# does; libzklock.a keeps its symbols but not its debug information (scripts/package.sh sets
# ZKLOCK_STRIP_STATIC for the install step that does it).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME zklock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "zklock developers <zklock@localhost>")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev cli)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# (CPackDeb splits the debug information of every unstripped ELF file into a -dbgsym .ddeb and
# strips the file; CPACK_STRIP_FILES would strip first and leave it nothing to split)
set(CPACK_STRIP_FILES OFF)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# (the libraries the binaries link, as Debian names their packages: dpkg-shlibdeps finds them;
# libzklock.so.0 itself is ours, in this build)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libzklock0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "${PROJECT_DESCRIPTION} (shared library)
 zklock gives Boost.Asio programs the ZooKeeper lock recipes (mutex, read/write lock,
 semaphore, multi-lock, revocable and reentrant locks) as Asio initiating functions,
 with lease-based lock-loss signals and fencing tokens.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libzklock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libzklock0 (= ${PROJECT_VERSION}), libboost1.81-dev, libssl-dev (>= 3), libzookeeper-st2")
set(CPACK_COMPONENT_DEV_DESCRIPTION "${PROJECT_DESCRIPTION} (development files)
 Headers, the static library, and the files for find_package(zklock) and pkg-config.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME zklock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "libzklock0 (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_CLI_DESCRIPTION "flock(1) across machines: run a command while holding a ZooKeeper lock
 zklock run, list, break and revoke: the locks of Apache Curator and kazoo, from the shell.")
include(CPack)
