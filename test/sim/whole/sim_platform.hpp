// The whole library under simulation, a first step (issue 62): a platform (src/session/platform.hpp)
// whose clocks are virtual, whose timers are events of a seeded scheduler, and whose links
// (src/session/zk_link.hpp) talk to a model ZooKeeper server in the same process. A session made
// with it (session(ex, opts, platform)) runs the library's own code, drivers included, unchanged:
// the requests, the heartbeat, the lease, the deletes, the recipes. One thread, one io_context,
// one seed: the run is replayed exactly.
//
// The model today: one server that applies each session's requests in order after a seeded
// delay, and answers after another; znodes with czxid, versions, the parent's cversion for
// sequential names, ephemeral owners, containers and their reaper, one-shot data, child and
// existence watches and their removal, multi all or nothing (its watch events in its operations'
// order), a session tracker that expires untouched sessions; links that drop (requests applied or
// not, replies lost, ZCONNECTIONLOSS or a receive timeout's ZOPERATIONTIMEOUT, requests queued in
// the client while an outage hangs), reconnect to the same session with held watch events, or
// learn of the expiry at the reconnect (ZSESSIONEXPIRED). Not yet: followers, stale reads, writes
// applied late, failover (issue 62 lists them).
#pragma once

#include "session/platform.hpp"
#include "session/zk_link.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace zklock::sim {

namespace asio = boost::asio;
using zklock::detail::lease_ns;

/// Virtual time and the events at their times, with the io_context the library runs on: run()
/// alternates running every ready handler (io.poll) and advancing to the next event.
class scheduler {
    // (first: destroyed after io, whose destructor destroys the handlers and coroutines still
    // pending, and with them timers that cancel their events)
    std::uint64_t seq_ = 0;
    std::map<std::pair<std::int64_t, std::uint64_t>, std::function<void()>> events_;

public:
    explicit scheduler(std::uint64_t seed) : rng(seed) {}
    asio::io_context io;
    std::mt19937_64 rng;
    std::int64_t now = 1'000'000'000; // ns (not 0: the lease reads 0 as "never")
    std::uint64_t trace_hash = 1469598103934665603ULL;

    /// `fn` at `at` (ns); events at one time run in the order they were scheduled. Returns an id.
    std::uint64_t at(std::int64_t t, std::function<void()> fn) {
        const auto id = ++seq_;
        events_.emplace(std::make_pair(std::max(t, now), id), std::move(fn));
        return id;
    }
    void cancel(std::uint64_t id) {
        for (auto it = events_.begin(); it != events_.end(); ++it)
            if (it->first.second == id) {
                events_.erase(it);
                return;
            }
    }
    /// A delay drawn in [lo, hi] ns.
    std::int64_t draw(std::int64_t lo, std::int64_t hi) {
        return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
    }
    void note(std::uint64_t v) { trace_hash = (trace_hash ^ v) * 1099511628211ULL; }
    /// Runs until `done()` or nothing is left to run, or virtual time passes `limit` ns.
    bool run(const std::function<bool()>& done, std::int64_t limit) {
        for (;;) {
            io.poll();
            io.restart();
            if (done()) return true;
            if (events_.empty() || events_.begin()->first.first > limit) return false;
            auto it = events_.begin();
            now = it->first.first;
            note(static_cast<std::uint64_t>(now));
            auto fn = std::move(it->second);
            events_.erase(it);
            fn();
        }
    }
};

/// Completes `h` with `ec` on its associated executor (else `ex`), posted.
inline void complete_later(const asio::any_io_executor& ex,
                           asio::any_completion_handler<void(boost::system::error_code)> h,
                           boost::system::error_code ec) {
    asio::post(ex, [h = std::move(h), ex, ec]() mutable {
        auto hex = asio::get_associated_executor(h, ex);
        asio::dispatch(hex, [h = std::move(h), ec]() mutable { std::move(h)(ec); });
    });
}

/// What the links did, counted over a process's seeds (for the summary: do the faults happen?).
struct link_counts {
    long queued = 0, expired_replies = 0, timeouts = 0;
};
inline link_counts& counts() {
    static link_counts c;
    return c;
}

