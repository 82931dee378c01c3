package example.snowflaked;

/**
 * This host's daemon cannot serve now, and another daemon may: the action "fail_over"
 * (daemon_not_running, daemon_starting, daemon_paused, daemon_out_of_service,
 * daemon_stopped, daemon_not_heartbeating, daemon_dead, timed_out). Fail over to another
 * host; {@link #code()} says which. A ring that stayed empty while the daemon looked
 * healthy is not one of them: that is a {@link RingEmptyException}, to retry here.
 */
public class UnavailableException extends SnowflakeException {
  private static final long serialVersionUID = 1L;

  public UnavailableException(String code, int status, String message) {
    super(code, status, "fail_over", message);
  }
}
