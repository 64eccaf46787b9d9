# Finds the ZooKeeper C client, multi-threaded flavour (Debian: libzookeeper-mt-dev).
# Defines ZooKeeper::zookeeper_mt.
find_path(ZooKeeperMT_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(ZooKeeperMT_LIBRARY zookeeper_mt)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeperMT REQUIRED_VARS ZooKeeperMT_LIBRARY ZooKeeperMT_INCLUDE_DIR)
if(ZooKeeperMT_FOUND AND NOT TARGET ZooKeeper::zookeeper_mt)
  add_library(ZooKeeper::zookeeper_mt UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::zookeeper_mt PROPERTIES
    IMPORTED_LOCATION "${ZooKeeperMT_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeperMT_INCLUDE_DIR}")
endif()
mark_as_advanced(ZooKeeperMT_INCLUDE_DIR ZooKeeperMT_LIBRARY)
