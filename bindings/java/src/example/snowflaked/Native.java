package example.snowflaked;

/**
 * The native methods of libsnowflake_jni.so, over libsnowflake's C ABI (snowflake.h). A
 * client is its {@code sf_client} pointer as a long; callers (SnowflakeClient) keep it
 * alive for the length of every call. Every method throws a {@link SnowflakeException}
 * on failure and returns normally otherwise.
 */
final class Native {
  private Native() {}

  static {
    NativeLoader.load();
  }

  static native long open(String service, String runtimeDir, int waitTimeoutMs,
      int maxHeartbeatAgeMs, String remotes, String remotesCa, String remotesCert,
      String remotesKey);

  /** One ID; allocates nothing. */
  static native long next(long client);

  /** Fills ids[0..got) and returns got, 1 <= got <= ids.length. */
  static native int nextBatch(long client, long[] ids);

  static native void close(long client);

  /** out = {unix_ms, machine, sequence}; client 0: the default epoch. */
  static native boolean decode(long client, long id, long[] out);

  /** out = {first_id, last_id, first_unix_ms, last_unix_ms}. */
  static native boolean bounds(long epochUnixMs, long fromUnixMs, long toUnixMs, long[] out);

  /** decode with the epoch and layout given (sf_parse_layout, sf_decode_in). */
  static native boolean decodeIn(String layout, long epochUnixMs, long id, long[] out);

  /** bounds in the layout given (sf_parse_layout, sf_bounds_in). */
  static native boolean boundsIn(String layout, long epochUnixMs, long fromUnixMs, long toUnixMs,
      long[] out);

  static native long parseTime(String text);

  /** A bare native call, for the benchmark's floor: returns value + 1. */
  static native int floor(int value);

  /** The most IDs one take can return: a ring's largest capacity (shm kMaxCapacity). */
  static native int maxBatch();

  /** sf_status_str of every error status, from 1 (SF_INVALID_SERVICE_NAME) on. */
  static native String[] errorCodes();

  /** sf_status_action of every error status ("fail_over", ...), in errorCodes' order. */
  static native String[] errorActions();

  /**
   * The status as the JSON object {@code snowflakectl status --json} prints, which
   * Status.fromJson reads; askDaemon false reads the segment alone, without the control
   * socket ("daemon" and "daemon_error" are then null).
   */
  static native String status(String runtimeDir, int maxHeartbeatAgeMs, boolean askDaemon);
}
