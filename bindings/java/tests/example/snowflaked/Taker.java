package example.snowflaked;

import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Takes IDs on several threads from one client and writes them, thread by thread, to a
 * file: the child JVM of StressTest (and its in-process half). Each thread checks that its
 * own IDs strictly increase; every other check is the parent's.
 *
 * <p>Usage: Taker RUNTIME_DIR THREADS IDS_PER_THREAD OUT_FILE
 */
public final class Taker {
  private Taker() {}

  public static void main(String[] args) throws Exception {
    long[][] ids = take(Path.of(args[0]), Integer.parseInt(args[1]), Integer.parseInt(args[2]));
    write(ids, Path.of(args[3]));
  }

  /** Each thread's IDs, in the order it took them. */
  static long[][] take(Path runtimeDir, int threads, int perThread) throws Exception {
    long[][] ids = new long[threads][perThread];
    List<Thread> workers = new ArrayList<>();
    List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
    try (SnowflakeClient client = SnowflakeClient.open("stress",
             new Options().withRuntimeDir(runtimeDir).withWaitTimeoutMs(2000))) {
      for (int t = 0; t < threads; t++) {
        long[] mine = ids[t];
        // Odd threads take in batches of up to 100, even ones one by one.
        boolean batches = t % 2 == 1;
        Thread worker = new Thread(() -> {
          try {
            int got = 0;
            while (got < perThread) {
              if (batches) {
                long[] batch = client.nextBatch(Math.min(100, perThread - got));
                System.arraycopy(batch, 0, mine, got, batch.length);
                got += batch.length;
              } else {
                mine[got++] = client.next();
              }
            }
            for (int i = 1; i < perThread; i++) {
              if (mine[i] <= mine[i - 1]) {
                throw new AssertionError("thread order broken: " + mine[i] + " after "
                    + mine[i - 1] + " at " + i);
              }
            }
          } catch (Throwable e) {
            failures.add(e);
          }
        });
        workers.add(worker);
        worker.start();
      }
      for (Thread worker : workers) worker.join();
    }
    if (!failures.isEmpty()) {
      AssertionError error = new AssertionError(failures.size() + " taker threads failed");
      for (Throwable failure : failures) error.addSuppressed(failure);
      throw error;
    }
    return ids;
  }

  static void write(long[][] ids, Path file) throws IOException {
    try (OutputStream raw = Files.newOutputStream(file);
         DataOutputStream out = new DataOutputStream(new java.io.BufferedOutputStream(raw))) {
      out.writeInt(ids.length);
      for (long[] thread : ids) {
        out.writeInt(thread.length);
        for (long id : thread) out.writeLong(id);
      }
    }
  }

  static long[][] read(Path file) throws IOException {
    try (java.io.DataInputStream in = new java.io.DataInputStream(
             new java.io.BufferedInputStream(Files.newInputStream(file)))) {
      long[][] ids = new long[in.readInt()][];
      for (int t = 0; t < ids.length; t++) {
        ids[t] = new long[in.readInt()];
        for (int i = 0; i < ids[t].length; i++) ids[t][i] = in.readLong();
      }
      return ids;
    }
  }
}
