// Curator's side of bench/failover.sh: the same holders and waiters as zklock_failover, with
// InterProcessMutex and LeaderLatch (Debian's Curator, its defaults). One CuratorFramework
// (session) per holder and per waiter. Prints READY when every holder holds its lock and leads
// its latch and every waiter waits; then watches for the files DIR/mark (the fault's moment) and
// DIR/stop (print one JSON line with the same keys as zklock_failover, and exit).
//   java CuratorFailover CONNECT HOLDERS WAITERS SESSION_TIMEOUT_MS DIR
// "Told lost": the holder's client reported ConnectionState.LOST (Curator's word for a session it
// gave up: it closes and remakes the ZooKeeper handle itself once disconnected for the session
// timeout); SUSPENDED is counted apart. "Kept": the holder's lock node still exists, owned by the
// holder's original session. "Leaders changed": a waiter's latch became leader.
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.leader.*;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryForever;
import org.apache.zookeeper.data.Stat;

public class CuratorFailover {
    static final class Holder {
        CuratorFramework c;
        long sid;
        volatile long lostAt = 0, suspendedAt = 0;
        volatile boolean leaderLost = false;
        InterProcessMutex m;
        LeaderLatch latch;
    }
    static final class Waiter {
        CuratorFramework c;
        volatile long grantedAt = 0, ledAt = 0;
        LeaderLatch latch;
    }

    static CuratorFramework client(String connect, int timeoutMs) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(connect).sessionTimeoutMs(timeoutMs)
            .connectionTimeoutMs(15000).retryPolicy(new RetryForever(200)).build();
        c.start();
        if (!c.blockUntilConnected(60, TimeUnit.SECONDS)) throw new RuntimeException("no connection");
        return c;
    }

    /// True if `path` holds a child owned by session `sid`.
    static boolean ownsChild(CuratorFramework c, String path, long sid) {
        try {
            for (String ch : c.getChildren().forPath(path)) {
                Stat st = c.checkExists().forPath(path + "/" + ch);
                if (st != null && st.getEphemeralOwner() == sid) return true;
            }
        } catch (Exception e) {}
        return false;
    }

    public static void main(String[] a) throws Exception {
        String connect = a[0];
        int holders = Integer.parseInt(a[1]), waiters = Integer.parseInt(a[2]), timeoutMs = Integer.parseInt(a[3]);
        Path dir = Paths.get(a[4]);
        String base = "/curator-bench/failover/" + ProcessHandle.current().pid() + "/";
        List<Holder> hs = new ArrayList<>();
        List<Waiter> ws = new ArrayList<>();
        for (int i = 0; i < holders; ++i) {
            Holder h = new Holder();
            h.c = client(connect, timeoutMs);
            h.sid = h.c.getZookeeperClient().getZooKeeper().getSessionId();
            h.c.getConnectionStateListenable().addListener((cl, st) -> {
                long now = System.nanoTime();
                if (st == ConnectionState.LOST && h.lostAt == 0) h.lostAt = now;
                if (st == ConnectionState.SUSPENDED && h.suspendedAt == 0) h.suspendedAt = now;
            });
            h.m = new InterProcessMutex(h.c, base + "p" + i);
            h.m.acquire();
            h.latch = new LeaderLatch(h.c, base + "e" + i, "h" + i);
            h.latch.addListener(new LeaderLatchListener() {
                public void isLeader() {}
                public void notLeader() { h.leaderLost = true; }
            });
            h.latch.start();
            h.latch.await();
            hs.add(h);
        }
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        for (int i = 0; i < waiters; ++i) {
            Waiter w = new Waiter();
            w.c = client(connect, timeoutMs);
            final String lockPath = base + "p" + i;
            pool.submit(() -> {
                try {
                    new InterProcessMutex(w.c, lockPath).acquire();
                    w.grantedAt = System.nanoTime();
                } catch (Exception e) {}
                return null;
            });
            w.latch = new LeaderLatch(w.c, base + "e" + i, "w" + i);
            w.latch.addListener(new LeaderLatchListener() {
                public void isLeader() { if (w.ledAt == 0) w.ledAt = System.nanoTime(); }
                public void notLeader() {}
            });
            w.latch.start();
            ws.add(w);
        }
        // every waiter queued: each lock and each latch path holds two children
        for (int i = 0; i < waiters; ++i)
            for (String p : new String[] {base + "p" + i, base + "e" + i})
                while (hs.get(0).c.getChildren().forPath(p).size() < 2) Thread.sleep(20);
        System.out.println("READY " + holders + " " + waiters + " " + timeoutMs);
        System.out.flush();
        long faultAt = System.nanoTime();
        boolean marked = false;
        while (!Files.exists(dir.resolve("stop"))) {
            if (!marked && Files.exists(dir.resolve("mark"))) {
                faultAt = System.nanoTime();
                marked = true;
            }
            Thread.sleep(20);
        }
        int lost = 0, suspended = 0, kept = 0, survived = 0, granted = 0, leadersTold = 0, leadersKept = 0,
            leadersChanged = 0;
        double firstLoss = 1e9, lastLoss = -1e9, firstGrant = 1e9, lastGrant = -1e9;
        for (int i = 0; i < holders; ++i) {
            Holder h = hs.get(i);
            if (h.lostAt != 0) {
                ++lost;
                double s = (h.lostAt - faultAt) / 1e9;
                firstLoss = Math.min(firstLoss, s);
                lastLoss = Math.max(lastLoss, s);
            }
            if (h.suspendedAt != 0) ++suspended;
            long sidNow = -1;
            try { sidNow = h.c.getZookeeperClient().getZooKeeper().getSessionId(); } catch (Exception e) {}
            if (sidNow == h.sid && h.c.getZookeeperClient().isConnected()) ++survived;
            if (ownsChild(h.c, base + "p" + i, h.sid)) ++kept;
            if (h.leaderLost) ++leadersTold;
            if (h.latch.hasLeadership() && ownsChild(h.c, base + "e" + i, h.sid)) ++leadersKept;
        }
        for (Waiter w : ws) {
            if (w.ledAt != 0) ++leadersChanged;
            if (w.grantedAt == 0) continue;
            ++granted;
            double s = (w.grantedAt - faultAt) / 1e9;
            firstGrant = Math.min(firstGrant, s);
            lastGrant = Math.max(lastGrant, s);
        }
        System.out.printf(Locale.ROOT,
            "{\"holders\": %d, \"waiters\": %d, \"holders_told_lost\": %d, \"holders_suspended\": %d, "
            + "\"holders_regained\": -1, \"holders_lost_for_good\": %d, \"holders_kept_with_same_token\": %d, "
            + "\"locks_changed_hands\": %d, \"holder_sessions_survived\": %d, \"first_loss_s\": %.3f, "
            + "\"last_loss_s\": %.3f, \"first_grant_s\": %.3f, \"last_grant_s\": %.3f, \"leaders\": %d, "
            + "\"leaders_told_lost\": %d, \"leaders_kept_with_same_token\": %d, \"leaders_changed\": %d}%n",
            holders, waiters, lost, suspended, lost, kept, granted, survived, lost > 0 ? firstLoss : -1.0,
            lost > 0 ? lastLoss : -1.0, granted > 0 ? firstGrant : -1.0, granted > 0 ? lastGrant : -1.0, holders,
            leadersTold, leadersKept, leadersChanged);
        System.out.flush();
        for (Waiter w : ws) w.c.close();
        for (Holder h : hs) h.c.close();
        System.exit(0);
    }
}
