#!/usr/bin/env bash
# Throwaway ZooKeeper servers from Debian's jars, on loopback ports outside the ephemeral range, in a temp dir.
#
#   scripts/zk.sh start [--servers N] [--observers K] [--tick MS] [--sync-limit N] [--fsync yes|no] [--dir DIR] [--relay]
#                       [--tls [--tls-client-auth need|want|none] [--tls-server-cert server|wrongname|expired]]
#       Starts a standalone server (N=1, default) or an N-server ensemble on 127.0.0.1
#       (tickTime 500 ms, initLimit 20, syncLimit 10 ticks unless given).
#       Prints ZK_CONNECT=host:port[,host:port...] and ZK_DIR=<state dir>, one a line (eval-able).
#       --tls: each server also serves TLS (1.3 and 1.2, Netty) on a secureClientPort of its own, with
#       a throwaway PKI in DIR/tls (scripts/tls_certs.sh), and authenticates a client by its
#       certificate as x509:<subject> (client.pem: "x509:CN=zklock-client"); the plain clientPort
#       stays, quorum links stay plain. Prints one more line, between the two:
#       ZK_TLS_CONNECT=127.0.0.1:port[,...] (also in DIR/tls_connect; server i's port in DIR/tls_port<i>).
#       --tls-client-auth: ssl.clientAuth, whether a client must show a certificate (default need).
#       --tls-server-cert: the certificate the servers show: server (default), or tls_certs.sh's
#       wrongname (names wrong.example only) or expired one.
#       --observers K: K more servers, N+1..N+K, as observers (peerType=observer); they sync with the
#       leader until `zk.sh observe` points one at a follower. The N voting servers each serve
#       observers on an observerMasterPort of their own (ObserverMaster runs on followers).
#       (Not with --relay.)
#       --relay: server i reaches server j's quorum and election ports through freezable relays
#       (scripts/quorum_relay.py); the client ports stay direct. (A server answers an election
#       connection from a lower id by connecting back to its advertised port, past the relay.)
#   scripts/zk.sh observe DIR O J    restarts observer O to sync through server J's ObserverMaster
#                                    (J must follow: the leader runs none), so that O's sessions reach
#                                    the leader over two relays, O -> J -> leader; waits until J
#                                    logs O as its learner and O serves
#   scripts/zk.sh freeze DIR I J [I J ...]  freezes the links of server I to server J
#                                    (bytes stop both ways, sockets stay open; needs --relay)
#   scripts/zk.sh hold DIR I J       holds back what server J sends to server I on the links I opened
#                                    to J (a leader J's pings and proposals to its follower I), while
#                                    what I sends to J passes (needs --relay; thaw ends it)
#   scripts/zk.sh thaw DIR [I J]     thaws that link (all links without I J)
#                                    (freeze and thaw return once the relay applied the change)
#   scripts/zk.sh depose DIR L       the leader L is cut off from its quorum (every relay link
#       between L and the others frozen, both ways) and the others are SIGKILLed and restarted at
#       once, so they give L up at once and elect a new leader among themselves, while L keeps
#       serving its clients and believes it leads until its syncLimit x tickTime runs out.
#       Waits until the restarted servers serve (20 s at most); prints two lines on stdout,
#       CUT_FROM=<realtime ns just before the cut> and NEW_LEADER=<id>, and its progress on
#       stderr; fails if L does not lead, if no new leader serves within 20 s, or if they follow L. Needs --relay. `zk.sh thaw DIR` undoes the cut
#       (L then rejoins as a follower).
#   scripts/zk.sh stop  DIR          stops every server of DIR and removes DIR
#   scripts/zk.sh kill  DIR I        SIGKILLs server I (1-based) of DIR
#   scripts/zk.sh pause|resume DIR I SIGSTOP/SIGCONT server I
#   scripts/zk.sh restart DIR I      starts server I of DIR again (after kill)
#   scripts/zk.sh srvr DIR I         prints the four-letter 'srvr' answer of server I
#   scripts/zk.sh wait DIR I         waits until server I serves requests
set -euo pipefail

