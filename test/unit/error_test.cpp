#include <zklock/error.hpp>

#include <gtest/gtest.h>

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
    for (int v = 1; v <= 60; ++v) {
        auto m = make_error_code(static_cast<errc>(v)).message();
        if (m.rfind("zklock error", 0) == 0) continue; // unassigned value
        EXPECT_GT(m.size(), 15u) << v;
    }
}
