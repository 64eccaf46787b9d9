# An overlay port that builds zklock from this source tree:
#   vcpkg install zklock --overlay-ports=<zklock>/ports
# The ZooKeeper C client is not in vcpkg's registry: it comes from the system (Debian:
# libzookeeper-mt-dev for the headers, libzookeeper-st2 for the library), found by zklock's
# FindZooKeeper.cmake, which the installed CMake package carries along.
set(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../..")

vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES
    cli ZKLOCK_BUILD_CLI)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${FEATURE_OPTIONS}
    -DZKLOCK_BUILD_TESTS=OFF
    -DZKLOCK_BUILD_EXAMPLES=OFF
    -DZKLOCK_BUILD_BENCH=OFF)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME zklock CONFIG_PATH lib/cmake/zklock)
vcpkg_fixup_pkgconfig()
if("cli" IN_LIST FEATURES)
  vcpkg_copy_tools(TOOL_NAMES zklock AUTO_CLEAN)
endif()

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug/include" "${CURRENT_PACKAGES_DIR}/debug/share")
# (vcpkg wants share/zklock/copyright; the project has not chosen a licence yet: until it does,
# the README stands in for it)
file(INSTALL "${SOURCE_PATH}/README.md" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}" RENAME copyright)
