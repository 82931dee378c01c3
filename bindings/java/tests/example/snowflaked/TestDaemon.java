package example.snowflaked;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;

/**
 * A snowflaked of its own for one test: runtime, state and machine-lock directories in a
 * fresh temporary directory; {@link #close()} stops it and removes the directory.
 * $SNOWFLAKED names the binary (ctest sets it to the build's); without it the test fails,
 * never skips.
 *
 * <p>Each start gets a notify socket of the harness's own in that directory, passed as
 * NOTIFY_SOCKET as systemd does for a Type=notify service: {@link #waitReady()} returns
 * once the daemon sent READY=1 on it, which it does once its ring serves (or, started out
 * of service, once it waits for an operator: docs/daemon.md).
 *
 * <p>Java 17 cannot bind that socket itself: {@code
 * DatagramChannel.open(StandardProtocolFamily.UNIX)} throws UnsupportedOperationException
 * (JEP 380 brought AF_UNIX stream sockets only). So the build's notify_listener
 * ($SNOWFLAKE_NOTIFY_LISTENER, tests/support) binds it and exits once READY=1 came.
 */
final class TestDaemon implements AutoCloseable {
  final Path root;
  final Path runtimeDir;
  private final Path log;
  private Process process;
  private int starts;
  private Path notifySocket; // this start's
  private Process listener; // this start's notify_listener, until READY=1 came

  private TestDaemon() throws IOException {
    // Short: the control socket's path must fit sockaddr_un.
    root = Files.createTempDirectory(Path.of("/tmp"), "sf-java-");
    runtimeDir = root.resolve("run");
    log = root.resolve("daemon.log");
  }

  /** A daemon not started yet. */
  static TestDaemon create() throws IOException {
    return new TestDaemon();
  }

  /** A daemon started and READY: its ring serves. */
  static TestDaemon serving() throws IOException {
    TestDaemon daemon = new TestDaemon();
    try {
      daemon.start();
      daemon.waitReady();
    } catch (IOException | RuntimeException | Error e) {
      try {
        daemon.close();
      } catch (Exception cleanup) {
        e.addSuppressed(cleanup);
      }
      throw e;
    }
    return daemon;
  }

