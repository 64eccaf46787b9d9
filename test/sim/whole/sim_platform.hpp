// The whole library under simulation (issue 62): a platform (src/session/platform.hpp)
// whose clocks are virtual, whose timers are events of a seeded scheduler, and whose links
// (src/session/zk_link.hpp) talk to a model ZooKeeper server in the same process. A session made
// with it (session(ex, opts, platform)) runs the library's own code, drivers included, unchanged:
// the requests, the heartbeat, the lease, the deletes, the recipes. One thread, one io_context,
// one seed: the run is replayed exactly.
//
// The model today (model_server below; docs/internals.md maps each rule to the ZooKeeper 3.8
// class it mirrors): an ensemble of one server or a leader and two followers, each with its own
// tree and watches; writes forwarded to the leader, checked there (SESSIONEXPIRED, SESSIONMOVED),
// logged and applied by every server in order after a drawn lag; reads answered from the client's
// server (stale on a follower behind); the leader's session tracker fed by handshakes and by the
// followers' relays on its ping loop; closeSession through the log; the container reaper; links
// that drop (requests reaching their server anyway or never, replies lost, ZCONNECTIONLOSS or the
// receive timeout's ZOPERATIONTIMEOUT, requests queued in the client while an outage hangs),
// reconnect to a server not behind the client's last zxid with SetWatches, or learn of the expiry
// at the reconnect (ZSESSIONEXPIRED); followers cut off from the leader, giving it up past
// syncLimit; the leader's failover (a crash, or a cut from both followers: it commits nothing,
// then steps down; a follower wins the election and restarts every session with a whole T).
// A client's process pauses (its sessions' handlers and its C client's reads and pings wait for
// the resume), and a connection stalls one way or both (TCP held back); ACLs, with NOAUTH (a
// server's freeze is the world's: a cut of its learner link and stalls of its clients'
// connections). No sync (zklock sends none). Not yet: clock drift (issue 62).
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
#include <deque>
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

/// A client's process: the io_context its sessions run on, and the end of its pause (SIGSTOP, a
/// GC, swap): while paused, none of its handlers runs, and nothing its C client does (replies
/// and events read, pings sent, a drop noticed) happens before the pause ends.
struct process {
    asio::io_context io;
    std::int64_t paused_until = 0;
};

