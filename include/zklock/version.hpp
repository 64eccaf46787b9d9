// The version: of the headers (macros) and of the library linked at run time (version()).
#pragma once

#include <zklock/config.hpp>

#include <string_view>

// (CMakeLists.txt reads the version from these three lines: they are its only source)
/// The headers' major version.
#define ZKLOCK_VERSION_MAJOR 0
/// The headers' minor version.
#define ZKLOCK_VERSION_MINOR 1
/// The headers' patch version.
#define ZKLOCK_VERSION_PATCH 0

/// \cond INTERNAL
#define ZKLOCK_VERSION_STR_(x) #x
#define ZKLOCK_VERSION_STR(x) ZKLOCK_VERSION_STR_(x)
/// \endcond
/// "0.1.0": the headers' version.
#define ZKLOCK_VERSION_STRING                                                                                \
    ZKLOCK_VERSION_STR(ZKLOCK_VERSION_MAJOR)                                                                 \
    "." ZKLOCK_VERSION_STR(ZKLOCK_VERSION_MINOR) "." ZKLOCK_VERSION_STR(ZKLOCK_VERSION_PATCH)

namespace zklock {

/// The version of the library linked at run time ("0.1.0"). With the shared library it may be
/// newer than ZKLOCK_VERSION_STRING, the version of the headers the program was compiled with:
/// a library with the same SONAME (libzklock.so.0) is binary compatible; a release that breaks
/// the ABI gets a new one.
ZKLOCK_DECL std::string_view version() noexcept;

} // namespace zklock
