// zklock/tls.hpp: TLS to ZooKeeper's secure client port (secureClientPort), and x509 identities.
#pragma once

#include <chrono>
#include <string>

namespace zklock {

/// TLS for a session (session_options::tls): every connection to a server of the connect string
/// is a TLS connection (1.2 with forward-secret AEAD suites only, or 1.3; no renegotiation),
/// whose server certificate must chain to `ca` and name the server. zklock does the TLS itself (OpenSSL, through Boost.Asio), between the C client and the
/// server; see docs/operations.md ("TLS") for how and why.
///
/// Files and PEM text: each of ca, certificate and key is given either as a file name (`*_file`)
/// or as PEM text (`*_pem`), not both (errc::tls_config_invalid). They are read by
/// session::async_connect, whose error names what could not be read.
struct tls_options {
    /// The certificate authorities that may sign a server's certificate (PEM, one or more).
    /// Only these are trusted, not the system's store, unless `use_system_ca_store`.
    /// One of ca_file, ca_pem or use_system_ca_store is needed (else errc::tls_config_invalid).
    std::string ca_file;
    /// The same certificate authorities as PEM text, instead of ca_file.
    std::string ca_pem;
    /// Also trust the system's default CA store (OpenSSL's default paths).
    bool use_system_ca_store = false;

    /// The client's certificate chain (PEM), for servers that ask for one (mutual TLS,
    /// ZooKeeper's ssl.clientAuth=need, its default). The server then authenticates the session
    /// as x509 with the certificate's subject, e.g. "CN=svc" (see acl::x509_all_world_read).
    /// Optional: without it, a server that requires one refuses the connection
    /// (errc::tls_client_certificate_required).
    /// A certificate without its private key, or a key without its certificate, is
    /// errc::tls_config_invalid.
    std::string certificate_file;
    /// The same certificate chain as PEM text, instead of certificate_file.
    std::string certificate_pem;
    /// The certificate's private key (PEM), and its password if it is encrypted.
    std::string private_key_file;
    /// The same private key as PEM text, instead of private_key_file.
    std::string private_key_pem;
    /// The private key's password, if it is encrypted (for private_key_file and private_key_pem
    /// alike; zklock never asks for it on a terminal). The session's TLS relay wipes its own copy
    /// of this and of private_key_pem once the key is loaded; these members, and the session's
    /// copy (session::options()), stay as given.
    std::string private_key_password;

    /// Check that the server's certificate names the server (its subject alternative names, by
    /// DNS name or IP address; never the subject's CN, and a wildcard only as a whole left-most
    /// label): the host of the connect string, or `server_name` if set. On by
    /// default; turned off, any certificate the CA signed is accepted for any server.
    bool verify_server_name = true;
    /// The name every server's certificate must carry (and that is sent as SNI), instead of each
    /// server's host in the connect string: for a connect string of addresses whose certificates
    /// name a service ("zk.example.com").
    std::string server_name;

    /// The most a connection may take from its TCP connect to the end of the TLS handshake;
    /// then it counts as failed and the next server is tried, as a silent plain server would be.
    /// Zero (the default): a third of the session timeout.
    std::chrono::milliseconds handshake_timeout{0};
};

} // namespace zklock
