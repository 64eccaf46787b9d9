// A plain synchronous ZooKeeper C-client handle for tests: it sets up what zklock itself never
// creates (nodes with a restrictive ACL, ephemeral parents) and checks, independently of zklock,
// what another client may do. Blocking: set-up and checks only.
#pragma once

#include "common.hpp"

#include <zookeeper/zookeeper.h>

#include <poll.h>

#include <algorithm>

namespace zt {

/// A plain synchronous C-client handle, for setting up what zklock itself never creates
/// (nodes with a restrictive ACL, ephemeral parents). Blocking: set-up only. The C client is the
/// single-threaded one zklock links; this handle drives it with poll() on the calling thread,
/// until each request completes (at most 10 s).
class raw_zk {
public:
    /// `auth`: optional digest credentials "user:password".
    explicit raw_zk(const std::string& auth = {}) {
        zh_ = zookeeper_init2(zk_connect().c_str(), nullptr, 10000, nullptr, nullptr, ZOO_NO_LOG_CLIENTENV,
                              [](const char*) {}); // quiet
        if (zh_) drive_until([&] { return zoo_state(zh_) == ZOO_CONNECTED_STATE; });
        EXPECT_TRUE(zh_ && zoo_state(zh_) == ZOO_CONNECTED_STATE) << "raw C client did not connect";
        if (zh_ && !auth.empty()) {
            int rc = call([&](completion* c) {
                return zoo_add_auth(zh_, "digest", auth.data(), static_cast<int>(auth.size()), on_void, c);
            });
            EXPECT_EQ(rc, ZOK);
        }
    }
    ~raw_zk() {
        if (zh_) zookeeper_close(zh_);
    }
    raw_zk(const raw_zk&) = delete;
    raw_zk& operator=(const raw_zk&) = delete;

    int create(const std::string& path, int flags = 0, struct ACL_vector* acl = &ZOO_OPEN_ACL_UNSAFE) {
        return call([&](completion* c) {
            return zoo_acreate(zh_, path.c_str(), nullptr, -1, acl, flags, on_string, c);
        });
    }
    /// Creates a sequential node "<prefix><10 digits>" (ephemeral: it goes with this handle), as
    /// Curator and kazoo create their lock nodes; returns its path, or "" on failure.
    std::string create_sequential(const std::string& prefix, bool ephemeral = true) {
        std::string out;
        int rc = call([&](completion* c) {
            c->out = &out;
            return zoo_acreate(zh_, prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                               ZOO_SEQUENCE | (ephemeral ? ZOO_EPHEMERAL : 0), on_string, c);
        });
        EXPECT_EQ(rc, ZOK) << zerror(rc);
        return rc == ZOK ? out : std::string();
    }
    /// Creates every missing ancestor of `path` (open ACL), not `path` itself.
    void create_parents(const std::string& path) {
        for (auto i = path.find('/', 1); i != std::string::npos; i = path.find('/', i + 1)) {
            int rc = create(path.substr(0, i));
            EXPECT_TRUE(rc == ZOK || rc == ZNODEEXISTS) << zerror(rc);
        }
    }
    int remove(const std::string& path) {
        return call([&](completion* c) { return zoo_adelete(zh_, path.c_str(), -1, on_void, c); });
    }
    int set(const std::string& path, const std::string& data) {
        return call([&](completion* c) {
            return zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), -1, on_stat, c);
        });
    }
    /// The children of `path`, or the error code.
    int children(const std::string& path, std::vector<std::string>& out) {
        out.clear();
        return call([&](completion* c) {
            c->list = &out;
            return zoo_aget_children(zh_, path.c_str(), 0, on_strings, c);
        });
    }

private:
    struct completion {
        bool done = false;
        int rc = ZOK;
        std::string* out = nullptr;
        std::vector<std::string>* list = nullptr;
    };
    static completion* as_completion(const void* d) { return static_cast<completion*>(const_cast<void*>(d)); }
    static void on_void(int rc, const void* d) {
        auto* c = as_completion(d);
        c->rc = rc;
        c->done = true;
    }
    static void on_stat(int rc, const Stat*, const void* d) { on_void(rc, d); }
    static void on_string(int rc, const char* value, const void* d) {
        auto* c = as_completion(d);
        if (rc == ZOK && value && c->out) *c->out = value;
        on_void(rc, d);
    }
    static void on_strings(int rc, const String_vector* v, const void* d) {
        auto* c = as_completion(d);
        for (int i = 0; rc == ZOK && v && c->list && i < v->count; ++i) c->list->emplace_back(v->data[i]);
        on_void(rc, d);
    }
    /// Sends a request with `start(completion)` and drives the client until it completes.
    template <class Start>
    int call(Start&& start) {
        if (!zh_) return ZINVALIDSTATE;
        completion c;
        int rc = start(&c);
        if (rc != ZOK) return rc;
        drive_until([&] { return c.done; });
        return c.done ? c.rc : ZOPERATIONTIMEOUT;
    }
    template <class Done>
    void drive_until(Done&& done) {
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (!done() && std::chrono::steady_clock::now() < until) {
            int fd = -1, interest = 0;
            timeval tv{};
            if (zookeeper_interest(zh_, &fd, &interest, &tv) == ZINVALIDSTATE) return;
            pollfd p{fd, 0, 0};
            if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
            if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
            const long ms = std::min(100L, tv.tv_sec * 1000 + tv.tv_usec / 1000);
            if (fd < 0) {
                std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1L, ms)));
                continue;
            }
            if (::poll(&p, 1, static_cast<int>(ms)) <= 0) continue;
            int events = 0;
            if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
            if (p.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
            zookeeper_process(zh_, events);
        }
    }

    zhandle_t* zh_ = nullptr;
};

} // namespace zt
