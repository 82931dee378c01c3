package example.snowflaked;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.time.Instant;
import java.util.Arrays;

/**
 * Takes IDs from the local snowflaked's ring for one service, through libsnowflake's C
 * ABI (JNI). 64-bit IDs: milliseconds since the epoch, machine number and sequence, in the
 * bits of the daemon's layout (41/10/12 unless its config sets another); every ID is larger than any ID a take that completed
 * before the call began received on this host, in any process.
 *
 * <pre>{@code
 * try (SnowflakeClient client = SnowflakeClient.open("orders")) {
 *   long id = client.next();
 * }
 * }</pre>
 *
 * <p>A SnowflakeClient is safe for concurrent use by multiple threads without external
 * synchronization. {@link #next()} and {@link #nextBatch(int)} mark the calling thread
 * inside the client (a store to a word of its own, see CloseGuard), make no system call and allocate nothing on the Java heap (nextBatch allocates only its
 * result) unless the ring is empty; then they wait up to the options' wait timeout,
 * re-checking the daemon, and throw as soon as the daemon is not serving. {@link #close()}
 * waits for calls running on other threads to return (a take: at most the wait timeout),
 * and every call after it throws "the client is closed": the native client is never used
 * after it is freed. Calling close() from two threads at once is safe; one closes. A
 * client nobody closed is closed by a {@link Cleaner} once it is unreachable, so its
 * service slot in the segment is given back (close it anyway: that is at once).
 *
 * <p>Errors are {@link SnowflakeException}s: {@link UnavailableException} (with its
 * subclass {@link PausedException}) is exactly the ones to fail over on, as in every
 * language ({@link SnowflakeException#action()} is "fail_over"); a {@link
 * RingEmptyException} ("retry_here") is a ring that stayed empty for the wait while the
 * daemon looked healthy: take again here.
 */
public final class SnowflakeClient implements AutoCloseable {
  /**
   * The largest n {@link #nextBatch(int)} takes: a ring's largest capacity (2^20), since one
   * call returns at most what the ring holds; a larger array would only be allocated.
   */
  public static final int MAX_BATCH = Native.maxBatch();

  private final CloseGuard guard = new CloseGuard();
  // The sf_client pointer. Set at construction; sf_close'd by close() once no call is
  // inside the guard, and never read after (enter() refuses from then on).
  private final long handle;
  private final String service;
  private final Options options;

  // Closes the native client of a SnowflakeClient nobody closed once it is unreachable,
  // so its service slot in the segment is given back. It holds the guard and the handle,
  // never the client.
  private static final Cleaner CLEANER = Cleaner.create();
  private final Cleaner.Cleanable cleanable;

  private static final class Release implements Runnable {
    private final CloseGuard guard;
    private final long handle;

    Release(CloseGuard guard, long handle) {
      this.guard = guard;
      this.handle = handle;
    }

    @Override
    public void run() {
      if (guard.close()) Native.close(handle);
    }
  }

  private SnowflakeClient(long handle, String service, Options options) {
    this.cleanable = CLEANER.register(this, new Release(guard, handle));
    this.handle = handle;
    this.service = service;
    this.options = options;
  }

  /** {@link #open(String, Options)} with the default options. */
  public static SnowflakeClient open(String service) {
    return open(service, new Options());
  }

  /**
   * Opens the local daemon's ring for {@code service} (1-63 characters of [a-z0-9._-]).
   *
   * @throws SnowflakeException invalid_service_name, invalid_argument (a bad remote or TLS
   *     file), permission_denied (join the group the message names), incompatible_version,
   *     corrupt_segment, untrusted_segment, system_error; {@link UnavailableException}
   *     daemon_not_running (start snowflaked, or point runtimeDir at its directory). A
   *     stopped or paused daemon is reported by the takes, not here.
   */
  public static SnowflakeClient open(String service, Options options) {
    if (service == null) {
      throw new SnowflakeException("invalid_service_name", 1, "fix_the_call",
          "the service name is null: give 1-63 characters of [a-z0-9._-], e.g. \"orders\"");
    }
    if (options == null) throw SnowflakeException.invalidArgument("options is null: pass "
        + "new Options() for the defaults");
    long handle = Native.open(service, Options.text(options.runtimeDir()),
        options.waitTimeoutMs(), options.maxHeartbeatAgeMs(), options.remotesText(),
        Options.text(options.remotesCa()), Options.text(options.remotesCert()),
        Options.text(options.remotesKey()));
    return new SnowflakeClient(handle, service, options);
  }