JARS=/usr/share/java
CP="$JARS/zookeeper.jar:$JARS/zookeeper-jute.jar:$JARS/slf4j-api.jar:$JARS/slf4j-simple.jar:$JARS/netty-handler.jar:$JARS/netty-common.jar:$JARS/netty-buffer.jar:$JARS/netty-transport.jar:$JARS/netty-codec.jar:$JARS/netty-resolver.jar:$JARS/netty-transport-native-epoll.jar:$JARS/netty-transport-native-unix-common.jar:$JARS/metrics-core.jar:$JARS/snappy-java.jar:$JARS/commons-cli.jar:$JARS/commons-io.jar"

die() { echo "zk.sh: $*" >&2; exit 1; }

four() { # four-letter word to 127.0.0.1:$1, prints the answer
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf '%s' "$2" >&3
  timeout 2 cat <&3 || true
  exec 3<&- 3>&-
}

launch() { # launch DIR I
  local dir=$1 i=$2
  [ -f "$dir/zoo$i.cfg" ] || die "no server $i in $dir"
  # A restarted server appends to its log: what it logged before it was killed stays readable.
  [ -s "$dir/server$i.log" ] && echo "=== zk.sh: server $i started again at $(date +%H:%M:%S.%3N)" >>"$dir/server$i.log"
  # -Xss/-Xmx keep memory small; each server is its own JVM
  # ZK_JVM_OPTS: tests default to a quick-starting JVM; benchmarks pass their own
  # ZK_LOG_LEVEL: the server's log level (default info, into DIR/serverI.log; benchmarks use warn)
  # The server must inherit no descriptor but 0-2 (redirected): a test that restarts a server
  # through system() would hand it whatever the test process holds open without CLOEXEC, and the
  # server outlives the test. Seen under ThreadSanitizer: the server kept the write end of the
  # pipe into TSan's llvm-symbolizer, so the symbolizer never saw EOF, kept the test's stderr
  # (ctest's pipe) open, and ctest waited for it until its timeout although the test had passed.
  # ZK_TRACE_TOUCHES (default: on unless ZK_LOG_LEVEL is set): the session tracker logs every touch
  # of a session at TRACE ("Touch session: 0x<id> with timeout <ms>"), once wait_up has set the
  # trace mask (4lw stmk): what a test needs to measure a lease's margin against the leader's own
  # expiry before its rounding to a tick (the last touch + its timeout: test/integration/loss_race.hpp)
  local touch_log=""
  [ "${ZK_TRACE_TOUCHES:-$([ -z "${ZK_LOG_LEVEL:-}" ] && echo 1 || echo 0)}" = 1 ] &&
    touch_log="-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.SessionTrackerImpl=trace"
  # setsid: the server is alone in its own session and process group, so SIGSTOPping it (pause)
  # leaves no stopped process in the group of the caller, whose group the kernel would otherwise
  # send SIGHUP when it becomes orphaned, and no terminal hang-up reaches it. (setsid forks only
  # if its caller leads a process group; this script has no job control, so the subshell does not,
  # and the pid recorded below stays the server's.)
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    # Containers (lock paths) are reaped every second, and without the reaper's default rate
    # limit (znode.container.maxPerMinute = 10,000, one delete per 6 ms): a test that leaves
    # 4,000 empty lock paths (Scale.ASessionKeepsMoreLocks...) backlogged it for 24 s, and the
    # no-leftover check of a test run in that time (5 s) failed on empty containers
    # (MixedRecipes.ListShowsASemaphoresLeasesAndBreakTakesThem, when the suite ran in a fresh
    # build's order).
    # shellcheck disable=SC2086
    exec setsid java -Xmx512m ${ZK_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1} -Dzookeeper.admin.enableServer=false \
      -Dorg.slf4j.simpleLogger.defaultLogLevel="${ZK_LOG_LEVEL:-info}" -Dorg.slf4j.simpleLogger.showDateTime=true \
      -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS $touch_log \
      -Dznode.container.checkIntervalMs=1000 -Dznode.container.maxPerMinute=6000000 \
      -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo$i.cfg"
  ) >>"$dir/server$i.log" 2>&1 </dev/null &
  echo $! >"$dir/server$i.pid"
}

