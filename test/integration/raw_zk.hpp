// A plain synchronous ZooKeeper C-client handle for tests: it sets up what zklock itself never
// creates (nodes with a restrictive ACL, ephemeral parents) and checks, independently of zklock,
// what another client may do. Blocking: set-up and checks only.
#pragma once

#include "common.hpp"

#include <zookeeper/zookeeper.h>

namespace zt {

/// A plain synchronous C-client handle, for setting up what zklock itself never creates
/// (nodes with a restrictive ACL, ephemeral parents). Blocking: set-up only.
class raw_zk {
public:
    /// `auth`: optional digest credentials "user:password".
    explicit raw_zk(const std::string& auth = {}) {
        zh_ = zookeeper_init2(zk_connect().c_str(), nullptr, 10000, nullptr, nullptr, ZOO_NO_LOG_CLIENTENV,
                              [](const char*) {}); // quiet
        for (int i = 0; i < 500 && zh_ && zoo_state(zh_) != ZOO_CONNECTED_STATE; ++i)
            std::this_thread::sleep_for(10ms);
        EXPECT_TRUE(zh_ && zoo_state(zh_) == ZOO_CONNECTED_STATE) << "raw C client did not connect";
        if (zh_ && !auth.empty()) {
            int rc = zoo_add_auth(zh_, "digest", auth.data(), static_cast<int>(auth.size()), nullptr, nullptr);
            EXPECT_EQ(rc, ZOK);
        }
    }
    ~raw_zk() {
        if (zh_) zookeeper_close(zh_);
    }
    raw_zk(const raw_zk&) = delete;
    raw_zk& operator=(const raw_zk&) = delete;

    int create(const std::string& path, int flags = 0, struct ACL_vector* acl = &ZOO_OPEN_ACL_UNSAFE) {
        return zoo_create(zh_, path.c_str(), nullptr, -1, acl, flags, nullptr, 0);
    }
    /// Creates a sequential node "<prefix><10 digits>" (ephemeral: it goes with this handle), as
    /// Curator and kazoo create their lock nodes; returns its path, or "" on failure.
    std::string create_sequential(const std::string& prefix, bool ephemeral = true) {
        std::vector<char> buf(prefix.size() + 16);
        int rc = zoo_create(zh_, prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                            ZOO_SEQUENCE | (ephemeral ? ZOO_EPHEMERAL : 0), buf.data(), static_cast<int>(buf.size()));
        EXPECT_EQ(rc, ZOK) << zerror(rc);
        return rc == ZOK ? std::string(buf.data()) : std::string();
    }
    /// Creates every missing ancestor of `path` (open ACL), not `path` itself.
    void create_parents(const std::string& path) {
        for (auto i = path.find('/', 1); i != std::string::npos; i = path.find('/', i + 1)) {
            int rc = create(path.substr(0, i));
            EXPECT_TRUE(rc == ZOK || rc == ZNODEEXISTS) << zerror(rc);
        }
    }
    int remove(const std::string& path) { return zoo_delete(zh_, path.c_str(), -1); }
    int set(const std::string& path, const std::string& data) {
        return zoo_set(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), -1);
    }
    /// The children of `path`, or the error code.
    int children(const std::string& path, std::vector<std::string>& out) {
        String_vector v{};
        int rc = zoo_get_children(zh_, path.c_str(), 0, &v);
        out.clear();
        for (int i = 0; rc == ZOK && i < v.count; ++i) out.emplace_back(v.data[i]);
        if (rc == ZOK) deallocate_String_vector(&v);
        return rc;
    }

private:
    zhandle_t* zh_ = nullptr;
};

} // namespace zt
