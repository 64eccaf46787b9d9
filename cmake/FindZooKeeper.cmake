# Finds the ZooKeeper C client.
#   ZooKeeper::zookeeper_st  the single-threaded library zklock drives from its io_context
#   ZooKeeper::zookeeper_mt  the multi-threaded one: only bench/zk_raw_bench uses it, as the raw
#                            C client most programs run
# Debian's two -dev packages (libzookeeper-st-dev, libzookeeper-mt-dev) install the same headers
# and cannot be installed together; with either one, the other flavour's runtime package
# (libzookeeper-st2, libzookeeper-mt2) is found by its versioned name.
find_path(ZooKeeper_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(ZooKeeper_ST_LIBRARY NAMES zookeeper_st libzookeeper_st.so.2)
find_library(ZooKeeper_MT_LIBRARY NAMES zookeeper_mt libzookeeper_mt.so.2)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeper REQUIRED_VARS ZooKeeper_ST_LIBRARY ZooKeeper_INCLUDE_DIR)
if(ZooKeeper_FOUND AND NOT TARGET ZooKeeper::zookeeper_st)
  add_library(ZooKeeper::zookeeper_st UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::zookeeper_st PROPERTIES
    IMPORTED_LOCATION "${ZooKeeper_ST_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeper_INCLUDE_DIR}")
endif()
if(ZooKeeper_FOUND AND ZooKeeper_MT_LIBRARY AND NOT TARGET ZooKeeper::zookeeper_mt)
  add_library(ZooKeeper::zookeeper_mt UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::zookeeper_mt PROPERTIES
    IMPORTED_LOCATION "${ZooKeeper_MT_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeper_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS THREADED)
endif()
mark_as_advanced(ZooKeeper_INCLUDE_DIR ZooKeeper_ST_LIBRARY ZooKeeper_MT_LIBRARY)