stop_dir() { # stop_dir DIR : stops its servers, drops its port reservations, removes a temp DIR
  local dir=$1 f pid
  for f in "$dir"/server*.pid "$dir"/relay.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f"); kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true
  done
  for f in "$dir"/server*.pid "$dir"/relay.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  /usr/bin/python3 "$(dirname "$0")/zk_ports.py" release "$dir" || true
  case "$dir" in /tmp/zklock-zk.*) rm -rf "$dir";; esac
}

set_trace_mask() { # set_trace_mask PORT : 4lw stmk with the mask as 8 bytes, big-endian (0x13a)
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'stmk\x00\x00\x00\x00\x00\x00\x01\x3a' >&3
  timeout 2 cat <&3 || true
  exec 3<&- 3>&-
}

launch_relay() { # launch_relay DIR : the quorum relays of DIR/relays (see quorum_relay.py)
  local dir=$1
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec setsid /usr/bin/python3 "$(dirname "$0")/quorum_relay.py" "$dir"
  ) >>"$dir/relay.log" 2>&1 </dev/null &
  echo $! >"$dir/relay.pid"
  for _ in $(seq 1 100); do grep -q 'relays up' "$dir/relay.log" 2>/dev/null && return 0; sleep 0.05; done
  die "the quorum relay did not start: $(tail -5 "$dir/relay.log")"
}

write_frozen() { # write_frozen DIR "lines": atomically, so the relay never reads half a file
  printf '%s' "$2" >"$1/frozen.tmp" && mv -f "$1/frozen.tmp" "$1/frozen"
}

set_frozen() { # set_frozen DIR "lines": write_frozen, then
  write_frozen "$1" "$2"
  # wait until the relay applied it (it writes back what it applied: quorum_relay.py), so
  # that the caller's next step (a kill, a sleep that times the fault) comes after the change
  local _
  for _ in $(seq 1 400); do cmp -s "$1/frozen" "$1/frozen.applied" 2>/dev/null && return 0; sleep 0.005; done
  die "the quorum relay of $1 did not apply the change in time (is it running? see $1/relay.log)"
}

