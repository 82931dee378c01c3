package example.snowflaked;

/**
 * The daemon is alive but not handing out IDs for a while, and resumes by itself:
 * daemon_paused (the message says why, e.g. the clock moved back) or daemon_starting. An
 * {@link UnavailableException}, so a caller that fails over does so here too; catch this
 * one first to wait instead.
 */
public class PausedException extends UnavailableException {
  private static final long serialVersionUID = 1L;

  public PausedException(String code, int status, String message) {
    super(code, status, message);
  }
}