  static String env(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) fail(name + " must be set (ctest sets it)");
    return value;
  }

  void start() throws IOException {
    start(null);
  }

  /** Starts it with a config file of this text (null: the built-in defaults). */
  void start(String config) throws IOException {
    start(config, Map.of());
  }

  /**
   * Starts it so, with these variables added to its environment (libfaketime's), after
   * NOTIFY_SOCKET, so a test may point that elsewhere. Does not wait: see waitReady().
   */
  void start(String config, Map<String, String> variables) throws IOException {
    start(config, variables, List.of());
  }

  /** Starts it so, with these arguments added to its command line. */
  void start(String config, Map<String, String> variables, List<String> args)
      throws IOException {
    Files.createDirectories(runtimeDir);
    Files.createDirectories(root.resolve("state"));
    List<String> command = new java.util.ArrayList<>(List.of(env("SNOWFLAKED"), "--runtime-dir",
        runtimeDir.toString(), "--state-dir", root.resolve("state").toString(), "--log-level",
        "warn"));
    if (config != null) {
      Path file = root.resolve("snowflaked.toml");
      Files.writeString(file, config);
      command.add("--config");
      command.add(file.toString());
    }
    command.addAll(args);
    listen();
    ProcessBuilder builder = new ProcessBuilder(command);
    Map<String, String> environment = builder.environment();
    for (String name : List.of("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
             "LISTEN_PID", "SNOWFLAKE_REMOTES", "SNOWFLAKE_RUNTIME_DIR")) {
      environment.remove(name);
    }
    // Its own machine-number locks: never competes with the host's daemons.
    environment.put("SNOWFLAKE_HOST_LOCK_DIR", root.resolve("locks").toString());
    environment.put("NOTIFY_SOCKET", notifySocket.toString());
    environment.putAll(variables);
    builder.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
    process = builder.start();
  }

  Options options() {
    return new Options().withRuntimeDir(runtimeDir);
  }

  /**
   * {@link #options()} with bounds wide enough for a busy machine, for tests that check
   * results, not the bounds: a heartbeat limit of 10 s and a wait of 1 s on an empty ring. A
   * daemon slowed by a sanitizer on two loaded cores left its heartbeat 155 ms old, past the
   * daemon's default limit of 50 ms, and did not refill within the default 100 ms.
   */
  Options wideOptions() {
    return options().withMaxHeartbeatAgeMs(10_000).withWaitTimeoutMs(1000);
  }

  /**
   * Binds this start's notify socket through notify_listener: a fresh one per start, so a
   * READY=1 of a killed predecessor never counts for its successor.
   */
  private void listen() throws IOException {
    closeListener();
    starts++;
    notifySocket = root.resolve("notify-" + starts);
    Path errors = root.resolve("notify-" + starts + ".err");
    listener = new ProcessBuilder(env("SNOWFLAKE_NOTIFY_LISTENER"), notifySocket.toString())
        .redirectError(errors.toFile()).start();
    // Its stdin stays open: it ends when this JVM ends, never outliving the tests.
    BufferedReader out = new BufferedReader(
        new InputStreamReader(listener.getInputStream(), StandardCharsets.UTF_8));
    String first = out.readLine(); // "listening" once bound, or end of stream on a failure
    if (!"listening".equals(first)) {
      fail("notify_listener did not bind " + notifySocket + ": " + Files.readString(errors));
    }
  }

  private void closeListener() {
    if (listener == null) return;
    listener.destroyForcibly();
    try {
      listener.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    listener = null;
  }

  /** Returns once the daemon sent READY=1; fails the test otherwise within 30 s. */
  void waitReady() {
    waitReady(Duration.ofSeconds(30));
  }

  /**
   * Returns once the daemon sent READY=1; fails the test, with the daemon's output, if it
   * exits first or sends none within {@code timeout}. Waits on both processes' exits at
   * once: no polling.
   */
  void waitReady(Duration timeout) {
    if (listener == null) fail("waitReady() without a start(), or twice for one start");
    try {
      CompletableFuture.anyOf(listener.onExit(), process.onExit())
          .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      fail("snowflaked (pid " + process.pid() + ", running) sent no READY=1 within "
          + timeout.toSeconds() + " s on " + notifySocket + "; its output:\n" + log());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      fail("interrupted while waiting for READY=1");
    } catch (ExecutionException e) {
      fail("waiting for READY=1: " + e.getCause());
    }
    if (!listener.isAlive() && listener.exitValue() == 0) {
      listener = null; // READY=1 came; the listener is gone, later notifications refused
      return;
    }
    if (!process.isAlive()) {
      fail("snowflaked exited with " + process.exitValue() + " before READY=1; its output:\n"
          + log());
    }
    fail("notify_listener exited with " + listener.exitValue() + " before READY=1");
  }

  /**
   * For a daemon that has served and may be held up (SIGSTOP, a pause): returns once a take
   * succeeds; fails the test after 30 s. A start waits with waitReady().
   */
  void waitServing() throws IOException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    SnowflakeException last = null;
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) fail("snowflaked exited with " + process.exitValue() + ": " + log());
      try (SnowflakeClient client = SnowflakeClient.open("readiness", options())) {
        client.next();
        return;
      } catch (UnavailableException e) {  // PausedException too
        last = e;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        fail("interrupted");
      }
    }
    fail("snowflaked not serving after 30 s (" + last + "): " + log());
  }

  long pid() {
    return process.pid();
  }

  /** Sends a signal by name ("STOP", "CONT", "KILL") with /bin/kill (procps). */
  void signal(String name) throws IOException, InterruptedException {
    int rc = new ProcessBuilder("/bin/kill", "-" + name, Long.toString(process.pid())).inheritIO()
        .start().waitFor();
    if (rc != 0) fail("kill -" + name + " " + process.pid() + " exited with " + rc);
  }

  Process process() {
    return process;
  }

  /** SIGCONT and SIGTERM, then SIGKILL after 10 s; returns the exit status. */
  int stop() throws IOException, InterruptedException {
    if (process == null) return -1;
    if (process.isAlive()) {
      signal("CONT");
      process.destroy();
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly();
      }
    }
    return process.waitFor();
  }

  String log() {
    try {
      String text = Files.readString(log);
      return text.length() > 2000 ? text.substring(text.length() - 2000) : text;
    } catch (IOException e) {
      return "(no log)";
    }
  }

  @Override
  public void close() throws IOException, InterruptedException {
    stop();
    closeListener();
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
