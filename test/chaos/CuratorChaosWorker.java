// A chaos-soak peer (scripts/chaos.sh --peers curator): Curator's InterProcessMutex on the same
// paths as the zklock workers, logging every hold in their format (see chaos_worker.cpp):
//   G <path> <start_ns> <fencing_token> <session_id_hex>
//   E <path> <end_ns> released | E <path> <end_ns> lost suspended
// The fencing token is the lock node's czxid x 4096, as zklock makes its own, so the checker can
// order grants across implementations. The loss signal is Curator's advice: a connection state
// change to SUSPENDED or LOST. SIGTERM: finish the hold, release, exit 0.
//   java CuratorChaosWorker CONNECT PATHS LOG SEED SESSION_TIMEOUT_MS HOLD_MIN_MS HOLD_MAX_MS
import java.io.*;
import java.time.Instant;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryForever;

public class CuratorChaosWorker {
    static long nowNs() { Instant i = Instant.now(); return i.getEpochSecond() * 1_000_000_000L + i.getNano(); }
    static volatile boolean stop = false;

    public static void main(String[] a) throws Exception {
        String connect = a[0], logPath = a[2];
        int paths = Integer.parseInt(a[1]), timeoutMs = Integer.parseInt(a[4]);
        int holdMin = Integer.parseInt(a[5]), holdMax = Integer.parseInt(a[6]);
        Random rng = new Random(Long.parseLong(a[3]));
        AtomicLong lostAt = new AtomicLong(0);
        // (a signal handler, not a shutdown hook: the JVM would exit with 143 after the hook)
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stop = true);
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> stop = true);
        int holds = 0, failed = 0;
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(connect, timeoutMs, 60000, new RetryForever(100));
             PrintWriter log = new PrintWriter(new FileWriter(logPath), true)) {
            c.getConnectionStateListenable().addListener((client, state) -> {
                if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) lostAt.compareAndSet(0, nowNs());
            });
            c.start();
            c.blockUntilConnected(60, TimeUnit.SECONDS);
            while (!stop) {
                String path = "/zklock-chaos/lock" + rng.nextInt(paths);
                InterProcessMutex m = new InterProcessMutex(c, path);
                long start, token, session;
                try {
                    lostAt.set(0);
                    if (!c.getZookeeperClient().isConnected() || !m.acquire(10, TimeUnit.SECONDS)) { failed++; Thread.sleep(50); continue; }
                    start = nowNs();
                    String mine = m.getParticipantNodes().iterator().next(); // the holder: us
                    token = c.checkExists().forPath(mine).getCzxid() * 4096;
                    session = c.getZookeeperClient().getZooKeeper().getSessionId();
                    if (lostAt.get() != 0) throw new IllegalStateException("lost before the grant was logged");
                } catch (Exception e) {
                    failed++;
                    try { m.release(); } catch (Exception ignored) { }
                    Thread.sleep(50);
                    continue;
                }
                log.println("G " + path + " " + start + " " + token + " " + Long.toHexString(session));
                // hold, unless the loss signal comes first
                long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(holdMin + rng.nextInt(holdMax - holdMin + 1));
                while (System.nanoTime() < until && lostAt.get() == 0) Thread.sleep(1);
                long lost = lostAt.get();
                if (lost != 0) log.println("E " + path + " " + lost + " lost suspended");
                else log.println("E " + path + " " + nowNs() + " released");
                holds++;
                try { m.release(); } catch (Exception ignored) { } // Curator's delete is guaranteed: retried in the background
            }
        }
        System.err.println("curator worker: " + holds + " holds, " + failed + " failed acquires");
        System.exit(0);
    }
}