/// Virtual time and the events at their times, with the io_contexts the library runs on: run()
/// alternates running every ready handler of every process not paused (io.poll) and advancing
/// to the next event.
class scheduler {
    // (first: destroyed after io, whose destructor destroys the handlers and coroutines still
    // pending, and with them timers that cancel their events)
    std::uint64_t seq_ = 0;
    std::map<std::pair<std::int64_t, std::uint64_t>, std::function<void()>> events_;

public:
    explicit scheduler(std::uint64_t seed) : rng(seed) {}
    asio::io_context io;       // (the world's own, never paused)
    std::deque<process> procs; // (each client process's; a deque: they do not move)
    /// A new process for the world's sessions.
    process& add_process() { return procs.emplace_back(); }
    bool paused(const process* p) const { return p != nullptr && now < p->paused_until; }
    /// Process `p` stops for `d` ns from now (a pause that ends earlier is lengthened).
    void pause(process& p, std::int64_t d) {
        p.paused_until = std::max(p.paused_until, now + d);
        at(p.paused_until, [] {}); // (its handlers run at the resume)
    }
    /// `fn` at `t`, or, if process `p` is paused then, at the end of its pause.
    void at_in(process* p, std::int64_t t, std::function<void()> fn) {
        at(t, [this, p, fn = std::move(fn)]() mutable { run_in(p, std::move(fn)); });
    }
    void run_in(process* p, std::function<void()> fn) {
        if (!paused(p)) return fn();
        at(p->paused_until, [this, p, fn = std::move(fn)]() mutable { run_in(p, std::move(fn)); });
    }
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
            for (std::size_t ran = 1; ran != 0;) { // (a handler of one may post to another)
                ran = io.poll();
                io.restart();
                for (auto& p : procs)
                    if (!paused(&p)) {
                        ran += p.io.poll();
                        p.io.restart();
                    }
            }
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
    long stale_reads = 0;    // reads a follower answered from a tree behind the leader's
    long late_writes = 0;    // writes the leader applied after their connection had dropped
    long moved = 0;          // writes the leader refused: the session had moved (SESSIONMOVED)
    long setwatch_fired = 0; // watch events a reconnect's SetWatches fired
    long cuts = 0, gave_up = 0;
    long failovers = 0;   // leaders replaced (crashed, or cut off from both followers past syncLimit)
    long own_missing = 0; // listings a follower answered without a node of the session the leader had
    long pauses = 0, stalls = 0,
         freezes = 0;           // a client process's pauses, a connection's stalls, a server's freezes
    long freezes_at_answer = 0; // (of those: right after the server answered a write)
    long monitor_reads = 0;     // listings of the contenders by a monitor (the world's)
    long regains = 0;           // suspended locks held again (the world's)
    long noauth = 0;            // ACL checks refused with ZNOAUTH (a write: once per server applying it)
    long told_paused = 0;       // holders whose lock read as lost while their process was paused
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
class model_server;

/// One server of the ensemble: its copy of the tree (ZooKeeper 3.8's DataTree), the watches set
/// on it by the sessions connected to it (WatchManager), the log position it has applied, and
/// each connected session's requests in order (CommitProcessor: a session's read waits behind
/// its own pending writes; other sessions' writes do not hold it back, so a follower behind the
/// leader answers reads from an older tree).
struct replica {
    struct node {
        std::string data;
        std::int64_t czxid = 0, mzxid = 0, pzxid = 0, owner = 0;
        std::int32_t version = 0, cversion = 0;
        bool container = false;
        std::set<std::string> children;
        std::vector<zklock::acl_entry> acl; // (empty: open, world:anyone with every permission)
    };
    struct watch {
        std::int64_t session;
        std::uint64_t id;
    };
    /// A request of a connected session, in arrival order.
    struct pending {
        std::uint64_t key;
        std::uint64_t conn; // the client's connection it came on
        zklock::detail::zk_request r;
        bool write = false, answered = false;
        zklock::detail::zk_result res;
        std::function<void(zklock::detail::zk_result, std::int64_t zxid)> reply;
    };

    int index = 0;
    std::map<std::string, node> nodes;
    std::multimap<std::string, watch> data_w, child_w;     // (data_w: getData and exists watches)
    std::int64_t zxid = 0;                                 // the last txn applied
    std::size_t applied = 0;                               // log entries applied
    std::int64_t last_commit_at = 0;                       // (commits reach it in order)
    std::int64_t to_leader_last = 0, from_leader_last = 0; // (the learner link: FIFO both ways)
    std::int64_t cut_until = 0;                            // cut off from the leader until then (0: not cut)
    std::uint64_t epoch = 0;                 // moves when it gives up its leader: older messages are lost
    bool gave_up = false;                    // cut off past syncLimit: serves no client until it syncs again
    std::set<std::int64_t> touched;          // sessions heard from since its last ping answer (a follower)
    std::map<std::int64_t, sim_link*> links; // sessions connected to it
    std::map<std::int64_t, std::uint64_t> conn_of; // and on which of their connections
    std::map<std::int64_t, std::deque<pending>> queues;
    std::set<std::int64_t> ended; // sessions whose closeSession it has applied