/// A timer of the scheduler.
class sim_timer final : public zklock::detail::timer_backend {
public:
    sim_timer(scheduler& s, asio::any_io_executor ex) : s_(s), ex_(std::move(ex)) {}
    ~sim_timer() override {
        if (event_) s_.cancel(*event_);
        // (a pending handler is dropped with the timer, as Asio's timers abort theirs: posted)
        if (h_) complete_later(ex_, std::move(*h_), asio::error::operation_aborted);
    }
    void wait_until(std::int64_t at,
                    asio::any_completion_handler<void(boost::system::error_code)> h) override {
        cancel();
        h_.emplace(std::move(h));
        if (at == std::numeric_limits<std::int64_t>::max()) return;
        event_ = s_.at(at, [this] {
            event_.reset();
            if (!h_) return;
            asio::any_completion_handler<void(boost::system::error_code)> h(std::move(*h_));
            h_.reset();
            complete_later(ex_, std::move(h), {});
        });
    }
    void cancel() override {
        if (event_) s_.cancel(*event_);
        event_.reset();
        if (!h_) return;
        asio::any_completion_handler<void(boost::system::error_code)> h(std::move(*h_));
        h_.reset();
        complete_later(ex_, std::move(h), asio::error::operation_aborted);
    }

private:
    scheduler& s_;
    asio::any_io_executor ex_;
    std::optional<std::uint64_t> event_;
    // (optional: Boost 1.81's any_completion_handler must not be assigned to)
    std::optional<asio::any_completion_handler<void(boost::system::error_code)>> h_;
};

class sim_link;

/// The model ZooKeeper server.
class model_server {
public:
    struct node {
        std::string data;
        std::int64_t czxid = 0, mzxid = 0, owner = 0;
        std::int32_t version = 0, cversion = 0;
        bool container = false;
        std::set<std::string> children;
    };
    model_server() { nodes_["/"] = node{}; }

