package example.snowflaked;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Property: when the daemon is SIGKILLed while Java threads take, every take returns an ID
 * or throws an UnavailableException within the wait timeout plus the liveness checks;
 * none hangs, each thread's IDs keep increasing, and no ID taken after the kill is older
 * than the freshness bound.
 */
class KillTest {
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aSigkilledDaemonGivesAnExceptionNeverAHangOrAStaleId() throws Exception {
    final int threads = 4;
    try (TestDaemon daemon = TestDaemon.serving();
         SnowflakeClient sut = SnowflakeClient.open("kill", daemon.options().withWaitTimeoutMs(500))) {
      long freshnessMs = sut.status().freshnessBoundMs();
      AtomicReference<Throwable> unexpected = new AtomicReference<>();
      long[] afterKill = new long[threads];
      String[] codes = new String[threads];
      AtomicLong killedAt = new AtomicLong(Long.MAX_VALUE);
      Thread[] workers = new Thread[threads];
      for (int t = 0; t < threads; t++) {
        final int me = t;
        workers[t] = new Thread(() -> {
          long previous = 0;
          try {
            while (true) {
              long id = sut.next();
              if (id <= previous) throw new AssertionError(id + " after " + previous);
              previous = id;
              long now = System.currentTimeMillis();
              if (now > killedAt.get()) {
                afterKill[me]++;
                long age = now - SnowflakeClient.decode(id).time().toEpochMilli();
                if (age > freshnessMs + 50) {
                  throw new AssertionError("stale ID after the kill: " + age + " ms old");
                }
              }
            }
          } catch (UnavailableException e) {
            codes[me] = e.code();
          } catch (Throwable e) {
            unexpected.set(e);
          }
        });
        workers[t].start();
      }
      Thread.sleep(200);
      killedAt.set(System.currentTimeMillis());
      daemon.process().destroyForcibly();
      daemon.process().waitFor();
      long killed = System.nanoTime();
      for (Thread worker : workers) {
        worker.join(TimeUnit.SECONDS.toMillis(20));
        if (worker.isAlive()) fail("a take hung after the daemon was killed");
      }
      long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
      if (unexpected.get() != null) throw new AssertionError(unexpected.get());
      System.out.printf("kill: %d threads stopped %d ms after SIGKILL with %s; IDs taken after "
          + "it: %s%n", threads, tookMs, List.of(codes), Arrays.toString(afterKill));
      for (String code : codes) {
        assertNotNull(code);
        assertTrue(List.of("daemon_dead", "daemon_not_heartbeating", "timed_out").contains(code), code);
      }
      UnavailableException again = assertThrows(UnavailableException.class, sut::next);
      assertEquals("daemon_dead", again.code(), again.toString());
    }
  }
}
