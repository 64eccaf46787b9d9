// zklock/election.hpp: leader election on the fair lock: campaign, proclaim, resign, observe.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/detail/deadline.hpp>
#include <zklock/detail/no_session.hpp>

#include <zklock/acl.hpp>
#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/inspect.hpp>
#include <zklock/loss_policy.hpp>
#include <zklock/session.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zklock {

namespace asio = boost::asio;

/// Which peer's candidates share the election path. Each names its nodes its own way, and each
/// peer sees only its own naming, so one path takes one dialect: a campaign that lists a
/// candidate of another naming fails with errc::election_dialect_mixed and leaves no node.
enum class election_dialect {
    /// Curator's LeaderSelector (an InterProcessMutex underneath): "_c_<uuid>-lock-<seq>". Also
    /// zklock's mutex in its default dialect: a campaign and a mutex on one path exclude each other.
    curator_selector,
    /// Curator's LeaderLatch: "_c_<uuid>-latch-<seq>".
    curator_latch,
    /// kazoo's Election (a kazoo Lock underneath): "<32 hex>__lock__<seq>".
    kazoo,
};

/// Options of an election: the dialect, the leader's loss policy and the ACL of its nodes.
struct election_options {
    /// The naming of the candidates' nodes (see election_dialect). Default: Curator's LeaderSelector.
    election_dialect dialect = election_dialect::curator_selector;
    /// This election's loss policy; empty: the session's (session_options::loss). An invalid
    /// lease fraction fails the campaign with errc::invalid_lease_fraction.
    std::optional<loss_policy> loss;
    /// The ACL of the candidates' nodes and of the election path when zklock creates it.
    acl node_acl = acl::open();
};

/// The leader as ZooKeeper shows it: the lowest candidate node on the election path.
struct leader_info {
    std::string value;     ///< the value it published (its node's data)
    std::string node_path; ///< its node's full path
    /// What its leadership's fencing_token() is: czxid * 4096. A zklock leader's, and the same
    /// number for a Curator or kazoo leader, whose node was made the same way.
    std::int64_t fencing_token = 0;
    std::int64_t session_id = 0; ///< the session that owns the node (its ephemeralOwner)
    /// Equal when every field is (what async_observe compares with its `last_seen`).
    friend bool operator==(const leader_info&, const leader_info&) = default;
};

class leadership;

namespace detail {
ZKLOCK_DECL void start_proclaim(const std::shared_ptr<held_lock>& h, std::string value,
                                asio::any_completion_handler<void(error_code)> handler);
ZKLOCK_DECL void start_campaign(const std::shared_ptr<session_impl>& s, std::string path,
                                const election_options& o, std::string value,
                                std::optional<std::chrono::steady_clock::time_point> deadline, bool try_only,
                                asio::any_completion_handler<void(error_code, leadership)> handler);
/// last_seen: with `observe`, complete once the leader differs from it; without, at once.
ZKLOCK_DECL void
start_leader(const std::shared_ptr<session_impl>& s, std::string path, bool observe,
             std::optional<leader_info> last_seen,
             asio::any_completion_handler<void(error_code, std::optional<leader_info>)> handler);
} // namespace detail

/// Leadership won by a campaign: a guard on the candidate's node, plus async_proclaim.
///
/// Everything a guard offers holds for it: fencing_token() (increases with every leader),
/// is_lost() and async_wait_lost() (told before any other candidate can lead, under the
/// default lease policy), bind_loss(), async_commit() (writes that land only while leading), and
/// async_release(), which resigns (async_resign says the same).
class leadership : public guard {
public:
    leadership() noexcept = default;
    /// Internal: the guard a campaign was granted.
    explicit leadership(guard g) noexcept : guard(std::move(g)) {}

    /// Publishes a new value: the leader's node's data, which async_leader and async_observe
    /// report. Guarded: it lands only while this leadership holds. One sent before the loss signal
    /// may succeed after it: it was applied while the node existed, before any later leader.
    ///
    /// \signature `void(error_code)`. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's); never inside the
    /// initiating function.
    /// \cancellation Not cancellable (a write in flight cannot be called back).
    /// \errors
    /// - errc::lock_lost: the leadership is known to be lost (nothing is sent), or its node was
    ///   gone at the write; nothing was written;
    /// - errc::not_held: an empty leadership (resigned, moved from, never won);
    /// - errc::data_too_large: `value` is over max_node_data bytes (nothing is sent);
    /// - errc::session_closed; zk_errc::connection_loss or operation_timeout (the outcome is
    ///   unknown: async_leader reads it back); another failure of the request (e.g.
    ///   zk_errc::session_expired).
    /// \lifetimes `value` is moved into the operation, which shares the leadership's state: the
    /// leadership may be released or destroyed while the operation is pending.
    /// \threadsafety Distinct objects: safe. Shared object: unsafe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_proclaim(std::string value, CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [h = state(), empty = !owns_lock()](auto handler, std::string v) {
                if (empty)
                    return detail::complete_without_session(std::move(handler), error_code(errc::not_held));
                detail::start_proclaim(h, std::move(v),
                                       asio::any_completion_handler<void(error_code)>(std::move(handler)));
            },
            token, std::move(value));
    }

    /// Resigns: async_release under the name of the recipe. The next candidate leads once the
    /// node is gone.
    ///
    /// \signature `void(error_code)`, as guard::async_release. The token defaults to asio::deferred.
    /// \executor As guard::async_release.
    /// \cancellation As guard::async_release.
    /// \errors As guard::async_release.
    /// \lifetimes As guard::async_release.
    /// \threadsafety As guard::async_release.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_resign(CompletionToken&& token = default_completion_token{}) {
        return async_release(std::forward<CompletionToken>(token));
    }
};

