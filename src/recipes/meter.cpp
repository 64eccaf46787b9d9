// An acquire's metrics (session::metrics): counted from its start to its completion, by outcome;
// a grant's hold is counted by its held_lock (held_lock.hpp, metrics and granted_at).
#include "recipes/held_lock.hpp"

namespace zklock::detail {

void meter_acquire(session_impl& s, const std::string& path, pending<void(error_code, guard)>& p) {
    if (!s.metrics_enabled()) return;
    auto m = s.metrics().path(path);
    m->started.fetch_add(1, std::memory_order_relaxed);
    m->waiting.fetch_add(1, std::memory_order_relaxed);
    p.observe([m, plat = s.plat(), t0 = s.plat()->steady_now()](const error_code& ec, const guard& g) {
        m->waiting.fetch_sub(1, std::memory_order_relaxed);
        if (!ec && g.owns_lock()) {
            auto now = plat->steady_now();
            m->granted.fetch_add(1, std::memory_order_relaxed);
            m->wait.observe(now - t0);
            if (g.local_grant() > 0) m->handoff.fetch_add(1, std::memory_order_relaxed);
            // (Completions run on the session's strand: the held_lock is the strand's too.)
            if (auto& h = g.state(); h && !h->metrics) {
                h->metrics = m;
                h->granted_at = now;
            }
        } else if (ec == errc::acquire_timeout) {
            m->timed_out.fetch_add(1, std::memory_order_relaxed);
        } else if (ec == errc::lock_busy) {
            m->busy.fetch_add(1, std::memory_order_relaxed);
        } else if (ec == asio::error::operation_aborted) {
            m->cancelled.fetch_add(1, std::memory_order_relaxed);
        } else {
            m->failed.fetch_add(1, std::memory_order_relaxed);
        }
    });
}

} // namespace zklock::detail