    replica() { nodes["/"] = node{}; }
    void drop_watches(std::int64_t session);
    static std::string parent_of(const std::string& p) {
        auto i = p.rfind('/');
        return i == 0 ? "/" : p.substr(0, i);
    }
};

/// The model ZooKeeper ensemble: one leader (server 0) and 0 or 2 followers, each a replica.
///
/// Writes (create, delete, setData, multi) go from the client's server to the leader over its
/// learner link (FIFO, a drawn delay), which checks the session (alive: else SESSIONEXPIRED; its
/// owner the forwarding server: else SESSIONMOVED; PrepRequestProcessor.checkSession), applies
/// them to its tree, logs them and commits them to every follower, in order, after a drawn lag;
/// each server applies the log in order and answers its own client when it applies that client's
/// write (FinalRequestProcessor). Reads and watch removals are answered by the client's server
/// from its own tree. Watches live on the server that set them and fire when it applies the change.
///
/// Sessions: the leader's tracker expires a session its news has not reached for T
/// (SessionTrackerImpl); its news is a handshake (a follower revalidates the session at the
/// leader: Learner.validateSession) or a touch a follower relays in its answer to the leader's
/// ping (every tickTime/2 plus a drawn jitter, LearnerSessionTracker). An expiry, or a client's
/// close, is a closeSession in the log: each server deletes the session's ephemeral nodes when it
/// applies it, and closes the session's connection if it has one.
///
/// A follower may be cut off from the leader (both ways): it goes on answering its clients' reads
/// and pings from its tree, while what it forwards, its relays and the leader's commits wait for
/// the cut to heal (TCP: late, in order); past syncLimit (10 s) it gives up its leader, closes its
/// clients' connections, loses what was in flight on the learner link and serves no client until
/// the cut heals and it syncs.
class model_server {
public:
    using node = replica::node;
    struct txn {
        std::int64_t session = 0;
        zklock::detail::zk_request r;
        int error = 0;      // SESSIONEXPIRED or SESSIONMOVED: an error txn, nothing applied
        bool close = false; // a closeSession
        int origin = -1;    // the server that forwarded it (answers it)
        std::uint64_t key = 0;
        std::int64_t zxid = 0; // the leader's zxid after it
        bool expiry = false;   // (a closeSession of the tracker's: its earliest moment and T, for the oracle)
        std::int64_t earliest = 0, timeout = 0;
    };
    struct config {
        int servers = 1;
        std::int64_t forward_hi = 2'000'000;       // the learner link's delay, [50 us, this]
        std::int64_t lag_hi = 2'000'000;           // a follower's commit lag, [50 us, this]
        std::int64_t ping_jitter_hi = 200'000'000; // the leader's ping loop: tickTime/2 + [0, this]
    };

    model_server() = default;
    /// Starts the ensemble on `s` (its ping loop); before any link.
    void start(scheduler& s, config c);
    int servers() const { return static_cast<int>(reps_.size()); }
    /// The leader's index, or -1 during an election.
    int leader() const { return leader_; }
    replica& server(int i) { return reps_[static_cast<std::size_t>(i)]; }

    // -- sessions (the leader's tracker) --
    /// A new session (createSession at the leader, from server `via`).
    std::int64_t open_session(std::int64_t timeout_ns, int via);
    /// Session `id` presents `auth` on its connections (addAuth): its digest identities, each
    /// the credentials' "user:password" itself (the model does not hash them: an ACL names an
    /// identity as an `auth` entry expands it, or as the same string).
    void set_identity(std::int64_t id, const std::vector<zklock::credentials>& auth);
    /// The leader heard from session `id` now (a handshake, a relay, a request to the leader).
    void touch(std::int64_t id) {
        if (auto it = alive_.find(id); it != alive_.end()) it->second.first = s_->now;
    }
    /// A connection's handshake reached the leader through server `via`: the session is touched
    /// and owned by `via` (Leader.revalidateSession). False if it is expired.
    bool revalidate(std::int64_t id, int via);
    /// (the leader's session tracker) Expires every session not heard from for its timeout.
    bool expire_due(std::int64_t now);
    bool alive(std::int64_t id) const { return alive_.count(id) != 0; }
    int expired() const { return expired_; }
    /// The client closes session `id` (closeSession through the leader).
    void close_session(std::int64_t id);

