#include <zklock/session.hpp>
#include <zklock/detail/deadline.hpp>
#include <zklock/metrics.hpp>

#include "session/session_impl.hpp"

namespace zklock {

const char* to_string(loss_policy::kind k) noexcept {
    switch (k) {
    case loss_policy::kind::lease:
        return "lease";
    case loss_policy::kind::on_disconnect:
        return "on_disconnect";
    case loss_policy::kind::on_expiry:
        return "on_expiry";
    }
    return "unknown";
}

const char* to_string(session_state s) noexcept {
    switch (s) {
    case session_state::disconnected:
        return "disconnected";
    case session_state::connecting:
        return "connecting";
    case session_state::connected:
        return "connected";
    case session_state::suspended:
        return "suspended";
    case session_state::expired:
        return "expired";
    case session_state::closed:
        return "closed";
    }
    return "unknown";
}

namespace detail {
std::chrono::steady_clock::time_point steady_now_of(const session_impl* s) noexcept {
    return (s ? s->plat() : real_platform())->steady_now();
}
} // namespace detail

session::session(executor_type ex, session_options opts)
    : impl_(std::make_shared<detail::session_impl>(std::move(ex), std::move(opts))) {}

session::session(executor_type ex, session_options opts, std::shared_ptr<detail::platform> plat)
    : impl_(std::make_shared<detail::session_impl>(std::move(ex), std::move(opts), std::move(plat))) {}

session::~session() { impl_->shutdown(); }

session::executor_type session::get_executor() const noexcept { return impl_->executor(); }
const session_options& session::options() const noexcept { return impl_->options(); }
session_state session::state() const noexcept { return impl_->state(); }
std::int64_t session::session_id() const noexcept { return impl_->session_id(); }
std::chrono::milliseconds session::negotiated_timeout() const noexcept { return impl_->negotiated_timeout(); }
std::string session::last_connect_attempts() const { return impl_->last_connect_attempts(); }
session_statistics session::statistics() const noexcept { return impl_->statistics(); }
metrics_snapshot session::metrics() const { return impl_->metrics_snapshot_now(); }

void session::start_connect(std::shared_ptr<detail::session_impl> impl,
                            asio::any_completion_handler<void(error_code)> h) {
    auto ex = impl->executor();
    impl->connect(detail::pending<void(error_code)>(std::move(h), ex));
}

void session::start_close(std::shared_ptr<detail::session_impl> impl,
                          asio::any_completion_handler<void(error_code)> h) {
    auto ex = impl->executor();
    impl->close(detail::pending<void(error_code)>(std::move(h), ex));
}

void session::start_wait_state(std::shared_ptr<detail::session_impl> impl, session_state s,
                               asio::any_completion_handler<void(error_code, session_state)> h) {
    auto ex = impl->executor();
    impl->wait_state(s, detail::pending<void(error_code, session_state)>(std::move(h), ex));
}

} // namespace zklock
