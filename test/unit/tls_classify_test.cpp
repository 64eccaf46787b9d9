// How the TLS relay names a failed handshake (classify_tls_failure): pure, no server.
#include "bridge/tls_relay.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/strand.hpp>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

namespace {

using zklock::errc;
using zklock::detail::classify_tls_failure;
namespace asio = boost::asio;

zklock::error_code ssl_reason(int reason) {
    return {static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, reason)), asio::error::get_ssl_category()};
}
const zklock::error_code verify_failed = ssl_reason(SSL_R_CERTIFICATE_VERIFY_FAILED);

TEST(TlsFailure, TheServersCertificateVerdictsAreNamed) {
    auto f = classify_tls_failure(verify_failed, X509_V_ERR_CERT_HAS_EXPIRED, true, "zk1");
    EXPECT_EQ(f.ec, errc::tls_certificate_expired);
    EXPECT_TRUE(f.definitive);
    EXPECT_EQ(classify_tls_failure(verify_failed, X509_V_ERR_CERT_NOT_YET_VALID, true, "zk1").ec,
              errc::tls_certificate_expired);
    f = classify_tls_failure(verify_failed, X509_V_ERR_HOSTNAME_MISMATCH, true, "zk1.example");
    EXPECT_EQ(f.ec, errc::tls_server_name_mismatch);
    EXPECT_NE(f.detail.find("does not name zk1.example"), std::string::npos) << f.detail;
    EXPECT_EQ(classify_tls_failure(verify_failed, X509_V_ERR_IP_ADDRESS_MISMATCH, true, "10.0.0.1").ec,
              errc::tls_server_name_mismatch);
    for (long v : {X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
                   X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN})
        EXPECT_EQ(classify_tls_failure(verify_failed, v, true, "zk1").ec, errc::tls_unknown_ca) << v;
    EXPECT_EQ(classify_tls_failure(verify_failed, X509_V_ERR_CERT_REVOKED, true, "zk1").ec,
              errc::tls_handshake_failed);
}

TEST(TlsFailure, TheServersRefusalOfTheClientCertificate) {
    // TLS 1.3: the alert comes after the client's side of the handshake, on the first read
    EXPECT_EQ(
        classify_tls_failure(ssl_reason(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED), X509_V_OK, false, "zk").ec,
        errc::tls_client_certificate_required);
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_SSLV3_ALERT_BAD_CERTIFICATE), X509_V_OK, false, "zk").ec,
              errc::tls_client_certificate_required);
    // a bare handshake_failure alert without a client certificate: a missing certificate or no
    // cipher in common; the error claims neither (the detail names both)
    const auto bare =
        classify_tls_failure(ssl_reason(SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE), X509_V_OK, false, "zk");
    EXPECT_EQ(bare.ec, errc::tls_handshake_failed);
    EXPECT_NE(bare.detail.find("cipher in common"), std::string::npos) << bare.detail;
    EXPECT_NE(bare.detail.find("client certificate"), std::string::npos) << bare.detail;
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_TLSV1_ALERT_UNKNOWN_CA), X509_V_OK, true, "zk").ec,
              errc::tls_client_certificate_rejected);
    EXPECT_EQ(
        classify_tls_failure(ssl_reason(SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN), X509_V_OK, true, "zk").ec,
        errc::tls_client_certificate_rejected);
}

TEST(TlsFailure, APlainServerAndTheNetworkAreToldApart) {
    // A server that closes in the handshake: a plain port, or a TLS server not serving yet (an
    // election, too many connections): named, but no verdict (the connect goes on)
    auto eof = classify_tls_failure(asio::ssl::error::stream_truncated, X509_V_OK, true, "zk");
    EXPECT_EQ(eof.ec, errc::tls_not_tls_server);
    EXPECT_FALSE(eof.definitive);
    EXPECT_FALSE(classify_tls_failure(asio::error::eof, X509_V_OK, true, "zk").definitive);
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_WRONG_VERSION_NUMBER), X509_V_OK, true, "zk").ec,
              errc::tls_not_tls_server);
    // network failures are not verdicts: the next attempt may succeed
    auto f = classify_tls_failure(asio::error::connection_refused, X509_V_OK, true, "zk");
    EXPECT_FALSE(f.definitive);
    EXPECT_EQ(f.ec, asio::error::connection_refused);
    EXPECT_EQ(f.detail, "connection refused");
    EXPECT_FALSE(classify_tls_failure(asio::error::connection_reset, X509_V_OK, true, "zk").definitive);
}

TEST(TlsFailure, RelayedLogLinesNameTheServer) {
    asio::io_context io;
    zklock::tls_options o;
    o.use_system_ca_store = true;
    zklock::error_code ec;
    std::string why;
    auto relay = zklock::detail::tls_relay::make(asio::make_strand(io.get_executor()), o, ec, why);
    ASSERT_TRUE(relay) << why;
    auto given = relay->listen({{"zk1.example", "10.0.0.1", 2281}, {"zk2.example", "10.0.0.2", 2281}}, ec);
    ASSERT_FALSE(ec) << ec.message();
    const auto comma = given.find(',');
    ASSERT_NE(comma, std::string::npos) << given;
    const auto first = given.substr(0, comma), second = given.substr(comma + 1);
    EXPECT_EQ(first.rfind("127.0.0.1:", 0), 0u) << given;
    EXPECT_EQ(zklock::detail::name_relayed_servers("Socket [" + first + "] zk retcode=-4; then " + second),
              "Socket [zk1.example:2281] zk retcode=-4; then zk2.example:2281");
    // a port that is no listener of any relay, and a longer number that starts like one, pass unchanged
    EXPECT_EQ(zklock::detail::name_relayed_servers("connecting to 127.0.0.1:1"), "connecting to 127.0.0.1:1");
    EXPECT_EQ(zklock::detail::name_relayed_servers(first + "0"), first + "0");
    relay->close();
    relay.reset();
    io.run(); // (the listeners' accepts end, and with them the relay: its names go with it)
    EXPECT_EQ(zklock::detail::name_relayed_servers(first), first);
}

TEST(TlsFailure, BadOptionsAreRefusedBeforeAnyConnection) {
    asio::io_context io;
    auto make = [&](const zklock::tls_options& o) {
        zklock::error_code ec;
        std::string why;
        auto r = zklock::detail::tls_relay::make(asio::make_strand(io.get_executor()), o, ec, why);
        EXPECT_FALSE(r);
        EXPECT_EQ(ec, errc::tls_config_invalid);
        return why;
    };
    EXPECT_NE(make({}).find("no CA"), std::string::npos);
    zklock::tls_options o;
    o.ca_pem = "not a certificate";
    EXPECT_NE(make(o).find("ca_pem holds no readable certificate"), std::string::npos);
    o.use_system_ca_store = true;
    o.ca_pem.clear();
    o.certificate_pem = "x";
    EXPECT_NE(make(o).find("without its private key"), std::string::npos);
}

} // namespace
