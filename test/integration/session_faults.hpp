// The faults of the world around one session, injected from outside the library: a tap on the
// session (src/session/session_tap.hpp) that breaks, holds or adds to the next N requests of a
// kind, as counted here. The library holds no fault; it only lets a test see each request and
// its reply, and the session's other inputs (names, the resolver, timers).
//
//   zt::faults(*session).lose_create_replies = 1;   // the next create's reply is lost
//   zt::faults(*session).on_reply = [&](auto k, auto& path, auto& r) { ... };   // anything else
#pragma once

#include <zklock/session.hpp>

#include "session/session_impl.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <new>
#include <string>

namespace zt {

struct session_faults final : zklock::detail::session_tap {
    using kind = zklock::detail::tapped_request;
    using zk_result = zklock::detail::zk_result;

    explicit session_faults(zklock::detail::session_impl& s) : s_(s) {}

    // -- lost requests and replies --

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

    // -- other clients' writes, in between (sent on this session, just ahead of the request) --

    /// The next N creates of create_and_list are preceded by a create of the same name (the
    /// same guid), whose reply nobody reads: what a create committed late, after its recovery
    /// had looked, leaves behind.
    std::atomic<int> orphan_creates{0};
    /// The next N creates of a semaphore's lease are preceded by a delete of "<path>/leases",
    /// as the container reaper may take it between N's read and the create.
    std::atomic<int> reap_leases_before_create{0};
    /// Once the container `reap_after_create` is made, it is deleted again before the next
    /// request, as the container reaper may (then cleared).
    std::string reap_after_create;

    // -- late requests, events and timers --

    /// Reads that set a watch on a node's data (a waiter's predecessor) wait this long before
    /// they are sent.
    std::atomic<int> hold_watched_reads_ms{0};
    /// The lease timer fires this much after its deadline.
    std::atomic<int> lease_timer_late_ms{0};
    /// The next news that the handle is dead (credentials refused, session expired) is handled
    /// this much later (once).
    std::atomic<int> end_news_late_ms{0};

    // -- names and the world outside --

    /// The guid the next lock node (or lease) is named with (once).
    std::string next_guid;
    /// The next N guids throw std::bad_alloc instead, as an allocation failure in the acquire
    /// would, after `guids_before_throw` more are made normally (a semaphore's internal lock
    /// names its node before the lease does).
    std::atomic<int> throw_at_guid{0};
    std::atomic<int> guids_before_throw{0};
    /// With TLS: the next N handles are given no address of the relay (as if lost).
    std::atomic<int> lose_relay_address{0};
    /// A DNS: the address `host` resolves to ("" for the real resolver).
    std::function<std::string(const std::string& host)> resolve_host;

    // -- anything else, at the moment it happens --

    /// Before a request of any tapped kind is sent: a code to refuse it with, or 0.
    std::function<int(kind, const std::string& path)> on_before;
    /// At a reply, before the caller sees it (the test may change it, or cancel an operation).
    std::function<void(kind, const std::string& path, zk_result&)> on_reply;

    int before(kind k, const std::string& path) override {
        if (on_before)
            if (int rc = on_before(k, path); rc != 0) return rc;
        if (k == kind::cleanup && take(cleanup_errors)) return cleanup_error_rc.load();
        if (k != kind::create_and_list) return 0;
        if (take(drop_creates)) return ZCONNECTIONLOSS;
        if (take(orphan_creates)) s_.create(path, {}, ZOO_EPHEMERAL_SEQUENTIAL, ignore());
        if (is_lease(path) && take(reap_leases_before_create)) s_.remove(parent_of(path), -1, ignore());
        return 0;
    }

    void reply(kind k, const std::string& path, zk_result& r) override {
        if (on_reply) on_reply(k, path, r);
        if (k == kind::marked_release) {
            if (take(lose_release_replies)) r.rc = ZCONNECTIONLOSS;
            return;
        }
        if (k == kind::container_create) {
            if (r.rc == ZOK && !reap_after_create.empty() && path == reap_after_create) {
                reap_after_create.clear();
                s_.remove(path, -1, ignore()); // (ahead of the next create: one session, in order)
            }
            if ((r.rc == ZOK || r.rc == ZNODEEXISTS) && take(drop_parent_creates)) r.rc = ZCONNECTIONLOSS;
            return;
        }
        if (k != kind::create_and_list || r.rc != ZOK) return;
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

    std::chrono::milliseconds hold(kind k, const std::string&) override {
        return std::chrono::milliseconds(k == kind::watched_read ? hold_watched_reads_ms.load() : 0);
    }
    void naming(std::string& guid) override {
        if (!next_guid.empty()) guid = std::exchange(next_guid, {});
        if (throw_at_guid.load() > 0 && !take(guids_before_throw) && take(throw_at_guid))
            throw std::bad_alloc();
    }
    std::string resolve(const std::string& host) override {
        return resolve_host ? resolve_host(host) : std::string();
    }
    void handing_over(std::string& connect) override {
        if (take(lose_relay_address)) connect.clear();
    }
    std::chrono::milliseconds lease_timer_late() override {
        return std::chrono::milliseconds(lease_timer_late_ms.load());
    }
    std::chrono::milliseconds end_news_late() override {
        return std::chrono::milliseconds(end_news_late_ms.exchange(0));
    }

private:
    static bool take(std::atomic<int>& n) { return n.load() > 0 && n.fetch_sub(1) > 0; }
    static zklock::detail::zk_handler ignore() {
        return zklock::detail::zk_handler([](zk_result) {});
    }
    static std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('/')); }
    static bool is_lease(const std::string& path) {
        auto parent = parent_of(path);
        return parent.size() >= 7 && parent.compare(parent.size() - 7, 7, "/leases") == 0;
    }

    zklock::detail::session_impl& s_;
};

/// The faults of `s` (the tap is installed at the first call; call it on the thread that runs
/// the session's io_context, or before the session runs).
inline session_faults& faults(zklock::session& s) {
    auto& impl = *s.impl();
    if (!impl.tap) impl.tap = std::make_shared<session_faults>(impl);
    return static_cast<session_faults&>(*impl.tap);
}

} // namespace zt
