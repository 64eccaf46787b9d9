#include <zklock/version.hpp>

namespace zklock {

std::string_view version() noexcept { return ZKLOCK_VERSION_STRING; }

} // namespace zklock
