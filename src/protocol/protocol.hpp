// Pure protocol logic of the lock recipes: no I/O, unit-tested without a server.
#pragma once

#include <zklock/dialect.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zklock::detail {

/// Our node prefix: "_c_" + 36-char uuid (Curator's "protected" naming).
inline constexpr std::string_view protected_prefix = "_c_";

/// Which recipe names a node: the exclusive lock ("lock-", "__lock__"), the read/write lock
/// ("__READ__"/"__WRIT__", "__rlock__"/"__lock__"), or Curator's LeaderLatch ("-latch-": an
/// election in election_dialect::curator_latch). It decides the names zklock creates, never which
/// children count: every recipe counts every lock node on its path, so a mutex and a read/write
/// lock on one path exclude each other (a mutex node is a writer to a reader).
enum class lock_family { mutex, rw, latch };

/// Whose naming a contender's name follows. Each peer orders only the nodes of its own naming
/// (Curator sorts other names after its own, kazoo ignores them), so candidates of two namings on
/// one path may both lead: an election refuses such a path (errc::election_dialect_mixed).
enum class naming { curator_lock, curator_latch, kazoo };
/// The naming of a contender's name (one that parse_contender accepts).
naming naming_of(std::string_view contender_name) noexcept;
/// The first contender among `children` whose naming differs from `ours`, if any.
std::optional<std::string> other_naming(std::span<const std::string> children, naming ours);

/// A child recognised as a lock contender.
struct contender {
    std::string_view name;     ///< the child's name
    std::string_view seq_text; ///< the 10-character sequence suffix, compared as a string
    std::int32_t seq = 0;      ///< its value (negative after the parent's cversion overflowed)
    bool writer = true;        ///< excludes everyone (mutex and write nodes); false for read nodes
};

/// The marker before the sequence of a node this library creates.
std::string_view node_marker(lock_family f, bool reader, lock_dialect d) noexcept;

/// Parses "<anything><marker><seq>" where <seq> is exactly what ZooKeeper appends: "%010d" of an
/// int32, i.e. 10 digits, or '-' and 9 digits. Anything else is not a contender. The markers, in
/// every family and dialect: writers "lock-" (Curator's mutex, with or without its "_c_<uuid>-"
/// prefix), "__lock__" (kazoo's Lock and WriteLock), "__WRIT__" (Curator's write lock), "latch-"
/// (Curator's LeaderLatch); readers
/// "__READ__" (Curator) and "__rlock__" (kazoo).
std::optional<contender> parse_contender(std::string_view child,
                                         lock_dialect d = lock_dialect::curator) noexcept;
/// The same (`f` and `d` do not change what counts: see lock_family).
std::optional<contender> parse_contender(std::string_view child, lock_family f, lock_dialect d) noexcept;

/// A semaphore lease's name: "<anything>-lease-<seq>" (Curator's InterProcessSemaphoreV2 layout,
/// under "<path>/leases").
bool is_semaphore_lease(std::string_view child) noexcept;

/// Parses a sequence suffix: 10 digits, or '-' followed by 9 digits.
std::optional<std::int32_t> parse_sequence(std::string_view text) noexcept;

/// The parent's cversion, read in the same getChildren2 reply as the children (nullopt: not
/// known). A sequential create names its node "%010d" of the parent's cversion before the create
/// counts in it, so every child a sequential create made has a suffix in [0, cversion) while the
/// counter has not wrapped. ZooKeeper stores the cversion capped: once it reaches INT32_MAX it
/// stays there while the counter that names new nodes wraps to negative values. So a stored
/// cversion below INT32_MAX proves that no wrap has happened.
using parent_cversion = std::optional<std::int32_t>;

/// True unless `cv` proves that the parent's sequence counter has never wrapped.
constexpr bool counter_may_have_wrapped(parent_cversion cv) noexcept {
    return !cv || *cv < 0 || *cv == INT32_MAX;
}

/// How a child of a lock path counts.
enum class child_kind {
    contender, ///< a lock node: ordered by its suffix
    foreign,   ///< named like a lock node, but its suffix is malformed, or one that no sequential
               ///< create can have made (negative or not below the cversion, while the counter has
               ///< not wrapped): made by hand. Ignored for ordering; `inspect` lists it, `break` removes it.
    other,     ///< not a lock node at all (e.g. "leases", a peer's helper node)
};
child_kind classify_child(std::string_view child, lock_family f, lock_dialect d, parent_cversion cv) noexcept;

