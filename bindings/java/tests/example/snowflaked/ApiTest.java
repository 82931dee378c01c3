package example.snowflaked;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.opentest4j.AssertionFailedError;

/** Every call and every error of SnowflakeClient, against a real snowflaked. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApiTest {
  private static TestDaemon daemon;

  @BeforeAll
  static void startDaemon() throws IOException {
    daemon = TestDaemon.serving();
  }

  @AfterAll
  static void stopDaemon() throws Exception {
    if (daemon != null) daemon.close();
  }

  private static <T extends SnowflakeException> T assertCode(Class<T> type, String code,
      String phrase, org.junit.jupiter.api.function.Executable call) {
    T error = assertThrows(type, call);
    assertEquals(code, error.code(), error.toString());
    assertTrue(error.getMessage().contains(phrase), error.getMessage());
    return error;
  }

  @Test
  void nextGivesIncreasingIdsOfTheDaemonsMachine() {
    try (SnowflakeClient sut = SnowflakeClient.open("orders", daemon.wideOptions())) {
      long previous = 0;
      for (int i = 0; i < 10_000; i++) {
        long id = sut.next();
        assertTrue(id > previous, id + " after " + previous);
        previous = id;
      }
      DecodedId fields = SnowflakeClient.decode(previous);
      assertEquals(sut.status().machine(), fields.machine());
      long ageMs = Instant.now().toEpochMilli() - fields.time().toEpochMilli();
      assertTrue(ageMs >= -1000 && ageMs < 60_000, "ID time is " + fields.time());
      assertEquals("orders", sut.service());
    }
  }

  @Test
  void nextBatchGivesOneToNStrictlyIncreasingIds() {
    try (SnowflakeClient sut = SnowflakeClient.open("orders", daemon.wideOptions())) {
      long before = sut.next();
      for (int n : new int[] {1, 7, 1000, 5000}) {
        long[] ids = sut.nextBatch(n);
        assertTrue(ids.length >= 1 && ids.length <= n, ids.length + " of " + n);
        for (long id : ids) {
          assertTrue(id > before);
          before = id;
        }
      }
    }
  }

  @Test
  void nextBatchRefusesNOutsideOneToMaxBatch() {
    try (SnowflakeClient sut = SnowflakeClient.open("orders", daemon.wideOptions())) {
      assertCode(SnowflakeException.class, "invalid_argument", "from 1 to", () -> sut.nextBatch(0));
      assertCode(SnowflakeException.class, "invalid_argument", "from 1 to", () -> sut.nextBatch(-5));
      // No 16 GB array for a mistaken n: one take returns at most a ring's capacity.
      assertEquals(1 << 20, SnowflakeClient.MAX_BATCH);
      assertCode(SnowflakeException.class, "invalid_argument", "from 1 to 1048576",
          () -> sut.nextBatch(SnowflakeClient.MAX_BATCH + 1));
      assertCode(SnowflakeException.class, "invalid_argument", "from 1 to",
          () -> sut.nextBatch(Integer.MAX_VALUE));
    }
  }

  // Opens a client, takes an ID and drops it unclosed; returns its guard only (which does
  // not hold the client), so the client is unreachable once this returns.
  private static CloseGuard leakOne(TestDaemon own) {
    SnowflakeClient leaked = SnowflakeClient.open("leaked", own.wideOptions());
    leaked.next();
    return leaked.guardForTest();
  }

  private static void awaitCleaned(List<CloseGuard> guards) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!guards.stream().allMatch(CloseGuard::isClosed)) {
      assertTrue(System.nanoTime() < deadline, "unreachable clients were not closed in 30 s");
      System.gc();
      Thread.sleep(10);
    }
  }

  @Test
  void anUnclosedClientGivesItsServiceSlotBackOnceUnreachable() throws Exception {
    // The segment has 255 service slots: 255 unclosed clients hold them all. Once the
    // Cleaner closed them (their slots retired) and the daemon folded their counts (it
    // scans each second), a new client gets a slot again: its take is counted, not
    // "uncounted". Without the Cleaner none would ever come free (their owner is alive).
    try (TestDaemon own = TestDaemon.serving()) {
      List<CloseGuard> guards = new ArrayList<>();
      for (int i = 0; i < 255; i++) guards.add(leakOne(own));
      awaitCleaned(guards);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (true) {
        try (SnowflakeClient probe = SnowflakeClient.open("probe", own.wideOptions())) {
          long before = probe.status().uncounted();
          probe.next();
          if (probe.status().uncounted() == before) break;  // counted: the probe has a slot
        }
        assertTrue(System.nanoTime() < deadline,
            "no service slot came free in 30 s: the unclosed clients kept theirs");
        Thread.sleep(50);
      }
    }
  }

  @Test
  void statusHasTheSegmentAndTheControlAnswer() {
    try (SnowflakeClient sut = SnowflakeClient.open("status-test", daemon.wideOptions())) {
      sut.next();
      Status status = sut.status();
      assertEquals("serving", status.state());
      assertEquals("serving", status.health());
      assertEquals("none", status.reasonCode());
      assertTrue(status.ringCapacity() > 0 && status.publishedTotal() > 0);
      assertTrue(status.livenessMs() > 0 && status.freshnessBoundMs() >= status.livenessMs());
      assertEquals(daemon.pid(), status.pid());
      assertEquals(SnowflakeClient.DEFAULT_EPOCH_UNIX_MS, status.epochUnixMs());
      assertEquals("41/10/12", status.layout());
      assertNull(status.controlError());
      Status.Control control = status.control();
      assertNotNull(control);
      assertEquals("serving", control.state());
      assertEquals(daemon.pid(), control.pid());
      assertEquals(status.machine(), control.machine());
      assertEquals(daemon.runtimeDir.toString(), control.runtimeDir());
      // Counts reach the daemon through the service slot; its status folds them in by name.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (control.services().getOrDefault("status-test", 0L) < 1) {
        assertTrue(System.nanoTime() < deadline, "never counted: " + control.services());
        try {
          Thread.sleep(20);
        } catch (InterruptedException e) {
          throw new AssertionError(e);
        }
        control = sut.status().control();
      }
      assertTrue(control.lastIssuedId() > 0);
      assertTrue(!control.version().isEmpty());
      assertEquals(Instant.ofEpochMilli(status.epochUnixMs()), sut.epoch());
    }
  }

  @Test
  void theHarnessReportsADaemonThatExitsBeforeReadyWithItsOutput() throws Exception {
    try (TestDaemon own = TestDaemon.create()) {
      String missing = own.root.resolve("missing.toml").toString();
      own.start(null, Map.of(), List.of("--config", missing));

      AssertionFailedError failure = assertThrows(AssertionFailedError.class, own::waitReady);

      assertTrue(failure.getMessage().contains("snowflaked exited with 2 before READY=1"),
          failure.getMessage());
      assertTrue(failure.getMessage().contains(missing), failure.getMessage());
    }
  }

  @Test
  void theHarnessReportsADaemonThatSendsNoReadyWithItsOutput() throws Exception {
    try (TestDaemon own = TestDaemon.create()) {
      // NOTIFY_SOCKET where nobody listens: the daemon serves, and its READY=1 is lost.
      own.start(null, Map.of("NOTIFY_SOCKET", own.root.resolve("nobody").toString()));

      AssertionFailedError failure = assertThrows(AssertionFailedError.class,
          () -> own.waitReady(Duration.ofSeconds(2)));

      assertTrue(failure.getMessage().contains("running) sent no READY=1 within 2 s"),
          failure.getMessage());
      assertTrue(failure.getMessage().contains("its output:"), failure.getMessage());
    }
  }

  @Test
  void statusListsTheDaemonsFronts() throws Exception {
    int port;
    try (java.net.ServerSocket probe = new java.net.ServerSocket(0, 1,
             java.net.InetAddress.getLoopbackAddress())) {
      port = probe.getLocalPort();
    }
    try (TestDaemon own = TestDaemon.create()) {
      own.start("[http]\nlisten = [\"127.0.0.1:" + port + "\"]\n");
      own.waitReady();
      try (SnowflakeClient sut = SnowflakeClient.open("orders", own.wideOptions())) {
        List<Status.Front> fronts = sut.status().control().fronts();
        assertEquals(1, fronts.size(), fronts.toString());
        assertEquals("http", fronts.get(0).name());
        assertEquals(List.of("127.0.0.1:" + port), fronts.get(0).listen());
      }
    }
  }

  @Test
  void statusSaysWhyTheControlSocketDidNotAnswer() throws Exception {
    try (TestDaemon stopped = TestDaemon.serving();
         SnowflakeClient sut = SnowflakeClient.open("orders", stopped.wideOptions())) {
      stopped.stop();
      Status status = sut.status();
      assertEquals("stopped", status.state());
      assertNull(status.control());
      // daemon_error's words, as snowflakectl status --json gives them: the socket's path.
      assertTrue(status.controlError().contains(stopped.runtimeDir.resolve("control.sock")
          .toString()), status.controlError());
    }
  }

  @Test
  void openRefusesABadServiceName() {
    for (String name : new String[] {"", "Orders", "a/b", "x".repeat(64), "sp ace"}) {
      SnowflakeException error = assertCode(SnowflakeException.class, "invalid_service_name", "",
          () -> SnowflakeClient.open(name, daemon.options()));
      assertEquals(1, error.status());
      assertTrue(!(error instanceof UnavailableException));
    }
    assertCode(SnowflakeException.class, "invalid_service_name", "null",
        () -> SnowflakeClient.open(null, daemon.options()));
  }

  @Test
  void openWithoutADaemonIsUnavailable() {
    Options options = new Options().withRuntimeDir(Path.of("/nonexistent/snowflaked"));
    UnavailableException error = assertCode(UnavailableException.class, "daemon_not_running",
        "/nonexistent/snowflaked", () -> SnowflakeClient.open("orders", options));
    assertEquals(3, error.status());
  }

  @Test
  void anEmptyRemotesListMeansNoneAndNullMeansTheEnvironment() {
    // What reaches sf_options.remotes: NULL reads $SNOWFLAKE_REMOTES, "" means none.
    assertNull(new Options().remotesText());
    assertEquals("", new Options().withRemotes(List.of()).remotesText());
    assertEquals("a:1,b:2", new Options().withRemotes(List.of("a:1", "b:2")).remotesText());
  }

  // Text crosses JNI as standard UTF-8 both ways, not JNI's modified UTF-8: a directory
  // named outside the BMP is the one Java created (modified UTF-8 would name another, and
  // the open would find nothing there), and the library's message naming it reads back as
  // the same Java string. The segment path here is a directory, so the open fails with
  // the error of a file that exists and is not a regular file.
  @Test
  void pathsOutsideTheBmpCrossJniAsUtf8() throws IOException {
    Path dir = Files.createDirectories(
        Files.createTempDirectory("snowflake-utf8").resolve("run-\uD83D\uDE00-\u00E9"));
    Files.createDirectory(dir.resolve("snowflake.ring"));
    try {
      SnowflakeException error = assertThrows(SnowflakeException.class,
          () -> SnowflakeClient.open("orders", new Options().withRuntimeDir(dir)));
      assertTrue(error.getMessage().contains(dir.resolve("snowflake.ring") + " is not a regular file"),
          error.getMessage());
    } finally {
      Files.delete(dir.resolve("snowflake.ring"));
      Files.delete(dir);
    }
  }

  @Test
  void textThatIsNotUnicodeIsRefusedNamingWhere() {
    assertCode(SnowflakeException.class, "invalid_argument",
        "the service name: not valid Unicode text: an unpaired surrogate at index 3",
        () -> SnowflakeClient.open("ord\uD800x", daemon.options()));
    assertCode(SnowflakeException.class, "invalid_argument",
        "the remotes: not valid Unicode text: a NUL character at index 1",
        () -> SnowflakeClient.open("orders", daemon.options().withRemotes(List.of("a\u0000b:1"))));
  }

  @Test
  void badOptionsAreRefused() {
    assertCode(SnowflakeException.class, "invalid_argument", "waitTimeoutMs",
        () -> new Options().withWaitTimeoutMs(-1));
    assertCode(SnowflakeException.class, "invalid_argument", "maxHeartbeatAgeMs",
        () -> new Options().withMaxHeartbeatAgeMs(-1));
    assertCode(SnowflakeException.class, "invalid_argument", "runtimeDir is empty",
        () -> new Options().withRuntimeDir(Path.of("")));
    assertCode(SnowflakeException.class, "invalid_argument", "without a comma",
        () -> new Options().withRemotes(List.of("a:1,b:2")));
    assertCode(SnowflakeException.class, "invalid_argument", "options is null",
        () -> SnowflakeClient.open("orders", null));
    // The library checks what only it can: a remote that is no host:port, a key alone.
    assertCode(SnowflakeException.class, "invalid_argument", "",
        () -> SnowflakeClient.open("orders", daemon.options().withRemotes(List.of("no port"))));
    assertCode(SnowflakeException.class, "invalid_argument", "",
        () -> SnowflakeClient.open("orders", daemon.options().withRemotes(List.of("127.0.0.1:1"))
            .withRemotesCertAndKey(null, Path.of("/nonexistent.key"))));
  }

  @Test
  void callsAfterCloseAreRefusedAndCloseIsIdempotent() {
    SnowflakeClient sut = SnowflakeClient.open("orders", daemon.wideOptions());
    sut.close();
    sut.close();
    assertCode(SnowflakeException.class, "invalid_argument", "closed", sut::next);
    assertCode(SnowflakeException.class, "invalid_argument", "closed", () -> sut.nextBatch(3));
    assertCode(SnowflakeException.class, "invalid_argument", "closed", sut::status);
    assertCode(SnowflakeException.class, "invalid_argument", "closed", () -> sut.decodeId(1));
  }

  @Test
  void closeWaitsForTakesOnOtherThreads() throws Exception {
    // Four threads take until the client is closed under them: each stops with "closed",
    // never a crash (a take after the free would be one).
    SnowflakeClient sut = SnowflakeClient.open("orders", daemon.wideOptions());
    ExecutorService pool = Executors.newFixedThreadPool(4);
    CountDownLatch started = new CountDownLatch(4);
    try {
      List<Future<Long>> takers = new java.util.ArrayList<>();
      for (int t = 0; t < 4; t++) {
        takers.add(pool.submit(() -> {
          long taken = 0;
          started.countDown();
          try {
            while (true) {
              sut.next();
              taken++;
            }
          } catch (SnowflakeException e) {
            assertEquals("invalid_argument", e.code(), e.toString());
            return taken;
          }
        }));
      }
      started.await();
      Thread.sleep(50);
      sut.close();
      for (Future<Long> taker : takers) assertTrue(taker.get(10, TimeUnit.SECONDS) > 0);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void decodeSplitsAnIdAndRefusesANegativeValue() {
    long id = ((1000L) << 22) | (5L << 12) | 7L;
    DecodedId fields = SnowflakeClient.decode(id);
    assertEquals(new DecodedId(Instant.ofEpochMilli(SnowflakeClient.DEFAULT_EPOCH_UNIX_MS + 1000),
        5, 7), fields);
    assertCode(SnowflakeException.class, "invalid_argument", "", () -> SnowflakeClient.decode(-1));
    try (SnowflakeClient sut = SnowflakeClient.open("orders", daemon.wideOptions())) {
      assertEquals(fields, sut.decodeId(id));
      assertCode(SnowflakeException.class, "invalid_argument", "", () -> sut.decodeId(Long.MIN_VALUE));
    }
  }

  @Test
  void boundsCoverARangeAndRefuseOneOutsideTheEpoch() {
    Instant epoch = Instant.ofEpochMilli(SnowflakeClient.DEFAULT_EPOCH_UNIX_MS);
    IdBounds bounds = SnowflakeClient.bounds(epoch.plusMillis(1000), epoch.plusMillis(2000));
    assertEquals(1000L << 22, bounds.firstId());
    assertEquals((2000L << 22) | ((1L << 22) - 1), bounds.lastId());
    assertEquals(epoch.plusMillis(1000), bounds.first());
    // A range that begins before the epoch is cut to it.
    IdBounds cut = SnowflakeClient.bounds(epoch.minusSeconds(60), epoch.plusMillis(1));
    assertEquals(0, cut.firstId());
    assertEquals(epoch, cut.first());
    try (SnowflakeClient sut = SnowflakeClient.open("orders", daemon.wideOptions())) {
      long id = sut.next();
      IdBounds now = SnowflakeClient.bounds(SnowflakeClient.decode(id).time(),
          SnowflakeClient.decode(id).time());
      assertTrue(now.firstId() <= id && id <= now.lastId());
    }
    assertCode(SnowflakeException.class, "time_out_of_range", "",
        () -> SnowflakeClient.bounds(epoch.minusSeconds(60), epoch.minusSeconds(1)));
    assertCode(SnowflakeException.class, "time_out_of_range", "",
        () -> SnowflakeClient.bounds(epoch.plusSeconds(80L * 366 * 86400),
            epoch.plusSeconds(81L * 366 * 86400)));
    assertCode(SnowflakeException.class, "invalid_argument", "",
        () -> SnowflakeClient.bounds(epoch.plusMillis(2), epoch.plusMillis(1)));
    assertCode(SnowflakeException.class, "invalid_argument", "null",
        () -> SnowflakeClient.bounds(null, epoch));
    assertCode(SnowflakeException.class, "time_out_of_range", "",
        () -> SnowflakeClient.bounds(Instant.MIN, Instant.MIN.plusSeconds(1)));
  }

  // 41/16/6 (65536-hosts): the time bits start at bit 22 as in the default; the machine and
  // sequence split at bit 6.
  private static final long WIDE_ID = (1L << 22) | (65535L << 6) | 63L;

  @Test
  void decodeSplitsByTheLayoutGiven() {
    Instant epoch = Instant.ofEpochMilli(SnowflakeClient.DEFAULT_EPOCH_UNIX_MS);
    DecodedId expected = new DecodedId(epoch.plusMillis(1), 65535, 63);
    for (String layout : new String[] {"65536-hosts", "41/16/6", "time41-machine16-sequence6"}) {
      assertEquals(expected, SnowflakeClient.decode(WIDE_ID, epoch, layout), layout);
    }
    assertEquals(new DecodedId(Instant.ofEpochMilli(1), 8191, 511),
        SnowflakeClient.decode(WIDE_ID, Instant.EPOCH, "8192-hosts"));
    assertEquals(SnowflakeClient.decode(WIDE_ID), SnowflakeClient.decode(WIDE_ID, epoch, "default"));
    assertNotEquals(65535, SnowflakeClient.decode(WIDE_ID).machine(), "the default splits it elsewhere");
  }

  @Test
  void boundsFollowTheLayoutGiven() {
    Instant epoch = Instant.ofEpochMilli(SnowflakeClient.DEFAULT_EPOCH_UNIX_MS);
    Instant at = epoch.plusMillis(1000);
    IdBounds sut = SnowflakeClient.bounds(epoch, at, at, "41/16/6");
    assertEquals(new DecodedId(at, 65535, 63), SnowflakeClient.decode(sut.lastId(), epoch, "41/16/6"));
    assertEquals(new DecodedId(at, 0, 0), SnowflakeClient.decode(sut.firstId(), epoch, "41/16/6"));
    IdBounds longer = SnowflakeClient.bounds(Instant.EPOCH, Instant.EPOCH,
        Instant.ofEpochMilli(1L << 62), "44/1/18");
    assertEquals(Instant.ofEpochMilli((1L << 44) - 1), longer.last(), "44 time bits: 557 years");
    assertEquals(Long.MAX_VALUE, longer.lastId());
  }

  @Test
  void decodeAndBoundsRefuseABadLayoutSayingWhy() {
    Instant epoch = Instant.ofEpochMilli(SnowflakeClient.DEFAULT_EPOCH_UNIX_MS);
    SnowflakeException error = assertCode(SnowflakeException.class, "invalid_argument",
        "layout \"41/17/6\" is not a layout", () -> SnowflakeClient.decode(1, epoch, "41/17/6"));
    assertTrue(error.getMessage().contains("= 64 bits, not 63"), error.getMessage());
    assertTrue(error.getMessage().contains("\"65536-hosts\" = 41/16/6"), error.getMessage());
    assertCode(SnowflakeException.class, "invalid_argument", "neither a preset",
        () -> SnowflakeClient.bounds(epoch, epoch, epoch, "many-hosts"));
    assertCode(SnowflakeException.class, "invalid_argument", "is not a layout",
        () -> SnowflakeClient.bounds(epoch, epoch, epoch, "45/12/6"));
    assertCode(SnowflakeException.class, "invalid_argument", "null",
        () -> SnowflakeClient.decode(1, epoch, null));
    assertCode(SnowflakeException.class, "invalid_argument", "epoch out of range",
        () -> SnowflakeClient.decode(1, Instant.ofEpochMilli(-5), "default"));
  }

  @Test
  void parseTimeReadsMillisecondsAndRfc3339() {
    assertEquals(Instant.parse("2026-01-01T00:00:00Z"), SnowflakeClient.parseTime("2026-01-01T00:00:00Z"));
    assertEquals(Instant.ofEpochMilli(5), SnowflakeClient.parseTime("5"));
    assertCode(SnowflakeException.class, "invalid_argument", "", () -> SnowflakeClient.parseTime("yesterday"));
  }

  @Test
  void everyErrorCodeMapsToItsClass() {
    String[] codes = Native.errorCodes();
    String[] actions = Native.errorActions();
    assertEquals(17, codes.length);
    assertEquals(codes.length, actions.length);
    for (int i = 0; i < codes.length; i++) {
      SnowflakeException error = SnowflakeException.fromNative(i + 1, codes[i], actions[i], "m");
      Class<?> expected = switch (codes[i]) {
        case "daemon_not_running", "daemon_stopped", "daemon_dead", "daemon_not_heartbeating",
            "daemon_out_of_service", "timed_out" -> UnavailableException.class;
        case "daemon_paused", "daemon_starting" -> PausedException.class;
        case "ring_empty" -> RingEmptyException.class;
        default -> SnowflakeException.class;
      };
      assertEquals(expected, error.getClass(), codes[i]);
      // The one failover rule (sf_status_action): catching UnavailableException fails over
      // on exactly the codes every other language does.
      assertEquals(actions[i].equals("fail_over"), error instanceof UnavailableException,
          codes[i] + " is " + error.getClass().getSimpleName() + ", its action " + actions[i]);
      assertEquals(actions[i], error.action(), codes[i]);
    }
    assertArrayEquals(new String[] {"invalid_service_name", "invalid_argument"},
        new String[] {codes[0], codes[1]});
  }

  // The public constructor takes its action from the vocabulary, as fromNative does; it
  // makes no SnowflakeException that should have been an UnavailableException.
  @Test
  void thePublicConstructorFollowsTheVocabulary() {
    String[] codes = Native.errorCodes();
    String[] actions = Native.errorActions();
    for (int i = 0; i < codes.length; i++) {
      final int status = i + 1;
      final String code = codes[i];
      if (actions[i].equals("fail_over")) {
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
            () -> new SnowflakeException(code, status, "m"));
        assertTrue(refused.getMessage().contains("UnavailableException"), refused.getMessage());
      } else if (code.equals("ring_empty")) {
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
            () -> new SnowflakeException(code, status, "m"));
        assertTrue(refused.getMessage().contains("RingEmptyException"), refused.getMessage());
      } else {
        assertEquals(actions[i], new SnowflakeException(code, status, "m").action(), code);
      }
    }
    assertThrows(IllegalArgumentException.class, () -> new SnowflakeException("x", 0, "m"));
    assertThrows(IllegalArgumentException.class, () -> new SnowflakeException("x", 18, "m"));
    assertThrows(IllegalArgumentException.class,
        () -> new SnowflakeException("invalid_argument", 1, "m"));
  }

  // ring_empty (status 17, the C ABI's SF_RING_EMPTY) says retry here: a
  // RingEmptyException, a SnowflakeException that is not an UnavailableException, so a
  // caller's failover does not catch it.
  @Test
  void ringEmptyIsItsOwnClassToRetryHere() {
    String[] codes = Native.errorCodes();
    assertEquals("ring_empty", codes[16]);
    assertEquals("retry_here", Native.errorActions()[16]);
    SnowflakeException error = SnowflakeException.fromNative(17, "ring_empty", "retry_here", "m");
    assertTrue(error instanceof RingEmptyException, error.toString());
    assertFalse(error instanceof UnavailableException, error.toString());
    assertEquals("retry_here", error.action());
    assertEquals(17, error.status());
    assertEquals("fail_over", SnowflakeException.fromNative(14, "timed_out", "fail_over", "m")
        .action());
  }

  // A take that finds a healthy daemon's ring empty for its whole wait: ring_empty, thrown
  // as a RingEmptyException. The segment is the conformance table's
  // empty_ring_without_waiting row (an empty ring, a heartbeat fresh for 10 s, the region
  // served), so no refill can race the take.
  @Test
  void anEmptyRingOfAHealthyDaemonIsRingEmpty() throws Exception {
    Path directory = Files.createTempDirectory(Path.of("/tmp"), "sf-java-empty-");
    try {
      ConformanceTest.fixture("empty_ring_without_waiting", directory, false);
      try (SnowflakeClient sut = SnowflakeClient.open("orders", new Options()
          .withRuntimeDir(directory).withRemotes(List.of()))) {
        for (RingEmptyException error : List.of(assertThrows(RingEmptyException.class, sut::next),
            assertThrows(RingEmptyException.class, () -> sut.nextBatch(8)))) {
          assertEquals("ring_empty", error.code());
          assertEquals(17, error.status());
          assertEquals("retry_here", error.action());
          SnowflakeException thrown = error;
          assertFalse(thrown instanceof UnavailableException, "a failover would catch it");
          assertTrue(error.getMessage().contains("no ID within 100 ms"), error.getMessage());
          assertTrue(error.getMessage().endsWith("retry here"), error.getMessage());
        }
      }
    } finally {
      try (var paths = Files.walk(directory)) {
        paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  @Test
  void aStoppedDaemonIsUnavailableAndAResumedOneServes() throws Exception {
    // SIGSTOP: the heartbeat ages past the limit, and a take on the empty ring says so.
    try (TestDaemon own = TestDaemon.serving();
         SnowflakeClient sut = SnowflakeClient.open("orders", own.options()
             .withMaxHeartbeatAgeMs(200).withWaitTimeoutMs(2000))) {
      sut.next();
      own.signal("STOP");
      UnavailableException error;
      try {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
          try {
            sut.nextBatch(100_000);
          } catch (UnavailableException e) {
            error = e;
            break;
          }
          assertTrue(System.nanoTime() < deadline, "takes kept succeeding from a stopped daemon");
        }
      } finally {
        own.signal("CONT");
      }
      assertEquals("daemon_not_heartbeating", error.code(), error.toString());
      own.waitServing();
      sut.next();
      // A clean stop: daemon_stopped once the ring is drained.
      own.stop();
      UnavailableException stopped = assertThrows(UnavailableException.class, sut::next);
      assertEquals("daemon_stopped", stopped.code(), stopped.toString());
    }
  }
}
