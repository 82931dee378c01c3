package example.snowflaked;

/**
 * The ring stayed empty for the whole wait timeout while the daemon looked healthy
 * (ring_empty): the daemon is alive and refilling, since a hung or frozen one is reported as
 * daemon_not_heartbeating before the wait runs out. The action is "retry_here": take again
 * from this client. Not an {@link UnavailableException}, so a caller that fails over on
 * those does not leave a healthy daemon because its ring was briefly empty.
 */
public class RingEmptyException extends SnowflakeException {
  private static final long serialVersionUID = 1L;

  public RingEmptyException(String code, int status, String message) {
    super(code, status, "retry_here", message);
  }
}
