// Lost requests and lost replies, injected from outside the library: a tap on one session's
// requests (src/session/request_tap.hpp) that breaks the next N of a kind, as counted here.
// The library holds no fault of these kinds; it only lets a test see each request and its reply.
//
//   zt::faults(*session).lose_create_replies = 1;   // the next create's reply is lost
#pragma once

#include <zklock/session.hpp>

#include "session/session_impl.hpp"

#include <atomic>
#include <memory>

namespace zt {

struct request_faults final : zklock::detail::request_tap {
    /// The next N successful creates of create_and_list report ZCONNECTIONLOSS instead, as if
    /// the reply had been lost after the server applied the create.
    std::atomic<int> lose_create_replies{0};
    /// The next N successful creates of create_and_list have their listing report
    /// ZCONNECTIONLOSS, as if the create's reply had come and the connection had then dropped
    /// before the listing's: the two replies split across a connection loss. (The connection
    /// itself stays up: what the recipes see is the same.)
    std::atomic<int> lose_list_replies{0};
    /// While one of the two faults above is set, the next N successful creates of
    /// create_and_list are left alone by them (a semaphore's internal lock goes first: this
    /// reaches its lease's flight).
    std::atomic<int> create_and_list_faults_skip{0};
    /// The next N creates of create_and_list are not sent and report ZCONNECTIONLOSS (a create
    /// lost on its way to the server).
    std::atomic<int> drop_creates{0};
    /// The next N requests of the guaranteed deletes are not sent and complete with
    /// cleanup_error_rc instead (ZMARSHALLINGERROR, ZOPERATIONTIMEOUT, ...).
    std::atomic<int> cleanup_errors{0};
    std::atomic<int> cleanup_error_rc{-5}; // ZMARSHALLINGERROR
    /// The next N releases sent with their marker (a transaction) report ZCONNECTIONLOSS although
    /// the server applied them, as if the connection had dropped before the reply.
    std::atomic<int> lose_release_replies{0};
    /// The next N successful creates of a container (a lock path or its parents) report
    /// ZCONNECTIONLOSS, as if the connection had dropped while the parents were made.
    std::atomic<int> drop_parent_creates{0};

    int refuse(zklock::detail::tapped_request k) override {
        using zklock::detail::tapped_request;
        if (k == tapped_request::create_and_list && take(drop_creates)) return ZCONNECTIONLOSS;
        if (k == tapped_request::cleanup && take(cleanup_errors)) return cleanup_error_rc.load();
        return 0;
    }
    void reply(zklock::detail::tapped_request k, zklock::detail::zk_result& r) override {
        using zklock::detail::tapped_request;
        if (k == tapped_request::marked_release) {
            if (take(lose_release_replies)) r.rc = ZCONNECTIONLOSS;
            return;
        }
        if (k == tapped_request::container_create) {
            if ((r.rc == ZOK || r.rc == ZNODEEXISTS) && take(drop_parent_creates)) r.rc = ZCONNECTIONLOSS;
            return;
        }
        if (k != tapped_request::create_and_list || r.rc != ZOK) return;
        if (lose_create_replies.load() <= 0 && lose_list_replies.load() <= 0) return;
        if (take(create_and_list_faults_skip)) return; // left alone
        if (take(lose_create_replies)) {
            r.rc = ZCONNECTIONLOSS;
            r.list_rc = ZCONNECTIONLOSS;
        } else if (take(lose_list_replies)) {
            r.list_rc = ZCONNECTIONLOSS;
            r.children.clear();
            r.cversion.reset();
        }
    }

private:
    static bool take(std::atomic<int>& n) { return n.load() > 0 && n.fetch_sub(1) > 0; }
};

/// The faults of `s`'s requests (the tap is installed at the first call; call it on the thread
/// that runs the session's io_context).
inline request_faults& faults(zklock::session& s) {
    auto& impl = *s.impl();
    if (!impl.tap) impl.tap = std::make_shared<request_faults>();
    return static_cast<request_faults&>(*impl.tap);
}

} // namespace zt