freeze_pairs() { # freeze_pairs DIR I J [I J ...] : adds the links to the frozen ones
  local d=$1 lines; shift
  lines=$(cat "$d/frozen" 2>/dev/null || true)
  while [ $# -ge 2 ]; do lines="$lines"$'\n'"$1 $2"; shift 2; done
  set_frozen "$d" "$(echo "$lines" | sed '/^$/d' | sort -u)"$'\n'
}

mode_of() { # mode_of DIR I : leader, follower, standalone, or nothing (not serving, not running)
  four "$(cat "$1/port$2")" srvr 2>/dev/null | sed -n 's/^Mode: //p' || true
}

gone() { # gone PID : true once PID has exited (a zombie counts: its sockets are closed)
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
  [ -z "$st" ] || [ "$st" = Z ]
}

direct_links() { # direct_links PID PID... : established TCP connections between the first PID and
  # any of the others that do not go through a relay (both ends belong to those processes), one line
  # each; nothing if there are none
  local a=$1; shift
  ss -tnpH state established 2>/dev/null | awk -v a="$a" -v others=" $* " '
    $NF ~ /users:/ && match($NF, /pid=[0-9]+/) {
      here = $(NF-2); peer = $(NF-1); owner[here] = substr($NF, RSTART + 4, RLENGTH - 4); seen[here] = peer }
    END { for (l in seen) { p = seen[l]
            if (owner[l] == a && (p in owner) && index(others, " " owner[p] " "))
              print "  " l " (pid " a ") <-> " p " (pid " owner[p] ")" } }'
}

listening() { # listening PORT : true if a socket listens on local port PORT (java's are IPv6 sockets)
  awk -v p=":$(printf %04X "$1")" 'substr($2, length($2) - 4) == p && $4 == "0A" { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

wait_up() { # wait_up DIR I : until srvr answers with a mode (and the TLS port listens: a standalone
  # server binds it after it serves on the plain port, ~0.2 s later)
  local dir=$1 i=$2 port tport=""
  port=$(cat "$dir/port$i")
  [ -f "$dir/tls_port$i" ] && tport=$(cat "$dir/tls_port$i")
  for _ in $(seq 1 300); do
    if four "$port" srvr 2>/dev/null | grep -q '^Mode: ' && { [ -z "$tport" ] || listening "$tport"; }; then
      # the trace mask: ZooKeeper's default (0x132) and CLIENT_PING_TRACE_MASK (0x8), which the
      # tracker's touches are logged under (read only where its logger is at TRACE: launch)
      set_trace_mask "$port" >/dev/null 2>&1 || true
      return 0
    fi
    kill -0 "$(cat "$dir/server$i.pid")" 2>/dev/null || { tail -20 "$dir/server$i.log" >&2; die "server $i died"; }
    sleep 0.1
  done
  die "server $i of $dir did not come up within 30 s"
}

cmd=${1:-}; shift || true
case "$cmd" in
  start)
    n=1 k=0 tick=500 sync_limit=10 fsync=no dir="" relay=no tls=no tls_opts=no client_auth=need server_cert=server
    while [ $# -gt 0 ]; do
      case "$1" in
        --servers) n=$2; shift 2;;
        --observers) k=$2; shift 2;;
        --relay) relay=yes; shift;;
        --tls) tls=yes; shift;;
        --tls-client-auth) client_auth=$2; tls_opts=yes; shift 2
          case "$client_auth" in need|want|none) ;; *) die "--tls-client-auth: need, want or none";; esac;;
        --tls-server-cert) server_cert=$2; tls_opts=yes; shift 2
          case "$server_cert" in server|wrongname|expired) ;; *) die "--tls-server-cert: server, wrongname or expired";; esac;;
        --tick) tick=$2; shift 2;;
        --sync-limit) sync_limit=$2; shift 2;;
        --fsync) fsync=$2; shift 2;;
        --dir) dir=$2; shift 2;;
        *) die "unknown option $1";;
      esac
    done
    command -v java >/dev/null || die "java not found: run scripts/setup.sh"
    [ -f "$JARS/zookeeper.jar" ] || die "Debian's zookeeper package is missing: run scripts/setup.sh"
    [ -n "$dir" ] || dir=$(mktemp -d /tmp/zklock-zk.XXXXXX)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    # A start that fails half-way (no free ports, a server that does not come up) prints no
    # ZK_DIR for the caller to stop: stop what it started here.
    trap 'stop_dir "$dir"' EXIT
    # Ports outside the kernel's ephemeral range, reserved for this dir: a quorum port stays
    # unbound until its server leads, and one taken meanwhile by anything on the machine keeps
    # the ensemble without a leader (see zk_ports.py).
    [ "$relay" = no ] || [ "$n" -gt 1 ] || die "--relay needs an ensemble (--servers N, N > 1)"
    [ "$k" -eq 0 ] || [ "$relay" = no ] || die "--observers and --relay do not go together"
    [ "$k" -eq 0 ] || [ "$n" -gt 1 ] || die "--observers needs an ensemble (--servers N, N > 1)"
    m=$((n + k)) # every server; 1..n vote, n+1..m observe
    [ "$tls_opts" = no ] || [ "$tls" = yes ] || die "--tls-client-auth and --tls-server-cert need --tls"
    nrelay=0; [ "$relay" = yes ] && nrelay=$((2 * n * (n - 1)))
    ntls=0; [ "$tls" = yes ] && ntls=$m
    nom=0; [ "$k" -gt 0 ] && nom=$n
    ports=$(/usr/bin/python3 "$(dirname "$0")/zk_ports.py" pick $((3 * m + nrelay + ntls + nom)) "$dir") || die "no ports (see above)"
    mapfile -t picked <<<"$ports"
    declare -a cports qports eports oports
    declare -A rports reports
    for i in $(seq 1 "$m"); do
      cports[$i]=${picked[$((3 * i - 3))]}; qports[$i]=${picked[$((3 * i - 2))]}; eports[$i]=${picked[$((3 * i - 1))]}
    done
    # (an observer looks for a master at each voting server's quorum address and at its own
    # observerMasterPort: on one loopback address the voting servers need a port each, and
    # `observe` gives an observer the one of the follower it is to use)
    for i in $(seq 1 "$nom"); do oports[$i]=${picked[$((3 * m + nrelay + ntls + i - 1))]}; done
    if [ "$relay" = yes ]; then
      r=$((3 * n)); : >"$dir/relays"
      for i in $(seq 1 "$n"); do
        for j in $(seq 1 "$n"); do
          [ "$i" = "$j" ] && continue
          rports[$i,$j]=${picked[$r]}; reports[$i,$j]=${picked[$((r + 1))]}; r=$((r + 2))
          echo "$i $j ${rports[$i,$j]} ${qports[$j]}" >>"$dir/relays"
          echo "$i $j ${reports[$i,$j]} ${eports[$j]}" >>"$dir/relays"
        done
      done
    fi
    declare -a tports
    if [ "$tls" = yes ]; then
      for i in $(seq 1 "$m"); do tports[$i]=${picked[$((3 * m + nrelay + i - 1))]}; done
      "$(dirname "$0")/tls_certs.sh" "$dir/tls" || die "tls_certs.sh failed"
    fi
    connect="" tls_connect=""
    for i in $(seq 1 "$m"); do
      mkdir -p "$dir/data$i"
      {
        echo "tickTime=$tick"
        echo "initLimit=20"
        echo "syncLimit=$sync_limit"
        echo "dataDir=$dir/data$i"
        echo "clientPort=${cports[$i]}"
        echo "clientPortAddress=127.0.0.1"
        echo "maxClientCnxns=0"
        echo "admin.enableServer=false"
        echo "4lw.commands.whitelist=*"
        echo "forceSync=$fsync"
        echo "extendedTypesEnabled=true"
        echo "emulate353TTLNodes=false"
        if [ "$tls" = yes ]; then
          # TLS on a client port of its own, served by Netty (the NIO factory has no TLS); the plain
          # clientPort stays. Key store: ZooKeeper 3.8's PEM loader reads the key and the
          # certificate chain from one file (tls_certs.sh's NAME-keystore.pem); trust store: the CA.
          # Protocols: 3.8 enables only ssl.protocol (default TLSv1.2) and TLS 1.2 cipher suites
          # unless told; TLS 1.3 is enabled here too (its suites, then 3.8's default GCM ones).
          # x509: this provider authenticates each client that shows a certificate as x509:<its
          # subject, RFC 2253> ("x509:CN=zklock-client"). 3.8.0 sets this very key by itself once a
          # secureClientPort is set (QuorumPeerConfig.configureSSLAuth); written here to be seen.
          # (Any authProvider.N would do: a provider is registered under its scheme, x509.)
          # Host names: ssl.hostnameVerification stays on (the default); on a server it checks only
          # quorum peers (plain here). 3.8.0 never checks a client certificate's names against
          # the client's address on a client port (ClientX509Util verifies no client host name;
          # it reads no ssl.clientHostnameVerification), and the client certificates name
          # localhost and 127.0.0.1 anyway, so a server that did check would accept them.
          echo "secureClientPort=${tports[$i]}"
          echo "secureClientPortAddress=127.0.0.1"
          echo "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"
          echo "ssl.keyStore.location=$dir/tls/$server_cert-keystore.pem"
          echo "ssl.keyStore.type=PEM"
          echo "ssl.trustStore.location=$dir/tls/ca.pem"
          echo "ssl.trustStore.type=PEM"
          echo "ssl.clientAuth=$client_auth"
          echo "ssl.enabledProtocols=TLSv1.3,TLSv1.2"
          echo "ssl.ciphersuites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
          echo "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"
        fi
        if [ "$n" -gt 1 ]; then
          echo "standaloneEnabled=false"
          for j in $(seq 1 "$m"); do
            if [ "$j" -gt "$n" ]; then
              echo "server.$j=127.0.0.1:${qports[$j]}:${eports[$j]}:observer"
            elif [ "$relay" = yes ] && [ "$i" != "$j" ]; then
              echo "server.$j=127.0.0.1:${rports[$i,$j]}:${reports[$i,$j]}" # (server $i reaches $j through the relays)
            else
              echo "server.$j=127.0.0.1:${qports[$j]}:${eports[$j]}"
            fi
          done
          if [ "$i" -gt "$n" ]; then
            echo "peerType=observer"
          elif [ "$k" -gt 0 ]; then
            echo "observerMasterPort=${oports[$i]}"
          fi
        fi
      } >"$dir/zoo$i.cfg"
      [ "$n" -gt 1 ] && echo "$i" >"$dir/data$i/myid"
      [ "$k" -gt 0 ] && [ "$i" -le "$n" ] && echo "${oports[$i]}" >"$dir/observer_master_port$i"
      echo "${cports[$i]}" >"$dir/port$i"
      connect="${connect:+$connect,}127.0.0.1:${cports[$i]}"
      if [ "$tls" = yes ]; then
        echo "${tports[$i]}" >"$dir/tls_port$i"
        tls_connect="${tls_connect:+$tls_connect,}127.0.0.1:${tports[$i]}"
      fi
    done
    [ "$tls" = yes ] && echo "$tls_connect" >"$dir/tls_connect"
    echo "$m" >"$dir/servers"
    echo "$connect" >"$dir/connect"
    if [ "$relay" = yes ]; then write_frozen "$dir" ""; launch_relay "$dir"; fi
    for i in $(seq 1 "$m"); do launch "$dir" "$i"; done
    for i in $(seq 1 "$m"); do wait_up "$dir" "$i"; done
    trap - EXIT
    echo "ZK_CONNECT=$connect"
    [ "$tls" = no ] || echo "ZK_TLS_CONNECT=$tls_connect"
    echo "ZK_DIR=$dir"
    ;;
  stop)
    [ -d "${1:?dir}" ] || exit 0
    stop_dir "$(cd "$1" && pwd)"
    ;;
  kill) kill -9 "$(cat "${1:?dir}/server${2:?i}.pid")"; sleep 0.2;;
  pause) kill -STOP "$(cat "${1:?dir}/server${2:?i}.pid")";;
  resume) kill -CONT "$(cat "${1:?dir}/server${2:?i}.pid")";;
  restart) launch "${1:?dir}" "${2:?i}"; wait_up "$1" "$2";;
  wait) wait_up "${1:?dir}" "${2:?i}";;
  observe)
    d=$(cd "${1:?dir}" && pwd); o=${2:?observer}; j=${3:?server}
    grep -qx 'peerType=observer' "$d/zoo$o.cfg" 2>/dev/null || die "observe: server $o of $d is no observer"
    [ -f "$d/observer_master_port$j" ] || die "observe: server $j of $d serves no observers"
    [ "$(mode_of "$d" "$j")" = follower ] || die "observe: server $j does not follow (srvr: $(mode_of "$d" "$j"))"
    kill -9 "$(cat "$d/server$o.pid")" 2>/dev/null || true
    for _ in $(seq 1 100); do gone "$(cat "$d/server$o.pid")" && break; sleep 0.02; done
    sed -i '/^observerMasterPort=/d' "$d/zoo$o.cfg"
    echo "observerMasterPort=$(cat "$d/observer_master_port$j")" >>"$d/zoo$o.cfg"
    before=$(grep -c "Follower sid: $o : info" "$d/server$j.log" || true)
    launch "$d" "$o"
    for _ in $(seq 1 200); do
      [ "$(grep -c "Follower sid: $o : info" "$d/server$j.log" || true)" -gt "$before" ] && break
      gone "$(cat "$d/server$o.pid")" && { tail -20 "$d/server$o.log" >&2; die "observe: server $o died"; }
      sleep 0.1
    done
    [ "$(grep -c "Follower sid: $o : info" "$d/server$j.log" || true)" -gt "$before" ] ||
      die "observe: server $j logged no connection from observer $o within 20 s"
    wait_up "$d" "$o"
    ;;
  freeze)
    d=${1:?dir}; shift
    [ -f "$d/relays" ] || die "$d has no quorum relays (zk.sh start --relay)"
    [ $# -ge 2 ] && [ $(($# % 2)) -eq 0 ] || die "usage: zk.sh freeze DIR I J [I J ...]"
    freeze_pairs "$d" "$@"
    ;;
  hold)
    d=${1:?dir}; shift
    [ -f "$d/relays" ] || die "$d has no quorum relays (zk.sh start --relay)"
    [ $# -eq 2 ] || die "usage: zk.sh hold DIR I J"
    set_frozen "$d" "$(cat "$d/frozen" 2>/dev/null || true)"$'\n'"$1 $2 in"$'\n'
    ;;
  thaw)
    d=${1:?dir}; shift
    [ -f "$d/relays" ] || die "$d has no quorum relays (zk.sh start --relay)"
    if [ $# -ge 2 ]; then
      set_frozen "$d" "$(grep -vx "$1 $2" "$d/frozen" 2>/dev/null || true)"$'\n'
    else
      set_frozen "$d" ""
    fi
    ;;
  depose)
    t0=$(date +%s%N)
    d=$(cd "${1:?dir}" && pwd); l=${2:?leader}
    [ -f "$d/relays" ] || die "$d has no quorum relays (zk.sh start --relay)"
    n=$(cat "$d/servers")
    [ "$l" -ge 1 ] && [ "$l" -le "$n" ] || die "depose: no server $l in $d"
    [ "$(mode_of "$d" "$l")" = leader ] || die "depose: server $l does not lead (srvr: $(mode_of "$d" "$l"))"
    say() { echo "zk.sh: depose: +$(( ($(date +%s%N) - t0) / 1000000 )) ms: $*" >&2; }
    others=() cut=()
    for j in $(seq 1 "$n"); do [ "$j" = "$l" ] || { others+=("$j"); cut+=("$l" "$j" "$j" "$l"); }; done
    # 1. The cut, in place before the kills (set_frozen waits for the relay): the relays hold
    # the followers' quorum links to L as they were, the close of their sockets at the kill
    # included, so L sees no follower leave and goes on leading until syncLimit x tickTime pass
    # without an ack; the restarted servers' new links to L (quorum and election), and L's to
    # them, are accepted by the relay and held, and opened on the far side only at the thaw
    # (quorum_relay.py: a connection held open on the far side would block that server's
    # election listener for syncLimit x tickTime: seen, 6.8 s to a new leader instead of 2.3).
    # (CUT_FROM: the realtime clock just before the cut, in ns, for a test that times from the
    # fault itself rather than from the start of this command)
    echo "CUT_FROM=$(date +%s%N)"
    freeze_pairs "$d" "${cut[@]}"
    say "links between server $l and servers ${others[*]} frozen"
    # 2. The others die at once, and start again at once. (They keep their data; a follower
    # logged every committed transaction, so the leader they elect has all of them.)
    for j in "${others[@]}"; do kill -9 "$(cat "$d/server$j.pid")" 2>/dev/null || true; done
    for j in "${others[@]}"; do
      for _ in $(seq 1 100); do gone "$(cat "$d/server$j.pid")" && break; sleep 0.02; done
      gone "$(cat "$d/server$j.pid")" || die "depose: server $j did not die"
    done
    say "servers ${others[*]} killed"
    for j in "${others[@]}"; do launch "$d" "$j"; done
    say "servers ${others[*]} started again"
    # 3. Until one of them leads and the others follow it (a follower serves only once it synced
    # with its leader). All of them following means they follow L through a link that should not
    # exist: a failure, as is no leader within 20 s of the start of the command.
    new=""
    while :; do
      leader="" followers=0 modes=""
      for j in "${others[@]}"; do
        m=$(mode_of "$d" "$j"); modes="$modes server$j=${m:-none}"
        case "$m" in leader) leader=$j;; follower) followers=$((followers + 1));; esac
        gone "$(cat "$d/server$j.pid")" && { tail -20 "$d/server$j.log" >&2; die "depose: server $j died"; }
      done
      if [ -n "$leader" ] && [ "$followers" -eq $(( ${#others[@]} - 1 )) ]; then new=$leader; break; fi
      [ "$followers" -eq "${#others[@]}" ] &&
        die "depose: the new leader is the old one: servers ${others[*]} follow server $l"
      [ $(( $(date +%s%N) - t0 )) -lt 20000000000 ] ||
        die "depose: no new leader among servers ${others[*]} within 20 s (srvr:$modes; server$l=$(mode_of "$d" "$l"))"
      sleep 0.05
    done
    say "server $new leads, servers ${others[*]} serve (server $l: $(mode_of "$d" "$l"))"
    # 4. No election link between L and the restarted servers may bypass the relays (else L, still
    # leading, would answer their notifications and they would try to follow it into the frozen
    # link). Reasoning: a server keeps the election connection of a pair only from the higher id
    # to the lower; it drops one from a lower id and connects back to the address that server's
    # initial message advertises, its real election port (QuorumCnxManager.handleConnection).
    # A direct link between L and j therefore needs an initial message to cross the relays
    # between them first, and those are frozen before anything else happens. The direct links of
    # before the cut die with the killed processes (their new processes hold no old socket),
    # and L, leading, opens no election connection unless a LOOKING server's notification
    # reaches it. So none can exist; checked here anyway, at this moment (seen: none, in every
    # run by hand, with L = 1, 2 and 3). (The restarted servers' links to L through the relays
    # belong to the relay process, not to them.) The quorum links (a follower to its leader's
    # quorum port) always follow the configured address, the relay.
    if command -v ss >/dev/null; then
      pids=(); for j in "${others[@]}"; do pids+=("$(cat "$d/server$j.pid")"); done
      bad=$(direct_links "$(cat "$d/server$l.pid")" "${pids[@]}")
      [ -z "$bad" ] || die "depose: direct connections between server $l and the restarted servers, past the relays:"$'\n'"$bad"
    else
      say "(no ss: the check for direct links to server $l is skipped)"
    fi
    echo "NEW_LEADER=$new"
    ;;
  srvr) four "$(cat "${1:?dir}/port${2:?i}")" srvr;;
  mntr) four "$(cat "${1:?dir}/port${2:?i}")" mntr;;
  wchs) four "$(cat "${1:?dir}/port${2:?i}")" wchs;;
  *) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d'; exit 2;;
esac