    // -- requests, from a link --
    /// Request `r` of session `id` reaches server `at`; `reply` gets its result (and the
    /// server's zxid) when that server answers it. Returns false if that server serves no client.
    void receive(int at, std::int64_t id, std::uint64_t conn, std::uint64_t key, zklock::detail::zk_request r,
                 std::function<void(zklock::detail::zk_result, std::int64_t)> reply);
    /// A ping of session `id` reaches server `at`.
    void ping(int at, std::int64_t id);
    /// Session `id`'s connection to server `at` closed: the server drops its watches and its
    /// pending requests' answers (what it forwarded goes on).
    void disconnect(int at, std::int64_t id);
    /// Link `l` is closed or gone: no server keeps a connection of it (one that answered its
    /// handshake before the client read the answer, or before the attempt was given up).
    void forget(const sim_link* l);
    /// Session `id` connects to server `at` (after its handshake): its watches are set again with
    /// the client's last zxid (SetWatches: what changed since fires now, DataTree.setWatches).
    struct client_watch {
        std::uint64_t id;
        std::string path;
        enum kind_t { data, exist, child } kind;
    };
    void connect(int at, std::int64_t id, sim_link* l, const std::vector<client_watch>& ws,
                 std::int64_t rel_zxid);
    /// The servers a client that has seen `zxid` may connect to (a server behind it refuses).
    std::vector<int> eligible(std::int64_t zxid) const;
    /// When a message server `at` sends the leader now arrives, and the reverse (FIFO each way,
    /// held by a cut until it heals). A message that finds the server's epoch moved is lost.
    std::int64_t to_leader_at(int at);
    /// Until when server `at`'s learner link is held by a cut (its own, or the leader's).
    std::int64_t cut_of(int at) const;
    std::int64_t from_leader_at(int at, std::int64_t hi);
    /// Runs `fn` at server `at` (or at the leader, `to_leader`) when a message sent now on the
    /// learner link arrives, unless the link broke meanwhile.
    void over_link(int at, bool to_leader, std::function<void()> fn);

    // -- faults --
    /// Follower `at` is cut off from the leader for `d` ns. False if another cut, or a failover,
    /// is under way (one fault of the ensemble at a time).
    bool cut(int at, std::int64_t d);
    /// The leader is cut off from both followers for `down` ns: a crash and its restart (`notice`
    /// 0: the followers see its connections close at once), or a partition (`notice` syncLimit or
    /// more: the followers stop hearing its pings, and it stops hearing their acks). Until then it
    /// commits nothing (no quorum) and answers its own clients' reads and pings; if the cut lasts
    /// past `notice`, every server drops its clients, the followers elect one of them, which
    /// starts every session of the tree with a whole T, and the old leader rejoins as a follower
    /// when the cut heals (Leader.lead's quorum check, QuorumPeer's LOOKING, SessionTrackerImpl).
    /// False if an election or another cut is under way (one fault of the ensemble at a time).
    bool fail_leader(std::int64_t notice, std::int64_t down);
    /// An operator's delete (zkCli's `delete`) through the leader.
    bool operator_delete(const std::string& path);
    /// The container reaper (ZooKeeper 3.8's ContainerManager, every checkIntervalMs, on the
    /// leader): deletes, as the server's own delete, each container that has had children and has
    /// none now (cversion > 0). Returns how many it deleted.
    int reap_containers();
    int reaped() const { return reaped_; }
    /// Makes a persistent node (and its parents) on every server before the run, as an operator would.
    void seed_node(const std::string& path);
    /// Every server has applied the whole log and serves clients (nothing is on its way).
    bool settled() const {
        for (auto& r : reps_)
            if (r.applied != log_.size() || r.gave_up) return false;
        return true;
    }

