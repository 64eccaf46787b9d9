// The release and the guaranteed deletes in the simulator: the library's own machine
// (src/session/cleanup_fsm.hpp, the one session_cleanup.cpp drives on a session), performed on the
// model server for one client. Every world uses it for its releases, its background deletes and
// its sweeps by guid; the world supplies how a request is sent.
#pragma once

#include "model_zk.hpp"
#include "session/cleanup_fsm.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace zklock::sim {

class cleanup_jobs {
public:
    struct job {
        detail::cleanup_fsm m;
        bool release = false; // the holder's release: its end ends the cycle (io::released)
    };
    /// How a world performs the machine's requests for one client.
    struct io {
        std::function<std::uint64_t(const request&)> send; ///< a request of a job; its id
        std::function<void(const std::string&)> barrier;   ///< the write ahead of a listing
        std::function<void()> released;                    ///< a release ended
        std::function<void(const std::string&)> fail;      ///< the model cannot run this
    };

    void start(job j, const io& io) {
        auto a = j.m.next();
        perform(std::move(j), std::move(a), io);
    }
    /// True if `id` is one of the jobs' requests.
    bool owns(std::uint64_t id) const { return in_flight_.count(id) != 0; }
    /// The reply to one of the jobs' requests. `connected`: the connection's state as it arrives
    /// (a reply lost with it: false).
    void on_reply(const reply& r, bool connected, const io& io) {
        auto it = in_flight_.find(r.id);
        if (it == in_flight_.end()) return;
        auto j = std::move(it->second);
        in_flight_.erase(it);
        detail::cleanup_reply in{r.rc, r.czxid, -1, r.children};
        auto a = j.m.resume(in, connected);
        perform(std::move(j), std::move(a), io);
    }
    /// The connection is back: the jobs that waited for it start again.
    void reconnected(const io& io) {
        for (auto& j : std::exchange(waiting_, {})) start(std::move(j), io);
    }
    /// The session ended: its nodes went with it.
    void clear() {
        in_flight_.clear();
        waiting_.clear();
    }

private:
    void perform(job j, detail::cleanup_action a, const io& io) {
        using ca = detail::cleanup_action;
        request r;
        r.path = a.path;
        switch (a.what) {
        case ca::done:
            if (j.release) io.released();
            return;
        case ca::retry:
            // On the reconnect (the model's connection comes back at once, after its replies),
            // or after a back-off while connected: at once here.
            if (a.plan.on_reconnect) return waiting_.push_back(std::move(j));
            return start(std::move(j), io);
        case ca::remove:
            r.kind = op::remove;
            break;
        case ca::marked_release:
            r.kind = op::release_with_marker;
            r.marker = detail::release_marker(a.path);
            break;
        case ca::list:
            io.barrier(a.path);
            r.kind = op::get_children;
            break;
        case ca::check:
        case ca::delete_version:
            return io.fail("model: a fixed-name delete, which the model does not run");
        }
        in_flight_.emplace(io.send(r), std::move(j));
    }

    std::map<std::uint64_t, job> in_flight_;
    std::vector<job> waiting_;
};

} // namespace zklock::sim
