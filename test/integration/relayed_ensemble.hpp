// The suite's second 3-server ensemble, whose server-to-server links go through zk.sh's
// freezable relays ($ZK_RELAY_ENSEMBLE_DIR): its roles, and the faults zk.sh injects into it.
#pragma once

#include "common.hpp"
#include "ensemble.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace zt {

inline std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

/// The ensemble with quorum relays: its state dir, zk.sh, connect strings per server.
struct relayed_ensemble {
    std::string dir, scripts;
    int leader = 0;
    std::vector<int> followers;

    /// False (with a test failure) if the suite's ensemble has no relays or no leader now.
    bool find_roles() {
        dir = env_or_empty("ZK_RELAY_ENSEMBLE_DIR");
        scripts = env_or_empty("ZKLOCK_SCRIPTS");
        if (dir.empty() || scripts.empty()) {
            ADD_FAILURE()
                << "ZK_RELAY_ENSEMBLE_DIR / ZKLOCK_SCRIPTS not set: run the suite with scripts/test.sh";
            return false;
        }
        if (!std::ifstream(dir + "/relays")) {
            ADD_FAILURE() << dir
                          << " has no quorum relays: scripts/test.sh starts this ensemble with --relay";
            return false;
        }
        // (an earlier test may have restarted a server: wait until all three serve; and a leader
        // deposed by an earlier test may still believe it leads for up to syncLimit ticks after
        // the links came back: wait, up to 20 s, for one leader and two followers)
        for (int i = 1; i <= 3; ++i) sh("wait", i);
        std::string modes;
        for (int attempt = 0; attempt < 100; ++attempt) {
            leader = 0;
            followers.clear();
            modes.clear();
            int leaders = 0;
            for (int i = 1; i <= 3; ++i) {
                auto mode = server_mode(dir, i);
                modes += " " + std::to_string(i) + "=" + (mode.empty() ? "-" : mode);
                if (mode == "leader")
                    leader = i, ++leaders;
                else if (mode == "follower")
                    followers.push_back(i);
            }
            if (leaders == 1 && followers.size() == 2) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        ADD_FAILURE() << "no leader with two followers in " << dir << " (20 s):" << modes;
        return false;
    }
    /// Clients reach the servers over TLS (their secureClientPort: test.sh starts this ensemble
    /// with zk.sh --tls), with options() below.
    bool tls = false;
    /// Server `i`'s client port (its TLS port with `tls`).
    std::string connect_to(int i) const {
        if (!tls) return "127.0.0.1:" + std::to_string(server_port(dir, i));
        std::ifstream f(dir + "/tls_port" + std::to_string(i));
        std::string port;
        f >> port;
        if (port.empty())
            ADD_FAILURE() << dir << " has no TLS port for server " << i << ": start it with zk.sh --tls";
        return "127.0.0.1:" + port;
    }
    /// zt::options(connect), with the ensemble's client certificate when `tls`.
    zklock::session_options options(std::string connect) const {
        auto o = zt::options(std::move(connect));
        if (tls) {
            zklock::tls_options t;
            t.ca_file = dir + "/tls/ca.pem";
            t.certificate_file = dir + "/tls/client.pem";
            t.private_key_file = dir + "/tls/client.key";
            o.tls = t;
        }
        return o;
    }
    void sh(const std::string& what, int i = 0, int j = 0) const {
        std::string cmd = scripts + "/zk.sh " + what + " " + dir;
        if (i) cmd += " " + std::to_string(i);
        if (j) cmd += " " + std::to_string(j);
        EXPECT_EQ(std::system((cmd + " >/dev/null").c_str()), 0) << cmd;
    }
    /// Restarts server i with `maxSessionTimeout=ms` in its configuration (0: the line removed, the
    /// server's default, 20 x tickTime): a server that caps the sessions it negotiates.
    void set_max_session_timeout(int i, int ms) const {
        (void)std::system(
            ("kill -9 $(cat " + dir + "/server" + std::to_string(i) + ".pid) 2>/dev/null; sleep 0.2")
                .c_str());
        const std::string cfg = dir + "/zoo" + std::to_string(i) + ".cfg";
        std::string cmd = "sed -i '/^maxSessionTimeout=/d' " + cfg;
        if (ms > 0) cmd += " && echo maxSessionTimeout=" + std::to_string(ms) + " >> " + cfg;
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        sh("restart", i);
    }
    void freeze(int i, int j) const { sh("freeze", i, j); }
    /// zk.sh hold: what server j sends to server i is held back (leader j's pings and proposals to
    /// its follower i), what i sends to j passes; thaw_all() ends it.
    void hold(int i, int j) const { sh("hold", i, j); }
    /// zk.sh depose: leader `l` cut off from its quorum both ways, the other servers restarted at
    /// once; they elect a new leader among themselves while `l` still leads alone. Returns the
    /// new leader's id (0 on a failure, with the command's output on stderr). Blocks ~2-3 s.
    /// `cut_from` (if given): the realtime clock (ns since the epoch) just before the cut.
    int depose(int l, long long* cut_from = nullptr) const {
        std::string cmd =
            scripts + "/zk.sh depose " + dir + " " + std::to_string(l) + " 2>" + dir + "/depose.err";
        FILE* p = ::popen(cmd.c_str(), "r");
        if (!p) return 0;
        char buf[256];
        int id = 0;
        long long cut = 0;
        while (std::fgets(buf, sizeof buf, p)) {
            if (std::sscanf(buf, "CUT_FROM=%lld", &cut) == 1 && cut_from) *cut_from = cut;
            if (std::sscanf(buf, "NEW_LEADER=%d", &id) == 1) break;
        }
        const int rc = ::pclose(p);
        if (rc != 0 || id == 0) {
            std::fprintf(stderr, "zk.sh depose failed (%d):\n", rc);
            (void)std::system(("cat " + dir + "/depose.err >&2").c_str());
            return 0;
        }
        return id;
    }
    void thaw_all() const { sh("thaw"); }
    /// Lines of server i's log that contain `what`.
    int log_count(int i, const std::string& what) const {
        std::ifstream in(dir + "/server" + std::to_string(i) + ".log");
        int n = 0;
        for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
        return n;
    }
    void print_logs() const {
        for (int i = 1; i <= 3; ++i) {
            auto cmd = "tail -n 40 " + dir + "/server" + std::to_string(i) + ".log >&2";
            std::fprintf(stderr, "  --- server %d\n", i);
            (void)std::system(cmd.c_str());
        }
        (void)std::system(("tail -n 5 " + dir + "/relay.log >&2").c_str());
    }
};

} // namespace zt
