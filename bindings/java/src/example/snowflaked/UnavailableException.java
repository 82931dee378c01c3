package example.snowflaked;

/**
 * No daemon serves on this host now: daemon_not_running, daemon_stopped, daemon_dead,
 * daemon_not_heartbeating, daemon_out_of_service or timed_out. Fail over to another host;
 * {@link #code()} says which.
 */
public class UnavailableException extends SnowflakeException {
  private static final long serialVersionUID = 1L;

  public UnavailableException(String code, int status, String message) {
    super(code, status, message);
  }
}
