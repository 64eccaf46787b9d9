// The 3-server ensemble of scripts/zk.sh, seen from a test or a measurement: its servers' client
// ports (from zk.sh's state dir) and their four-letter-word answers (who leads, who follows).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <fstream>
#include <string>

namespace zt {

/// A ZooKeeper four-letter word sent to 127.0.0.1:port, answered synchronously ("" if the server
/// does not answer).
inline std::string four_letter(unsigned short port, const std::string& word) {
    try {
        boost::asio::io_context io;
        boost::asio::ip::tcp::socket s(io);
        s.connect({boost::asio::ip::make_address("127.0.0.1"), port});
        boost::asio::write(s, boost::asio::buffer(word));
        std::string out;
        boost::system::error_code ec;
        boost::asio::read(s, boost::asio::dynamic_buffer(out), ec);
        return out;
    } catch (const std::exception&) {
        return {};
    }
}

/// The client port of server `i` (1-based) of the ensemble in zk.sh's state dir (0 if unknown).
inline unsigned short server_port(const std::string& dir, int i) {
    std::ifstream in(dir + "/port" + std::to_string(i));
    int v = 0;
    in >> v;
    return static_cast<unsigned short>(v);
}

/// The quorum port of server `i` (the one a leader listens on for its followers; bound only while
/// that server leads), from the `server.i=host:quorum:election` line of server i's own config (0 if
/// unknown; the other servers' configs may name a relay instead: zk.sh start --relay).
inline unsigned short quorum_port(const std::string& dir, int i) {
    std::ifstream in(dir + "/zoo" + std::to_string(i) + ".cfg");
    const std::string key = "server." + std::to_string(i) + "=";
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(key, 0) != 0) continue;
        auto a = line.find(':', key.size()), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) return 0;
        return static_cast<unsigned short>(std::stoi(line.substr(a + 1, b - a - 1)));
    }
    return 0;
}

/// Server `i`'s role as 'srvr' reports it ("leader", "follower"), or "" if it is not serving.
inline std::string server_mode(const std::string& dir, int i) {
    auto out = four_letter(server_port(dir, i), "srvr");
    auto at = out.find("Mode: ");
    if (at == std::string::npos) return "";
    auto end = out.find('\n', at);
    return out.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

/// True if server `i` answers 'srvr' as a follower.
inline bool is_follower(const std::string& dir, int i) { return server_mode(dir, i) == "follower"; }

/// True when the ensemble's `n` servers all serve: one leader, the rest followers. A test that
/// picks servers by their role waits for it first: an earlier test's restart, or an election on a
/// loaded machine, can leave a server syncing with the leader for a while.
inline bool ensemble_settled(const std::string& dir, int n = 3) {
    int leaders = 0, followers = 0;
    for (int i = 1; i <= n; ++i) {
        const auto m = server_mode(dir, i);
        leaders += m == "leader";
        followers += m == "follower";
    }
    return leaders == 1 && followers == n - 1;
}

} // namespace zt