    std::int64_t open_session(sim_link* l, std::int64_t timeout_ns, std::int64_t now) {
        const auto id = ++next_session_;
        links_[id] = l;
        alive_[id] = {now, timeout_ns};
        return id;
    }
    /// The session is touched (a request or a ping reached the server) at `now`.
    void touch(std::int64_t id, std::int64_t now) {
        if (auto it = alive_.find(id); it != alive_.end()) it->second.first = now;
    }
    /// (the leader's session tracker) Expires every session not touched for its timeout; true if
    /// `id` is (or was) expired.
    bool expire_due(std::int64_t now) {
        std::vector<std::int64_t> due;
        for (auto& [id, t] : alive_)
            if (now - t.first > t.second) due.push_back(id);
        for (auto id : due) {
            ++expired_;
            // (the earliest moment the leader may expire it: its last news plus T, before any
            // rounding to a tick; the oracles measure the lease's margin against this)
            if (on_expire) on_expire(id, alive_[id].first + alive_[id].second, alive_[id].second);
            close_session(id);
        }
        return !due.empty();
    }
    /// (for the oracles) Session `id` is expired now; `earliest` is its last touch plus T (ns).
    std::function<void(std::int64_t id, std::int64_t earliest, std::int64_t timeout)> on_expire;
    /// (for the oracles) A node's data was set by session `id`, alone or in a multi that succeeded.
    std::function<void(std::int64_t id, const std::string& path, const std::string& data)> on_set;
    /// The container reaper (ZooKeeper 3.8's ContainerManager, every checkIntervalMs): deletes
    /// each container that has had children and has none now (cversion > 0), as the server's
    /// own delete, whose watch events fire as any delete's. Returns how many it deleted.
    int reap_containers() {
        std::vector<std::string> due;
        for (auto& [p, n] : nodes_)
            if (n.container && n.children.empty() && n.cversion > 0) due.push_back(p);
        for (auto& p : due) remove(p, -1);
        reaped_ += static_cast<int>(due.size());
        return static_cast<int>(due.size());
    }
    int reaped() const { return reaped_; }
    /// An operator's delete (zkCli's `delete`): the node goes as any delete's, its watches fire.
    /// True if it was there and had no children.
    bool operator_delete(const std::string& path) { return remove(path, -1) == ZOK; }
    /// Makes a persistent node (and its parents) before the run, as an operator would.
    void seed_node(const std::string& path) {
        if (path.empty() || path == "/" || nodes_.count(path)) return;
        seed_node(parent_of(path));
        std::string made;
        create(0, path, {}, 0, made);
    }
    bool alive(std::int64_t id) const { return alive_.count(id) != 0; }
    int expired() const { return expired_; }
    /// A link's connection went and came back: the same session, the same object.
    void rebind(std::int64_t id, sim_link* l) {
        if (alive_.count(id)) links_[id] = l;
    }
    /// Ends session `id`: its ephemeral nodes go (their watches fire), its watches are dropped.
    void close_session(std::int64_t id);
    /// Applies `r` of session `id` now; watch events it triggers are handed to the links.
    zklock::detail::zk_result apply(std::int64_t id, const zklock::detail::zk_request& r);
    /// Every node under `path` (not itself), for the oracles.
    std::vector<std::string> under(const std::string& path) const {
        std::vector<std::string> out;
        for (auto& [p, n] : nodes_)
            if (p.size() > path.size() && p.compare(0, path.size(), path) == 0 && p[path.size()] == '/')
                out.push_back(p);
        return out;
    }
    std::size_t watch_count() const { return data_w_.size() + child_w_.size(); }
    std::size_t ephemeral_count() const {
        std::size_t n = 0;
        for (auto& [p, x] : nodes_) n += x.owner != 0;
        return n;
    }
    const node* find(const std::string& p) const {
        auto it = nodes_.find(p);
        return it == nodes_.end() ? nullptr : &it->second;
    }

private:
    struct watch {
        std::int64_t session;
        std::uint64_t id;
    };
    static std::string parent_of(const std::string& p) {
        auto i = p.rfind('/');
        return i == 0 ? "/" : p.substr(0, i);
    }
    void fire(std::multimap<std::string, watch>& m, const std::string& path, int type);
    int create(std::int64_t s, const std::string& path, const std::string& data, int flags,
               std::string& made);
    int remove(const std::string& path, int version);
    int set(const std::string& path, const std::string& data, int version, std::int32_t& new_version);

    std::int64_t zxid_ = 0, next_session_ = 0;
    std::map<std::string, node> nodes_;
    std::multimap<std::string, watch> data_w_, child_w_; // (data_w_: getData and exists watches)
    std::map<std::int64_t, sim_link*> links_;
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> alive_; // id -> (last touch, timeout)
    int expired_ = 0, reaped_ = 0;
    std::vector<std::pair<std::int64_t, std::pair<std::string, std::string>>> sets_; // (in a multi)
    struct event {
        std::int64_t session;
        std::uint64_t id;
        int type;
    };
    bool in_multi_ = false;
    std::vector<event> multi_events_; // (fired in a multi, in order)
};

/// A session's connection to the model server.
class sim_link final : public zklock::detail::zk_link, public std::enable_shared_from_this<sim_link> {
public:
    sim_link(scheduler& s, model_server& m, zklock::detail::zk_link_params p)
        : s_(s), m_(m), p_(std::move(p)) {}
    ~sim_link() override { close(); }
    bool init(const std::string&, int timeout_ms, const std::vector<credentials>&) override {
        timeout_ms_ = std::clamp(timeout_ms, 4'000, 40'000); // (tickTime 2 s: 2 to 20 ticks)
        return true;
    }
    void start() override;
    void submit(zklock::detail::zk_request r, zklock::detail::zk_handler h) override;
    void close() override;
    bool write_in_flight() const override {
        for (auto& q : queued_)
            if (zklock::detail::vouch_of(q.r.op) == zklock::detail::vouch::commit && !q.r.heartbeat)
                return true;
        return writes_ > 0;
    }
    void set_servers(const std::string&) override {}
    bool session_info(std::int64_t& id, int& timeout_ms) override {
        if (closed_) return false;
        id = id_;
        timeout_ms = timeout_ms_;
        return true;
    }
    std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>>
    client_socket_address() override {
        return std::nullopt;
    }
    std::string attempts() const override { return {}; }

