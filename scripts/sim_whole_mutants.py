#!/usr/bin/env python3
"""Mutants of the library's drivers (src/recipes, src/session), run by the whole-library simulation.

Each mutant changes one place of zklock's own source in a scratch copy of the tree, rebuilds the
whole-library simulator (test/sim/whole/: the library, unchanged but for the mutant, on the
simulated platform) and runs it. "killed" when a seed fails (its first failing seed and the
violation are printed), "survived" otherwise; each survivor's reason is in docs/internals.md ("The
whole library under simulation"). The scratch copy and its build directory are kept between
mutants (build-mutants/ in the tree, ignored by git): the first build is the library's, then each
mutant rebuilds one file and relinks.

  scripts/sim_whole_mutants.py [--seeds N] [--fault-seeds N] [--only NAME[,NAME...]] [--rotate K]

Each mutant is run without faults, then with --faults (with its own arguments, a pinned recipe
for instance), until a seed fails in one of the violation classes the mutant names (EXPECT): a
seed failing in another class is noted and the hunt goes on past it, so a mutant is found only
by its own violation (or a crash or a hang). The full set runs by hand (after a first build of a
few minutes, about a minute per mutant, more for a header many files include); CI runs
--rotate 6: the mutants of the files the landing changed and a window of six that moves with
each commit. A survivor not listed in EXPECTED_SURVIVORS (each explained in docs/internals.md)
fails the run. The pure machines' mutants and the hand-written worlds' hunts, once
scripts/sim_mutants.py's and test/sim's, are here too, as changes of the production source.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(ROOT, "build-mutants")

# (name, file, old text, new text, what it breaks[, the simulator's arguments]). Each old text must
# occur exactly once.
MUTANTS = [
    ("timeout-keeps-node", "src/recipes/mutex.cpp",
     "auto r = co_await s_->async_remove(my_node_, use_awaitable);\n                done = r.rc == ZOK || r.rc == ZNONODE;",
     "auto r = co_await s_->async_exists(my_node_, use_awaitable);\n                done = r.rc == ZOK || r.rc == ZNONODE;",
     "an acquire that gives up keeps its node: the queue behind it waits on a waiter that is gone"),
    ("release-skips-delete", "src/recipes/guard.cpp",
     "if (!done) return session->delete_in_background(node, std::nullopt, owner, marks_release);",
     "if (!done) return;",
     "a release without a completion handler never deletes the node"),
    ("no-heartbeat", "src/session/session_heartbeat.cpp",
     "if (now && state() == session_state::connected) send_heartbeat();",
     "if (false) send_heartbeat();",
     "no heartbeat: a hold longer than the lease loses its lock with no fault"),
    ("token-ignores-local-grant", "src/recipes/guard.cpp",
     "return h_ ? detail::fencing_token(h_->czxid, h_->local_index) : 0;",
     "return h_ ? detail::fencing_token(h_->czxid, 0) : 0;",
     "an in-process hand-off's grant repeats the node's fencing token"),
    ("create-and-list-lists-the-node", "src/session/session_requests.cpp",
     "    r.parent = parent;\n",
     "    r.parent = path;\n",
     "the create's pipelined listing names the new node, not the lock path"),
    ("fsm-deletes-dropped", "src/recipes/mutex.cpp",
     "for (const auto& n : a.delete_nodes) s.delete_in_background(n);",
     "for (const auto& n : a.delete_nodes) (void)n;",
     "the acquire machine's deletes (a duplicate node, a node left by a lost create) are not sent"),
    ("lease-timer-silent", "src/session/session_heartbeat.cpp",
     "        notify(session_event::lease_check);\n    lease_checked_at_ = now;",
     "        (void)0;\n    lease_checked_at_ = now;",
     "the lease's timer finds the lapse and tells no holder", ["--faults"]),
    ("unwatch-never", "src/session/session_impl.cpp",
     "if (!armed || path.empty()) return;",
     "return;",
     "a watch the library gives up is never removed at the server"),
    ("timer-cancel-keeps-deadline", "src/session/timer.hpp",
     "        backend_->cancel();\n        at_ = never;\n    }",
     "        backend_->cancel();\n    }",
     "a cancelled timer still reports its deadline: the lease timer's re-arm for that deadline is skipped (the defect of 37bd5ea)",
     ["--faults", "--first", "91260"]),  # (where a run by hand found it: docs/internals.md)
    ("unique-maybe-owned-kept", "src/recipes/mutex.cpp",
     "if (fsm.maybe_owns_node() && !op.session_gone())",
     "if (false && fsm.maybe_owns_node() && !op.session_gone())",
     "a unique_node acquire that gives up disconnected after a lost create leaves a node that may be its own (the defect the simulation found)",
     ["--faults", "--first", "355619"]),  # (where a run by hand found it: docs/internals.md)
    ("unique-abandon-retries-by-name", "src/recipes/mutex.cpp",
     "req_.strategy == lock_strategy::unique_node ? czxid_ : 0);\n        }",
     "0);\n        }",
     "unique_node: an acquire that gives up retries the delete of <path>/lock by name after a lost reply: it deletes the next holder's node (the defect the ensemble model found)",
     ["--faults", "--recipe", "mutex"]),
    ("sem-counted-watch-kept", "src/protocol/semaphore_fsm.hpp",
     "(watch_ == watch_state::counted && k != semaphore_action::grant)",
     "false",
     "a semaphore round that ends after its count without the grant leaves the leases' child watch at the server (the defect the ensemble model found)",
     ["--faults", "--recipe", "semaphore"]),
    ("unwatch-one-not-resent", "src/session/session_impl.cpp",
     "s->unwatch_one_again_.push_back({std::move(path), id, child});",
     "(void)s;",
     "a single watcher's removal lost with the connection is not sent again: SetWatches sets the watch again at the reconnect, and it stays",
     ["--faults", "--recipe", "semaphore"]),
    ("unique-parent-bound-per-acquire", "src/protocol/unique_fsm.hpp",
     "if (in.result != outcome::connection) parent_attempts_ = 0;",
     "(void)0;",
     "unique_node: the bound on making the lock path counts every reap of a long wait, not reaps in a row: a waiter fails with ZNONODE after its sixth hand-over across a reaped path (the defect the multi-lock world found)",
     ["--faults", "--first", "63251"]),  # (where a run by hand found it: docs/internals.md)
    ('data-change-as-deletion', 'src/recipes/mutex.cpp',
     'o->pred_deleted_ = type == ZOO_DELETED_EVENT;',
     'o->pred_deleted_ = type == ZOO_DELETED_EVENT || type == ZOO_CHANGED_EVENT;',
     "a data change of the predecessor (a leader's proclaim) counts as its deletion: the alone waiter is granted while the leader holds",
     ['--recipe', 'election']),
    ('unique-abandon-deletes-others', 'src/recipes/mutex.cpp',
     'if (fsm.owns_node()) {\n                op.my_node_ = fsm.node();',
     '{\n                op.my_node_ = fsm.node();',
     "unique_node: an acquire that gives up (busy try, timeout) takes <path>/lock for its own and deletes the holder's node",
     ['--recipe', 'mutex']),
    ('abandon-no-background-delete', 'src/recipes/mutex.cpp',
     'if (!done && !session_gone())\n                s_->delete_in_background(',
     'if (false)\n                s_->delete_in_background(',
     'an acquire that gives up while disconnected (or whose remove is lost) leaves its node: the queue behind it is stuck',
     ['--faults']),
    ('rw-writer-named-reader', 'src/recipes/mutex.cpp',
     'protected_node_prefix(op.req_.path, op.guid_, op.req_.dialect, op.family(), op.req_.reader)',
     'protected_node_prefix(op.req_.path, op.guid_, op.req_.dialect, op.family(), op.req_.rw)',
     'every read/write node is named a read node (the rw flag passed for the reader flag): writers no longer exclude each other',
     ['--recipe', 'shared']),
    ('watch-own-node', 'src/recipes/mutex.cpp',
     'g = co_await s.async_get_data(a.node, pred_watch_, use_awaitable);',
     'g = co_await s.async_get_data(my_node_, pred_watch_, use_awaitable);',
     'a waiter reads and watches its own node instead of its predecessor: it is never woken'),
    ('release-while-lost-keeps-node', 'src/recipes/guard.cpp',
     '        delete_lost_node();\n        if (done) done->complete({});\n        return;',
     '        if (done) done->complete({});\n        return;',
     'a lock released while suspended (or lost by policy) never deletes its node: the session keeps it, the queue is stuck',
     ['--faults']),
    ('reentrant-release-off-by-one', 'src/recipes/guard.cpp',
     'if (--holds > 0) {',
     'if (holds-- > 0) {',
     'the hold count is tested before its decrement: the last release keeps the node'),
    ('suspend-skips-loss-waiters', 'src/recipes/guard.cpp',
     '    end_waits(why, true, true);\n    try {',
     '    try {',
     'a lease lapse suspends the lock without telling its loss waiters: the holder learns nothing before the expiry',
     ['--faults']),
    ('token-from-sequence', 'src/recipes/guard.cpp',
     'return h_ ? detail::fencing_token(h_->czxid, h_->local_index) : 0;',
     'return h_ ? detail::fencing_token(h_->seq, h_->local_index) : 0;',
     "the fencing token is built from the node's sequence number, not its czxid (unique_node has none: 0 every time)",
     ['--recipe', 'mutex']),
    ('commit-while-suspended', 'src/recipes/commit.cpp',
     'if (h->st != detail::held_lock::status::held || h->is_lost_now())',
     'if (h->st == detail::held_lock::status::released || h->st == detail::held_lock::status::lost)',
     'a guarded write is sent while the lock is suspended (lease lapsed, node kept): it lands although the holder was told',
     ['--faults']),
    ('commit-check-on-lock-path', 'src/recipes/commit.cpp',
     'ops.push_back(transaction::op{transaction::kind::check, h->node, {}, -1, create_mode::persistent});',
     "ops.push_back(transaction::op{transaction::kind::check, h->node.substr(0, h->node.rfind('/')), {}, -1, create_mode::persistent});",
     "the commit's check names the lock path instead of the lock node: a write lands after the node is gone",
     ['--faults']),
    ('proclaim-while-suspended', 'src/recipes/election.cpp',
     'if (h->st != held_lock::status::held || h->is_lost_now()) return p.complete(errc::lock_lost);',
     'if (h->st == held_lock::status::released) return p.complete(errc::lock_lost);',
     'a leader proclaims while its lock is suspended or lost: the write succeeds although the leader was told',
     ['--faults', '--recipe', 'election']),
    ('downgrade-waits', 'src/recipes/shared_mutex.cpp',
     'req.try_only = true;',
     'req.try_only = false;',
     'a downgrade waits behind a writer queued after our write node, which waits for that node: a deadlock',
     ['--recipe', 'shared']),
    ('sem-timeout-keeps-lease', 'src/recipes/semaphore.cpp',
     '            auto r = co_await s_->async_remove(lease_node_, use_awaitable);\n            if (r.rc != ZOK && r.rc != ZNONODE) s_->delete_in_background(lease_node_);',
     '            auto r = co_await s_->async_exists(lease_node_, use_awaitable);\n            (void)r;',
     'a semaphore acquire that gives up while connected keeps its lease: it counts against N for ever',
     ['--recipe', 'semaphore']),
    ('sem-grant-deletes-lease', 'src/recipes/semaphore.cpp',
     'if (!lease && !lease_node_.empty() && s_->state() == session_state::connected) {',
     'if (!lease_node_.empty() && s_->state() == session_state::connected) {',
     "the round's end deletes the lease even when it was granted: the holder holds a lease that is gone",
     ['--recipe', 'semaphore']),
    ('sem-grant-not-started', 'src/recipes/semaphore.cpp',
     '                h->start();\n                co_return co_await op.finish({}, guard(std::move(h)));',
     '                co_return co_await op.finish({}, guard(std::move(h)));',
     'a granted lease is never registered with its session: no heartbeat keeps it, no lapse or expiry reaches its holder',
     ['--recipe', 'semaphore']),
    ('sem-deaf-to-reconnect', 'src/recipes/semaphore.cpp',
     '        else if (e != session_event::reconnected && e != session_event::state_changed)\n            return;',
     '        else\n            return;',
     'a semaphore round waiting for the connection is not woken by the reconnect: it waits for ever',
     ['--faults', '--recipe', 'semaphore']),
    ('handoff-lent-not-recorded', 'src/recipes/handoff.cpp',
     '        lent_ = h;\n        w.h->complete({}, guard(std::move(h)));',
     '        w.h->complete({}, guard(std::move(h)));',
     'the queue forgets which grant is lent: its release is taken for a stale one, nothing is passed on and the node is kept',
     ['--recipe', 'mutex']),
    ('handoff-node-loss-unwatched', 'src/recipes/handoff.cpp',
     '        n.arm_watch();      // a node deleted by someone else, or revoked, stops the hand-offs\n        watch_node_loss(s);',
     '        n.arm_watch();      // a node deleted by someone else, or revoked, stops the hand-offs',
     "the queue does not follow its node's loss: a release held back during a suspension is never passed on",
     ['--faults', '--recipe', 'mutex']),
    ('lease-timer-at-expiry', 'src/session/session_heartbeat.cpp',
     "std::max(session_lease::deadline(lease_->vouched(), lease_->timeout(), *f) + 1, now + 1'000'000);",
     "std::max(lease_->earliest_expiry() + 1, now + 1'000'000);",
     "the lease timer is armed for the earliest expiry, not the lease's deadline: holders are told too late",
     ['--faults']),
    ('renewal-is-a-read', 'src/session/session_heartbeat.cpp',
     '    multi(transaction{}.check(node.empty() ? std::string("/") : node, -1).ops(), std::move(h), n_renewal);',
     '    send(make_request(zk_op::exists, node.empty() ? std::string("/") : node), std::move(h), &n_renewal);',
     'the renewal before a grant is a read, which vouches for nothing: a waiter whose lease lapsed is never granted'),
    ('delete-dropped-while-suspended', 'src/session/session_cleanup.cpp',
     "    if (state() == session_state::closed || state() == session_state::expired || refused_) {\n        if (done) done->complete({}); // the server deletes the session's ephemeral nodes",
     "    if (state() != session_state::connected || refused_) {\n        if (done) done->complete({}); // the server deletes the session's ephemeral nodes",
     'a delete asked for while disconnected is dropped as if the session had ended: the node of a session that lives on stays',
     ['--faults']),
    ('cleanup-waits-for-reconnect', 'src/session/session_cleanup.cpp',
     '    cleanups_.push_back(std::move(job));\n    cleanup_gauges();\n    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));',
     '    cleanups_.push_back(std::move(job));\n    cleanup_gauges();',
     'a node delete (a release) is queued but not sent while connected: it waits for a reconnect that never comes'),
    ('marked-release-keeps-node', 'src/session/session_cleanup.cpp',
     '        ops.push_back({transaction::kind::remove, a.path, {}, -1, create_mode::persistent, acl::open()});\n',
     '',
     'the marked release creates and deletes the marker but not the node itself'),
    ('retry-marked-running', 'src/session/session_cleanup.cpp',
     '    it->running = false;\n    n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);',
     '    it->running = true;\n    n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);',
     'a delete to retry on the reconnect stays marked running: run_cleanups skips it and the node stays',
     ['--faults']),
    ('reconnect-not-notified', 'src/session/session_impl.cpp',
     '        case effect::notify_reconnected:\n            notify(session_event::reconnected);',
     '        case effect::notify_reconnected:\n            (void)0;',
     'a reconnect to the same session is told to no listener: acquires waiting for the connection never resume',
     ['--faults']),
    ('watch-id-not-advanced', 'src/session/session_impl.cpp',
     'std::uint64_t session_impl::add_watch(std::function<void(int)> fn) {\n    auto id = next_id_++;',
     'std::uint64_t session_impl::add_watch(std::function<void(int)> fn) {\n    auto id = next_id_;',
     "two watches registered back to back share an id: the second one's callback is lost and its waiter never wakes"),
    ('cleanups-not-resent', 'src/session/session_fsm.hpp',
     '        t.add(effect::run_cleanups);\n',
     '',
     'the pending guaranteed deletes are not sent again on the reconnect: a release made while disconnected keeps its node',
     ['--faults']),
    ('lease-offset-omits-gap', 'src/session/lease.hpp',
     'static constexpr double reference_offset = ping_gap + heartbeat;',
     'static constexpr double reference_offset = heartbeat;',
     "the lease's reference point forgets the ping gap G: in the steady state of heartbeats the lease lapses with no fault"),
    ('heartbeat-period-is-ping-gap', 'src/session/lease.hpp',
     'return static_cast<lease_ns>(heartbeat * static_cast<double>(timeout));',
     'return static_cast<lease_ns>(ping_gap * static_cast<double>(timeout));',
     "the heartbeat period is G (5T/16) instead of T/10: a held lock's lease lapses between two heartbeats"),
    ('lease-grant-skips-confirmation', 'src/recipes/lease_grant.hpp',
     '    if (r.rc != ZOK) co_return r.rc;\n    if (!too_short()) co_return ZOK;\n    // A renewal answered',
     '    if (r.rc != ZOK) co_return r.rc;\n    co_return ZOK;\n    // A renewal answered',
     'any answered renewal vouches for the grant: a revival (past v + T) or a still short lease grants a lock that is lost at once'),
    ('loss-waiters-parked-as-verdict', 'src/recipes/held_lock.hpp',
     '        return which == wait_kind::loss     ? wait_state().loss\n               : which == wait_kind::revoke ? wait_state().revoke\n                                            : wait_state().verdict;',
     '        return which == wait_kind::loss     ? wait_state().verdict\n               : which == wait_kind::revoke ? wait_state().revoke\n                                            : wait_state().loss;',
     "loss and verdict waiters are parked in each other's map: a suspension keeps the loss waiters waiting (the holder is not told)",
     ['--faults']),
    ('cleanup-check-inverted', 'src/session/cleanup_rules.hpp',
     'if (rc == ZNONODE || (rc == ZOK && czxid != owner_czxid)) return verdict::finished;',
     'if (rc == ZNONODE || (rc == ZOK && czxid == owner_czxid)) return verdict::finished;',
     "a fixed-name node (unique_node's <path>/lock) is taken for someone else's exactly when it is ours: never deleted",
     ['--recipe', 'mutex']),
    ('connection-loss-as-gone', 'src/session/cleanup_rules.hpp',
     'return rc == ZCLOSING || rc == ZINVALIDSTATE || rc == ZSESSIONEXPIRED || rc == ZAUTHFAILED;',
     'return rc == ZCLOSING || rc == ZINVALIDSTATE || rc == ZSESSIONEXPIRED || rc == ZAUTHFAILED || rc == ZCONNECTIONLOSS;',
     "a connection loss is taken for the handle's end: a delete lost with the connection (maybe never applied) is not retried",
     ['--faults']),
    ('sweep-drops-parent', 'src/session/cleanup_fsm.hpp',
     'node_ = parent_ + "/" + *found;',
     'node_ = *found;',
     'the sweep by guid deletes the bare child name, not its path: the node a lost create made stays',
     ['--faults']),
    ('handoff-leavers-forgotten', 'src/protocol/handoff_fsm.hpp',
     '        for (auto& [id, why] : leavers) out.push_back({handoff_effect::fail, id, why});\n        if (!session_alive) return out;',
     '        if (!session_alive) return out;',
     'a local waiter that gave up while the node was being acquired is never completed once that acquire ends',
     ['--recipe', 'mutex']),
    ('token-adds-index', 'src/protocol/protocol.hpp',
     '    return static_cast<std::int64_t>((static_cast<std::uint64_t>(czxid) << local_grant_bits) |\n                                     (local_index & (max_local_grants - 1)));',
     '    return czxid + static_cast<std::int64_t>(local_index);',
     "the fencing token adds the hand-off's index to the czxid: a later node's token can repeat or undercut an earlier node's",
     ['--recipe', 'mutex']),
    ('handoff-single-waiter-dropped', 'src/protocol/protocol.hpp',
     '    if (waiters == 0) return after_release::release;',
     '    if (waiters <= 1) return after_release::release;',
     'off by one: a release with one local waiter lets go of the node and queues nobody again; that waiter is stuck',
     ['--recipe', 'mutex']),
    ('children-wait-inverted', 'src/protocol/acquire_fsm.hpp',
     '                           .predecessor == pred_;',
     '                           .predecessor != pred_;',
     'watch_children: waits when the predecessor is already gone (on a child watch nothing may fire), polls while it stands',
     ['--recipe', 'mutex']),
    ('fsm-grant-skips-lease', 'src/protocol/acquire_fsm.hpp',
     '        case listing_step::grant:\n            return lease_top(false);',
     '        case listing_step::grant:\n            st_ = state::done;\n            return act(acquire_action::grant);',
     "a grant decided on a listing skips the lease's check: a waiter whose lease lapsed while it waited is granted a lost lock"),
    ('recovered-node-no-czxid', 'src/protocol/acquire_fsm.hpp',
     '            node_ = std::move(candidate_);\n            czxid_ = in.czxid;',
     '            node_ = std::move(candidate_);',
     "a node found again after a lost create reply keeps czxid 0: its grant's fencing token is 0",
     ['--faults']),
    ('stale-listing-reused', 'src/protocol/acquire_fsm.hpp',
     '    acquire_action examine() {\n        listed_ = false;',
     '    acquire_action examine() {',
     "the flight's listing stays marked fresh: after a wake the machine decides on an empty listing (our node 'missing')"),
    ('unique-adopts-any-node', 'src/protocol/unique_fsm.hpp',
     '            if (read_ok && is_ours(in.data)) { // our create was applied; its reply was lost',
     '            if (read_ok) { // our create was applied; its reply was lost',
     'unique_node: any <path>/lock read after a refused create is taken for ours: two holders',
     ['--recipe', 'mutex']),
    ('unique-lease-unchecked', 'src/protocol/unique_fsm.hpp',
     '            return go(state::checking_lease, unique_action::check_lease);\n        case state::list_reconnecting:',
     '            return go(state::done, unique_action::grant);\n        case state::list_reconnecting:',
     "unique_node: a create that won is granted without the lease's check (a lapsed lease after a long wait)",
     ['--recipe', 'mutex']),
    ('sem-count-excludes-own', 'src/protocol/semaphore_fsm.hpp',
     '            ++c.leases;\n            c.present = c.present || k == mine;',
     '            c.leases += k != mine;\n            c.present = c.present || k == mine;',
     'the count leaves our own lease out: N + 1 leases are granted',
     ['--recipe', 'semaphore']),
    ('kazoo-lock-as-reader', 'src/protocol/protocol.cpp',
     'if (ends_with_marker("__READ__") || ends_with_marker("__rlock__")) {',
     'if (ends_with_marker("__READ__") || ends_with_marker("lock__")) {',
     'a too loose suffix match reads kazoo\'s write/mutex nodes ("__lock__") as read nodes: kazoo holders do not exclude each other'),
    ('reader-waits-on-later-writer', 'src/protocol/protocol.cpp',
     'for (auto j = it; j != all.begin();) {',
     'for (auto j = all.end(); j != all.begin();) {',
     'a reader waits for the highest writer, even one queued after it (kazoo #649): reader and writer wait for each other',
     ['--recipe', 'shared']),
    # The pure machines' mutants and the hand-written worlds' hunts (--bug), once run by
    # scripts/sim_mutants.py and test/sim's own copies of the drivers: here each is a change of the
    # production source, run by the whole library (the hunt each stands for in brackets).
    ('wake-other-grants-alone', 'src/protocol/acquire_steps.hpp',
     'if (alone && (w == wake::predecessor_deleted || w == wake::predecessor_missing)) return wake_step::grant;',
     'if (alone) return wake_step::grant;',
     'an alone waiter granted by any wake-up (a reconnect, a data change)', ['--faults']),
    ('wake-deleted-grants-always', 'src/protocol/acquire_steps.hpp',
     'if (alone && (w == wake::predecessor_deleted || w == wake::predecessor_missing)) return wake_step::grant;',
     'if (w == wake::predecessor_deleted || w == wake::predecessor_missing) return wake_step::grant;',
     'a predecessor\'s deletion grants even behind a deeper queue'),
    ('alone-second-and-third', 'src/protocol/protocol.cpp',
     'd.alone = d.position == 1;',
     'd.alone = d.position <= 2;',
     'the third in line thinks it is alone (the hunt always-alone)'),
    ('watch-the-lowest', 'src/protocol/protocol.cpp',
     'if (it != all.begin()) blocker = it - 1;',
     'if (it != all.begin()) blocker = all.begin();',
     'every waiter watches the lowest node: a herd (the hunt herd)', ['--recipe', 'mutex']),
    ('no-duplicate-cleanup', 'src/protocol/acquire_steps.cpp',
     'if (*it != mine && it->find(guid) != std::string::npos) {',
     'if (false) {',
     'our own earlier node (a lost create applied, then created again) is kept, and waited on', ['--faults']),
    ('no-recovery', 'src/protocol/acquire_fsm.hpp',
     '                st_ = state::recover_connecting;\n                return act(acquire_action::wait_connected);\n            }\n            return in.result == outcome::no_node',
     '                return create_top(in.stop);\n            }\n            return in.result == outcome::no_node',
     'a create whose reply was lost is made again without looking for the first (the hunt no-guid-recovery)',
     ['--faults']),
    ('recovery-ignores-the-find', 'src/protocol/acquire_fsm.hpp',
     'if (!found || c_.guid.empty()) return create_top(in.stop); // never applied: create again',
     'return create_top(in.stop); // never applied: create again',
     'the guid lookup finds the node, and the machine creates again anyway', ['--faults']),
    ('wait-even-if-gone', 'src/protocol/acquire_fsm.hpp',
     'bool wait = in.result == outcome::ok && !in.marked;',
     'bool wait = in.result != outcome::connection;',
     'waits on a predecessor the read found gone (no watch was set)'),
    ('no-sweep-when-giving-up', 'src/protocol/acquire_fsm.hpp',
     '            if (!in.ok) {\n                auto a = fail(acquire_action::stop);\n                a.delete_by_guid = true;',
     '            if (!in.ok) {\n                auto a = fail(acquire_action::stop);\n                a.delete_by_guid = false;',
     'a stop while a lost create is unresolved leaves its node', ['--faults']),
    ('no-barrier', 'src/protocol/acquire_fsm.hpp',
     '                a.barrier = true;\n',
     '                a.barrier = false;\n',
     'the recovery\'s listing without the write before it: a stale read takes a create in the pipeline for never applied (the hunt no-barrier)',
     ['--faults']),
    ('no-barrier-nor-duplicate-cleanup', ('src/protocol/acquire_fsm.hpp', 'src/protocol/acquire_steps.cpp'),
     ('                a.barrier = true;\n', 'if (*it != mine && it->find(guid) != std::string::npos) {'),
     ('                a.barrier = false;\n', 'if (false) {'),
     'both defences against a lost create applied after the recovery looked (the barrier before its '
     'listing, the duplicate\'s delete at the next listing) taken away together: each alone survives',
     ['--faults']),
    ('observe-first-child-unsorted', 'src/recipes/election.cpp',
     'if (!sorted.empty()) first = op.path_ + "/" + std::string(sorted.front().name);',
     'if (!sorted.empty()) first = op.path_ + "/" + l.children.front();',
     "an election's observer takes the first child listed for the leader, not the lowest candidate",
     ['--recipe', 'election']),
    ('observe-cancel-keeps-watch', 'src/recipes/election.cpp',
     's.drop_watch(wid, w.rc == ZOK);',
     's.drop_watch(wid, false);',
     "an observe cancelled while it waits for the first candidate leaves its child watch at the server",
     ['--recipe', 'election']),
    ('revoke-waiters-not-told', 'src/recipes/guard.cpp',
     '    if (waiters_) complete_all(waiters_->revoke, errc::revocation_requested);',
     '    (void)0;',
     "a revocation request on a revocable lock's node is noted, and its holder's waits are never told",
     ['--recipe', 'mutex']),
    ('stop-ignored-before-grant', 'src/protocol/acquire_fsm.hpp',
     '            if (in.stop) return fail(acquire_action::stop);\n            st_ = state::done;',
     '            st_ = state::done;',
     'a stop (a timeout, a cancel) that races the grant is not honoured'),
    ('order-by-name', 'src/protocol/protocol.cpp',
     'auto all = sorted_contenders(children, dialect, f, cv);',
     'auto all = sorted_contenders(children, dialect, f, cv);\n    std::sort(all.begin(), all.end(), [](const contender& a, const contender& b) { return a.name < b.name; });',
     'contenders ordered by their full name (the guid first) instead of their sequence number'),
    ('writer-passes-readers', 'src/protocol/protocol.cpp',
     '    if (it->writer) {\n        if (it != all.begin()) blocker = it - 1;\n    } else {',
     '    {',
     'a writer waits only for writers below it, like a reader', ['--recipe', 'shared']),
    ('reader-passes-writers', 'src/protocol/protocol.cpp',
     'if (j->writer && j->name != own_writer) {',
     'if (false) {',
     'a reader never waits', ['--recipe', 'shared']),
    ('reader-alone-behind-any-writer', 'src/protocol/protocol.cpp',
     '            d.alone = std::none_of(all.begin(), blocker,',
     '            d.alone = true || std::none_of(all.begin(), blocker,',
     'a reader thinks its writer is all in its way', ['--recipe', 'shared']),
    ('sem-one-too-many', 'src/protocol/semaphore_fsm.hpp',
     'return leases <= static_cast<std::size_t>(max_leases);',
     'return leases <= static_cast<std::size_t>(max_leases) + 1;',
     'the count lets N + 1 leases be held (the hunt count-others)', ['--recipe', 'semaphore']),
    ('sem-no-sweep', 'src/protocol/semaphore_fsm.hpp',
     '        auto a = failed(rc);\n        a.delete_by_guid = true;',
     '        auto a = failed(rc);\n        a.delete_by_guid = false;',
     'a round that lost its create\'s reply leaves the lease it may have made (the hunt no-sweep)',
     ['--faults', '--recipe', 'semaphore']),
    ('sem-no-restart', 'src/protocol/semaphore_fsm.hpp',
     '        internal_lost_ = in.internal_lost;',
     '        internal_lost_ = false;',
     'a round whose internal lock was lost waits on: two waiters\' leases block each other (the hunt no-restart)',
     ['--faults', '--recipe', 'semaphore']),
    ('sem-no-recovery', 'src/protocol/semaphore_fsm.hpp',
     '            st_ = state::recover_listing;\n            return act(semaphore_action::list_for_guid);',
     '            return recreate();',
     'a lease whose create reply was lost is made again without looking for the first (the hunt no-recovery)',
     ['--faults', '--recipe', 'semaphore']),
    ('sem-no-barrier', 'src/recipes/semaphore.cpp',
     '            s.renew_lease(zk_handler([](zk_result) {}), leases);\n            in.listing',
     '            in.listing',
     'the semaphore\'s recovery lists the leases without the write before it: a create still in the pipeline is taken for never applied (the hunt no-barrier)',
     ['--faults', '--recipe', 'semaphore']),
    ('sem-count-before-the-path-check', 'src/protocol/semaphore_fsm.hpp',
     '        if (!lost(made_.listed)) return failed(made_.list_rc);',
     '        if (!lost(made_.listed)) return failed(made_.list_rc);\n        return line_top();',
     'a path listing lost with the connection is not made again', ['--faults', '--recipe', 'semaphore']),
    ('cleanup-lost-delete-not-retried', 'src/session/cleanup_fsm.hpp',
     '            return retry(r.rc, connected); // the node may still be there',
     '            return end();',
     'a release or background delete lost with the connection is not sent again (its node stays)', ['--faults']),
    ('cleanup-lost-marked-release-retried-plain', 'src/session/cleanup_fsm.hpp',
     '            default:\n                return retry(r.rc, connected);\n            }\n        case cleanup_action::remove:',
     '            default:\n                marked_ = false;\n                return retry(r.rc, connected);\n            }\n        case cleanup_action::remove:',
     'a marked release whose reply was lost is sent again without its marker', ['--faults']),
    ('cleanup-sweep-finds-nothing', 'src/session/cleanup_fsm.hpp',
     'if (auto found = find_by_guid(r.children, guid_)) {',
     'if (auto found = std::optional<std::string>()) {',
     'the sweep by guid never deletes the node it finds', ['--faults']),
    ('handoff-grant-on-arrival', 'src/protocol/handoff_fsm.hpp',
     '        if (phase_ == phase::idle) start(out);\n        return out;',
     '        if (phase_ == phase::idle) start(out);\n        if (phase_ == phase::held) grant_next(out);\n        return out;',
     'a local acquirer that comes while the node is held is granted at once', ['--recipe', 'mutex']),
    ('handoff-no-requeue', 'src/protocol/handoff_fsm.hpp',
     '            release(out);\n            start(out);\n            break;',
     '            release(out);\n            break;',
     'after the bound, the node goes and the queue does not ask for a new one', ['--recipe', 'mutex']),
    ('handoff-session-end-keeps-waiters', 'src/protocol/handoff_fsm.hpp',
     '        fail_if([](bool) { return true; }, handoff_reason::session_end, out);',
     '',
     'the session\'s end does not tell the local waiters', ['--faults', '--recipe', 'mutex']),
    ('unique-recovered-skips-path-check', 'src/protocol/unique_fsm.hpp',
     '                // before our node would not see it (the whole-library simulation\'s seed 3,663)\n'
     '                return go(state::listing, unique_action::list);',
     '                // before our node would not see it (the whole-library simulation\'s seed 3,663)\n'
     '                return go(state::checking_lease, unique_action::check_lease);',
     'unique_node: a node read back as ours after a lost create is granted without the path\'s '
     'listing: a semaphore\'s leases beside it are not seen (the defect session 49\'s mixed paths found)',
     ['--faults', '--recipe', 'semaphore']),
    ('lease-gap-quarter', 'src/session/lease.hpp',
     'double gap = ping_gap;       ///< G, as a fraction of T',
     'double gap = 0.25;       ///< G, as a fraction of T',
     'rule (b)\'s gap G is T/4, not the premise\'s 5T/16 (the hunt quarter-gap)', ['--faults']),
    ('lease-gap-from-send', 'src/session/lease.hpp',
     'bool from_reply = true;      ///< G counted from j\'s reply (false: from j\'s send)',
     'bool from_reply = false;      ///< G counted from j\'s reply (false: from j\'s send)',
     'rule (b)\'s gap G counted from the earlier request\'s send, not its reply', ['--faults']),
    ('lease-any-reply-vouches', 'src/session/lease.hpp',
     '        bool gap = false;\n        if (commit) {',
     '        bool gap = false;\n        if (true) {',
     'any reply vouches, a read\'s too (a follower cut off from its leader still answers reads)', ['--faults']),
    ('lease-no-revival-confirm', 'src/session/lease.hpp',
     'if (rules_.confirm_revival && cur != 0 &&',
     'if (false && cur != 0 &&',
     'a commit answered past the earliest expiry revives the lease at once (premise 8; the hunt no-revival-confirm)',
     ['--faults']),
    ('regain-any-node', 'src/session/regain_fsm.hpp',
     'if (rules_.check_identity && (czxid != czxid_ || owner != session_))',
     'if (false && (czxid != czxid_ || owner != session_))',
     'a suspended lock is regained on any node of its name, not only its own (the hunt regain-any-node)',
     ['--faults']),
    ('regain-stale-commit', 'src/session/regain_fsm.hpp',
     '(rules_.after_suspension && !sent_after_suspension)',
     'false',
     'a suspended lock is regained on a heartbeat sent before the suspension (the hunt regain-stale-commit)',
     ['--faults']),
]


# The violation classes each mutant must be found by (zklock_sim_whole prints a failure's class:
# overlap, token, lease, write, stuck, left, spurious, handler, herd, observe, revoke, regain; a crash or a hang
# counts for any).
# A hunt that finds only other classes has not found its mutant: it goes on past them, and fails.
EXPECT = {
    'timeout-keeps-node': {'left', 'stuck'},
    'release-skips-delete': {'left', 'stuck'},
    'no-heartbeat': {'spurious', 'lease'},
    'token-ignores-local-grant': {'token'},
    'create-and-list-lists-the-node': {'spurious', 'stuck'},
    'fsm-deletes-dropped': {'left', 'stuck'},
    'lease-timer-silent': {'lease'},
    'unwatch-never': {'left'},
    'timer-cancel-keeps-deadline': {'lease'},
    'unique-maybe-owned-kept': {'left', 'stuck'},
    'unique-abandon-retries-by-name': {'spurious', 'overlap'},
    'sem-counted-watch-kept': {'left'},
    'unwatch-one-not-resent': {'left'},
    'unique-parent-bound-per-acquire': {'spurious'},
    'data-change-as-deletion': {'overlap'},
    'unique-abandon-deletes-others': {'spurious', 'overlap'},
    'abandon-no-background-delete': {'left', 'stuck'},
    'rw-writer-named-reader': {'overlap'},
    'watch-own-node': {'stuck'},
    'release-while-lost-keeps-node': {'left', 'stuck'},
    'reentrant-release-off-by-one': {'left', 'stuck'},
    'suspend-skips-loss-waiters': {'left', 'lease'},
    'token-from-sequence': {'token'},
    'commit-while-suspended': {'write'},
    'commit-check-on-lock-path': {'write'},
    'proclaim-while-suspended': {'write'},
    'downgrade-waits': {'stuck'},
    'sem-timeout-keeps-lease': {'left', 'stuck'},
    'sem-grant-deletes-lease': {'spurious', 'overlap'},
    'sem-grant-not-started': {'spurious', 'lease'},
    'sem-deaf-to-reconnect': {'stuck'},
    'handoff-lent-not-recorded': {'left', 'stuck'},
    'handoff-node-loss-unwatched': {'left', 'stuck'},
    'lease-timer-at-expiry': {'lease'},
    'renewal-is-a-read': {'spurious', 'stuck'},
    'delete-dropped-while-suspended': {'left', 'stuck'},
    'cleanup-waits-for-reconnect': {'left', 'stuck'},
    'marked-release-keeps-node': {'left', 'stuck'},
    'retry-marked-running': {'left', 'stuck'},
    'reconnect-not-notified': {'stuck'},
    'watch-id-not-advanced': {'left', 'stuck'},
    'cleanups-not-resent': {'left', 'stuck'},
    'lease-offset-omits-gap': {'spurious', 'stuck'},
    'heartbeat-period-is-ping-gap': {'spurious'},
    'lease-grant-skips-confirmation': {'spurious', 'lease'},
    'loss-waiters-parked-as-verdict': {'left', 'lease'},
    'cleanup-check-inverted': {'left', 'stuck'},
    'connection-loss-as-gone': {'left', 'stuck'},
    'sweep-drops-parent': {'left', 'stuck'},
    'handoff-leavers-forgotten': {'handler', 'stuck'},
    'token-adds-index': {'token'},
    'handoff-single-waiter-dropped': {'stuck'},
    'children-wait-inverted': {'stuck'},
    'fsm-grant-skips-lease': {'spurious', 'lease'},
    'recovered-node-no-czxid': {'token'},
    'stale-listing-reused': {'spurious'},
    'unique-adopts-any-node': {'overlap'},
    'unique-lease-unchecked': {'spurious', 'lease'},
    'sem-count-excludes-own': {'overlap'},
    'kazoo-lock-as-reader': {'overlap'},
    'reader-waits-on-later-writer': {'stuck'},
    'wake-other-grants-alone': {'token', 'overlap'},
    'wake-deleted-grants-always': {'token', 'overlap'},
    'alone-second-and-third': {'token', 'overlap'},
    'watch-the-lowest': {'herd'},
    'no-duplicate-cleanup': {'left', 'stuck'},
    'no-recovery': {'left', 'stuck'},
    'recovery-ignores-the-find': {'write', 'left', 'stuck'},
    'wait-even-if-gone': {'stuck'},
    'no-sweep-when-giving-up': {'left'},
    'no-barrier': {'write', 'left', 'stuck'},
    'no-barrier-nor-duplicate-cleanup': {'stuck', 'left', 'write'},
    'observe-first-child-unsorted': {'observe'},
    'observe-cancel-keeps-watch': {'left'},
    'revoke-waiters-not-told': {'revoke'},
    'stop-ignored-before-grant': {'handler', 'left', 'stuck'},
    'order-by-name': {'token', 'overlap'},
    'writer-passes-readers': {'overlap'},
    'reader-passes-writers': {'overlap'},
    'reader-alone-behind-any-writer': {'overlap'},
    'sem-one-too-many': {'overlap'},
    'sem-no-sweep': {'left'},
    'sem-no-restart': {'stuck'},
    'sem-no-recovery': {'left', 'stuck'},
    'sem-no-barrier': {'left', 'stuck'},
    'sem-count-before-the-path-check': {'overlap', 'spurious', 'stuck'},
    'cleanup-lost-delete-not-retried': {'left', 'stuck'},
    'cleanup-lost-marked-release-retried-plain': {'left', 'stuck'},
    'cleanup-sweep-finds-nothing': {'left'},
    'handoff-grant-on-arrival': {'token', 'overlap'},
    'handoff-no-requeue': {'stuck'},
    'handoff-session-end-keeps-waiters': {'handler', 'stuck'},
    'unique-recovered-skips-path-check': {'overlap'},
    'lease-gap-quarter': {'lease'},
    'lease-gap-from-send': {'lease'},
    'lease-any-reply-vouches': {'lease', 'overlap'},
    'lease-no-revival-confirm': {'lease', 'overlap'},
    'regain-any-node': {'regain', 'write', 'lease', 'overlap'},
    'regain-stale-commit': {'write', 'lease', 'overlap'},
}


# The survivors explained in docs/internals.md ("The whole library under simulation"): any other
# survivor fails the run (CI's rotation included).
EXPECTED_SURVIVORS = {"fsm-deletes-dropped", "timer-cancel-keeps-deadline", "sem-deaf-to-reconnect",
                      "unique-maybe-owned-kept", "unwatch-one-not-resent", "unique-parent-bound-per-acquire",
                      "no-barrier", "sem-no-barrier", "no-duplicate-cleanup", "no-barrier-nor-duplicate-cleanup",
                      "stop-ignored-before-grant",
                      "cleanup-lost-marked-release-retried-plain", "lease-gap-quarter",
                      "lease-no-revival-confirm", "regain-any-node", "regain-stale-commit"}


def sync_tree():
    """The scratch copy: the tree's tracked files as they are in the work tree."""
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard"], capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        src, dst = os.path.join(ROOT, f), os.path.join(SCRATCH, "tree", f)
        if not os.path.isfile(src):
            continue
        if os.path.exists(dst) and open(src, "rb").read() == open(dst, "rb").read():
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        # (a plain copy: the copy's time is now, so the build sees it newer than an object built
        # from a mutant that an interrupted run left in place)
        shutil.copy(src, dst)


