package example.snowflaked;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Property: every ID is handed out at most once across processes and threads, and each
 * thread sees its IDs strictly increase. Two JVMs (this one and a child) × 8 threads take
 * 1 M IDs in all from one daemon, bounded by count and by the test's timeout.
 */
class StressTest {
  static final int JVMS = 2;
  static final int THREADS = 8;
  static final int TOTAL = 1_000_000;
  static final int PER_THREAD = TOTAL / (JVMS * THREADS);

  @Test
  void theCheckerFindsADuplicate() {
    // The checker on its own first: it must fail on a planted duplicate.
    long[][] planted = {{1, 2, 3}, {4, 2, 6}};
    assertEquals(1, duplicates(planted));
    assertEquals(0, duplicates(new long[][] {{1, 2}, {3, 4}}));
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void twoJvmsOfEightThreadsTakeAMillionIdsWithoutADuplicate() throws Exception {
    System.out.printf("stress: %d JVMs x %d threads x %d IDs = %d IDs%n", JVMS, THREADS,
        PER_THREAD, JVMS * THREADS * PER_THREAD);
    try (TestDaemon daemon = TestDaemon.serving()) {
      Path childOut = daemon.root.resolve("child.ids");
      Process child = new ProcessBuilder(TestDaemon.env("SNOWFLAKE_JAVA"),
          "-Dsnowflake.jni.path=" + TestDaemon.env("SNOWFLAKE_JNI_PATH"),
          "-cp", TestDaemon.env("SNOWFLAKE_JAVA_CLASSPATH"), "example.snowflaked.Taker",
          daemon.runtimeDir.toString(), Integer.toString(THREADS),
          Integer.toString(PER_THREAD), childOut.toString()).inheritIO().start();
      long[][] mine = Taker.take(daemon.runtimeDir, THREADS, PER_THREAD);
      assertTrue(child.waitFor(100, TimeUnit.SECONDS), "the child JVM did not finish");
      assertEquals(0, child.exitValue(), "the child JVM failed");
      long[][] theirs = Taker.read(childOut);
      List<long[]> all = new ArrayList<>(Arrays.asList(mine));
      all.addAll(Arrays.asList(theirs));
      long[][] every = all.toArray(new long[0][]);
      long count = Arrays.stream(every).mapToLong(t -> t.length).sum();
      assertEquals(TOTAL, count);
      for (long[] thread : every) {
        for (int i = 1; i < thread.length; i++) assertTrue(thread[i] > thread[i - 1]);
      }
      assertEquals(0, duplicates(every));
    }
  }

  static int duplicates(long[][] ids) {
    long[] all = Arrays.stream(ids).flatMapToLong(Arrays::stream).toArray();
    Arrays.sort(all);
    int duplicates = 0;
    for (int i = 1; i < all.length; i++) {
      if (all[i] == all[i - 1]) duplicates++;
    }
    return duplicates;
  }
}
