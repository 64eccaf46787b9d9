// The C++ snippets of README.md and docs/ that no other example holds, here so that the build
// compiles them. Not run: they need servers with credentials, TLS, a bank. The suite checks that
// every C++ block of the docs is taken from examples/ or include/zklock/
// (test/docs/check_snippets.py).
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <string>

namespace asio = boost::asio;

namespace snippets {

// README.md, its first lines.
asio::awaitable<void> pitch(zklock::mutex& mutex) {
    auto guard = co_await mutex.async_acquire(asio::use_awaitable);  // suspends the coroutine, never a thread
    co_await guard.async_release(asio::use_awaitable);
}

// docs/guarantees.md, "Guarded writes".
std::string debit(const std::string& balance) { return std::to_string(std::stoll(balance) - 10); }
std::string credit(const std::string& balance) { return std::to_string(std::stoll(balance) + 10); }

asio::awaitable<void> guarded_transfer(zklock::session& zk, zklock::mutex& lock) {
    auto g = co_await lock.async_acquire(asio::use_awaitable);
    auto alice = co_await zklock::async_get_data(zk, "/bank/alice", asio::use_awaitable);
    auto bob = co_await zklock::async_get_data(zk, "/bank/bob", asio::use_awaitable);
    auto [ec, r] = co_await g.async_commit(zklock::transaction{}
                                               .set_data("/bank/alice", debit(alice.data), alice.version)
                                               .set_data("/bank/bob", credit(bob.data), bob.version),
                                           asio::as_tuple(asio::use_awaitable));
    // ec == zklock::errc::lock_lost: the lock was gone, nothing was written
    // ec == zklock::zk_errc::bad_version (or no_node, ...): r.failed is the failing operation's index
    (void)r;
    if (!ec) co_await g.async_release(asio::use_awaitable);
}

// docs/operations.md, "Protecting lock nodes: credentials and ACLs".
void credentials_and_acl(const asio::any_io_executor& ex, const std::string& password) {
    zklock::session zk{ex, {.connect = "zk1:2181,zk2:2181", .auth = {zklock::digest("orders-svc", password)}}};
    zklock::mutex m{zk, "/locks/orders", {.node_acl = zklock::acl::creator_all_world_read()}};
}

// docs/operations.md, "TLS: encrypted connections and x509 identities".
void tls(const asio::any_io_executor& ex) {
    zklock::session zk{ex, {.connect = "zk1.example.com:2281,zk2.example.com:2281",
                            .tls = zklock::tls_options{.ca_file = "/etc/zk/ca.pem",
                                                       .certificate_file = "/etc/zk/orders-svc.pem",
                                                       .private_key_file = "/etc/zk/orders-svc.key"}}};
    zklock::mutex m{zk, "/locks/orders", {.node_acl = zklock::acl::x509_all_world_read("CN=orders-svc")}};
}

// docs/recipes.md, "In-process hand-off".
asio::awaitable<void> local_handoff(zklock::session& zk) {
    zklock::mutex m{zk, "/locks/hot-row", {.local_handoff = 64}};
    auto g = co_await m.async_acquire(asio::use_awaitable);   // same API, same guard
    co_await g.async_release(asio::use_awaitable);
}

} // namespace snippets

// (Nothing to run: the snippets need servers this program does not have.)
int main() {
    (void)&snippets::pitch;
    (void)&snippets::guarded_transfer;
    (void)&snippets::credentials_and_acl;
    (void)&snippets::tls;
    (void)&snippets::local_handoff;
}
