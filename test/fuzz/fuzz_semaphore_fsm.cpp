// libFuzzer target: a semaphore lease's state machine (src/protocol/semaphore_fsm.hpp) fed any
// sequence of results a server, a connection, the internal lock or a user could give. The
// invariants:
//  - a grant comes only right after a lease check that succeeded without a stop, on the lease
//    this machine created, counted among at most N leases since;
//  - a restart comes only after a result that said the internal lock was lost;
//  - while the fate of our last create is unknown (its reply lost), every end sweeps our guid;
//  - a failure that says our lease is gone leaves none to delete, unless the lease check said so
//    (then the driver's delete is a harmless ZNONODE);
//  - a try never waits;
//  - a lost create is looked for only by its guid, and a node found is adopted only if this
//    session owns it (then it is the lease granted);
//  - once every result carries a stop (the input ran out: the user cancels), it ends within a
//    few steps.
//
// Input: byte 0 picks N (1 to 3), try, and whether the machine has its guid (a lost create is
// looked for); then each result takes one byte (its outcome, the stop
// and internal-lost bits, what it varies) and, for listings, one more that picks the children.
#include "fuzz_input.hpp"
#include "protocol/semaphore_fsm.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace zklock::detail;
using A = semaphore_action;

namespace {

const std::string path = "/s";
const std::string leases = path + "/leases";
const std::string guid = "gggggggg-gggg-4ggg-8ggg-gggggggggggg";
const std::string prefix = leases + "/_c_" + guid + "-lease-";

[[noreturn]] void violated(const char* what) {
    std::fprintf(stderr, "semaphore_fsm: %s\n", what);
    std::abort();
}

using zklock::fuzz::input;
using zklock::fuzz::seq;

outcome outcome_of(std::uint8_t b) { return static_cast<outcome>(b & 3); }
int rc_of(outcome o) {
    return o == outcome::ok ? 0 : o == outcome::no_node ? -101 : o == outcome::connection ? -4 : -102;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    input in{data + 1, size - 1};
    const int n = 1 + data[0] % 3;
    const bool try_only = (data[0] & 4) != 0;
    const bool with_guid = (data[0] & 8) != 0;
    semaphore_fsm m({path, prefix, n, try_only, with_guid ? guid : std::string()});
    constexpr std::int64_t session = 77;

    std::string made;                      // the lease this machine created last
    bool create_lost = false;              // the last create's reply was lost: its fate is unknown
    std::string lost_node;                 // ... the node it would have made
    std::vector<std::string> guid_listing; // the last listing for our guid
    std::string adopt_refused;             // a node read as another session's: never ours
    auto lease_listing = [&](std::uint8_t pick) {
        std::vector<std::string> kids;
        for (int i = 0; i < 4; ++i)
            if (pick & (1 << i))
                kids.push_back("_c_" + std::string(36, static_cast<char>('a' + i)) + "-lease-" + seq(i));
        if ((pick & 16) && !made.empty()) kids.push_back(made.substr(leases.size() + 1));
        if (pick & 32) kids.push_back("not-a-lease");
        return kids;
    };
    auto path_listing = [&](std::uint8_t pick) {
        std::vector<std::string> kids{"leases", "locks"};
        if (pick & 64)
            kids.push_back((pick & 128) ? "lock" : "_c_" + std::string(36, 'z') + "-lock-" + seq(1));
        return kids;
    };
    auto counted_ok = [&](const std::vector<std::string>& kids) {
        std::size_t c = 0;
        bool mine = false;
        for (const auto& k : kids) {
            if (!is_semaphore_lease(k)) continue;
            ++c;
            mine = mine || (!made.empty() && leases + "/" + k == made);
        }
        return mine && c <= static_cast<std::size_t>(n);
    };

    A a = m.start();
    A::kind last = A::flight;
    bool last_lease_ok = false, last_internal_lost = false, counted_within_n = false;
    int last_check_rc = 0;
    int steps_after_stop = 0;
    for (int step = 0; step < 4096; ++step) {
        const bool final = a.what == A::grant || a.what == A::fail || a.what == A::restart;
        if (final && create_lost && !a.delete_by_guid)
            violated("ends with a create's fate unknown and no sweep");
        if (a.what == A::grant) {
            if (last != A::check_lease || !last_lease_ok)
                violated("granted without a lease check that succeeded");
            if (m.node().empty() || m.node() != made) violated("granted a lease it did not create");
            if (!counted_within_n) violated("granted without counting at most N leases");
            return 0;
        }
        if (a.what == A::restart) {
            if (!last_internal_lost) violated("restarted without losing the internal lock");
            return 0;
        }
        if (a.what == A::fail) {
            if (a.why == A::node_deleted && !m.node().empty() &&
                !(last == A::check_lease && last_check_rc == semaphore_codes::no_node))
                violated("its lease is gone, yet it has one to delete");
            return 0;
        }
        if (a.what == A::wait && try_only) violated("a try waits");
        if ((a.what == A::flight || a.what == A::create) && a.node != prefix)
            violated("a lease of another name");
        if (a.what == A::list_for_guid && !create_lost) violated("looks for a lease whose create answered");
        if (!adopt_refused.empty() && m.node() == adopt_refused) violated("adopted another session's node");
        if (a.what == A::read_node) {
            bool listed = false;
            for (const auto& k : guid_listing) listed = listed || leases + "/" + k == a.node;
            if (!listed || a.node.find(guid) == std::string::npos)
                violated("reads a node that is not the listing's with our guid");
        }
        if (in.done() && ++steps_after_stop > 16) violated("a stop did not end it within 16 steps");

        // (once the input ran out: stop, with results that succeed or lose the connection in
        // turn, so that each state must end on the stop itself, not on a failed request)
        const std::uint8_t b =
            in.done() ? static_cast<std::uint8_t>(0x80 | ((steps_after_stop & 1) != 0 ? 2 : 0)) : in.next();
        semaphore_input r;
        r.stop = (b & 0x80) != 0;
        r.internal_lost = (b & 0x40) != 0;
        const outcome o = outcome_of(b);
        switch (a.what) {
        case A::flight:
        case A::create: {
            const std::uint8_t c = in.next();
            r.made.result = o;
            r.made.rc = rc_of(o);
            if (o == outcome::ok) {
                made = leases + "/_c_" + guid + "-lease-" + seq(10 + step);
                r.made.path = made;
                r.made.czxid = step;
            }
            create_lost = o == outcome::connection;
            lost_node = create_lost ? leases + "/_c_" + guid + "-lease-" + seq(10 + step) : std::string();
            r.made.listed = outcome_of(c >> 2);
            r.made.list_rc = rc_of(r.made.listed);
            r.made.children = path_listing(c);
            if (a.what == A::flight) {
                r.read_answered = (b & 4) == 0;
                r.read.result = outcome_of(c >> 4);
                r.read.rc = rc_of(r.read.result);
                r.read.data = (b & 8) ? "9" : std::to_string(n);
                const std::uint8_t l = in.next();
                r.listing.result = outcome_of(b >> 4);
                r.listing.rc = rc_of(r.listing.result);
                r.listing.children = lease_listing(l);
            }
            break;
        }
        case A::make_leases:
            r.made.result = o;
            r.made.rc = rc_of(o);
            r.made.exists = (b & 4) != 0;
            break;
        case A::read_n:
            r.read.result = o;
            r.read.rc = rc_of(o);
            r.read.data = (b & 8) ? "9" : std::to_string(n);
            break;
        case A::list_path:
            r.listing.result = o;
            r.listing.rc = rc_of(o);
            r.listing.children = path_listing(in.next());
            break;
        case A::list_leases:
            r.listing.result = o;
            r.listing.rc = rc_of(o);
            r.listing.children = lease_listing(in.next());
            break;
        case A::list_for_guid: {
            // the lost create applied (or not), among others' leases
            const std::uint8_t pick = in.next();
            r.listing.result = o;
            r.listing.rc = rc_of(o);
            r.listing.children = lease_listing(pick & 15);
            if ((pick & 16) && !lost_node.empty())
                r.listing.children.push_back(lost_node.substr(leases.size() + 1));
            guid_listing = r.listing.children;
            // Behind the barrier, a listing without the lost create's node says it was not applied
            // (no "leases" either): its fate is known from here on.
            if (o == outcome::no_node || (o == outcome::ok && !(pick & 16))) create_lost = false;
            break;
        }
        case A::read_node:
            r.read.result = o;
            r.read.rc = rc_of(o);
            r.read.owner = (b & 4) ? session + 1 : session;
            r.read.czxid = step;
            r.session = session;
            adopt_refused = o == outcome::ok && r.read.owner != session ? a.node : std::string();
            if (o == outcome::ok && r.read.owner == session) { // adopted: it is our lease
                made = a.node;
                create_lost = false;
            }
            if (o == outcome::no_node || (o == outcome::ok && r.read.owner != session))
                create_lost = false; // (gone, or another session's: not ours to sweep)
            break;
        case A::check_lease:
            r.rc = (b & 4) ? semaphore_codes::check_denied : rc_of(o);
            if ((b & 8) && o != outcome::ok) r.rc = semaphore_codes::operation_timeout;
            break;
        case A::wait_connected:
        case A::wait:
        case A::grant:
        case A::fail:
        case A::restart:
            break;
        }
        // what the machine will count: the flight's listing if usable, or a listing of the leases
        if ((a.what == A::flight || a.what == A::list_leases) && r.listing.result == outcome::ok)
            counted_within_n = counted_ok(r.listing.children);
        last = a.what;
        last_lease_ok = a.what == A::check_lease && r.rc == semaphore_codes::ok && !r.stop;
        last_check_rc = r.rc;
        last_internal_lost = r.internal_lost;
        a = m.resume(std::move(r));
    }
    violated("no end within 4096 steps");
}
