// A request in flight in the C client (c_op) and the C completions that end it: c_requests.cpp
// builds them from the session's zk_request, zk_handle.cpp runs the calls, c_callbacks.cpp
// completes them.
#pragma once

#include "bridge/zk_handle.hpp"

#include <boost/asio/strand.hpp>

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace zklock::detail {

/// What a multi-op's C call points into until its completion: the operations, their results, the
/// created paths' buffers and the set operations' stats (sized once: the pointers must not move).
struct multi_buffers {
    std::vector<zoo_op_t> ops;
    std::vector<zoo_op_result_t> results;
    std::vector<std::vector<char>> paths;
    std::vector<Stat> stats;
};

struct c_op {
    zk_handle* owner = nullptr; // valid until the op is taken or swept
    std::optional<zk_handler> h;
    zk_result res;
    std::atomic<int> remaining{1};        // C completions still to come (2 for create_and_list)
    bool pipelined = false;               // create_and_list: the listing's code goes to res.list_rc
    vouch renews = vouch::touch;          // what a successful reply proves (the lease: see proves_commit)
    lease_ns sent = 0;                    // when the request was handed to the C client (the lease clock)
    bool heartbeat = false;               // a lease heartbeat (not counted by zk_handle::write_in_flight)
    std::unique_ptr<multi_buffers> multi; // multi: what the C client writes the results into
};

/// Posts `op`'s handler with its result to `strand`, and frees `op`.
void post_result(const asio::strand<asio::any_io_executor>& strand, c_op* op);
/// Runs `op`'s handler with its result now (on the strand), and frees `op`.
void run_result(c_op* op);

// The C completions (their `data` is the c_op) and watchers (c_callbacks.cpp).
void on_string_stat(int rc, const char* value, const Stat* stat, const void* data);
void on_strings(int rc, const String_vector* strings, const Stat* stat, const void* data);
void on_multi(int rc, const void* data);
void on_data(int rc, const char* value, int len, const Stat* stat, const void* data);
void on_stat(int rc, const Stat* stat, const void* data);
void on_void(int rc, const void* data);
/// The handle's session events (its context is the zk_handle).
void global_watcher(zhandle_t* zh, int type, int state, const char*, void* ctx);
/// zoo_add_auth's completion (its data is the zk_handle).
void on_auth(int rc, const void* data);
/// A node watch (its context is the session's watch id).
void node_watcher(zhandle_t* zh, int type, int, const char*, void* ctx);

template <class F>
int zk_handle::submit(c_op* op, F&& call) {
    using fn = std::remove_reference_t<F>;
    return submit_call(
        op, [](void* f, zhandle_t* zh, c_op* o) -> int { return (*static_cast<fn*>(f))(zh, o); },
        const_cast<void*>(static_cast<const void*>(&call)));
}

} // namespace zklock::detail
