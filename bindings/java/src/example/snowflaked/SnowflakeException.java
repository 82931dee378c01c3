package example.snowflaked;

/**
 * Every error of the library: {@link #code()} is its stable name ("daemon_paused",
 * "invalid_service_name", ..., the C ABI's {@code sf_status_str}), {@link #status()} the C
 * ABI's {@code sf_status} number, and the message says what happened and what to do.
 *
 * <p>Two subclasses group the codes a caller fails over on:
 *
 * <ul>
 *   <li>{@link UnavailableException}: no daemon serves here now, and none may for a while
 *       (daemon_not_running, daemon_stopped, daemon_dead, daemon_not_heartbeating,
 *       daemon_out_of_service, timed_out). Take from another host.
 *   <li>{@link PausedException}: the daemon is alive and will serve again by itself
 *       (daemon_paused, daemon_starting). Retry shortly, or fail over if the caller cannot
 *       wait.
 * </ul>
 *
 * Every other code (invalid_service_name, invalid_argument, permission_denied,
 * incompatible_version, corrupt_segment, untrusted_segment, system_error,
 * time_out_of_range) is a plain SnowflakeException: a mistake in the call or the setup
 * that retrying does not fix.
 */
public class SnowflakeException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String code;
  private final int status;

  public SnowflakeException(String code, int status, String message) {
    super(message);
    this.code = code;
    this.status = status;
  }

  /** The library's code, e.g. "daemon_paused". */
  public String code() {
    return code;
  }

  /** The C ABI's sf_status value (1..16). */
  public int status() {
    return status;
  }

  @Override
  public String toString() {
    return getClass().getName() + " [" + code + "]: " + getMessage();
  }

  /** Called by the native library: the class for the code. */
  static SnowflakeException fromNative(int status, String code, String message) {
    switch (code) {
      case "daemon_not_running":
      case "daemon_stopped":
      case "daemon_dead":
      case "daemon_not_heartbeating":
      case "daemon_out_of_service":
      case "timed_out":
        return new UnavailableException(code, status, message);
      case "daemon_paused":
      case "daemon_starting":
        return new PausedException(code, status, message);
      default:
        return new SnowflakeException(code, status, message);
    }
  }

  static SnowflakeException invalidArgument(String message) {
    return new SnowflakeException("invalid_argument", 2, message);
  }
}
