package example.snowflaked;

/**
 * Every error of the library: {@link #code()} is its stable name ("daemon_paused",
 * "invalid_service_name", ..., the C ABI's {@code sf_status_str}), {@link #status()} the C
 * ABI's {@code sf_status} number, {@link #action()} what a caller does about it (the C
 * ABI's {@code sf_status_action}, the same rule in every language), and the message says
 * what happened and what to do.
 *
 * <p>The class follows the action:
 *
 * <ul>
 *   <li>{@link UnavailableException}: "fail_over", this host's daemon cannot serve now and
 *       another may (daemon_not_running, daemon_starting, daemon_paused,
 *       daemon_out_of_service, daemon_stopped, daemon_not_heartbeating, daemon_dead,
 *       timed_out: the ring held only IDs too old to hand out). Catch it to fail over.
 *   <li>{@link PausedException}, an UnavailableException: the daemon is alive and serves
 *       again by itself (daemon_paused, daemon_starting), for a caller that would rather
 *       wait than fail over.
 *   <li>{@link RingEmptyException}: "retry_here", the ring stayed empty for the wait
 *       timeout while the daemon looked healthy (ring_empty): it is refilling, so take
 *       again here. Not an UnavailableException.
 * </ul>
 *
 * Every other code is a plain SnowflakeException: "fix_the_call" (invalid_service_name,
 * invalid_argument, time_out_of_range) or "fix_the_host" (permission_denied,
 * incompatible_version, corrupt_segment, untrusted_segment, system_error), which neither a
 * retry nor another daemon fixes.
 */
public class SnowflakeException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String code;
  private final int status;
  private final String action;

  /**
   * An error of the library's vocabulary, for callers that make one (a wrapper, a test
   * double): its action is the vocabulary's for {@code status}. A status whose action is
   * "fail_over" is an {@link UnavailableException} (or a {@link PausedException}), and
   * ring_empty is a {@link RingEmptyException}, so they are refused here, as is a code that
   * is not the status's.
   *
   * @throws IllegalArgumentException for a status outside 1..17, a code that is not
   *     {@code status}'s, a status to fail over from, or ring_empty
   */
  public SnowflakeException(String code, int status, String message) {
    this(code, status, actionOf(code, status), message);
  }

  private static String actionOf(String code, int status) {
    String[] codes = Native.errorCodes();
    if (status < 1 || status > codes.length) {
      throw new IllegalArgumentException(
          "status " + status + " is not one of the library's (1.." + codes.length + ")");
    }
    if (!codes[status - 1].equals(code)) {
      throw new IllegalArgumentException(
          "code \"" + code + "\" is not status " + status + "'s (\"" + codes[status - 1] + "\")");
    }
    String action = Native.errorActions()[status - 1];
    if (action.equals("fail_over")) {
      throw new IllegalArgumentException("\"" + code + "\" is an error to fail over from: "
          + "make an UnavailableException (or a PausedException) of it");
    }
    if (code.equals("ring_empty")) {
      throw new IllegalArgumentException("\"ring_empty\" has its class: make a "
          + "RingEmptyException of it");
    }
    return action;
  }

  SnowflakeException(String code, int status, String action, String message) {
    super(message);
    this.code = code;
    this.status = status;
    this.action = action;
  }

  /** The library's code, e.g. "daemon_paused". */
  public String code() {
    return code;
  }

  /** The C ABI's sf_status value (1..17). */
  public int status() {
    return status;
  }

  /**
   * What a caller does: "fail_over" (exactly the {@link UnavailableException}s),
   * "retry_here" (a {@link RingEmptyException}), "fix_the_call" or "fix_the_host".
   */
  public String action() {
    return action;
  }

  @Override
  public String toString() {
    return getClass().getName() + " [" + code + "]: " + getMessage();
  }

  /** Called by the native library: the class for the action, then the code. */
  static SnowflakeException fromNative(int status, String code, String action, String message) {
    return switch (action) {
      case "fail_over" -> switch (code) {
        case "daemon_paused", "daemon_starting" -> new PausedException(code, status, message);
        default -> new UnavailableException(code, status, message);
      };
      case "retry_here" -> code.equals("ring_empty")
          ? new RingEmptyException(code, status, message)
          : new SnowflakeException(code, status, action, message);
      default -> new SnowflakeException(code, status, action, message);
    };
  }

  static SnowflakeException invalidArgument(String message) {
    return new SnowflakeException("invalid_argument", 2, "fix_the_call", message);
  }
}
