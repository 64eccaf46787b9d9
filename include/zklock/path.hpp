// zklock/path.hpp: checks on lock paths and connect strings (no I/O).
#pragma once

#include <zklock/config.hpp>

#include <zklock/error.hpp>

#include <string_view>

namespace zklock {

/// Checks a lock path: not empty, at most max_path_length bytes, absolute, no trailing '/', no
/// empty, "." or ".." segment, not under the reserved "/zookeeper" tree, and not "/" itself; and
/// UTF-8 without a character the server refuses (NUL, U+0001-U+001F, U+007F-U+009F,
/// U+E000-U+F8FF, U+FFF0-U+FFFF, anything past U+FFFF): errc::path_bad_character.
/// Returns the errc naming the first problem found, or an empty error_code.
ZKLOCK_DECL error_code validate_lock_path(std::string_view path) noexcept;

/// Checks a connect string: "host:port[,host:port...][/chroot]", ports 1..65535,
/// the chroot (if any) a valid path. Returns errc::invalid_connect_string or a path error
/// (errc::invalid_chroot for a chroot that is not a valid path, errc::path_too_long for one
/// longer than max_path_length; errc::invalid_connect_separator for servers separated by ';'
/// instead of ','), or an empty error_code.
ZKLOCK_DECL error_code validate_connect_string(std::string_view connect) noexcept;

} // namespace zklock
