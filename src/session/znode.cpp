#include <zklock/path.hpp>
#include <zklock/znode.hpp>

#include "protocol/protocol.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/post.hpp>

namespace zklock::detail {
namespace {

error_code rc_error(int rc) { return rc == ZOK ? error_code{} : error_code(rc, zookeeper_category()); }

/// Checks the path, the size of a write (`data_bytes`: its data's; 0 for other requests) and the
/// session, then runs `request(impl, pending)` on the strand.
template <class Signature, class Request, class Fail>
void start(const std::shared_ptr<session_impl>& s, const std::string& path,
           asio::any_completion_handler<Signature> h, Fail fail, Request request,
           std::size_t data_bytes = 0) {
    pending<Signature> p(std::move(h), s->executor());
    auto ec = validate_lock_path(path);
    if (!ec && data_bytes > 0 && path.size() + data_bytes + 64 > max_write_bytes) ec = errc::write_too_large;
    if (!ec && s->state() == session_state::disconnected) ec = errc::not_connected;
    if (!ec && s->state() == session_state::closed) ec = asio::error::operation_aborted;
    if (ec) return fail(p, ec);
    asio::post(s->strand(),
               [s, p = std::move(p), request = std::move(request)]() mutable { request(*s, std::move(p)); });
}

} // namespace

void start_get_data(const std::shared_ptr<session_impl>& s, std::string path,
                    asio::any_completion_handler<void(error_code, node_data)> h) {
    using P = pending<void(error_code, node_data)>;
    start<void(error_code, node_data)>(
        s, path, std::move(h), [](P& p, error_code ec) { p.complete(ec, {}); },
        [path](session_impl& impl, P p) {
            impl.get_data(path, 0, zk_handler([p = std::move(p)](zk_result r) mutable {
                              node_data d;
                              if (r.rc == ZOK) {
                                  d.data = std::move(r.data);
                                  d.version = r.stat.version;
                                  d.czxid = r.stat.czxid;
                                  d.mzxid = r.stat.mzxid;
                                  d.ephemeral_owner = r.stat.ephemeralOwner;
                              }
                              p.complete(rc_error(r.rc), std::move(d));
                          }));
        });
}

void start_set_data(const std::shared_ptr<session_impl>& s, std::string path, std::string data, int version,
                    asio::any_completion_handler<void(error_code)> h) {
    using P = pending<void(error_code)>;
    const std::size_t bytes = data.size();
    start<void(error_code)>(
        s, path, std::move(h), [](P& p, error_code ec) { p.complete(ec); },
        [path, data = std::move(data), version](session_impl& impl, P p) {
            impl.set_data(path, data, version, zk_handler([p = std::move(p)](zk_result r) mutable {
                              p.complete(rc_error(r.rc));
                          }));
        },
        bytes);
}

void start_create(const std::shared_ptr<session_impl>& s, std::string path, std::string data,
                  asio::any_completion_handler<void(error_code)> h) {
    using P = pending<void(error_code)>;
    const std::size_t bytes = data.size();
    start<void(error_code)>(
        s, path, std::move(h), [](P& p, error_code ec) { p.complete(ec); },
        [path, data = std::move(data)](session_impl& impl, P p) {
            // Pipelined: every ancestor as a container, then the node; NODEEXISTS is fine.
            auto chain = ancestors(path);
            auto self = impl.shared_from_this();
            for (const auto& a : chain)
                impl.create(a, std::string(), ZOO_CONTAINER, zk_handler([self](zk_result) {}));
            impl.create(path, data, ZOO_PERSISTENT, zk_handler([p = std::move(p)](zk_result r) mutable {
                            p.complete(r.rc == ZNODEEXISTS ? error_code{} : rc_error(r.rc));
                        }));
        },
        bytes);
}

void start_delete(const std::shared_ptr<session_impl>& s, std::string path, int version,
                  asio::any_completion_handler<void(error_code)> h) {
    using P = pending<void(error_code)>;
    start<void(error_code)>(
        s, path, std::move(h), [](P& p, error_code ec) { p.complete(ec); },
        [path, version](session_impl& impl, P p) {
            impl.remove(path, version,
                        zk_handler([p = std::move(p)](zk_result r) mutable { p.complete(rc_error(r.rc)); }));
        });
}

void start_children(const std::shared_ptr<session_impl>& s, std::string path,
                    asio::any_completion_handler<void(error_code, std::vector<std::string>)> h) {
    using P = pending<void(error_code, std::vector<std::string>)>;
    start<void(error_code, std::vector<std::string>)>(
        s, path, std::move(h), [](P& p, error_code ec) { p.complete(ec, {}); },
        [path](session_impl& impl, P p) {
            impl.get_children(path, zk_handler([p = std::move(p)](zk_result r) mutable {
                                  p.complete(rc_error(r.rc), std::move(r.children));
                              }));
        });
}

} // namespace zklock::detail
