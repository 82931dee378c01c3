package example.snowflaked;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A snowflaked of its own for one test: runtime, state and machine-lock directories in a
 * fresh temporary directory; {@link #close()} stops it and removes the directory.
 * $SNOWFLAKED names the binary (ctest sets it to the build's); without it the test fails,
 * never skips.
 */
final class TestDaemon implements AutoCloseable {
  final Path root;
  final Path runtimeDir;
  private final Path log;
  private Process process;

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

  /** A daemon started and serving. */
  static TestDaemon serving() throws IOException {
    TestDaemon daemon = new TestDaemon();
    daemon.start();
    daemon.waitServing();
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

  /** Starts it so, with these variables added to its environment (libfaketime's). */
  void start(String config, Map<String, String> variables) throws IOException {
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
    ProcessBuilder builder = new ProcessBuilder(command);
    Map<String, String> environment = builder.environment();
    for (String name : List.of("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
             "LISTEN_PID", "SNOWFLAKE_REMOTES", "SNOWFLAKE_RUNTIME_DIR")) {
      environment.remove(name);
    }
    // Its own machine-number locks: never competes with the host's daemons.
    environment.put("SNOWFLAKE_HOST_LOCK_DIR", root.resolve("locks").toString());
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

  /** Returns once a take succeeds; fails the test after 30 s. */
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
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
