#!/usr/bin/env bash
# Prints the class path of Debian's Curator recipes and the ZooKeeper client they need, for the
# Java peers of the interop test, the chaos soak and the benchmarks (one list, three users).
J=/usr/share/java
echo "$J/curator-recipes.jar:$J/curator-framework.jar:$J/curator-client.jar:$J/zookeeper.jar:$J/zookeeper-jute.jar:$J/guava.jar:$J/slf4j-api.jar:$J/slf4j-nop.jar:$J/netty-handler.jar:$J/netty-transport.jar:$J/netty-common.jar:$J/netty-buffer.jar:$J/netty-codec.jar:$J/netty-resolver.jar:$J/netty-transport-native-epoll.jar:$J/netty-transport-native-unix-common.jar"
