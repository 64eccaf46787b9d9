#include <zklock/path.hpp>

#include <gtest/gtest.h>

#include <string>

using zklock::errc;
using zklock::validate_connect_string;
using zklock::validate_lock_path;

TEST(Path, AcceptsOrdinaryPaths) {
    EXPECT_FALSE(validate_lock_path("/locks"));
    EXPECT_FALSE(validate_lock_path("/locks/orders-42/a.b"));
    EXPECT_FALSE(validate_lock_path("/zookeeperish"));
}

TEST(Path, RejectsBadPathsWithNamedErrors) {
    EXPECT_EQ(validate_lock_path(""), errc::path_empty);
    EXPECT_EQ(validate_lock_path("locks"), errc::path_not_absolute);
    EXPECT_EQ(validate_lock_path("/locks/"), errc::path_trailing_slash);
    EXPECT_EQ(validate_lock_path("/locks//a"), errc::path_empty_segment);
    EXPECT_EQ(validate_lock_path("/locks/./a"), errc::path_relative_segment);
    EXPECT_EQ(validate_lock_path("/locks/.."), errc::path_relative_segment);
    EXPECT_EQ(validate_lock_path(std::string("/lo\0ck", 6)), errc::path_bad_character);
    EXPECT_EQ(validate_lock_path("/a\nb"), errc::path_bad_character);
    EXPECT_EQ(validate_lock_path("/zookeeper"), errc::path_reserved);
    EXPECT_EQ(validate_lock_path("/zookeeper/quota"), errc::path_reserved);
    EXPECT_EQ(validate_lock_path("/"), errc::path_reserved);
}

TEST(Path, MessagesNameTheProblem) {
    auto m = zklock::make_error_code(errc::path_trailing_slash).message();
    EXPECT_NE(m.find("end with '/'"), std::string::npos) << m;
    EXPECT_NE(zklock::make_error_code(errc::path_empty_segment).message().find("//"), std::string::npos);
}

TEST(ConnectString, Validates) {
    EXPECT_FALSE(validate_connect_string("127.0.0.1:2181"));
    EXPECT_FALSE(validate_connect_string("a:1,b:2,c:65535/chroot/x"));
    EXPECT_FALSE(validate_connect_string("localhost:2181/"));
    EXPECT_EQ(validate_connect_string(""), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("localhost"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("localhost:"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string(":2181"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h:0"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h:65536"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h:21x"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h:1,,h:2"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h 1:2181"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h:1/bad//chroot"), errc::path_empty_segment);
}
