package example.snowflaked;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Property: no call is inside the guard once close() has returned, and every call after it
 * is refused. The "resource" is a flag that close's caller sets as sf_close would free the
 * client; a call that finds it set inside the guard is a use after free.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CloseGuardTest {
  @Test
  void enterIsRefusedAfterClose() {
    CloseGuard sut = new CloseGuard();
    CloseGuard.Lane lane = sut.enter();
    assertNotNull(lane);
    CloseGuard.exit(lane);
    assertTrue(sut.close());
    assertFalse(sut.close());
    assertNull(sut.enter());
  }

  @Test
  void closeWaitsForACallInside() throws Exception {
    CloseGuard sut = new CloseGuard();
    CloseGuard.Lane lane = sut.enter();
    AtomicBoolean closed = new AtomicBoolean();
    Thread closer = new Thread(() -> {
      sut.close();
      closed.set(true);
    });
    closer.start();
    // close() has begun (the guard is marked closed) while this call is inside: from here
    // it may only wait. A close that did not would return within the next 200 ms.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!sut.isClosed() && System.nanoTime() < deadline) Thread.onSpinWait();
    assertTrue(sut.isClosed(), "close() never began");
    long window = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(200);
    while (!closed.get() && System.nanoTime() < window) Thread.onSpinWait();
    assertFalse(closed.get(), "close returned while a call was inside");
    CloseGuard.exit(lane);
    closer.join(5000);
    assertTrue(closed.get());
  }

  @Test
  void noCallIsInsideAfterCloseUnderStress() throws Exception {
    // 50 rounds: 2 threads enter and exit in a loop while the main thread closes and
    // "frees"; a thread inside the guard must never see the resource freed.
    final int rounds = 50;
    final int threads = 2;
    AtomicLong violations = new AtomicLong();
    long calls = 0;
    for (int round = 0; round < rounds; round++) {
      CloseGuard sut = new CloseGuard();
      AtomicBoolean freed = new AtomicBoolean();
      AtomicLong done = new AtomicLong();
      Thread[] workers = new Thread[threads];
      for (int t = 0; t < threads; t++) {
        workers[t] = new Thread(() -> {
          long n = 0;
          while (true) {
            CloseGuard.Lane lane = sut.enter();
            if (lane == null) break;
            if (freed.get()) violations.incrementAndGet();
            n++;
            CloseGuard.exit(lane);
          }
          done.addAndGet(n);
        });
        workers[t].start();
      }
      Thread.sleep(round % 3);
      sut.close();
      freed.set(true);
      for (Thread worker : workers) worker.join();
      calls += done.get();
    }
    System.out.printf("close guard: %d rounds x %d threads, %d calls%n", rounds, threads, calls);
    assertEquals(0, violations.get());
  }

  @Test
  void lanesOfEndedThreadsAreDropped() throws Exception {
    CloseGuard sut = new CloseGuard();
    for (int i = 0; i < 300; i++) {
      // Lanes are dropped when a registration sweeps (each time the list has doubled), and
      // only those whose thread the collector has already taken: collect every 50 threads,
      // so that each sweep finds ended threads gone.
      if (i % 50 == 49) System.gc();
      Thread thread = new Thread(() -> CloseGuard.exit(sut.enter()));
      thread.start();
      thread.join();
    }
    assertTrue(sut.laneCount() < 300, sut.laneCount() + " lanes for 300 ended threads");
  }
}
