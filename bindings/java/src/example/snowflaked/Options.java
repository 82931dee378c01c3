package example.snowflaked;

import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * Options for {@link SnowflakeClient#open(String, Options)}: the fields of the C ABI's
 * {@code sf_options}. Immutable; each {@code with...} returns a copy. The defaults are the
 * library's: the runtime directory from $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked; a
 * 100 ms wait on an empty ring; the daemon's own heartbeat age limit; remotes and their TLS
 * files from $SNOWFLAKE_REMOTES, $SNOWFLAKE_REMOTES_CA, $SNOWFLAKE_REMOTES_CERT and
 * $SNOWFLAKE_REMOTES_KEY.
 */
public final class Options {
  private final Path runtimeDir;
  private final int waitTimeoutMs;
  private final int maxHeartbeatAgeMs;
  private final List<String> remotes;
  private final Path remotesCa;
  private final Path remotesCert;
  private final Path remotesKey;

  public Options() {
    this(null, 100, 0, null, null, null, null);
  }

  private Options(Path runtimeDir, int waitTimeoutMs, int maxHeartbeatAgeMs,
      List<String> remotes, Path remotesCa, Path remotesCert, Path remotesKey) {
    this.runtimeDir = runtimeDir;
    this.waitTimeoutMs = waitTimeoutMs;
    this.maxHeartbeatAgeMs = maxHeartbeatAgeMs;
    this.remotes = remotes;
    this.remotesCa = remotesCa;
    this.remotesCert = remotesCert;
    this.remotesKey = remotesKey;
  }

  /** The daemon's runtime directory (where its segment is); null: the default. */
  public Options withRuntimeDir(Path dir) {
    if (dir != null && dir.toString().isEmpty()) {
      throw SnowflakeException.invalidArgument("runtimeDir is empty: give the daemon's runtime "
          + "directory, or null for the default ($SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked)");
    }
    return new Options(dir, waitTimeoutMs, maxHeartbeatAgeMs, remotes, remotesCa, remotesCert,
        remotesKey);
  }

  /** How long a take waits on an empty ring while the daemon looks healthy (0: not at all). */
  public Options withWaitTimeoutMs(int ms) {
    if (ms < 0) {
      throw SnowflakeException.invalidArgument(
          "waitTimeoutMs must be 0 or more milliseconds (100 by default), not " + ms);
    }
    return new Options(runtimeDir, ms, maxHeartbeatAgeMs, remotes, remotesCa, remotesCert,
        remotesKey);
  }

  /** The oldest heartbeat a serving daemon may have; 0: the daemon's daemon.liveness_ms. */
  public Options withMaxHeartbeatAgeMs(int ms) {
    if (ms < 0) {
      throw SnowflakeException.invalidArgument("maxHeartbeatAgeMs must be 0 (the daemon's "
          + "liveness_ms) or more milliseconds, not " + ms);
    }
    return new Options(runtimeDir, waitTimeoutMs, ms, remotes, remotesCa, remotesCert,
        remotesKey);
  }

  /**
   * Other daemons' HTTP fronts ("host:port", "https://host:port") to take from while the
   * local daemon is not serving; null: $SNOWFLAKE_REMOTES, else none; an empty list: none,
   * whatever the environment says.
   */
  public Options withRemotes(List<String> remotes) {
    if (remotes != null) {
      for (String remote : remotes) {
        if (remote == null || remote.isEmpty() || remote.contains(",")) {
          throw SnowflakeException.invalidArgument("a remote must be one non-empty "
              + "[http://|https://]host:port without a comma, not \"" + remote + "\"");
        }
      }
      remotes = List.copyOf(remotes);
    }
    return new Options(runtimeDir, waitTimeoutMs, maxHeartbeatAgeMs, remotes, remotesCa,
        remotesCert, remotesKey);
  }

  /** The CA file (PEM) https remotes must verify against; null: the default. */
  public Options withRemotesCa(Path file) {
    return new Options(runtimeDir, waitTimeoutMs, maxHeartbeatAgeMs, remotes, file,
        remotesCert, remotesKey);
  }

  /** This client's certificate and key (PEM) for mutual TLS: both or neither. */
  public Options withRemotesCertAndKey(Path cert, Path key) {
    return new Options(runtimeDir, waitTimeoutMs, maxHeartbeatAgeMs, remotes, remotesCa, cert,
        key);
  }

  public Path runtimeDir() {
    return runtimeDir;
  }

  public int waitTimeoutMs() {
    return waitTimeoutMs;
  }

  public int maxHeartbeatAgeMs() {
    return maxHeartbeatAgeMs;
  }

  public List<String> remotes() {
    return remotes;
  }

  public Path remotesCa() {
    return remotesCa;
  }

  public Path remotesCert() {
    return remotesCert;
  }

  public Path remotesKey() {
    return remotesKey;
  }

  // null: $SNOWFLAKE_REMOTES; "" (an empty list): none, whatever the environment says.
  String remotesText() {
    return remotes == null ? null : String.join(",", remotes);
  }

  static String text(Path path) {
    return path == null ? null : path.toString();
  }

  @Override
  public String toString() {
    return "Options[runtimeDir=" + runtimeDir + ", waitTimeoutMs=" + waitTimeoutMs
        + ", maxHeartbeatAgeMs=" + maxHeartbeatAgeMs + ", remotes=" + remotes + "]";
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Options o && Objects.equals(runtimeDir, o.runtimeDir)
        && waitTimeoutMs == o.waitTimeoutMs && maxHeartbeatAgeMs == o.maxHeartbeatAgeMs
        && Objects.equals(remotes, o.remotes) && Objects.equals(remotesCa, o.remotesCa)
        && Objects.equals(remotesCert, o.remotesCert) && Objects.equals(remotesKey, o.remotesKey);
  }

  @Override
  public int hashCode() {
    return Objects.hash(runtimeDir, waitTimeoutMs, maxHeartbeatAgeMs, remotes);
  }
}