    /// (the server) A watch of this session fired.
    void watch_fired(std::uint64_t id, int type);
    /// The connection drops now: requests in flight fail with ZCONNECTIONLOSS (each one applied
    /// at the server or not, as drawn: a lost reply either way), the session hears
    /// ZOO_CONNECTING_STATE, and the link reconnects after `down` ns to the same session, unless
    /// the server expired it meanwhile (then ZOO_EXPIRED_SESSION_STATE, told at the reconnect).
    /// `rc`: what the requests in flight fail with: ZCONNECTIONLOSS (a reset), or
    /// ZOPERATIONTIMEOUT (the C client's receive timeout, 2T/3 without a byte, ended it).
    void drop(std::int64_t down, int rc = ZCONNECTIONLOSS);
    bool connected() const { return connected_; }
    std::int64_t session() const { return id_; }
    int timeout_ms() const { return timeout_ms_; }

private:
    /// The time a message sent to the client now arrives: after a drawn delay, in order.
    std::int64_t to_client_at();
    std::int64_t to_server_at();
    template <class F>
    void deliver(F&& fn) { // (on the strand)
        asio::post(p_.strand, std::forward<F>(fn));
    }

    scheduler& s_;
    model_server& m_;
    zklock::detail::zk_link_params p_;
    int timeout_ms_ = 10'000;
    std::int64_t id_ = 0;
    bool connected_ = false, closed_ = false;
    int writes_ = 0;
    std::int64_t last_to_client_ = 0, last_to_server_ = 0;
    std::uint64_t next_request_ = 0;
    std::map<std::uint64_t, std::shared_ptr<zklock::detail::zk_handler>> inflight_;
    std::map<std::uint64_t, std::uint64_t> applies_;         // request -> its apply event, not run yet
    std::uint64_t conn_ = 0;                                 // moves at each drop: older events are stale
    std::vector<std::pair<std::uint64_t, int>> held_events_; // watch events while disconnected
    void ping();
    /// Sends `r` (handed over at `sent`) to the server now.
    void send(zklock::detail::zk_request r, zklock::detail::zk_handler h, lease_ns sent);
    /// Fails every request waiting in the client's queue with `rc`.
    void fail_queued(int rc);
    struct queued {
        zklock::detail::zk_request r;
        zklock::detail::zk_handler h;
        lease_ns sent;
    };
    std::vector<queued> queued_; // handed over while disconnected, the connect attempt hanging
    bool refusing_ = false;      // this outage refuses connections (else an attempt hangs)
};

/// The platform: virtual clocks, the scheduler's timers, seeded randomness, links to the model.
class sim_platform final : public zklock::detail::platform {
public:
    sim_platform(scheduler& s, model_server& m) : s_(s), m_(m) {}
    std::chrono::steady_clock::time_point steady_now() const noexcept override {
        return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(s_.now));
    }
    std::chrono::system_clock::time_point wall_now() const noexcept override {
        return std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::nanoseconds(s_.now)));
    }
    lease_ns boot_now() const noexcept override { return s_.now; }
    std::unique_ptr<zklock::detail::timer_backend> make_timer(const asio::any_io_executor& ex,
                                                              zklock::detail::timer_clock) override {
        return std::make_unique<sim_timer>(s_, ex);
    }
    std::uint64_t random64() noexcept override { return s_.rng(); }
    std::string host_name() const override { return "sim"; }
    long process_id() const noexcept override { return 1; }
    std::shared_ptr<zklock::detail::zk_link> make_link(zklock::detail::zk_link_params p) override {
        auto l = std::make_shared<sim_link>(s_, m_, std::move(p));
        links.push_back(l);
        return l;
    }
    /// Every link made, for the world's faults.
    std::vector<std::weak_ptr<sim_link>> links;

private:
    scheduler& s_;
    model_server& m_;
};

} // namespace zklock::sim
