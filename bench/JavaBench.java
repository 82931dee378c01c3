/*
 * The Java package's cost per take against a serving daemon (scripts/bench), beside what
 * Java services write instead and the floor, measured in the same run and loop:
 *   java_next_ns               SnowflakeClient.next()
 *   java_batch_1000_ns_per_id  SnowflakeClient.nextBatch(1000), per ID it returned
 *   java_next_unlocked_ns      the same native take without the client's close guard
 *                              (what the close guard costs: the difference to next)
 *   java_jni_floor_ns          a bare static native call into libsnowflake_jni.so
 *   java_uuid4_ns              UUID.randomUUID()
 *   java_atomiclong_ns         AtomicLong.incrementAndGet() (one JVM's counter)
 *
 * Method, as bench/py_bench.py and bench/take_bench.cc: every figure is a series of timed
 * bursts of at most BURST calls, each after an untimed pause in which the daemon refills
 * the ring until it holds the burst's IDs (status()'s ringFill); a sustained series, or a
 * burst larger than the ring's fill, would measure the layout's cap of 4,096 IDs per ms
 * (244 ns per ID) instead of a take. The baselines run in the same bursts and pauses.
 * System.nanoTime() around each burst; the figure is the timed total over the calls.
 * Warm-up excluded: every figure's loop first runs WARMUP_BURSTS untimed bursts, so the
 * JIT has compiled it (C2) before timing starts. One thread.
 *
 * Prints one JSON object: each key a list with one figure per repetition.
 *
 *   java -cp snowflake.jar:BENCH_CLASSES -Dsnowflake.jni.path=.../libsnowflake_jni.so \
 *       example.snowflaked.JavaBench --runtime-dir DIR [--reps 5] [--calls 200000]
 *
 * In package example.snowflaked for the floor and the unlocked take (package-private).
 */
package example.snowflaked;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

public final class JavaBench {
  static final int BURST = 2000;  // calls per timed burst (IDs: below the ring's 4,096)
  static final long PAUSE_NS = 3_000_000;  // untimed, before each burst
  static final int WARMUP_BURSTS = 50;

  private static long sink;  // every result is folded in, so no call is optimised away
  private static long idsTaken;  // by the batch figure's calls (a batch may be short)

  private JavaBench() {}

  /**
   * How many calls of idsPerCall the ring holds now (1..burst), waiting up to 20 ms. The
   * fill is read from the segment alone (Status.ringFill()); the control socket's answer,
   * which status() also asks for, would wake the daemon's control thread just before the
   * timed burst.
   */
  static int awaitFill(SnowflakeClient client, int burst, int idsPerCall) throws Exception {
    long deadline = System.nanoTime() + 20_000_000L;
    while (true) {
      long n = client.ringFillForBench() / idsPerCall;
      if (n >= burst || (n > 0 && System.nanoTime() > deadline)) return (int) Math.min(n, burst);
      if (System.nanoTime() > deadline + 5_000_000_000L) return 1;
      Thread.sleep(0, 50_000);
    }
  }

  /** ns per call of fn over `calls` calls in timed bursts (a burst that meets an outage is
   * run again after a pause; an outage longer than 5 s fails the benchmark). */
  static double perCallNs(LongSupplier fn, long calls, int burst, SnowflakeClient client,
      int idsPerCall) throws Exception {
    long timed = 0;
    long done = 0;
    long outageSince = 0;
    while (done < calls) {
      Thread.sleep(PAUSE_NS / 1_000_000);
      int n = (int) Math.min(client != null ? awaitFill(client, burst, idsPerCall) : burst,
          calls - done);
      long acc = 0;
      long start = System.nanoTime();
      try {
        for (int i = 0; i < n; i++) acc += fn.getAsLong();
      } catch (UnavailableException | RingEmptyException e) {  // PausedException is one
        if (outageSince == 0) outageSince = System.nanoTime();
        if (System.nanoTime() - outageSince > 5_000_000_000L) throw e;
        continue;
      }
      long end = System.nanoTime();
      outageSince = 0;
      sink += acc;
      timed += end - start;
      done += n;
    }
    return (double) timed / calls;
  }

