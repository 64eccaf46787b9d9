// zklock/acl.hpp: who may touch lock nodes (ACLs), and the credentials a session presents.
#pragma once

#include <zklock/config.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zklock {

/// ZooKeeper's permission bits (combine with |).
namespace perm {
inline constexpr std::int32_t read = 1;   ///< getData, getChildren (list the contenders)
inline constexpr std::int32_t write = 2;  ///< setData (a revocation request writes the holder's node)
inline constexpr std::int32_t create = 4; ///< create children (become a contender)
inline constexpr std::int32_t remove = 8; ///< delete children (release, break a lock)
inline constexpr std::int32_t admin = 16; ///< setACL
inline constexpr std::int32_t all = 31;   ///< every permission above (read to admin combined)
} // namespace perm

/// One ACL entry: permissions for an identity, such as {perm::all, "digest", "svc:<base64 sha1>"},
/// {perm::read, "world", "anyone"}, {perm::all, "auth", ""} (whoever created the node).
struct acl_entry {
    std::int32_t perms = perm::all; ///< the permission bits granted (perm::*, combined with |)
    std::string scheme;             ///< the identity's scheme: "world", "auth", "digest", "x509", ...
    std::string id;                 ///< the identity within the scheme ("anyone", "svc:<base64 sha1>", ...)
    /// Equal when the permissions, the scheme and the id are equal.
    friend bool operator==(const acl_entry&, const acl_entry&) = default;
};

/// The ACL zklock creates lock nodes and the lock path node with (mutex_options::node_acl).
/// ZooKeeper checks a delete against the *parent's* ACL and a create against the parent's too:
/// protecting a lock means protecting its lock path node, which zklock creates with the same
/// ACL when it does not exist yet (an existing node keeps its own). Ancestors above the lock
/// path are created open: they are shared namespace ("/locks"), and one service's ACL there
/// would lock every other service out.
class ZKLOCK_DECL acl {
public:
    /// world:anyone with every permission (ZooKeeper's OPEN_ACL_UNSAFE). The default.
    static acl open() { return acl({{perm::all, "world", "anyone"}}); }
    /// The credentials that created a node get every permission, everyone else may read: any
    /// client can list the contenders and read their data, only sessions with the same
    /// credentials (session_options::auth) can become contenders, release, break or revoke.
    /// Needs credentials on the session (else the server refuses the create: zk_errc::invalid_acl).
    static acl creator_all_world_read() {
        return acl({{perm::all, "auth", ""}, {perm::read, "world", "anyone"}});
    }
    /// For sessions over mutual TLS (session_options::tls with a client certificate): the x509
    /// identity `subject` gets every permission, everyone else may read. ZooKeeper names a
    /// certificate's identity by its subject, in RFC 2253 form as Java prints it: "CN=svc" or
    /// "CN=svc,O=Acme" (`openssl x509 -noout -subject -nameopt RFC2253` prints it). Only
    /// sessions presenting a certificate with that subject, signed by a CA the server trusts,
    /// can become contenders, release, break or revoke; any session can list the contenders.
    static acl x509_all_world_read(std::string subject) {
        return acl({{perm::all, "x509", std::move(subject)}, {perm::read, "world", "anyone"}});
    }
    /// Any list of entries, such as a digest identity made with `zkCli.sh`'s digest tool.
    static acl custom(std::vector<acl_entry> entries) { return acl(std::move(entries)); }

    /// The entries, in order.
    const std::vector<acl_entry>& entries() const noexcept { return entries_; }
    /// True if the entries are exactly those of open() (world:anyone with every permission).
    bool is_open() const noexcept { return entries_ == open().entries_; }
    /// Equal when the entries are equal, in the same order.
    friend bool operator==(const acl&, const acl&) = default;

private:
    explicit acl(std::vector<acl_entry> e) : entries_(std::move(e)) {}
    std::vector<acl_entry> entries_;
};

/// Credentials a session presents (zoo_add_auth) on every connection, also after a new session
/// replaced an expired one. zklock never logs them nor puts them in error messages.
struct credentials {
    std::string scheme; ///< the authentication scheme, e.g. "digest"
    std::string secret; ///< the scheme's credentials, e.g. "user:password" for digest
};

/// The digest scheme: "user:password". ZooKeeper accepts any digest credentials at connect time
/// (the identity is simply user:base64(sha1(user:password))): a wrong password shows up later,
/// as zk_errc::no_auth on nodes the right one protects.
inline credentials digest(std::string user, const std::string& password) {
    return {"digest", std::move(user) + ":" + password};
}

} // namespace zklock