/// A leader election on a ZooKeeper path: at most one leader at a time, in the order the
/// candidates came.
///
/// Protocol: the fair, herd-free lock (mutex.hpp). A campaign creates an EPHEMERAL_SEQUENTIAL
/// node whose data is the candidate's value; the lowest node leads; every other candidate
/// watches only its predecessor. A leader learns of its loss through its leadership (a guard),
/// before any other candidate can lead under the default lease policy (docs/guarantees.md).
/// Observers (async_leader, async_observe) take no part: they read, and watch, the lowest node
/// only; while there is no candidate at all, async_observe watches the path's children.
///
/// An election object is a cheap description (session + path + options), as a mutex is.
/// Thread safety: distinct and shared objects: safe.
class ZKLOCK_DECL election {
public:
    /// An election on `path` of session `s`. Sends nothing: each operation checks the path.
    election(session& s, std::string path, election_options opts = {})
        : session_(s.impl()), path_(std::move(path)), opts_(std::move(opts)) {}

    /// The election path given to the constructor.
    const std::string& path() const noexcept { return path_; }

    /// Stands as a candidate publishing `value`, and completes once this candidate leads.
    ///
    /// As mutex::async_acquire, with the candidate's node holding `value` (verbatim; empty is
    /// allowed). A candidate that gives up (cancellation, a deadline) leaves no node.
    ///
    /// \signature `void(error_code, leadership)`: on success no error and the leadership; on
    /// failure the error and an empty leadership. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As mutex::async_acquire.
    /// \cancellation As mutex::async_acquire: terminal, partial, total; no node is left behind.
    /// \errors As mutex::async_acquire, plus:
    /// - errc::data_too_large: `value` is over max_node_data bytes (nothing is sent);
    /// - errc::election_dialect_mixed: the path holds a candidate named in another dialect (see
    ///   election_dialect); this candidate's node is deleted.
    /// \lifetimes As mutex::async_acquire: the election object may be destroyed while the
    /// campaign is pending.
    /// \threadsafety As mutex::async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, leadership))
                  CompletionToken = default_completion_token>
    auto async_campaign(std::string value, CompletionToken&& token = default_completion_token{}) {
        return initiate(std::move(value), {}, false, std::forward<CompletionToken>(token));
    }

