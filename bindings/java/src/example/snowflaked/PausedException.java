package example.snowflaked;

/**
 * The daemon is alive but not handing out IDs for a while, and resumes by itself:
 * daemon_paused (the message says why, e.g. the clock moved back) or daemon_starting.
 * Retry shortly, or fail over.
 */
public class PausedException extends SnowflakeException {
  private static final long serialVersionUID = 1L;

  public PausedException(String code, int status, String message) {
    super(code, status, message);
  }
}
