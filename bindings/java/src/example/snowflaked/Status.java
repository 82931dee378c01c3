package example.snowflaked;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A snapshot of the daemon and its ring. The fields up to {@code freshnessBoundMs} are read
 * from the mapped segment (the keys of {@code snowflakectl status --json}); {@code control}
 * is the daemon's own answer over its control socket, null when the socket did not answer
 * ({@code controlError} then says why: a dead daemon still has a segment). {@code ringFill},
 * {@code takenTotal} and {@code uncounted} are counts of the consumer region, which only a
 * running daemon hands over: -1 when it did not (they are unknown, never guessed).
 */
public record Status(String state, String health, String reasonCode, String reason,
    long reasonDetail, int machine, long epochUnixMs, long incarnation, long pid,
    long heartbeatAgeNs, long ringFill, long ringCapacity, long fillTarget, long publishedTotal,
    long takenTotal, long drainedTotal, long clockPauses, long uncounted, long livenessMs,
    long freshnessBoundMs, Control control, String controlError) {

  /**
   * The control socket's reply to {"command":"status"} (docs/control-protocol.md, "Status
   * keys"). lastIssuedId is 0 before the first ID; renewal is null unless a renewal of the
   * high-water reservation fails or the daemon waits for one.
   */
  public record Control(String state, String reasonCode, String reason, long reasonDetail,
      long pid, String version, String instance, String runtimeDir, String stateDir,
      String registerBackend, String registerLocation, String holderId, long machine,
      long epochUnixMs, long ringCapacity, long ringFill, long fillTarget, long publishedTotal,
      long drainedTotal, long incarnation, boolean segmentReopened, long lastIssuedId,
      long generatorMarkUnixMs, long reservedThroughUnixMs, long clockPauses,
      long clockBehindMs, long startedUnixMs, long stateSinceUnixMs,
      Map<String, Long> services, long segmentsRetired, String segmentRetiredReason,
      Renewal renewal, List<Front> fronts) {}

  /** What the daemon waits on to renew its reservation, and the store's last error. */
  public record Renewal(String store, String location, long sinceUnixMs, long waitedMs,
      boolean unanswered, String lastError, String lastErrorStore) {}

  /** One running front of the daemon (its HTTP listener). */
  public record Front(String name, List<String> listen, long connections, long requests,
      long refused) {}

  static Status fromNative(Object[] a) {
    String[] s = (String[]) a[0];
    long[] n = (long[]) a[1];
    return new Status(s[0], s[1], s[2], s[3], n[0], (int) n[1], n[2], n[3], n[4], n[5], n[6],
        n[7], n[8], n[9], n[10], n[11], n[12], n[13], n[14], n[15], control(a),
        (String) a[2]);
  }

  private static Control control(Object[] a) {
    if (a[3] == null) return null;
    String[] s = (String[]) a[3];
    long[] n = (long[]) a[4];
    String[] names = (String[]) a[5];
    long[] counts = (long[]) a[6];
    Map<String, Long> services = new LinkedHashMap<>();
    for (int i = 0; i < names.length; i++) services.put(names[i], counts[i]);
    Renewal renewal = null;
    if (a[7] != null) {
      String[] rs = (String[]) a[7];
      long[] rn = (long[]) a[8];
      renewal = new Renewal(rs[0], rs[1], rn[0], rn[1], rn[2] != 0, rs[2], rs[3]);
    }
    String[] frontNames = (String[]) a[9];
    String[][] listens = (String[][]) a[10];
    long[] frontCounts = (long[]) a[11];
    List<Front> fronts = new ArrayList<>();
    for (int i = 0; i < frontNames.length; i++) {
      fronts.add(new Front(frontNames[i], List.of(listens[i]), frontCounts[3 * i],
          frontCounts[3 * i + 1], frontCounts[3 * i + 2]));
    }
    return new Control(s[0], s[1], s[2], n[0], n[1], s[3], s[4], s[5], s[6], s[7], s[8], s[9],
        n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10] != 0, n[11], n[12], n[13], n[14],
        n[15], n[16], n[17], Collections.unmodifiableMap(services), n[18], s[10], renewal,
        List.copyOf(fronts));
  }
}
