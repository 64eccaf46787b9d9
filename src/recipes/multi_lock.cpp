#include <zklock/multi_lock.hpp>

#include "common/pending.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>

namespace zklock::detail {
namespace {

/// Takes the locks one by one on a strand of its own; any failure rolls back in reverse.
class multi_op : public std::enable_shared_from_this<multi_op> {
public:
    multi_op(std::vector<mutex> locks, std::optional<std::chrono::steady_clock::time_point> deadline,
             pending<void(error_code, std::vector<guard>)> h, asio::strand<asio::any_io_executor> strand)
        : locks_(std::move(locks)), deadline_(deadline), handler_(std::move(h)), strand_(std::move(strand)) {}

    void start() {
        handler_.on_cancel([w = weak_from_this(), strand = strand_](asio::cancellation_type t) {
            asio::post(strand, [w, t] {
                if (auto self = w.lock()) {
                    self->cancelled_ = true;
                    self->inner_.emit(t); // the acquire in flight, if any
                }
            });
        });
        asio::post(strand_, [self = shared_from_this()] { self->next(); });
    }

private:
    void next() {
        if (held_.size() == locks_.size()) return handler_.complete({}, std::move(held_));
        if (cancelled_) return rollback(asio::error::operation_aborted);
        auto done = asio::bind_cancellation_slot(
            inner_.slot(), asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, guard g) {
                self->inner_.slot().clear();
                if (ec) return self->rollback(ec);
                self->held_.push_back(std::move(g));
                self->next();
            }));
        auto& m = locks_[held_.size()];
        if (deadline_)
            m.async_acquire_until(*deadline_, std::move(done));
        else
            m.async_acquire(std::move(done));
    }

    void rollback(error_code ec) {
        // In reverse order; each delete is guaranteed in the background, so a partition does not
        // hold up the caller past its deadline.
        while (!held_.empty()) {
            held_.back().release_in_background();
            held_.pop_back();
        }
        handler_.complete(ec, {});
    }

    std::vector<mutex> locks_;
    std::optional<std::chrono::steady_clock::time_point> deadline_;
    pending<void(error_code, std::vector<guard>)> handler_;
    asio::strand<asio::any_io_executor> strand_;
    asio::cancellation_signal inner_;
    std::vector<guard> held_;
    bool cancelled_ = false;
};

} // namespace

void start_acquire_all(std::vector<mutex> locks,
                       std::optional<std::chrono::steady_clock::time_point> deadline,
                       asio::any_completion_handler<void(error_code, std::vector<guard>)> handler) {
    if (locks.empty()) {
        pending<void(error_code, std::vector<guard>)> p(std::move(handler),
                                                        asio::any_io_executor(asio::system_executor()));
        return p.complete(errc::multi_lock_empty, {});
    }
    auto ex = locks.front().session_impl()->executor();
    pending<void(error_code, std::vector<guard>)> p(std::move(handler), ex);
    // The canonical order: by path, so that two callers with overlapping sets take them alike.
    std::stable_sort(locks.begin(), locks.end(),
                     [](const mutex& a, const mutex& b) { return a.path() < b.path(); });
    for (std::size_t i = 1; i < locks.size(); ++i)
        if (locks[i].path() == locks[i - 1].path()) return p.complete(errc::multi_lock_duplicate_path, {});
    std::make_shared<multi_op>(std::move(locks), deadline, std::move(p), asio::make_strand(ex))->start();
}

} // namespace zklock::detail
