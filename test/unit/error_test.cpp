#include <zklock/error.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

using namespace zklock;

TEST(Error, CategoriesAndMessages) {
    error_code ec = errc::lock_busy;
    EXPECT_STREQ(ec.category().name(), "zklock");
    EXPECT_NE(ec.message().find("another contender"), std::string::npos);
    error_code zk = zk_errc::no_node;
    EXPECT_STREQ(zk.category().name(), "zookeeper");
    EXPECT_EQ(zk.value(), -101);
    EXPECT_NE(zk.message().find("no node"), std::string::npos) << zk.message();
    EXPECT_NE(ec, zk);
}

TEST(Error, FatalAndConnectionErrors) {
    EXPECT_TRUE(is_fatal(errc::session_expired));
    EXPECT_TRUE(is_fatal(zk_errc::session_expired));
    EXPECT_TRUE(is_fatal(errc::session_closed));
    EXPECT_FALSE(is_fatal(zk_errc::connection_loss));
    EXPECT_FALSE(is_fatal(errc::lock_busy));
    EXPECT_TRUE(is_connection_error(zk_errc::connection_loss));
    EXPECT_TRUE(is_connection_error(zk_errc::operation_timeout));
    EXPECT_FALSE(is_connection_error(zk_errc::no_node));
}

TEST(Error, EveryCodeHasItsOwnMessage) {
    std::map<std::string, int> seen;
    int assigned = 0;
    for (int v = 1; v <= 200; ++v) {
        auto m = make_error_code(static_cast<errc>(v)).message();
        if (m.rfind("zklock error", 0) == 0) continue; // unassigned value
        ++assigned;
        EXPECT_GT(m.size(), 15u) << v;
        auto [it, fresh] = seen.emplace(m, v);
        EXPECT_TRUE(fresh) << "errc " << v << " and errc " << it->second << " share the message \"" << m
                           << "\"";
    }
    EXPECT_GE(assigned, 45); // (the walk reaches every block of values)
}

// Each mistake has its code, and its message names the option and its range.
TEST(Error, EachMistakeNamesItsOptionAndRange) {
    struct want {
        errc e;
        std::vector<std::string> words;
    };
    for (const auto& w : std::vector<want>{
             {errc::invalid_session_timeout, {"session_timeout", "100 ms", "2147483647 ms"}},
             {errc::invalid_connect_timeout, {"connect_timeout", "positive"}},
             {errc::invalid_chroot, {"chroot"}},
             {errc::chroot_missing, {"chroot", "does not exist"}},
             {errc::invalid_connect_string, {"host:port", "http://"}},
             {errc::invalid_max_leases, {"max_leases", "at least 1"}},
             {errc::semaphore_size_mismatch, {"max_leases", "<path>/leases"}},
             {errc::invalid_local_handoff, {"local_handoff", "0 and 4096"}},
             {errc::local_handoff_unsupported, {"local_handoff", "read/write"}},
             {errc::invalid_lease_fraction, {"lease", "(0.1, 0.45]"}},
             {errc::multi_lock_empty, {"async_acquire_all", "empty"}},
             {errc::multi_lock_duplicate_path, {"async_acquire_all", "same path"}},
             {errc::not_a_write_guard, {"async_downgrade", "write"}},
             {errc::invalid_version, {"version", "-1"}},
             {errc::invalid_connect_separator, {"connect string", "';'", "comma"}},
             {errc::write_too_large, {"max_write_bytes", "921600", "jute.maxbuffer", "nothing was sent"}},
             {errc::invalid_lease_timeout_cap, {"lease_timeout_cap", "0", "100 ms", "maxSessionTimeout"}},
             {errc::path_used_by_semaphore, {"semaphore", "mutex or read/write lock"}},
             {errc::path_used_by_lock, {"semaphore", "mutex or read/write lock"}},
             {errc::strategy_conflict, {"unique_node"}},
         }) {
        auto m = make_error_code(w.e).message();
        for (const auto& word : w.words)
            EXPECT_NE(m.find(word), std::string::npos) << m << " lacks \"" << word << "\"";
    }
}