    // -- the oracles' view: the leader's tree (during an election, the most advanced server's) --
    std::vector<std::string> under(const std::string& path) const;
    const replica& view() const {
        if (leader_ >= 0) return reps_[static_cast<std::size_t>(leader_)];
        const replica* best = &reps_[0];
        for (auto& r : reps_)
            if (r.applied > best->applied) best = &r;
        return *best;
    }
    std::size_t watch_count() const {
        std::size_t n = 0;
        for (auto& r : reps_) n += r.data_w.size() + r.child_w.size();
        return n;
    }
    /// The watches left, "server N: session S path (kind)" each, for a failure's report.
    std::string describe_watches() const {
        std::string out;
        for (auto& r : reps_)
            for (auto* m : {&r.data_w, &r.child_w})
                for (auto& [p, w] : *m)
                    out += "; server " + std::to_string(r.index) + ": session " + std::to_string(w.session) +
                           " " + p + (m == &r.child_w ? " (children)" : " (data)");
        return out;
    }
    std::size_t ephemeral_count() const {
        std::size_t n = 0;
        for (auto& [p, x] : view().nodes) n += x.owner != 0;
        return n;
    }
    const node* find(const std::string& p) const {
        auto it = view().nodes.find(p);
        return it == view().nodes.end() ? nullptr : &it->second;
    }
    /// (for the oracles) Session `id` is expired now; `earliest` is the leader's last news plus T.
    std::function<void(std::int64_t id, std::int64_t earliest, std::int64_t timeout)> on_expire;
    /// (for the oracles) A node's data was set by session `id`, alone or in a multi, at the leader.
    std::function<void(std::int64_t id, const std::string& path, const std::string& data)> on_set;
    /// (for the oracles) Server `rp` set a data watch for session `id` on `path` (getData, or
    /// exists), answering the session's own request (not SetWatches at a reconnect).
    std::function<void(const replica& rp, std::int64_t id, const std::string& path)> on_watch;

private:
    /// The leader takes a write forwarded by server `origin`.
    void lead(int origin, std::int64_t id, std::uint64_t key, zklock::detail::zk_request r);
    void log_txn(txn t);
    /// Server `at` applies log entries up to `upto` (in order).
    void apply_log(int at, std::size_t upto);
    /// Answers what server `at` can answer for session `id`, in order.
    void pump(int at, std::int64_t id);
    void relay_loop();
    void give_up(int at);
    /// The followers of the lost leader `old` elect one of them (fail_leader).
    void elect(int old);
    /// Applies `r` of session `id` to server `at`'s tree now (its watch events go to its links).
    zklock::detail::zk_result apply(replica& rp, std::int64_t id, const zklock::detail::zk_request& r);
    void end_session(replica& rp, std::int64_t id);
    void fire(replica& rp, std::multimap<std::string, replica::watch>& m, const std::string& path, int type);
    int create(replica& rp, std::int64_t s, const std::string& path, const std::string& data, int flags,
               std::string& made, const std::vector<zklock::acl_entry>* acl);
    int remove(replica& rp, std::int64_t s, const std::string& path, int version);
    int set(replica& rp, std::int64_t s, const std::string& path, const std::string& data, int version,
            std::int32_t& new_version);
    /// Whether session `s` has permission `perm` on `n` (ZooKeeper 3.8's PrepRequestProcessor
    /// and FinalRequestProcessor checkACL: world:anyone, or one of the session's digest ids).
    bool allowed(const node& n, std::int64_t s, std::int32_t perm) const;

