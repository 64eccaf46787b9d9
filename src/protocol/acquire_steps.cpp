#include "protocol/acquire_steps.hpp"

namespace zklock::detail {

listing_step after_listing(std::vector<std::string> children, std::string_view mine, std::string_view guid,
                           const acquire_shape& shape, parent_cversion cv) {
    listing_step out;
    // One path, one naming for an election, checked on every listing while campaigning. (A leader
    // lists no more: a peer of another naming that comes later is not seen here, and does not see
    // us either. The dialect is the user's to set; this catches a mixed path whenever a campaign
    // looks at it.)
    if (shape.election && other_naming(children, shape.own_naming)) {
        out.why = listing_step::dialect_mixed;
        return out;
    }
    if (!guid.empty())
        for (auto it = children.begin(); it != children.end();) {
            if (*it != mine && it->find(guid) != std::string::npos) {
                out.duplicates.push_back(std::move(*it));
                it = children.erase(it);
            } else {
                ++it;
            }
        }
    auto d = decide(children, mine, shape.family, shape.dialect, shape.own_writer, cv);
    switch (d.what) {
    case exclusive_decision::ambiguous:
        out.why = listing_step::sequence_overflow;
        return out;
    case exclusive_decision::missing:
        out.why = listing_step::node_missing;
        return out;
    case exclusive_decision::acquired:
        out.what = listing_step::grant;
        return out;
    case exclusive_decision::wait:
        break;
    }
    if (shape.try_only) {
        out.what = listing_step::busy;
        return out;
    }
    out.what = listing_step::wait;
    out.predecessor = std::move(d.predecessor);
    out.alone = !shape.watch_children && d.alone;
    out.watch_marker =
        !out.alone && !shape.watch_children && may_mark_release(out.predecessor, shape.family, shape.dialect);
    return out;
}

} // namespace zklock::detail
