// Interop test peer: Curator's InterProcessMutex contending on the same path as zklock.
// Each hold: create the marker file exclusively (fails if anyone else holds it), log the
// interval (wall clock, microseconds), delete the marker, release.
//   java CuratorContender CONNECT PATH ITERATIONS HOLD_MS MARKER LOG [rw|selector|latch]
// With rw: InterProcessReadWriteLock, every third hold a write; readers only check no writer is in.
// With selector: a LeaderSelector (id "curator-selector") leads ITERATIONS times, one hold per
// takeLeadership; with latch: a LeaderLatch (id "curator-latch") per iteration, start, await,
// hold, close. Both log as writers.
// With INTEROP_GATE set (run_interop.sh): once connected, creates $INTEROP_GATE.ready.<pid> and
// waits for $INTEROP_GATE.go, so that every peer contends from the first hold.
import java.nio.file.*;
import java.io.*;
import java.time.Instant;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorContender {
    static final AtomicInteger overlaps = new AtomicInteger();

    static long micros() { Instant i = Instant.now(); return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000; }

    /// One hold: a writer owns the marker file exclusively, a reader checks no writer is in.
    static void hold(Path marker, int holdMs, PrintWriter log, String who, boolean writer) throws InterruptedException, IOException {
        long start = micros();
        if (writer) {
            try { Files.createFile(marker); } catch (FileAlreadyExistsException e) { overlaps.incrementAndGet(); }
        } else if (Files.exists(marker)) overlaps.incrementAndGet();
        Thread.sleep(holdMs);
        if (writer) {
            try { Files.delete(marker); } catch (NoSuchFileException e) { overlaps.incrementAndGet(); }
        } else if (Files.exists(marker)) overlaps.incrementAndGet();
        long end = micros();
        log.println(who + (writer ? " w " : " r ") + start + " " + end);
        log.flush();
    }

    /// The start gate (see above), if there is one.
    static void gate() throws Exception {
        String gate = System.getenv("INTEROP_GATE");
        if (gate == null || gate.isEmpty()) return;
        Files.createFile(Paths.get(gate + ".ready." + ProcessHandle.current().pid()));
        while (!Files.exists(Paths.get(gate + ".go"))) Thread.sleep(5);
    }

    public static void main(String[] a) throws Exception {
        String connect = a[0], path = a[1];
        int iterations = Integer.parseInt(a[2]), holdMs = Integer.parseInt(a[3]);
        Path marker = Paths.get(a[4]);
        String mode = a.length > 6 ? a[6] : "mutex";
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10000, 10000, new ExponentialBackoffRetry(100, 3));
             PrintWriter log = new PrintWriter(new FileWriter(a[5]))) {
            c.start();
            c.blockUntilConnected(30, TimeUnit.SECONDS);
            gate();
            if (mode.equals("selector")) {
                // One selector, requeued after each leadership (no autoRequeue: exactly ITERATIONS
                // leaderships). Our single-thread executor runs each attempt (acquire, takeLeadership,
                // release); a no-op queued behind the last one tells when its node has been deleted.
                ExecutorService worker = Executors.newSingleThreadExecutor();
                Semaphore led = new Semaphore(0);
                LeaderSelector s = new LeaderSelector(c, path, worker, new LeaderSelectorListenerAdapter() {
                    @Override
                    public void takeLeadership(CuratorFramework client) throws Exception {
                        try { hold(marker, holdMs, log, "curator-selector", true); } finally { led.release(); }
                    }
                });
                s.setId("curator-selector");
                s.start();
                for (int i = 0; i < iterations; i++) {
                    led.acquire();
                    // requeue() is refused until takeLeadership has returned; the new attempt then
                    // waits on the executor for this one's release
                    if (i + 1 < iterations) while (!s.requeue()) Thread.sleep(1);
                }
                worker.submit(() -> {}).get();
                s.close();
                worker.shutdown();
            } else if (mode.equals("latch")) {
                for (int i = 0; i < iterations; i++) {
                    LeaderLatch l = new LeaderLatch(c, path, "curator-latch");
                    l.start();
                    l.await();
                    hold(marker, holdMs, log, "curator-latch", true);
                    l.close(); // deletes its node (in the background)
                }
            } else {
                boolean rw = mode.equals("rw");
                InterProcessReadWriteLock rwl = rw ? new InterProcessReadWriteLock(c, path) : null;
                InterProcessMutex m = rw ? null : new InterProcessMutex(c, path);
                for (int i = 0; i < iterations; i++) {
                    boolean writer = !rw || i % 3 == 0;
                    InterProcessLock l = rw ? (writer ? rwl.writeLock() : rwl.readLock()) : m;
                    l.acquire();
                    hold(marker, holdMs, log, "curator", writer);
                    l.release();
                }
            }
        }
        System.out.println("curator overlaps " + overlaps.get());
        System.exit(overlaps.get() == 0 ? 0 : 3);
    }
}