/// Contenders among `children`, ordered as Curator and kazoo order them: by the sequence
/// suffix compared as a string (ties by full name: only a child made by hand can repeat a
/// suffix). Foreign children (classify_child) are left out.
std::vector<contender> sorted_contenders(std::span<const std::string> children,
                                         lock_dialect d = lock_dialect::curator,
                                         lock_family f = lock_family::mutex,
                                         parent_cversion cv = std::nullopt);

/// What an exclusive contender should do after listing the children.
struct exclusive_decision {
    /// ambiguous: the parent's sequence counter has overflowed (see sequence_ambiguous): the
    /// order of the contenders is unknown, so nobody may be granted on it.
    enum kind { acquired, wait, missing, ambiguous } what = missing;
    std::string predecessor;  ///< with `wait`: the child to watch (the next lower contender)
    std::size_t position = 0; ///< index of our node among the contenders (0 = holder)
    /// With `wait`: the predecessor is all that stands in the way, so its deletion alone grants
    /// the lock (granted_once_gone, computed here from the same sorted listing).
    bool alone = false;
};
exclusive_decision decide_exclusive(std::span<const std::string> children, std::string_view mine,
                                    lock_dialect d = lock_dialect::curator,
                                    parent_cversion cv = std::nullopt);

/// The read/write rules (recipes.md "shared locks"), over every lock node of the path:
///  - a writer (or a mutex contender) holds when it is the lowest node, else it watches the next
///    lower node of any kind;
///  - a reader holds when no writer is below it, else it watches the nearest lower writer
///    (not the lowest one: that would wake every reader at once). `own_writer` (a write node the
///    same owner holds) does not block the reader: that is a downgrade.
/// Only lower contenders matter (kazoo #649 deadlocked by looking at a later writer).
exclusive_decision decide(std::span<const std::string> children, std::string_view mine, lock_family f,
                          lock_dialect d, std::string_view own_writer = {},
                          parent_cversion cv = std::nullopt);

/// The specification of exclusive_decision::alone, for tests and the fuzz target (it decides
/// again on a copy of the listing): a waiter that listed `children` and must wait for `predecessor`: true when the predecessor's
/// deletion alone grants it the lock, with no need to list again. Sequence numbers under one
/// parent only grow (Curator's and kazoo's nodes take theirs from the same counter), so no node
/// that appears later sorts before ours: the decision on `children` without `predecessor` is
/// the decision on any later listing, except for nodes deleted meanwhile, which only help.
/// (A child made by hand with a low suffix later is not a contender anyone holds.)
bool granted_once_gone(std::span<const std::string> children, std::string_view mine,
                       std::string_view predecessor, lock_family f, lock_dialect d,
                       std::string_view own_writer = {}, parent_cversion cv = std::nullopt);

/// The release marker of the lock node at path `node`: "<node>.released". A holder of a write
/// node (a mutex's, or a read/write lock's writer) whose grant showed that no contender sorted
/// below it deletes its node in one transaction that also creates and deletes this path
/// (release_ops). A waiter that is not `alone` watches, with `exists`, the marker of the node it
/// waits for: a creation event proves that the node went while it was the lowest, so the
/// waiter's decision on its own listing without that node is `acquired` (as for `alone`), with
/// no new listing. Nothing else creates this path; a deletion without it (a waiter that gave up,
/// an expired session, another library's release, a reader) tells nothing, and the waiter lists
/// again. The marker never appears in a listing: it exists only inside that transaction.
std::string release_marker(std::string_view node);

/// True when `predecessor`, a contender's name, may be released with its marker: a write node of
/// any recipe (a reader's grant does not show that no writer is below it, so readers never mark).
bool may_mark_release(std::string_view predecessor, lock_family f, lock_dialect d) noexcept;

/// True when the sequence suffixes on a lock path cannot be trusted to order its contenders.
/// ZooKeeper names sequential nodes "%010d" of the parent's cversion, an int32: after 2^31
/// creates under one parent it wraps to negative values (up to 11 characters, "-2147483648")
/// in the request pipeline while the stored cversion stays at 2147483647, so suffixes repeat.
/// Only when `cv` does not rule a wrap out (counter_may_have_wrapped): then any suffix that is
/// negative, 2147483647, 11 characters long, or repeated makes the order unknown. While it
/// rules a wrap out, such children are foreign and ignored, so the order is always known.
bool sequence_ambiguous(std::span<const std::string> children, lock_family f, lock_dialect d,
                        parent_cversion cv = std::nullopt);

/// The child whose name contains `guid` (our node after a lost create reply), if any.
std::optional<std::string> find_by_guid(std::span<const std::string> children, std::string_view guid);

