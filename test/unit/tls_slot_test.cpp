// client_socket_slot: how the relay's listeners tell the C client's connection from a stranger's
// off the session's strand (bridge/tls_relay.hpp). Pure: no socket.
#include "bridge/tls_relay.hpp"

#include <gtest/gtest.h>

namespace {

using zklock::detail::client_socket_slot;
using verdict = client_socket_slot::verdict;
using ep = boost::asio::ip::tcp::endpoint;

const ep listener(boost::asio::ip::address_v4::loopback(), 40000);
const ep other_listener(boost::asio::ip::address_v4::loopback(), 40001);
const ep client(boost::asio::ip::address_v4::loopback(), 50000);
const ep stranger(boost::asio::ip::address_v4::loopback(), 50001);
int handle_a, handle_b; // (owners: their addresses)

TEST(TlsSlot, NoSocketMeansEveryConnectionIsAStrangers) {
    client_socket_slot s;
    EXPECT_EQ(s.check(client, listener), verdict::stranger);
    s.begin(&handle_a);
    s.end(&handle_a, std::nullopt);
    EXPECT_EQ(s.check(client, listener), verdict::stranger);
}

TEST(TlsSlot, OnlyTheClientsSocketToThatListenerMatches) {
    client_socket_slot s;
    s.begin(&handle_a);
    s.end(&handle_a, std::make_pair(client, listener));
    EXPECT_EQ(s.check(client, listener), verdict::match);
    EXPECT_EQ(s.check(stranger, listener), verdict::stranger);
    EXPECT_EQ(s.check(client, other_listener), verdict::stranger); // (its port, towards another)
}

TEST(TlsSlot, WhileASocketIsMadeOnlyItsOwnAddressIsUnsure) {
    client_socket_slot s;
    s.begin(&handle_a); // zookeeper_interest may be opening one: nobody can be told apart yet
    EXPECT_EQ(s.check(stranger, listener), verdict::unsure);
    s.end(&handle_a, std::nullopt, false, client); // its connect under way: its address known
    EXPECT_EQ(s.check(client, listener), verdict::unsure);
    EXPECT_EQ(s.check(stranger, listener), verdict::stranger);
    s.begin(&handle_a);
    s.end(&handle_a, std::make_pair(client, listener));
    EXPECT_EQ(s.check(client, listener), verdict::match);
    EXPECT_EQ(s.check(stranger, listener), verdict::stranger);
}

TEST(TlsSlot, AClosedHandleClearsOnlyItsOwnRecord) {
    client_socket_slot s;
    s.begin(&handle_a);
    s.end(&handle_a, std::make_pair(client, listener));
    s.begin(&handle_b); // the new handle's
    s.end(&handle_b, std::make_pair(stranger, listener));
    s.clear(&handle_a); // (the old one closes late: not its record any more)
    s.end(&handle_a, std::make_pair(client, listener));
    EXPECT_EQ(s.check(stranger, listener), verdict::match);
    EXPECT_EQ(s.check(client, listener), verdict::stranger);
    s.clear(&handle_b);
    EXPECT_EQ(s.check(stranger, listener), verdict::stranger);
    EXPECT_FALSE(s.current());
}

} // namespace