    scheduler* s_ = nullptr;
    config c_;
    std::vector<replica> reps_ = std::vector<replica>(1);
    std::vector<txn> log_;
    std::int64_t next_session_ = 0, leader_zxid_ = 0;
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> alive_; // id -> (last news, T)
    std::map<std::int64_t, int> owner_;                                   // id -> its server
    std::map<std::int64_t, std::int64_t> sessions_; // the tree's sessions (not closed in the log): id -> T
    std::map<std::int64_t, std::vector<std::string>> ids_; // a session's digest identities
    int leader_ = 0;                                       // -1: an election
    std::uint64_t era_ = 0; // moves at each failover: what was on its way to or from the old leader is lost
    int expired_ = 0, reaped_ = 0;
    bool in_multi_ = false;
    struct event {
        std::int64_t session;
        std::uint64_t id;
        int type;
    };
    std::vector<event> multi_events_; // (fired in a multi, in order)
    std::vector<std::pair<std::int64_t, std::pair<std::string, std::string>>> sets_; // (in a multi)
};

/// A session's connection to the model ensemble, as the C client makes it: to one server at a
/// time; a reconnect goes to any server not behind the client's last zxid, with the client's
/// watches (SetWatches).
class sim_link final : public zklock::detail::zk_link, public std::enable_shared_from_this<sim_link> {
public:
    sim_link(scheduler& s, model_server& m, zklock::detail::zk_link_params p, process* proc = nullptr)
        : s_(s), m_(m), p_(std::move(p)), proc_(proc) {}
    ~sim_link() override { close(); }
    bool init(const std::string&, int timeout_ms, const std::vector<credentials>& auth) override {
        timeout_ms_ = std::clamp(timeout_ms, 4'000, 40'000); // (tickTime 2 s: 2 to 20 ticks)
        auth_ = auth;
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

    /// (its server) A watch of this session fired there at `zxid`.
    void watch_fired(std::uint64_t id, int type, std::int64_t zxid);
    /// The connection drops now: requests in flight fail with `rc` (each one applied or not, as
    /// drawn: a lost reply either way), the session hears ZOO_CONNECTING_STATE, and the link
    /// reconnects after `down` ns, to a server not behind what it has seen, unless the leader
    /// expired the session meanwhile (then ZOO_EXPIRED_SESSION_STATE, told at the reconnect).
    /// `rc`: ZCONNECTIONLOSS (a reset), or ZOPERATIONTIMEOUT (the C client's receive timeout).
    void drop(std::int64_t down, int rc = ZCONNECTIONLOSS);
    /// The connection stalls for `d` ns one way or both (`up`: to the server; `down`: to the
    /// client): what is sent meanwhile arrives after the stall, in order (TCP held back, not
    /// broken; shorter than the C client's receive timeout, so nobody drops it).
    bool stalled() const { return stall_up_until_ > s_.now || stall_down_until_ > s_.now; }
    void stall(bool up, bool down, std::int64_t d) {
        if (up) stall_up_until_ = std::max(stall_up_until_, s_.now + d);
        if (down) stall_down_until_ = std::max(stall_down_until_, s_.now + d);
    }
    bool connected() const { return connected_; }
    std::int64_t session() const { return id_; }
    int timeout_ms() const { return timeout_ms_; }
    int server() const { return server_; }
    std::uint64_t conn() const { return conn_; }
    /// Called as a write (not a heartbeat) leaves the client: a world's hook for faults at that
    /// phase (a drop while a write is on its way or its reply is).
    std::function<void(sim_link&)> on_write;
    /// Called as its server answers one of its writes (a heartbeat too) with ZOK (the commit has passed that
    /// server): a world's hook for faults at that phase (the server frozen before its next ping
    /// answer carries the session's touches).
    std::function<void(sim_link&)> on_write_answered;

private:
    std::int64_t to_client_at();
    std::int64_t to_server_at();
    template <class F>
    void deliver(F&& fn) { // (on the strand)
        asio::post(p_.strand, std::forward<F>(fn));
    }
    /// Connects to a server: the handshake reaches it, the leader revalidates (or creates) the
    /// session, the answer comes back; then the watches are set again there.
    void handshake(bool first);
    void connected_to(int server);
    /// `fn` at `t` on the client's side: when its process runs (its C client reads the socket).
    void at_client(std::int64_t t, std::function<void()> fn) { s_.at_in(proc_, t, std::move(fn)); }

    scheduler& s_;
    model_server& m_;
    zklock::detail::zk_link_params p_;
    process* proc_ = nullptr;
    std::int64_t stall_up_until_ = 0, stall_down_until_ = 0;
    std::vector<credentials> auth_; // (presented on every connection)
    int timeout_ms_ = 10'000;
    std::int64_t id_ = 0;
    int server_ = -1;
    bool connected_ = false, closed_ = false;
    int writes_ = 0;
    std::int64_t last_to_client_ = 0, last_to_server_ = 0;
    std::int64_t last_zxid_ = 0; // the largest zxid this client has seen (replies, events)
    std::uint64_t next_request_ = 0;
    std::map<std::uint64_t, std::shared_ptr<zklock::detail::zk_handler>> inflight_;
    std::map<std::uint64_t, std::uint64_t> arrivals_; // request -> its arrival event, not run yet
    std::uint64_t conn_ = 0;                          // moves at each drop: older events are stale
    std::map<std::uint64_t, model_server::client_watch> watches_; // the client's watch table
    void ping();
    void send(zklock::detail::zk_request r, zklock::detail::zk_handler h, lease_ns sent);
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
    sim_platform(scheduler& s, model_server& m, process* proc = nullptr) : s_(s), m_(m), proc_(proc) {}
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
        auto l = std::make_shared<sim_link>(s_, m_, std::move(p), proc_);
        l->on_write = [this](sim_link& x) { // (the world's hook as it is when the write goes)
            if (on_write) on_write(x);
        };
        l->on_write_answered = [this](sim_link& x) {
            if (on_write_answered) on_write_answered(x);
        };
        links.push_back(l);
        return l;
    }
    /// Every link made, for the world's faults.
    std::vector<std::weak_ptr<sim_link>> links;
    /// Given to every link made (sim_link::on_write, sim_link::on_write_answered).
    std::function<void(sim_link&)> on_write, on_write_answered;

private:
    scheduler& s_;
    model_server& m_;
    process* proc_; // (the process whose sessions it serves, or none)
};

} // namespace zklock::sim
