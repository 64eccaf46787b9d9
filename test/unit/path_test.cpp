#include <zklock/path.hpp>

#include "protocol/protocol.hpp"

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

// The server decodes a path as UTF-8 into Java chars and refuses U+0000-U+001F, U+007F-U+009F,
// U+D800-U+F8FF and U+FFF0-U+FFFF (a malformed sequence decodes to U+FFFD, a code point past
// U+FFFF to two surrogates): each refused here before a request is sent
// (NewUser.ThePathCheckRefusesWhatTheServerRefuses, in the integration suite, asks the server).
TEST(Path, RefusesWhatTheServerRefusesInUtf8) {
    EXPECT_FALSE(validate_lock_path("/caf\xc3\xa9/\xe9\x94\x81"));  // U+00E9, U+9501
    EXPECT_FALSE(validate_lock_path("/\xc2\xa0/\xef\xbf\xaf/~"));   // U+00A0, U+FFEF, U+007E
    EXPECT_FALSE(validate_lock_path("/\xed\x9f\xbf/\xef\xa4\x80")); // U+D7FF, U+F900
    for (const char* bad : {
             "/a\x7f",             // U+007F
             "/a\xc2\x80",         // U+0080
             "/a\xc2\x85",         // U+0085 (NEL)
             "/a\xc2\x9f",         // U+009F
             "/a\xee\x80\x80",     // U+E000 (private use)
             "/a\xef\xa3\xbf",     // U+F8FF
             "/a\xef\xbf\xb0",     // U+FFF0
             "/a\xef\xbf\xbd",     // U+FFFD
             "/a\xef\xbf\xbf",     // U+FFFF
             "/a\xf0\x9f\x94\x92", // U+1F512: past U+FFFF
             "/a\xed\xa0\x80",     // an encoded surrogate (U+D800)
             "/a\xc0\xaf",         // an overlong '/'
             "/a\xe0\x80\xaf",     // another
             "/a\x80",             // a continuation byte first
             "/a\xc3",             // truncated
             "/a\xe9\x94/b",       // truncated before a '/'
             "/a\xff",             // never UTF-8
         })
        EXPECT_EQ(validate_lock_path(bad), errc::path_bad_character) << bad;
    auto m = zklock::make_error_code(errc::path_bad_character).message();
    EXPECT_NE(m.find("UTF-8"), std::string::npos) << m;
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
    EXPECT_EQ(validate_connect_string("zk1:2181;zk2:2181"), errc::invalid_connect_separator);
    EXPECT_EQ(validate_connect_string("zk1:2181;zk2:2181/app"), errc::invalid_connect_separator);
    EXPECT_EQ(validate_connect_string("zk1:2181,zk2:2181;"), errc::invalid_connect_separator);
    EXPECT_EQ(validate_connect_string("h:21x"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h:1,,h:2"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h 1:2181"), errc::invalid_connect_string);
    EXPECT_EQ(validate_connect_string("h:1/bad//chroot"), errc::invalid_chroot);
    EXPECT_EQ(validate_connect_string("h:1/chroot/"), errc::invalid_chroot);
    EXPECT_EQ(validate_connect_string("http://h:1"), errc::invalid_connect_string);
}

// ---- what the session resolves itself (asynchronously) before the C client sees the hosts ----
TEST(ConnectString, SplitsHostsPortsAndChroot) {
    auto spec = zklock::detail::parse_connect_string("a.example:2181,[::1]:2182,10.0.0.1:2183/app/locks");
    ASSERT_EQ(spec.hosts.size(), 3u);
    EXPECT_EQ(spec.hosts[0].host, "a.example");
    EXPECT_EQ(spec.hosts[0].port, "2181");
    EXPECT_EQ(spec.hosts[1].host, "[::1]");
    EXPECT_EQ(spec.hosts[1].port, "2182");
    EXPECT_EQ(spec.hosts[2].host, "10.0.0.1");
    EXPECT_EQ(spec.chroot, "/app/locks");
    EXPECT_EQ(zklock::detail::parse_connect_string("h:1/").chroot, "");
}

TEST(ConnectString, OnlyNamesNeedAResolver) {
    using zklock::detail::is_address_literal;
    using zklock::detail::needs_resolution;
    EXPECT_TRUE(is_address_literal("127.0.0.1"));
    EXPECT_TRUE(is_address_literal("::1"));
    EXPECT_TRUE(is_address_literal("[fe80::1]"));
    EXPECT_FALSE(is_address_literal("localhost"));
    EXPECT_FALSE(is_address_literal("1.2.3"));
    EXPECT_FALSE(is_address_literal("[::1"));
    EXPECT_FALSE(is_address_literal(""));
    EXPECT_FALSE(needs_resolution("127.0.0.1:1,[::1]:2/x"));
    EXPECT_TRUE(needs_resolution("127.0.0.1:1,zk.internal:2"));
}

TEST(ConnectString, BracketedIPv6LiteralsReachTheCClientWithoutBrackets) {
    // Before: "[::1]:2181" passed the check, then the C client refused it (its resolver was given
    // "[::1]") and async_connect failed with the generic invalid_connect_string.
    using zklock::detail::c_client_connect_string;
    EXPECT_FALSE(zklock::validate_connect_string("[::1]:2181"));
    EXPECT_EQ(c_client_connect_string("[::1]:2181"), "::1:2181");
    EXPECT_EQ(c_client_connect_string("[::1]:2181,127.0.0.1:2182,[fe80::1]:3/app"),
              "::1:2181,127.0.0.1:2182,fe80::1:3/app");
    EXPECT_EQ(c_client_connect_string("zk1:2181,zk2:2181/a/b"), "zk1:2181,zk2:2181/a/b");
    EXPECT_EQ(c_client_connect_string("::1:2181"), "::1:2181");
}

TEST(ConnectString, TheCClientGetsAddressesWithoutBracketsAndTheChroot) {
    // (the C client splits host and port at the last ':')
    auto s = zklock::detail::numeric_connect_string({{"10.0.0.1", 2181}, {"::1", 2181}, {"10.0.0.1", 2181}},
                                                    "/app");
    EXPECT_EQ(s, "10.0.0.1:2181,::1:2181/app");
    EXPECT_EQ(zklock::detail::numeric_connect_string({{"127.0.0.1", 1}}, ""), "127.0.0.1:1");
}
