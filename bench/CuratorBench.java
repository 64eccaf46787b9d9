// Curator's InterProcessMutex under the same workload as zklock_bench: one CuratorFramework
// (session) per worker thread. Prints one JSON object like zklock_bench.
//   java CuratorBench CONNECT WORKERS LOCKS HOLD_MS SECONDS
import java.lang.management.ManagementFactory;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench {
    /// The server's count of packets received (4lw "mntr", zk_packets_received), -1 if unknown: its
    /// change over the measured window, per cycle, is the requests per cycle as the server saw them.
    static long packetsReceived(String connect) {
        String hp = connect.split(",")[0];
        int i = hp.lastIndexOf(':');
        try (java.net.Socket s = new java.net.Socket(hp.substring(0, i), Integer.parseInt(hp.substring(i + 1)))) {
            s.getOutputStream().write("mntr".getBytes());
            s.shutdownOutput();
            for (String line : new String(s.getInputStream().readAllBytes()).split("\n"))
                if (line.startsWith("zk_packets_received")) return Long.parseLong(line.trim().split("\\s+")[1]);
        } catch (Exception e) {}
        return -1;
    }
    static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime() / 1e9;
    }
    public static void main(String[] a) throws Exception {
        String connect = a[0];
        int workers = Integer.parseInt(a[1]), locks = Integer.parseInt(a[2]), holdMs = Integer.parseInt(a[3]);
        double seconds = Double.parseDouble(a[4]);
        String base = "/zklock-bench/curator-" + ProcessHandle.current().pid();
        AtomicBoolean measuring = new AtomicBoolean(false), stop = new AtomicBoolean(false);
        List<List<Double>> lat = new ArrayList<>();
        long[] cycles = new long[workers];
        List<long[]>[] holds = new List[locks];
        for (int i = 0; i < locks; i++) holds[i] = Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        CountDownLatch ready = new CountDownLatch(workers);
        for (int w = 0; w < workers; w++) {
            final int id = w;
            List<Double> mine = new ArrayList<>();
            lat.add(mine);
            Thread t = new Thread(() -> {
                try (CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10000, 10000, new ExponentialBackoffRetry(100, 3))) {
                    c.start();
                    c.blockUntilConnected(30, TimeUnit.SECONDS);
                    InterProcessMutex m = new InterProcessMutex(c, base + "/lock-" + (id % locks));
                    ready.countDown();
                    while (!stop.get()) {
                        long t0 = System.nanoTime();
                        m.acquire();
                        long t1 = System.nanoTime();
                        if (holdMs > 0) Thread.sleep(holdMs);
                        long t2 = System.nanoTime();
                        if (measuring.get()) {
                            mine.add((t1 - t0) / 1000.0);
                            holds[id % locks].add(new long[]{t1, t2});
                            cycles[id]++;
                        }
                        m.release();
                    }
                } catch (Exception e) { e.printStackTrace(); }
            });
            t.start();
            threads.add(t);
        }
        ready.await();
        Thread.sleep(1000);
        double cpu0 = cpuSeconds();
        long packets0 = packetsReceived(connect);
        long start = System.nanoTime();
        measuring.set(true);
        Thread.sleep((long) (seconds * 1000));
        measuring.set(false);
        long packets1 = packetsReceived(connect);
        double wall = (System.nanoTime() - start) / 1e9;
        double cpu = cpuSeconds() - cpu0;
        stop.set(true);
        for (Thread t : threads) t.join();
        List<Double> all = new ArrayList<>();
        long n = 0;
        for (int w = 0; w < workers; w++) { all.addAll(lat.get(w)); n += cycles[w]; }
        Collections.sort(all);
        long overlaps = 0;
        for (List<long[]> hs : holds) {
            hs.sort(Comparator.comparingLong(x -> x[0]));
            for (int i = 1; i < hs.size(); i++) if (hs.get(i)[0] < hs.get(i - 1)[1]) overlaps++;
        }
        double p50 = all.isEmpty() ? 0 : all.get(Math.min(all.size() - 1, (int) (0.5 * all.size())));
        double p99 = all.isEmpty() ? 0 : all.get(Math.min(all.size() - 1, (int) (0.99 * all.size())));
        double max = all.isEmpty() ? 0 : all.get(all.size() - 1);
        long rss = 0;
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/self/status")))
                if (line.startsWith("VmHWM:")) rss = Long.parseLong(line.replaceAll("[^0-9]", ""));
        } catch (Exception e) {}
        String rq = packets0 >= 0 && packets1 >= 0 && n > 0 ? String.format(Locale.ROOT, "%.2f", (packets1 - packets0) / (double) n) : "null";
        System.out.printf(Locale.ROOT, "{\"impl\":\"curator\",\"workers\":%d,\"sessions\":%d,\"locks\":%d,\"hold_ms\":%d,\"cycles\":%d,"
            + "\"seconds\":%.3f,\"cycles_per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"requests_per_cycle\":%s,"
            + "\"requests_counted_by\":\"server\",\"cpu_us_per_cycle\":%.1f,\"peak_rss_kb\":%d,\"overlaps\":%d}%n",
            workers, workers, locks, holdMs, n, wall, n / wall, p50, p99, max, rq, n > 0 ? cpu * 1e6 / n : 0.0, rss, overlaps);
        System.exit(0);
    }
}
