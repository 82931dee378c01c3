import example.snowflaked.Options;
import example.snowflaked.SnowflakeClient;
import example.snowflaked.SnowflakeException;
import example.snowflaked.UnavailableException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The Java taker of the mixed-takers stress (bindings/go/mixed_test.go), with mixed_taker's
 * arguments and output:
 *
 * <pre>
 *   java -cp snowflake.jar:snowflake-mixed-taker.jar MixedTaker RUNTIME_DIR OUT_FILE COUNT SEED SERVICE
 * </pre>
 *
 * <p>Takes COUNT IDs with one client of SERVICE, mixing next() and nextBatch() of 1..1000
 * (seeded), and appends them in the order taken to OUT_FILE (little-endian u64) at least
 * every 1024 IDs, each time with a write(2) of its own, so a SIGKILL loses at most the
 * unwritten tail (under 2024 IDs). With $SNOWFLAKE_MIXED_START_FILE set, it opens the client
 * and creates OUT_FILE, then waits (up to 60 s) for that file to exist before it takes: the
 * driver starts every taker's takes at once, whatever its runtime's start-up. A daemon that cannot serve for a moment is retried, as a
 * service would, for 30000 retries of 1 ms or more. Closes the client (its service slot is
 * retired with its final count), then exits 0; or 1 with the error, 2 on bad arguments.
 */
public final class MixedTaker {
  private MixedTaker() {}

  public static void main(String[] args) throws IOException, InterruptedException {
    if (args.length != 5) {
      System.err.println("usage: MixedTaker RUNTIME_DIR OUT_FILE COUNT SEED SERVICE");
      System.exit(2);
    }
    long count;
    long seed;
    try {
      count = Long.parseLong(args[2]);
      seed = Long.parseLong(args[3]);
    } catch (NumberFormatException e) {
      System.err.println("MixedTaker: COUNT and SEED must be decimal integers: " + e.getMessage());
      System.exit(2);
      return;
    }
    SplittableRandom rng = new SplittableRandom(seed);
    // 1023 IDs wait at most before a take, which adds at most 1000.
    ByteBuffer pending = ByteBuffer.allocateDirect((1023 + 1000) * 8).order(ByteOrder.LITTLE_ENDIAN);
    Options options = new Options().withRuntimeDir(Path.of(args[0])).withWaitTimeoutMs(10000)
        .withRemotes(List.of());
    try (SnowflakeClient client = SnowflakeClient.open(args[4], options);
         FileChannel out = FileChannel.open(Path.of(args[1]), StandardOpenOption.CREATE,
             StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
      String start = System.getenv("SNOWFLAKE_MIXED_START_FILE");
      for (int waitedMs = 0; start != null && !Files.exists(Path.of(start)); waitedMs++) {
        if (waitedMs == 60000) {
          System.err.println("MixedTaker: no start file " + start + " after 60 s");
          System.exit(1);
        }
        Thread.sleep(1);
      }
      int retries = 0;
      for (long taken = 0; taken < count;) {
        try {
          if (rng.nextBoolean()) {
            pending.putLong(client.next());
            taken += 1;
          } else {
            int want = (int) Math.min(1 + rng.nextInt(1000), count - taken);
            long[] ids = client.nextBatch(want);
            for (long id : ids) pending.putLong(id);
            taken += ids.length;
          }
        } catch (UnavailableException e) {
          if (++retries > 30000) throw e;
          Thread.sleep(1);
          continue;
        }
        if (pending.position() >= 1024 * 8) write(out, pending);
      }
      write(out, pending);
    } catch (SnowflakeException e) {
      System.err.println("MixedTaker: " + e.code() + ": " + e.getMessage());
      System.exit(1);
    }
  }

  private static void write(FileChannel out, ByteBuffer pending) throws IOException {
    pending.flip();
    while (pending.hasRemaining()) out.write(pending);
    pending.clear();
  }
}
