// Interop test peer: Curator's InterProcessMutex contending on the same path as zklock.
// Each hold: create the marker file exclusively (fails if anyone else holds it), log the
// interval (wall clock, microseconds), delete the marker, release.
//   java CuratorContender CONNECT PATH ITERATIONS HOLD_MS MARKER LOG [rw]
// With rw: InterProcessReadWriteLock, every third hold a write; readers only check no writer is in.
import java.nio.file.*;
import java.io.*;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorContender {
    static long micros() { Instant i = Instant.now(); return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000; }
    public static void main(String[] a) throws Exception {
        String connect = a[0], path = a[1];
        int iterations = Integer.parseInt(a[2]), holdMs = Integer.parseInt(a[3]);
        Path marker = Paths.get(a[4]);
        int overlaps = 0;
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10000, 10000, new ExponentialBackoffRetry(100, 3));
             PrintWriter log = new PrintWriter(new FileWriter(a[5]))) {
            c.start();
            c.blockUntilConnected(30, TimeUnit.SECONDS);
            boolean rw = a.length > 6 && a[6].equals("rw");
            InterProcessReadWriteLock rwl = rw ? new InterProcessReadWriteLock(c, path) : null;
            InterProcessMutex m = rw ? null : new InterProcessMutex(c, path);
            for (int i = 0; i < iterations; i++) {
                boolean writer = !rw || i % 3 == 0;
                InterProcessLock l = rw ? (writer ? rwl.writeLock() : rwl.readLock()) : m;
                l.acquire();
                long start = micros();
                if (writer) {
                    try { Files.createFile(marker); } catch (FileAlreadyExistsException e) { overlaps++; }
                } else if (Files.exists(marker)) overlaps++;
                Thread.sleep(holdMs);
                if (writer) {
                    try { Files.delete(marker); } catch (NoSuchFileException e) { overlaps++; }
                } else if (Files.exists(marker)) overlaps++;
                long end = micros();
                log.println("curator " + (writer ? "w " : "r ") + start + " " + end);
                l.release();
            }
        }
        System.out.println("curator overlaps " + overlaps);
        System.exit(overlaps == 0 ? 0 : 3);
    }
}
