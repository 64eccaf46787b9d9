// libFuzzer target: guid lookup among children (recovering a create whose reply was lost).
// Input: the guid, a NUL byte, then the children one per line. A found child contains the guid
// and ends with a sequence suffix; a child that contains the guid and such a suffix is found.
#include "protocol/protocol.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using namespace zklock::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string in(reinterpret_cast<const char*>(data), size);
    auto nul = in.find('\0');
    if (nul == std::string::npos) return 0;
    std::string guid = in.substr(0, nul);
    std::vector<std::string> children;
    std::size_t start = nul + 1;
    while (start <= in.size()) {
        auto end = in.find('\n', start);
        if (end == std::string::npos) end = in.size();
        children.push_back(in.substr(start, end - start));
        start = end + 1;
    }
    auto found = find_by_guid(children, guid);
    bool any = false;
    for (const auto& c : children)
        if (!guid.empty() && c.find(guid) != std::string::npos && c.size() > 10 &&
            parse_sequence(std::string_view(c).substr(c.size() - 10)))
            any = true;
    if (found.has_value() != any) std::abort();
    if (found && found->find(guid) == std::string::npos) std::abort();
    return 0;
}