    /// As async_campaign, failing with errc::acquire_timeout once `timeout` has passed (counted
    /// from the start of the operation; zero is one try, as async_try_campaign).
    ///
    /// \signature As async_campaign. The token defaults to asio::deferred.
    /// \executor As async_campaign.
    /// \cancellation As async_campaign.
    /// \errors As async_campaign, plus errc::acquire_timeout.
    /// \lifetimes As async_campaign.
    /// \threadsafety As async_campaign.
    template <class Rep, class Period,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, leadership))
                  CompletionToken = default_completion_token>
    auto async_campaign_for(std::string value, std::chrono::duration<Rep, Period> timeout,
                            CompletionToken&& token = default_completion_token{}) {
        return initiate(std::move(value), detail::deadline_spec::after(timeout), false,
                        std::forward<CompletionToken>(token));
    }

    /// As async_campaign, failing with errc::acquire_timeout once `deadline` has passed.
    ///
    /// \signature As async_campaign. The token defaults to asio::deferred.
    /// \executor As async_campaign.
    /// \cancellation As async_campaign.
    /// \errors As async_campaign, plus errc::acquire_timeout.
    /// \lifetimes As async_campaign.
    /// \threadsafety As async_campaign.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, leadership))
                  CompletionToken = default_completion_token>
    auto async_campaign_until(std::string value, std::chrono::steady_clock::time_point deadline,
                              CompletionToken&& token = default_completion_token{}) {
        return initiate(std::move(value), detail::deadline_spec::at(deadline), false,
                        std::forward<CompletionToken>(token));
    }

    /// Leads only if no other candidate stands: errc::lock_busy otherwise (its node is deleted
    /// before completion). Never waits for a reconnect: zk_errc::connection_loss.
    ///
    /// \signature As async_campaign. The token defaults to asio::deferred.
    /// \executor As async_campaign.
    /// \cancellation As async_campaign.
    /// \errors As async_campaign, plus errc::lock_busy and zk_errc::connection_loss.
    /// \lifetimes As async_campaign.
    /// \threadsafety As async_campaign.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, leadership))
                  CompletionToken = default_completion_token>
    auto async_try_campaign(std::string value, CompletionToken&& token = default_completion_token{}) {
        return initiate(std::move(value), {}, true, std::forward<CompletionToken>(token));
    }

    /// The current leader, or none: the lowest candidate node (of any dialect) and its data.
    ///
    /// Reads the children, then the lowest node; if that node went in between, reads again.
    ///
    /// \signature `void(error_code, std::optional<leader_info>)`: no error and the leader (empty
    /// when no candidate stands, or the path does not exist); on failure the error and empty.
    /// The token defaults to asio::deferred.
    /// \executor The handler's associated executor (default: the session's); never inside the
    /// initiating function.
    /// \cancellation Terminal, partial, total: completes with asio::error::operation_aborted.
    /// \errors
    /// - errc::path_*: a bad path (nothing is sent);
    /// - errc::not_connected: the session is disconnected; asio::error::operation_aborted or
    ///   errc::session_closed: the session was closed;
    /// - the server's code for a refused read (zk_errc::no_auth, ...).
    /// \lifetimes The operation shares the session's implementation; the election object may be
    /// destroyed while it is pending.
    /// \threadsafety Distinct and shared objects: safe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<leader_info>))
                  CompletionToken = default_completion_token>
    auto async_leader(CompletionToken&& token = default_completion_token{}) const {
        return initiate_leader(false, std::nullopt, std::forward<CompletionToken>(token));
    }

    /// Waits until the leader differs from `last_seen` (another node, another value, a leader
    /// where there was none or none where there was one), and completes with it. Completes at
    /// once if it already differs. Changes in between are not queued: each call reports the
    /// leader of the moment it completes. A loop `leader = co_await e.async_observe(leader)`
    /// follows every change it has time to see.
    ///
    /// Takes no part in the election, and is herd-free: it watches the lowest node only (its
    /// deletion or its data), never the children while a candidate stands. It rides out
    /// disconnections (the watch is set again after a reconnect or a new session).
    ///
    /// \signature As async_leader. The token defaults to asio::deferred.
    /// \executor As async_leader.
    /// \cancellation Terminal, partial, total: completes with asio::error::operation_aborted and
    /// forgets its watch.
    /// \errors As async_leader.
    /// \lifetimes As async_leader; `last_seen` is copied.
    /// \threadsafety As async_leader.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<leader_info>))
                  CompletionToken = default_completion_token>
    auto async_observe(std::optional<leader_info> last_seen,
                       CompletionToken&& token = default_completion_token{}) const {
        return initiate_leader(true, std::move(last_seen), std::forward<CompletionToken>(token));
    }

    /// The candidates in queue order, the leader first (contender_info::holder), with their
    /// values (contender_info::data): zklock::async_list_contenders on the election path.
    ///
    /// \signature `void(error_code, std::vector<contender_info>)`. The token defaults to
    /// asio::deferred.
    /// \executor As zklock::async_list_contenders.
    /// \cancellation Not cancellable.
    /// \errors As zklock::async_list_contenders.
    /// \lifetimes As zklock::async_list_contenders.
    /// \threadsafety As zklock::async_list_contenders.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<contender_info>))
                  CompletionToken = default_completion_token>
    auto async_list_contenders(CompletionToken&& token = default_completion_token{}) const {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<contender_info>)>(
            [](auto h, std::shared_ptr<detail::session_impl> s, std::string p) {
                detail::start_list_contenders(s, std::move(p), inspect_options{}, std::move(h));
            },
            token, session_, path_);
    }

private:
    template <class CompletionToken>
    auto initiate(std::string value, detail::deadline_spec deadline, bool try_only, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, leadership)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, std::string path, election_options o,
               std::string v, detail::deadline_spec d, bool try_only) {
                detail::start_campaign(
                    s, std::move(path), o, std::move(v), d.resolve(detail::steady_now_of(s.get())), try_only,
                    asio::any_completion_handler<void(error_code, leadership)>(std::move(handler)));
            },
            token, session_, path_, opts_, std::move(value), deadline, try_only);
    }

    template <class CompletionToken>
    auto initiate_leader(bool observe, std::optional<leader_info> last, CompletionToken&& token) const {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<leader_info>)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, std::string path, bool observe,
               std::optional<leader_info> last) {
                detail::start_leader(
                    s, std::move(path), observe, std::move(last),
                    asio::any_completion_handler<void(error_code, std::optional<leader_info>)>(
                        std::move(handler)));
            },
            token, session_, path_, observe, std::move(last));
    }

    std::shared_ptr<detail::session_impl> session_;
    std::string path_;
    election_options opts_;
};

} // namespace zklock
