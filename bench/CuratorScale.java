// Curator's side of bench/scale.sh: one CuratorFramework (one session, T = SESSION_TIMEOUT_MS)
// holding N InterProcessMutex locks, each on its own path, acquired PARALLEL at a time (a pool of
// that many threads: acquire() blocks its thread). Then prints on stdout
//   READY <held> <acquire_s> <failures> <rss_before_bytes> <heap_before_bytes>
// and reads commands on stdin, one a line:
//   MARK   prints  MARK <t_s> <cpu_s> <rss_bytes> <heap_used_bytes> <lost> <suspended> <lost_events>
//          (t_s: System.nanoTime; cpu_s: the JVM's process CPU time; heap: used after a System.gc();
//          lost: held locks counted lost: all of them once the connection state went LOST (Curator's
//          rule: the session, and with it every lock node, may be gone), else 0; suspended and
//          lost_events: the ConnectionStateListener's SUSPENDED and LOST events so far)
//   CHECK  prints  CHECK <missing>: the held lock nodes that no longer exist (one exists() each)
//   QUIT   closes the client (the server deletes the nodes) and exits.
//   java CuratorScale CONNECT N SESSION_TIMEOUT_MS PARALLEL
import java.io.*;
import java.lang.management.ManagementFactory;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorScale {
    static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime() / 1e9;
    }
    static long rss() throws IOException { // resident pages (statm's second field) x 4096
        String[] f = new String(Files.readAllBytes(Paths.get("/proc/self/statm"))).trim().split("\\s+");
        return Long.parseLong(f[1]) * 4096L;
    }
    static long heapUsed() {
        System.gc();
        Runtime r = Runtime.getRuntime();
        return r.totalMemory() - r.freeMemory();
    }
    public static void main(String[] a) throws Exception {
        String connect = a[0];
        int n = Integer.parseInt(a[1]), timeoutMs = Integer.parseInt(a[2]), parallel = Integer.parseInt(a[3]);
        String base = "/zklock-scale/curator-" + ProcessHandle.current().pid();
        long rss0 = rss(), heap0 = heapUsed();
        AtomicLong suspended = new AtomicLong(), lostEvents = new AtomicLong();
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(connect).sessionTimeoutMs(timeoutMs)
                .connectionTimeoutMs(15000).retryPolicy(new ExponentialBackoffRetry(100, 3)).build();
        c.getConnectionStateListenable().addListener((cl, s) -> {
            if (s == ConnectionState.SUSPENDED) suspended.incrementAndGet();
            if (s == ConnectionState.LOST) lostEvents.incrementAndGet();
        });
        c.start();
        c.blockUntilConnected();
        InterProcessMutex[] m = new InterProcessMutex[n];
        for (int i = 0; i < n; i++) m[i] = new InterProcessMutex(c, base + "/l-" + i);
        ExecutorService pool = Executors.newFixedThreadPool(parallel);
        AtomicLong failures = new AtomicLong();
        Map<String, Long> errors = new ConcurrentHashMap<>();
        boolean[] held = new boolean[n];
        long t0 = System.nanoTime();
        List<Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int k = i;
            fs.add(pool.submit(() -> {
                try {
                    held[k] = m[k].acquire(60, TimeUnit.SECONDS);
                    if (!held[k]) { failures.incrementAndGet(); errors.merge("acquire timed out (60 s)", 1L, Long::sum); }
                } catch (Exception e) {
                    failures.incrementAndGet();
                    errors.merge(String.valueOf(e), 1L, Long::sum);
                }
            }));
        }
        for (Future<?> f : fs) f.get();
        double acquireS = (System.nanoTime() - t0) / 1e9;
        long heldN = 0;
        for (boolean h : held) heldN += h ? 1 : 0;
        for (Map.Entry<String, Long> e : errors.entrySet()) System.err.println("ACQUIRE_ERROR " + e.getValue() + " " + e.getKey());
        System.out.println("READY " + heldN + " " + String.format("%.3f", acquireS) + " " + failures.get() + " " + rss0 + " " + heap0);
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null;) {
            line = line.trim();
            if (line.equals("MARK")) {
                long heap = heapUsed();
                long lost = lostEvents.get() > 0 ? heldN : 0;
                System.out.println(String.format("MARK %.6f %.3f %d %d %d %d %d", System.nanoTime() / 1e9, cpuSeconds(), rss(), heap,
                        lost, suspended.get(), lostEvents.get()));
            } else if (line.equals("CHECK")) {
                // the lock nodes: each mutex's path's children that this client created (its session's ephemerals)
                long sid = c.getZookeeperClient().getZooKeeper().getSessionId(), missing = 0;
                for (int i = 0; i < n; i++) {
                    if (!held[i]) continue;
                    boolean mine = false;
                    for (String ch : c.getChildren().forPath(base + "/l-" + i)) {
                        org.apache.zookeeper.data.Stat st = c.checkExists().forPath(base + "/l-" + i + "/" + ch);
                        if (st != null && st.getEphemeralOwner() == sid) mine = true;
                    }
                    if (!mine) missing++;
                }
                System.out.println("CHECK " + missing);
            } else if (line.equals("QUIT")) {
                break;
            }
            System.out.flush();
        }
        // (the mutexes stay reachable to the end: else the JIT may count m dead after the acquires
        // and the collector take them, which the heap figure would then leave out)
        java.lang.ref.Reference.reachabilityFence(m);
        pool.shutdownNow();
        c.close();
        System.exit(0);
    }
}
