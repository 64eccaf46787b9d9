// How a failed TLS handshake is named (classify_tls_failure, bridge/tls_relay.hpp): pure, from
// the handshake's error and OpenSSL's verdict on the server's certificate; unit-tested in
// test/unit/tls_classify_test.cpp.
#include "bridge/tls_relay.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>

namespace zklock::detail {

namespace ssl = asio::ssl;

namespace {
std::string openssl_words(const error_code& ec) {
    auto m = ec.message();
    return m.empty() ? "error " + std::to_string(ec.value()) : m;
}
} // namespace

tls_failure classify_tls_failure(const error_code& ec, long verify_result, bool sent_certificate,
                                 std::string_view server_name) {
    tls_failure f;
    f.ec = ec;
    const std::string name(server_name);
    if (verify_result != X509_V_OK) {
        f.definitive = true;
        const std::string why = X509_verify_cert_error_string(verify_result);
        switch (verify_result) {
        case X509_V_ERR_CERT_HAS_EXPIRED:
        case X509_V_ERR_CERT_NOT_YET_VALID:
            f.ec = errc::tls_certificate_expired;
            f.detail = "TLS: the server's certificate is not valid now (" + why + ")";
            return f;
        case X509_V_ERR_HOSTNAME_MISMATCH:
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
            f.ec = errc::tls_server_name_mismatch;
            f.detail = "TLS: the server's certificate does not name " + name + " (" + why + ")";
            return f;
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_CERT_UNTRUSTED:
        case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            f.ec = errc::tls_unknown_ca;
            f.detail = "TLS: the server's certificate is not signed by a trusted CA (" + why + ")";
            return f;
        default:
            f.ec = errc::tls_handshake_failed;
            f.detail = "TLS: the server's certificate was refused (" + why + ")";
            return f;
        }
    }
    if (ec == ssl::error::stream_truncated || ec == asio::error::eof) {
        // A plain ZooKeeper server reads a ClientHello as a request of ~350 MB and closes the
        // connection without a word. But a TLS server closes before the handshake too when it
        // does not serve yet (an election), or has too many connections: not a verdict. (A
        // connect that times out with every server doing this says tls_not_tls_server.)
        f.ec = errc::tls_not_tls_server;
        f.detail = "TLS: the server closed the connection during the TLS handshake (a plain, non-TLS port? "
                   "or a server not serving yet)";
        return f;
    }
    if (ec.category() == asio::error::get_ssl_category()) {
        const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
        const std::string words = openssl_words(ec);
        switch (reason) {
        case SSL_R_WRONG_VERSION_NUMBER:
        case SSL_R_UNKNOWN_PROTOCOL:
        case SSL_R_PACKET_LENGTH_TOO_LONG:
        case SSL_R_RECORD_LENGTH_MISMATCH:
        case SSL_R_HTTP_REQUEST:
            f.definitive = true;
            f.ec = errc::tls_not_tls_server;
            f.detail =
                "TLS: the server did not answer as a TLS server (" + words + "; a plain, non-TLS port?)";
            return f;
        case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
        case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
        case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
        case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
        case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
        case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
        case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
        case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
            f.definitive = true;
            if (!sent_certificate && reason != SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE) {
                f.ec = errc::tls_client_certificate_required;
                f.detail = "TLS: the server requires a client certificate (" + words +
                           "): set tls_options::certificate_file and private_key_file";
            } else if (!sent_certificate) {
                // A bare handshake_failure alert names no cause: a TLS 1.2 server that wants a
                // client certificate sends it, and so does one with no cipher in common (seen: a
                // server offering only AES128-SHA). The headline claims neither.
                f.ec = errc::tls_handshake_failed;
                f.detail = "TLS: the server refused the handshake (" + words +
                           "): no protocol or cipher in common, or it requires a client certificate and "
                           "none is set (tls_options::certificate_file)";
            } else if (reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE) {
                f.ec = errc::tls_handshake_failed; // (no common protocol or cipher, or the certificate)
                f.detail = "TLS: the server refused the handshake (" + words +
                           "): no protocol or cipher in common, or it refused the client certificate";
            } else {
                f.ec = errc::tls_client_certificate_rejected;
                f.detail = "TLS: the server refused the client certificate (" + words + ")";
            }
            return f;
        default:
            f.definitive = true;
            f.ec = errc::tls_handshake_failed;
            f.detail = "TLS: handshake failed (" + words + ")";
            return f;
        }
    }
    f.detail = ec == asio::error::connection_refused ? std::string("connection refused")
               : ec == asio::error::connection_reset ? std::string("connection reset")
               : ec == asio::error::timed_out        ? std::string("timed out")
                                                     : ec.message();
    return f;
}

} // namespace zklock::detail