def build(mutant=False):
    bdir = os.path.join(SCRATCH, "build")
    if not os.path.exists(os.path.join(bdir, "build.ninja")):
        # (-Werror=return-type: a mutant that takes a coroutine's last co_await away makes it a
        # plain function that falls off its end; refused at the build, not run as a crash)
        subprocess.run(["cmake", "-S", os.path.join(SCRATCH, "tree"), "-B", bdir, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS=-Werror=return-type"],
                       check=True, capture_output=True)
    r = subprocess.run(["cmake", "--build", bdir, "--target", "zklock_sim_whole"], capture_output=True, text=True)
    if r.returncode != 0:
        if mutant:
            return None
        sys.exit("sim_whole_mutants: build failed:\n" + r.stdout[-3000:])
    return os.path.join(bdir, "test", "zklock_sim_whole")


def runs_of(extra):
    """The simulator runs a mutant gets, in order, until one fails: without faults, then with
    (each with the mutant's own arguments, a pinned recipe for instance)."""
    base = [a for a in extra if a != "--faults"]
    return [base, base + ["--faults"]] if "--faults" not in extra else [base + ["--faults"]]


def edits_of(m):
    """A mutant's edits, (file, old text, new text) each: one, or (a double mutant, two defences of
    one hole taken away together) the files, old texts and new texts given as tuples."""
    if isinstance(m[1], tuple):
        return list(zip(m[1], m[2], m[3]))
    return [(m[1], m[2], m[3])]


def hunt(exe, run, n, expect, others):
    """Runs `n` seeds of `run` (from its --first, else 1) until one fails in a class of `expect`
    (or the simulator crashes or hangs): returns (run, that failure), or None. A seed failing in
    another class is noted in `others` and the run goes on from the next seed (20 such at most):
    a hunt finds its own violation or none."""
    first = 1
    rest = list(run)
    if "--first" in rest:
        i = rest.index("--first")
        first = int(rest[i + 1])
        del rest[i:i + 2]
    end = first + n
    while first < end and len(others) < 20:
        try:
            r = subprocess.run([exe, "--seeds", str(end - first), "--first", str(first)] + rest,
                               capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return (run, f"[crash] the simulator ran past 600 s (a hang), from seed {first}")
        if r.returncode == 0:
            return None
        failed = [l for l in r.stdout.strip().splitlines() if l.startswith("seed ")]
        m = re.match(r"seed (\d+) FAILED \[(\w+)\]", failed[0]) if failed else None
        if not m:
            return (run, f"[crash] the simulator ended with {r.returncode}: "
                         f"{(r.stderr.strip().splitlines() or ['no output'])[-1][:160]}")
        if m.group(2) in expect:
            return (run, failed[0][:240])
        others.append(failed[0])
        first = int(m.group(1)) + 1
    return None


def chosen(args):
    """The mutants to run: all, one (--only), or for CI (--rotate K) the mutants of the files the
    last commit changed plus a window of K that moves with the commit count, so that every mutant
    runs within len(MUTANTS) / K landings."""
    if args.only:
        names = args.only.split(",")
        return [m for m in MUTANTS if m[0] in names]
    if not args.rotate:
        return list(MUTANTS)
    changed = subprocess.run(["git", "-C", ROOT, "diff", "--name-only", "HEAD~1", "HEAD"],
                             capture_output=True, text=True).stdout.split()
    count = int(subprocess.run(["git", "-C", ROOT, "rev-list", "--count", "HEAD"],
                               capture_output=True, text=True).stdout.strip() or 0)
    start = (count * args.rotate) % len(MUTANTS)
    window = [MUTANTS[(start + i) % len(MUTANTS)] for i in range(args.rotate)]
    picked = [m for m in MUTANTS if any(e[0] in changed for e in edits_of(m))]
    for m in window:
        if m not in picked:
            picked.append(m)
    return picked


def main():
    sys.stdout.reconfigure(line_buffering=True)
    # A run stopped by a signal still puts the mutated file back (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("sim_whole_mutants: stopped"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2000, help="seeds per run without faults")
    ap.add_argument("--fault-seeds", type=int, default=20000, help="seeds per run with --faults")
    ap.add_argument("--only", help="these mutants only (names, comma-separated)")
    ap.add_argument("--rotate", type=int, default=0,
                    help="CI: the last commit's files' mutants and a rotating window of this many")
    args = ap.parse_args()
    # Every mutant's text, not only the chosen ones': a change of the source that leaves a mutant
    # with nothing to change fails here, at the landing that made it, not rotations later.
    for m in MUTANTS:
        if m[0] not in EXPECT:
            sys.exit(f"sim_whole_mutants: {m[0]}: no violation class in EXPECT")
        for path, old, _ in edits_of(m):
            n = open(os.path.join(ROOT, path)).read().count(old)
            if n != 1:
                sys.exit(f"sim_whole_mutants: {m[0]}: the text to change occurs {n} times in {path}")
    sync_tree()
    exe = build()
    for run in ([], ["--faults"]):
        n = args.fault_seeds if run else args.seeds
        r = subprocess.run([exe, "--seeds", str(n)] + run, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("sim_whole_mutants: the unmutated library fails:\n" + r.stdout[-2000:])
    survived, killed, invalid = [], [], []
    for mutant in chosen(args):
        name, what = mutant[0], mutant[4]
        path = " + ".join(sorted({e[0] for e in edits_of(mutant)}))
        extra = mutant[5] if len(mutant) > 5 else []
        saved = {}
        try:
            for p, old, new in edits_of(mutant):
                target = os.path.join(SCRATCH, "tree", p)
                text = open(target).read()
                saved.setdefault(target, text)
                if text.count(old) != 1:
                    sys.exit(f"sim_whole_mutants: {name}: the text to change occurs {text.count(old)} times in {p}")
                open(target, "w").write(text.replace(old, new))
            exe = build(mutant=True)
            if exe is None:
                invalid.append(name)
                print(f"INVALID   {name} ({path}): the mutant does not build")
                continue
            found, others = None, []
            for run in runs_of(extra):
                n = args.fault_seeds if "--faults" in run else args.seeds
                found = hunt(exe, run, n, EXPECT[name], others)
                if found:
                    break
            if found:
                killed.append(name)
                print(f"killed    {name} ({path}): {what}\n          [{' '.join(found[0]) or 'no faults'}] {found[1]}")
            else:
                survived.append(name)
                print(f"SURVIVED  {name} ({path}): {what}")
            for o in others[:3]:
                print(f"          ({'first' if found else 'only'} outside its classes {sorted(EXPECT[name])}: {o[:200]})")
        finally:
            for target, text in saved.items():
                open(target, "w").write(text)
    total = len(killed) + len(survived)
    print(f"sim_whole_mutants: {len(killed)} killed, {len(survived)} survived"
          + (f" ({100 * len(killed) // total} %)" if total else ""))
    if invalid:
        print("sim_whole_mutants: mutants that do not build: " + ", ".join(invalid))
        sys.exit(1)
    unexpected = [n for n in survived if n not in EXPECTED_SURVIVORS]
    if unexpected:
        print("sim_whole_mutants: survived, not among the explained survivors: " + ", ".join(unexpected))
        sys.exit(1)


if __name__ == "__main__":
    main()
