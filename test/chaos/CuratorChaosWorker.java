// A chaos-soak peer (scripts/chaos.sh --peers curator): Curator's InterProcessMutex on the same
// paths as the zklock workers, logging every hold in their format (see chaos_worker.cpp):
//   G <path> <start_ns> <fencing_token> <session_id_hex>
//   E <path> <end_ns> released | E <path> <end_ns> lost suspended
// The fencing token is the lock node's czxid x 4096, as zklock makes its own, so the checker can
// order grants across implementations. The loss signal is Curator's advice: a connection state
// change to SUSPENDED or LOST. SIGTERM: finish the hold, release, exit 0.
// With RECIPE election (chaos.sh --recipe election --peers curator): Curator's LeaderSelector on
// the same election paths as the zklock candidates (their default dialect, "_c_<uuid>-lock-<seq>"),
// id NAME (its node's data). One campaign, one LeaderSelector: takeLeadership is one hold, logged
// as above (its token: the czxid of the newest candidate node whose data is NAME), ended by its
// return (released) or by the loss signal; the selector is listened to through Curator's
// LeaderSelectorListenerAdapter, which cancels the leadership (interrupts it) on SUSPENDED or LOST.
// A campaign not won within 10 s, or that sees the loss signal before it is won, is given up.
// No proclaims, no commits (LeaderSelector has neither).
//   java CuratorChaosWorker CONNECT PATHS LOG SEED SESSION_TIMEOUT_MS HOLD_MIN_MS HOLD_MAX_MS [RECIPE [NAME]]
//   RECIPE: mutex (default) or election; NAME: default, the log file's name without ".log"
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryForever;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorChaosWorker {
    static long nowNs() { Instant i = Instant.now(); return i.getEpochSecond() * 1_000_000_000L + i.getNano(); }
    static volatile boolean stop = false;
    static final AtomicLong lostAt = new AtomicLong(0);
    static final AtomicInteger holds = new AtomicInteger(), failed = new AtomicInteger();
    static PrintWriter log;
    static Random rng;
    static int holdMin, holdMax;

    public static void main(String[] a) throws Exception {
        String connect = a[0], logPath = a[2];
        int paths = Integer.parseInt(a[1]), timeoutMs = Integer.parseInt(a[4]);
        holdMin = Integer.parseInt(a[5]);
        holdMax = Integer.parseInt(a[6]);
        String recipe = a.length > 7 ? a[7] : "mutex";
        String name = a.length > 8 ? a[8] : new File(logPath).getName().replaceFirst("\\.log$", "");
        boolean election = recipe.equals("election");
        if (!election && !recipe.equals("mutex")) throw new IllegalArgumentException("RECIPE: mutex or election");
        rng = new Random(Long.parseLong(a[3]));
        // (a signal handler, not a shutdown hook: the JVM would exit with 143 after the hook)
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stop = true);
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> stop = true);
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(connect, timeoutMs, 60000, new RetryForever(100));
             PrintWriter l = new PrintWriter(new FileWriter(logPath), true)) {
            log = l;
            c.getConnectionStateListenable().addListener((client, state) -> {
                if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) lostAt.compareAndSet(0, nowNs());
            });
            c.start();
            c.blockUntilConnected(60, TimeUnit.SECONDS);
            while (!stop) {
                String path = "/zklock-chaos/lock" + rng.nextInt(paths);
                if (election) campaign(c, path, name);
                else mutexHold(c, path);
            }
        }
        System.err.println("curator worker: " + holds.get() + (election ? " leaderships, " : " holds, ") + failed.get()
                           + (election ? " failed campaigns" : " failed acquires"));
        System.exit(0);
    }

    // One acquire of InterProcessMutex and, if granted, one hold.
    static void mutexHold(CuratorFramework c, String path) throws Exception {
        InterProcessMutex m = new InterProcessMutex(c, path);
        long start, token, session;
        try {
            lostAt.set(0);
            if (!c.getZookeeperClient().isConnected() || !m.acquire(10, TimeUnit.SECONDS)) { failed.incrementAndGet(); Thread.sleep(50); return; }
            start = nowNs();
            String mine = m.getParticipantNodes().iterator().next(); // the holder: us
            token = c.checkExists().forPath(mine).getCzxid() * 4096;
            session = c.getZookeeperClient().getZooKeeper().getSessionId();
            if (lostAt.get() != 0) throw new IllegalStateException("lost before the grant was logged");
        } catch (Exception e) {
            failed.incrementAndGet();
            try { m.release(); } catch (Exception ignored) { }
            Thread.sleep(50);
            return;
        }
        log.println("G " + path + " " + start + " " + token + " " + Long.toHexString(session));
        // hold, unless the loss signal comes first
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(holdMin + rng.nextInt(holdMax - holdMin + 1));
        while (System.nanoTime() < until && lostAt.get() == 0) Thread.sleep(1);
        long lost = lostAt.get();
        if (lost != 0) log.println("E " + path + " " + lost + " lost suspended");
        else log.println("E " + path + " " + nowNs() + " released");
        holds.incrementAndGet();
        try { m.release(); } catch (Exception ignored) { } // Curator's delete is guaranteed: retried in the background
    }

    // One campaign of a LeaderSelector and, if it wins, one leadership (takeLeadership).
    static void campaign(CuratorFramework c, String path, String name) throws Exception {
        // (a campaign dies with the connection: wait for it, rather than count a failure every 50 ms)
        if (!c.blockUntilConnected(10, TimeUnit.SECONDS)) { failed.incrementAndGet(); return; }
        lostAt.set(0);
        if (!c.getZookeeperClient().isConnected()) { failed.incrementAndGet(); Thread.sleep(50); return; }
        AtomicInteger state = new AtomicInteger(0); // 0 campaigning, 1 leading, 2 given up
        CountDownLatch done = new CountDownLatch(1);
        // (the adapter's stateChanged: SUSPENDED or LOST cancels the leadership, interrupting takeLeadership)
        LeaderSelector sel = new LeaderSelector(c, path, new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework client) {
                if (!state.compareAndSet(0, 1)) return; // given up: relinquish at once, not a hold
                try { lead(client, path, name); } finally { done.countDown(); }
            }
        });
        sel.setId(name);
        sel.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (state.get() == 0 && System.nanoTime() < deadline && lostAt.get() == 0 && !stop) Thread.sleep(1);
        if (state.compareAndSet(0, 2)) { // not won: close() cancels the campaign (its node deleted, guaranteed)
            failed.incrementAndGet();
            sel.close();
            Thread.sleep(50);
            return;
        }
        done.await();
        sel.close(); // (the leadership was relinquished when takeLeadership returned: the node deleted, guaranteed)
    }

    // The leadership: log it, hold it unless the loss signal comes first, log its end.
    static void lead(CuratorFramework c, String path, String name) {
        long start, token, session;
        try {
            start = nowNs();
            token = ownNodeCzxid(c, path, name) * 4096;
            session = c.getZookeeperClient().getZooKeeper().getSessionId();
            if (lostAt.get() != 0) throw new IllegalStateException("lost before the grant was logged");
        } catch (Exception e) {
            failed.incrementAndGet(); // not a hold (relinquished on return)
            return;
        }
        log.println("G " + path + " " + start + " " + token + " " + Long.toHexString(session));
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(holdMin + rng.nextInt(holdMax - holdMin + 1));
        try {
            while (System.nanoTime() < until && lostAt.get() == 0) Thread.sleep(1);
        } catch (InterruptedException e) { // the adapter cancelled the leadership: SUSPENDED or LOST
            lostAt.compareAndSet(0, nowNs()); // (if the client's listener has not run yet)
            Thread.currentThread().interrupt();
        }
        long lost = lostAt.get();
        if (lost != 0) log.println("E " + path + " " + lost + " lost suspended");
        else log.println("E " + path + " " + nowNs() + " released");
        holds.incrementAndGet();
    }

    // The czxid of this candidate's node: the newest child whose data is our id (an older one
    // would be a node of ours still being deleted).
    static long ownNodeCzxid(CuratorFramework c, String path, String id) throws Exception {
        String newest = null;
        long czxid = 0;
        for (String child : c.getChildren().forPath(path)) {
            if (!child.contains("lock-")) continue;
            Stat st = new Stat();
            byte[] data;
            try {
                data = c.getData().storingStatIn(st).forPath(path + "/" + child);
            } catch (KeeperException.NoNodeException gone) {
                continue;
            }
            String seq = StandardLockInternalsDriver.standardFixForSorting(child, "lock-");
            if (data != null && id.equals(new String(data, StandardCharsets.UTF_8)) && (newest == null || seq.compareTo(newest) > 0)) {
                newest = seq;
                czxid = st.getCzxid();
            }
        }
        if (newest == null) throw new IllegalStateException("no candidate node of ours on " + path);
        return czxid;
    }
}
