// zklock/dialect.hpp: which peer's node naming a lock uses on its path.
#pragma once

namespace zklock {

/// Node naming on a lock path. Peers only exclude each other when each sees the other's nodes.
/// Whatever the dialect, zklock's exclusive locks count both Curator-style ("...lock-<seq>") and
/// kazoo-style ("...__lock__<seq>") children as contenders; the dialect decides the names zklock
/// itself creates:
///  - curator (default): "_c_<uuid>-lock-<seq>", Curator's InterProcessMutex naming. Excludes and is
///    excluded by Curator (and go-zookeeper). kazoo sees these nodes only when its Lock is made with
///    extra_lock_patterns=["-lock-"] (kazoo >= 2.7.1); a plain kazoo Lock does not.
///  - kazoo: "<32 hex>__lock__<seq>", kazoo's Lock naming, seen by every kazoo Lock. Curator never
///    sees kazoo-named nodes, so never mix Curator with this dialect (or with kazoo) on one path.
enum class lock_dialect { curator, kazoo };

} // namespace zklock