  public static void main(String[] args) throws Exception {
    String runtimeDir = null;
    int reps = 5;
    long calls = 200_000;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--runtime-dir" -> runtimeDir = args[++i];
        case "--reps" -> reps = Integer.parseInt(args[++i]);
        case "--calls" -> calls = Long.parseLong(args[++i]);
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (runtimeDir == null || reps < 1 || calls < 1) {
      throw new IllegalArgumentException("usage: --runtime-dir DIR [--reps N] [--calls N]");
    }
    Map<String, List<Double>> out = new LinkedHashMap<>();
    for (String key : new String[] {"java_next_ns", "java_batch_1000_ns_per_id",
             "java_next_unlocked_ns", "java_jni_floor_ns", "java_uuid4_ns",
             "java_atomiclong_ns"}) {
      out.put(key, new ArrayList<>());
    }
    long batchCalls = Math.max(2, calls / 100);  // 1000 IDs each, two per burst
    AtomicLong counter = new AtomicLong();
    try (SnowflakeClient client = SnowflakeClient.open("bench",
             new Options().withRuntimeDir(Path.of(runtimeDir)).withWaitTimeoutMs(5000))) {
      long handle = client.handleForBench();
      LongSupplier next = client::next;
      LongSupplier batch = () -> {
        long[] ids = client.nextBatch(1000);
        idsTaken += ids.length;
        return ids[0];
      };
      LongSupplier unlocked = () -> Native.next(handle);
      LongSupplier floor = () -> Native.floor(1);
      LongSupplier uuid = () -> UUID.randomUUID().getLeastSignificantBits();
      LongSupplier atomic = counter::incrementAndGet;
      // Warm-up, untimed: the JIT compiles each loop, the first take maps the counter
      // lane, and the daemon's fill target learns the bursts' size.
      for (LongSupplier fn : List.of(next, unlocked)) {
        perCallNs(fn, (long) WARMUP_BURSTS * BURST, BURST, client, 1);
      }
      perCallNs(batch, WARMUP_BURSTS * 2L, 2, client, 1000);
      for (LongSupplier fn : List.of(floor, uuid, atomic)) {
        perCallNs(fn, (long) WARMUP_BURSTS * BURST, BURST, null, 1);
      }
      for (int rep = 0; rep < reps; rep++) {
        // Alternated per repetition, so drift on a shared machine hits every figure.
        out.get("java_next_ns").add(perCallNs(next, calls, BURST, client, 1));
        out.get("java_next_unlocked_ns").add(perCallNs(unlocked, calls, BURST, client, 1));
        out.get("java_jni_floor_ns").add(perCallNs(floor, calls, BURST, null, 1));
        out.get("java_uuid4_ns").add(perCallNs(uuid, calls, BURST, null, 1));
        out.get("java_atomiclong_ns").add(perCallNs(atomic, calls, BURST, null, 1));
        // Per ID taken: nextBatch returns 1..1000 IDs (a short batch when the ring holds
        // fewer), so the time is divided by the IDs it returned, not by 1000 per call.
        idsTaken = 0;
        double perCall = perCallNs(batch, batchCalls, 2, client, 1000);
        out.get("java_batch_1000_ns_per_id").add(perCall * batchCalls / idsTaken);
        System.err.printf("JavaBench: nextBatch(1000) returned %.1f IDs per call%n",
            (double) idsTaken / batchCalls);
      }
    }
    StringBuilder json = new StringBuilder("{");
    for (Map.Entry<String, List<Double>> entry : out.entrySet()) {
      if (json.length() > 1) json.append(", ");
      json.append('"').append(entry.getKey()).append("\": [");
      for (int i = 0; i < entry.getValue().size(); i++) {
        if (i > 0) json.append(", ");
        json.append(String.format("%.2f", entry.getValue().get(i)));
      }
      json.append(']');
    }
    System.out.println(json.append('}'));
    if (sink == 42) System.err.println();  // keeps sink alive
  }
}