/// An RFC 4122 version-4 UUID in its 36-character form, from 128 random bits (the version and
/// variant bits are set over them). The bits come from the platform (session/platform.hpp).
std::string format_guid(std::uint64_t hi, std::uint64_t lo);

/// The path passed to create with ZOO_EPHEMERAL_SEQUENTIAL: "<parent>/_c_<guid>-lock-" (curator)
/// or "<parent>/<guid without dashes>__lock__" (kazoo); for the rw family "-__READ__"/"-__WRIT__"
/// (curator) or "__rlock__"/"__lock__" (kazoo).
std::string protected_node_prefix(std::string_view parent, std::string_view guid,
                                  lock_dialect d = lock_dialect::curator, lock_family f = lock_family::mutex,
                                  bool reader = false);
/// The part of the guid that appears in node names of dialect `d`.
std::string guid_in_name(std::string_view guid, lock_dialect d);

/// Fencing tokens: the lock node's czxid shifted left by `local_grant_bits`, plus the index of the
/// grant under that node (in-process hand-off; always 0 otherwise). Strictly increasing over the
/// successive grants of one lock as long as a node serves at most 2^local_grant_bits grants, and
/// representable while the czxid's epoch (its high 32 bits) is below 2^19.
inline constexpr int local_grant_bits = 12;
inline constexpr std::uint32_t max_local_grants = 1u << local_grant_bits;
constexpr std::int64_t fencing_token(std::int64_t czxid, std::uint32_t local_index) noexcept {
    return static_cast<std::int64_t>((static_cast<std::uint64_t>(czxid) << local_grant_bits) |
                                     (local_index & (max_local_grants - 1)));
}

/// In-process hand-off: what a queue does when the local holder releases its grant.
enum class after_release {
    hand_off,        ///< grant the next local waiter under the same node, no request
    release_requeue, ///< delete the node and queue again in ZooKeeper (others get their turn)
    release,         ///< delete the node; nobody local is waiting
};
/// `grants`: grants made under the node so far; `bound`: the most allowed per node.
/// No hand-off when the node is lost or the connection is not up (a grant is only made while
/// the session is known to hold the node).
constexpr after_release decide_after_release(bool node_held, bool connected, std::size_t waiters,
                                             std::uint32_t grants, std::uint32_t bound) noexcept {
    if (waiters == 0) return after_release::release;
    if (node_held && connected && grants < bound) return after_release::hand_off;
    return after_release::release_requeue;
}

/// The last segment of a path ("/a/b/c" -> "c").
std::string_view last_segment(std::string_view path) noexcept;

/// Whether the server takes these bytes in a path: strict UTF-8 without U+0000-U+001F,
/// U+007F-U+009F, U+E000-U+F8FF, U+FFF0-U+FFFF and anything past U+FFFF (which Java holds as
/// surrogates, refused with them).
bool path_segment_chars_ok(std::string_view seg) noexcept;
/// The proper ancestors of an absolute path, shortest first ("/a/b/c" -> "/a", "/a/b").
std::vector<std::string> ancestors(std::string_view path);

/// The holder description every recipe's nodes carry by default (mutex_options::node_data
/// empty): "zklock <hostname> pid <pid>" (platform::node_data gives this process's).
std::string holder_description(std::string_view host, long pid);

// ---- connect strings: the hosts resolved by zklock (asynchronously), not by the C client ----

/// One server of a connect string, as written ("[::1]" keeps its brackets).
struct connect_host {
    std::string host;
    std::string port;
};
/// The servers and the chroot ("" when none) of a connect string that
/// validate_connect_string accepted.
struct connect_spec {
    std::vector<connect_host> hosts;
    std::string chroot;
};
connect_spec parse_connect_string(std::string_view s);
/// True if `host` is an IPv4 or IPv6 address (brackets allowed): the C client takes it as it is,
/// without asking a resolver.
bool is_address_literal(std::string_view host) noexcept;
/// True if some host of `s` is a name: the C client would resolve it with a blocking
/// getaddrinfo, on the io_context, before every connection attempt.
bool needs_resolution(std::string_view s);
/// The connect string for the C client: "address:port,..." (IPv6 without brackets: the C client
/// splits at the last ':'), then the chroot. Duplicates are dropped, the order kept.
std::string numeric_connect_string(const std::vector<std::pair<std::string, unsigned short>>& addresses,
                                   std::string_view chroot);
/// A valid connect string as the C client takes it: bracketed IPv6 literals ("[::1]:2181") lose
/// their brackets ("::1:2181"; the C client splits host and port at the last ':' and would hand
/// "[::1]" to getaddrinfo, which refuses it). Everything else as it is.
std::string c_client_connect_string(std::string_view s);

} // namespace zklock::detail
