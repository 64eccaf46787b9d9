// The C client's completions and watchers: each reply is noted for the lease, copied out of the
// C client's buffers into its c_op, and handed to the session's strand (zk_handle::complete).
#include "bridge/c_op.hpp"

#include <boost/asio/post.hpp>

namespace zklock::detail {

void run_result(c_op* op) {
    auto p = std::unique_ptr<c_op>(op);
    zk_handler h = std::move(*p->h);
    zk_result r = std::move(p->res);
    p.reset();
    std::move(h)(std::move(r));
}

void post_result(const asio::strand<asio::any_io_executor>& strand, c_op* op) {
    asio::post(strand, [p = std::unique_ptr<c_op>(op)]() mutable { run_result(p.release()); });
}

namespace {

/// Every reply of the server is evidence for the lease (session_lease::on_reply): a touch of the
/// session, and for a committed write a proof that the leader still led with a quorum. It is
/// noted as soon as zookeeper_process reads it (before its result is posted to the strand). A
/// renewal that comes after the lease had lapsed is recorded as a gap (the lapse is final), and
/// the strand is told at once, not at its next timer.
void note_reply(c_op* op, int rc) {
    if (!is_server_reply(rc)) return;
    zk_handle* h = op->owner;
    const bool commit = proves_commit(op->renews, rc);
    if (h->lease->on_reply(op->sent, commit, h->plat->boot_now())) // (every reply's time: rule (b))
        h->to_strand([w = h->events] {
            if (auto s = w.lock()) s->check_lease();
        });
}

void finish(c_op* op) {
    if (op->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    zk_handle* owner = op->owner;
    if (owner->take(op)) owner->complete(op);
}

c_op* as_op(const void* data) { return static_cast<c_op*>(const_cast<void*>(data)); }

/// A request's code as the recipes should read it. ZRUNTIMEINCONSISTENCY on a whole request means
/// the C client dropped the connection after a reply it could not match to its oldest request
/// (after a send failed inside a request call, the single-threaded client closes its socket
/// without failing the requests in flight): what happened to the request is unknown, as on a
/// connection loss.
int reply_rc(int rc) noexcept { return rc == ZRUNTIMEINCONSISTENCY ? ZCONNECTIONLOSS : rc; }

} // namespace

void on_string_stat(int rc, const char* value, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    if (rc == ZOK) {
        if (value) op->res.path = value;
        if (stat) op->res.stat = *stat;
    }
    finish(op);
}

/// getChildren2: the children with the parent's stat, whose cversion tells which suffixes a
/// sequential create can have made (protocol.hpp, classify_child).
void on_strings(int rc, const String_vector* strings, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    if (!op->pipelined) note_reply(op, rc); // (create_and_list: the create's reply vouches, not this)
    (op->pipelined ? op->res.list_rc : op->res.rc) = rc;
    if (rc == ZOK && strings) {
        op->res.children.reserve(static_cast<std::size_t>(strings->count));
        for (int i = 0; i < strings->count; ++i) op->res.children.emplace_back(strings->data[i]);
    }
    if (rc == ZOK && stat) op->res.cversion = stat->cversion;
    finish(op);
}

/// zoo_amulti: each operation's outcome. After a failure the server reports the failed operation's
/// code (the ones before it ZOK, after it ZRUNTIMEINCONSISTENCY); after a failure of the whole
/// request (connection loss, ...) the results were never filled in: res.multi stays empty.
void on_multi(int rc, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    auto& b = *op->multi;
    const bool answered =
        rc == ZOK || std::any_of(b.results.begin(), b.results.end(), [](const zoo_op_result_t& r) {
            return r.err != ZOK && r.err != ZRUNTIMEINCONSISTENCY && r.err != 1;
        });
    if (answered) op->res.multi.resize(b.results.size());
    for (std::size_t i = 0; answered && i < b.results.size(); ++i) {
        auto& r = b.results[i];
        auto& m = op->res.multi[i];
        m.rc = r.err != 1 ? r.err : rc;
        if (rc != ZOK) continue;
        if (b.ops[i].type == ZOO_CREATE_OP && r.value) m.path = r.value;
        if (b.ops[i].type == ZOO_SETDATA_OP) m.version = b.stats[i].version;
    }
    finish(op);
}

void on_data(int rc, const char* value, int len, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    if (rc == ZOK) {
        if (value && len > 0) op->res.data.assign(value, static_cast<std::size_t>(len));
        if (stat) op->res.stat = *stat;
    }
    finish(op);
}

void on_stat(int rc, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    if (rc == ZOK && stat) op->res.stat = *stat;
    finish(op);
}

void on_void(int rc, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    finish(op);
}

void global_watcher(zhandle_t* zh, int type, int state, const char*, void* ctx) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* h = static_cast<zk_handle*>(ctx);
    // (At once, inside zookeeper_process: the replies that follow are this connection's.)
    if (state == ZOO_CONNECTED_STATE)
        h->lease->on_connected(static_cast<lease_ns>(zoo_recv_timeout(zh)) * 1'000'000, h->plat->boot_now());
    h->to_strand([w = h->events, gen = h->generation, state] {
        if (auto s = w.lock()) s->on_session_event(gen, state);
    });
}

void on_auth(int rc, const void* data) {
    auto* h = static_cast<zk_handle*>(const_cast<void*>(data));
    h->to_strand([w = h->events, gen = h->generation, rc] {
        if (auto s = w.lock()) s->on_auth_result(gen, rc);
    });
}

void node_watcher(zhandle_t* zh, int type, int, const char*, void* ctx) {
    // Per-call watchers also receive every session event while armed: the global watcher
    // handles those. Only the one node event matters here.
    if (type == ZOO_SESSION_EVENT) return;
    auto* h = static_cast<zk_handle*>(const_cast<void*>(zoo_get_context(zh)));
    if (!h) return;
    auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ctx));
    h->to_strand([w = h->events, id, type] {
        if (auto s = w.lock()) s->on_watch(id, type);
    });
}

} // namespace zklock::detail
