// How the TLS relay names a failed handshake (classify_tls_failure): pure, no server.
#include "detail/tls_relay.hpp"

#include <boost/asio/ssl/error.hpp>
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
    EXPECT_EQ(classify_tls_failure(verify_failed, X509_V_ERR_CERT_NOT_YET_VALID, true, "zk1").ec, errc::tls_certificate_expired);
    f = classify_tls_failure(verify_failed, X509_V_ERR_HOSTNAME_MISMATCH, true, "zk1.example");
    EXPECT_EQ(f.ec, errc::tls_server_name_mismatch);
    EXPECT_NE(f.detail.find("does not name zk1.example"), std::string::npos) << f.detail;
    EXPECT_EQ(classify_tls_failure(verify_failed, X509_V_ERR_IP_ADDRESS_MISMATCH, true, "10.0.0.1").ec, errc::tls_server_name_mismatch);
    for (long v : {X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
                   X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN})
        EXPECT_EQ(classify_tls_failure(verify_failed, v, true, "zk1").ec, errc::tls_unknown_ca) << v;
    EXPECT_EQ(classify_tls_failure(verify_failed, X509_V_ERR_CERT_REVOKED, true, "zk1").ec, errc::tls_handshake_failed);
}

TEST(TlsFailure, TheServersRefusalOfTheClientCertificate) {
    // TLS 1.3: the alert comes after the client's side of the handshake, on the first read
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED), X509_V_OK, false, "zk").ec,
              errc::tls_client_certificate_required);
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_SSLV3_ALERT_BAD_CERTIFICATE), X509_V_OK, false, "zk").ec,
              errc::tls_client_certificate_required);
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE), X509_V_OK, false, "zk").ec,
              errc::tls_client_certificate_required);
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_TLSV1_ALERT_UNKNOWN_CA), X509_V_OK, true, "zk").ec,
              errc::tls_client_certificate_rejected);
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN), X509_V_OK, true, "zk").ec,
              errc::tls_client_certificate_rejected);
}

TEST(TlsFailure, APlainServerAndTheNetworkAreToldApart) {
    EXPECT_EQ(classify_tls_failure(asio::ssl::error::stream_truncated, X509_V_OK, true, "zk").ec, errc::tls_not_tls_server);
    EXPECT_EQ(classify_tls_failure(asio::error::eof, X509_V_OK, true, "zk").ec, errc::tls_not_tls_server);
    EXPECT_EQ(classify_tls_failure(ssl_reason(SSL_R_WRONG_VERSION_NUMBER), X509_V_OK, true, "zk").ec, errc::tls_not_tls_server);
    // network failures are not verdicts: the next attempt may succeed
    auto f = classify_tls_failure(asio::error::connection_refused, X509_V_OK, true, "zk");
    EXPECT_FALSE(f.definitive);
    EXPECT_EQ(f.ec, asio::error::connection_refused);
    EXPECT_EQ(f.detail, "connection refused");
    EXPECT_FALSE(classify_tls_failure(asio::error::connection_reset, X509_V_OK, true, "zk").definitive);
}

TEST(TlsFailure, RelayedLogLinesNameTheServer) {
    // No listener: lines pass unchanged
    EXPECT_EQ(zklock::detail::name_relayed_servers("connecting to 127.0.0.1:1"), "connecting to 127.0.0.1:1");
}

} // namespace