  /**
   * Takes one ID.
   *
   * @throws PausedException daemon_paused, daemon_starting (an UnavailableException)
   * @throws UnavailableException daemon_stopped, daemon_out_of_service,
   *     daemon_not_heartbeating, daemon_dead (each within about a millisecond of finding
   *     the ring empty), timed_out (the ring held only IDs too old to hand out for the
   *     wait timeout: the daemon is not draining it)
   * @throws RingEmptyException ring_empty: the ring stayed empty for the wait timeout
   *     while the daemon looked healthy; retry here
   * @throws SnowflakeException invalid_argument if the client is closed
   */
  public long next() {
    CloseGuard.Lane lane = guard.enter();
    if (lane == null) throw closed();
    try {
      return Native.next(handle);
    } finally {
      CloseGuard.exit(lane);
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Takes between 1 and {@code n} strictly increasing IDs in one step (the C ABI's
   * sf_next_batch): fewer than n means the ring held only that many at that instant, which
   * is no error; call again for more. It never returns an empty array: on an empty ring it
   * waits and fails like {@link #next()}.
   *
   * @throws SnowflakeException invalid_argument if n is below 1 or above {@link #MAX_BATCH},
   *     or the client is closed; otherwise as {@link #next()}
   */
  public long[] nextBatch(int n) {
    if (n < 1 || n > MAX_BATCH) {
      throw SnowflakeException.invalidArgument("nextBatch: n must be from 1 to " + MAX_BATCH
          + " (one call takes at most what a ring holds), not " + n);
    }
    long[] ids = new long[n];
    int got;
    CloseGuard.Lane lane = guard.enter();
    if (lane == null) throw closed();
    try {
      got = Native.nextBatch(handle, ids);
    } finally {
      CloseGuard.exit(lane);
      Reference.reachabilityFence(this);
    }
    return got == n ? ids : Arrays.copyOf(ids, got);
  }

  /**
   * The daemon's status: its segment, as {@code snowflakectl status} reads it, and its
   * answer over the control socket (null with {@link Status#controlError()} if none).
   *
   * @throws SnowflakeException as {@link #open(String, Options)} (the segment could not be
   *     read), or invalid_argument if the client is closed
   */
  public Status status() {
    CloseGuard.Lane lane = guard.enter();
    if (lane == null) throw closed();
    try {
      return Status.fromJson(
          Native.status(Options.text(options.runtimeDir()), options.maxHeartbeatAgeMs(), true));
    } finally {
      CloseGuard.exit(lane);
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Splits an ID with this client's segment layout: its epoch and bits (which the daemon's
   * config may set), never the default's.
   */
  public DecodedId decodeId(long id) {
    long[] fields = new long[3];
    CloseGuard.Lane lane = guard.enter();
    if (lane == null) throw closed();
    try {
      Native.decode(handle, id, fields);
    } finally {
      CloseGuard.exit(lane);
      Reference.reachabilityFence(this);
    }
    return new DecodedId(Instant.ofEpochMilli(fields[0]), (int) fields[1], (int) fields[2]);
  }

  /** The epoch of this client's segment: the time of ID 0. */
  public Instant epoch() {
    return decodeId(0).time();
  }

  /** The guard, for the tests of the Cleaner (it does not hold the client). */
  CloseGuard guardForTest() {
    return guard;
  }

  /** The native handle, for bench/JavaBench.java's take without the guard. */
  long handleForBench() {
    return handle;
  }

  /** The ring's fill from the segment alone, for bench/JavaBench.java's pauses. */
  long ringFillForBench() {
    CloseGuard.Lane lane = guard.enter();
    if (lane == null) throw closed();
    try {
      return Status.fromJson(
          Native.status(Options.text(options.runtimeDir()), options.maxHeartbeatAgeMs(), false))
          .ringFill();
    } finally {
      CloseGuard.exit(lane);
      Reference.reachabilityFence(this);
    }
  }

  /** The service this client counts its takes under. */
  public String service() {
    return service;
  }

  /**
   * Closes the client. Waits for takes running on other threads to return; idempotent.
   * Calls after it throw invalid_argument ("the client is closed").
   */
  @Override
  public void close() {
    cleanable.clean();  // Release, once: the first close, or the Cleaner, whichever is first
  }

  /**
   * Splits an ID made with the default epoch (2026-01-01T00:00:00Z); for a daemon with
   * another epoch use {@link #decodeId(long)}.
   *
   * @throws SnowflakeException invalid_argument for a negative value (the sign bit is set:
   *     no ID)
   */
  public static DecodedId decode(long id) {
    long[] fields = new long[3];
    Native.decode(0, id, fields);
    return new DecodedId(Instant.ofEpochMilli(fields[0]), (int) fields[1], (int) fields[2]);
  }

  /**
   * Splits an ID made with the given epoch and layout: the daemons' [id] epoch and [id]
   * layout, a preset ("default", "8192-hosts", "65536-hosts") or time/machine/sequence bits
   * ("41/16/6"), read as snowflaked's config reads it.
   *
   * @throws SnowflakeException invalid_argument (a null argument, a layout that is no layout,
   *     saying why, an epoch before 1970 or too late, or a negative value: no ID)
   */
  public static DecodedId decode(long id, Instant epoch, String layout) {
    if (epoch == null || layout == null) {
      throw SnowflakeException.invalidArgument("decode: epoch and layout must not be null");
    }
    long[] fields = new long[3];
    Native.decodeIn(layout, millis(epoch), id, fields);
    return new DecodedId(Instant.ofEpochMilli(fields[0]), (int) fields[1], (int) fields[2]);
  }

  /** {@link #bounds(Instant, Instant, Instant)} with the default epoch. */
  public static IdBounds bounds(Instant from, Instant to) {
    return bounds(Instant.ofEpochMilli(DEFAULT_EPOCH_UNIX_MS), from, to);
  }

  /**
   * The smallest and largest IDs any machine can make from {@code from} to {@code to}
   * (milliseconds, both included; a finer fraction is cut), with the given epoch.
   *
   * @throws SnowflakeException invalid_argument (a null argument, from after to, or an
   *     epoch before 1970 or too late); time_out_of_range (the whole range is before the
   *     epoch or after its last millisecond, 69.7 years later)
   */
  public static IdBounds bounds(Instant epoch, Instant from, Instant to) {
    if (epoch == null || from == null || to == null) {
      throw SnowflakeException.invalidArgument("bounds: epoch, from and to must not be null");
    }
    long[] out = new long[4];
    Native.bounds(millis(epoch), millis(from), millis(to), out);
    return new IdBounds(out[0], out[1], Instant.ofEpochMilli(out[2]), Instant.ofEpochMilli(out[3]));
  }

  /**
   * {@link #bounds(Instant, Instant, Instant)} in the given layout: the daemons' [id] layout,
   * a preset ("default", "8192-hosts", "65536-hosts") or time/machine/sequence bits
   * ("41/16/6"), read as snowflaked's config reads it.
   *
   * @throws SnowflakeException invalid_argument (as bounds(epoch, from, to), or a layout
   *     that is no layout, saying why); time_out_of_range (the whole range is before the
   *     epoch or after its last millisecond, 2^time bits ms later)
   */
  public static IdBounds bounds(Instant epoch, Instant from, Instant to, String layout) {
    if (epoch == null || from == null || to == null || layout == null) {
      throw SnowflakeException.invalidArgument(
          "bounds: epoch, from, to and layout must not be null");
    }
    long[] out = new long[4];
    Native.boundsIn(layout, millis(epoch), millis(from), millis(to), out);
    return new IdBounds(out[0], out[1], Instant.ofEpochMilli(out[2]), Instant.ofEpochMilli(out[3]));
  }

  /**
   * Parses a time as snowflaked's config and snowflakectl do: Unix milliseconds
   * ("1767225600000") or RFC 3339 with a zone ("2026-01-01T00:00:00Z").
   *
   * @throws SnowflakeException invalid_argument, saying what is wrong with the text
   */
  public static Instant parseTime(String text) {
    if (text == null) throw SnowflakeException.invalidArgument("parseTime: text is null");
    return Instant.ofEpochMilli(Native.parseTime(text));
  }

  /** The default epoch, 2026-01-01T00:00:00Z, in Unix milliseconds. */
  public static final long DEFAULT_EPOCH_UNIX_MS = 1767225600000L;

  // An Instant beyond a long of milliseconds saturates: sf_bounds then cuts or refuses it.
  private static long millis(Instant time) {
    try {
      return time.toEpochMilli();
    } catch (ArithmeticException e) {
      return time.isBefore(Instant.EPOCH) ? Long.MIN_VALUE : Long.MAX_VALUE;
    }
  }

  private static SnowflakeException closed() {
    return SnowflakeException.invalidArgument("the client is closed: open a new one");
  }
}
