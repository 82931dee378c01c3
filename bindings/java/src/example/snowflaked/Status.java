package example.snowflaked;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonPrimitive;
import com.google.gson.TypeAdapter;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import java.io.IOException;
import java.io.StringReader;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A snapshot of the daemon and its ring. The fields up to {@code statusText} are read from
 * the mapped segment (the keys of {@code snowflakectl status --json}); {@code control} is
 * the daemon's own answer over its control socket, null when the socket did not answer
 * ({@code controlError} then says why, as {@code daemon_error} does: a dead daemon still
 * has a segment). {@code ringFill}, {@code takenTotal} and {@code uncounted} are counts of
 * the consumer region, which only a running daemon hands over: -1 when it did not (they
 * are unknown, never guessed). {@code takenTotal} counts the IDs clients took, not those
 * the daemon drained ({@code publishedTotal = takenTotal + drainedTotal + ringFill} at
 * rest). {@code statusText} is why the daemon does not serve, in its own words ("" while
 * serving). {@code layout} is the bits of the daemon's IDs, time/machine/sequence as its
 * [id] layout writes them ("41/10/12"), for {@link SnowflakeClient#decode(long, java.time.Instant,
 * String)}.
 */
public record Status(String state, String health, String reasonCode, String reason,
    long reasonDetail, int machine, long epochUnixMs, String layout, long incarnation, long pid,
    long heartbeatAgeNs, long ringFill, long ringCapacity, long fillTarget, long publishedTotal,
    long takenTotal, long drainedTotal, long clockPauses, long uncounted, long livenessMs,
    long freshnessBoundMs, String statusText, Control control, String controlError) {

  /**
   * The control socket's reply to {"command":"status"} (docs/control-protocol.md, "Status
   * keys"). lastIssuedId is 0 before the first ID; renewal is null unless a renewal of the
   * high-water reservation fails or the daemon waits for one; clockWait is null unless the
   * daemon waits for its clock.
   */
  public record Control(String state, String reasonCode, String reason, long reasonDetail,
      long pid, String version, String instance, String runtimeDir, String stateDir,
      String registerBackend, String registerLocation, String holderId, long machine,
      long epochUnixMs, long ringCapacity, long ringFill, long fillTarget, long publishedTotal,
      long drainedTotal, long incarnation, boolean segmentReopened, long lastIssuedId,
      long generatorMarkUnixMs, long reservedThroughUnixMs, long clockPauses,
      long clockBehindMs, long startedUnixMs, long stateSinceUnixMs,
      Map<String, Long> services, long segmentsRetired, String segmentRetiredReason,
      Renewal renewal, List<Front> fronts, ClockWait clockWait) {}

  /**
   * What the daemon waits on to renew its reservation, and the store's last error ("" for
   * both while the first attempt is still under way).
   */
  public record Renewal(String store, String location, long sinceUnixMs, long waitedMs,
      boolean unanswered, String lastError, String lastErrorStore) {}

  /**
   * The millisecond a generator paused (or out of service) for its clock waits for:
   * nothing is issued until the clock is past {@code untilUnixMs}; {@code setBy} names who
   * set that mark ("state_file", "register", "host_mark", "segment", "fence",
   * "last_issued"); {@code clockPassesInMs} is when this host's clock passes it, 0 or less
   * once it has.
   */
  public record ClockWait(long untilUnixMs, String setBy, long clockPassesInMs) {}

  /** One running front of the daemon (its HTTP listener). */
  public record Front(String name, List<String> listen, long connections, long requests,
      long refused) {}

  // Keys of the status JSON that Status reads nowhere, on purpose; every other key is read,
  // and StatusTest fails on a key that is in neither (a fact the protocol added that Java
  // would drop). At the top: the CLI's conveniences, each a copy of a key of "daemon"
  // (read there), a figure computed from one at the time of reading, or a summary of what
  // Status holds anyway; deprecated names of keys read under their new ones.
  static final Set<String> TOP_KEYS_NOT_READ = Set.of("ok", "runtime_dir", "daemon_reachable",
      "version", "instance", "started_unix_ms", "uptime_ms", "state_since_unix_ms",
      "state_age_ms", "register_backend", "register_location", "holder_id", "last_issued_id",
      "last_issued_id_unix_ms", "last_issued_id_time", "generator_mark_unix_ms",
      "last_issued_unix_ms", "reserved_through_unix_ms", "reserved_through_time", "renewal",
      "clock_wait", "uncounted_taken", "services");
  // In the daemon's reply: "ok" (true in every reply) and the deprecated name of
  // generator_mark_unix_ms.
  static final Set<String> CONTROL_KEYS_NOT_READ = Set.of("ok", "last_issued_unix_ms");

  /**
   * Reads the status JSON of libsnowflake_jni.so (Native.status): the object
   * {@code snowflakectl status --json} prints, written by libclient/status/status_report.
   *
   * @throws SnowflakeException system_error if it is not that object (a key missing or of
   *     another type): snowflake.jar and libsnowflake_jni.so of different builds
   */
  static Status fromJson(String json) {
    return read(json, new ArrayList<>());
  }

  /** The keys of {@code json} that fromJson does not read, as paths ("daemon.x"). */
  static List<String> keysNotRead(String json) {
    List<String> unread = new ArrayList<>();
    read(json, unread);
    return unread;
  }

  /**
   * The keys of one reply of the control socket (a status reply line) that Status.Control
   * is not read from, as paths ("fronts[0].x").
   */
  static List<String> controlKeysNotRead(String reply) {
    List<String> unread = new ArrayList<>();
    control(new Fields(object(parse(reply), "the reply"), ""), unread);
    return unread;
  }

  private static Status read(String json, List<String> unread) {
    Fields f = new Fields(object(parse(json), "the status"), "");
    Fields daemon = f.objectOrNull("daemon");
    Status out = new Status(f.text("state"), f.text("health"), f.text("reason_code"),
        f.text("reason"), f.integer("reason_detail"), (int) f.integer("machine"),
        f.integer("epoch_unix_ms"), f.text("layout"), f.integer("incarnation"), f.integer("pid"),
        f.integer("heartbeat_age_ns"), f.count("ring_fill"), f.integer("ring_capacity"),
        f.integer("fill_target"), f.integer("published_total"), f.count("taken_total"),
        f.integer("drained_total"), f.integer("clock_pauses"), f.count("uncounted"),
        f.integer("liveness_ms"), f.integer("freshness_bound_ms"), f.text("status_text"),
        daemon == null ? null : control(daemon, unread), f.textOrNull("daemon_error"));
    f.unread(unread, TOP_KEYS_NOT_READ);
    return out;
  }

  private static Control control(Fields f, List<String> unread) {
    Map<String, Long> services = new LinkedHashMap<>();
    Fields serviceCounts = f.object("services");
    for (String name : serviceCounts.keys()) services.put(name, serviceCounts.integer(name));
    Renewal renewal = null;
    Fields r = f.objectOrNull("renewal");
    if (r != null) {
      renewal = new Renewal(r.text("store"), r.text("location"), r.integer("since_unix_ms"),
          r.integer("waited_ms"), r.bool("unanswered"), r.textOrEmpty("last_error"),
          r.textOrEmpty("last_error_store"));
      r.unread(unread, Set.of());
    }
    ClockWait clockWait = null;
    Fields w = f.objectOrNull("clock_wait");
    if (w != null) {
      clockWait = new ClockWait(w.integer("until_unix_ms"), w.text("set_by"),
          w.integer("clock_passes_in_ms"));
      w.unread(unread, Set.of());
    }
    List<Front> fronts = new ArrayList<>();
    JsonArray frontArray = f.array("fronts");
    for (int i = 0; i < frontArray.size(); i++) {
      Fields front = new Fields(object(frontArray.get(i), f.path + "fronts[" + i + "]"),
          f.path + "fronts[" + i + "].");
      List<String> listen = new ArrayList<>();
      JsonArray addresses = front.array("listen");
      for (int j = 0; j < addresses.size(); j++) {
        listen.add(text(addresses.get(j), front.path + "listen[" + j + "]"));
      }
      fronts.add(new Front(front.text("name"), List.copyOf(listen), front.integer("connections"),
          front.integer("requests"), front.integer("refused")));
      front.unread(unread, Set.of());
    }
    String lastIssuedId = f.textOrNull("last_issued_id");
    Control out = new Control(f.text("state"), f.text("reason_code"), f.text("reason"),
        f.integer("reason_detail"), f.integer("pid"), f.text("version"), f.text("instance"),
        f.text("runtime_dir"), f.text("state_dir"), f.text("register_backend"),
        f.text("register_location"), f.text("holder_id"), f.integer("machine"),
        f.integer("epoch_unix_ms"), f.integer("ring_capacity"), f.integer("ring_fill"),
        f.integer("fill_target"), f.integer("published_total"), f.integer("drained_total"),
        f.integer("incarnation"), f.bool("segment_reopened"),
        lastIssuedId == null ? 0 : id(lastIssuedId, f.path + "last_issued_id"),
        f.integer("generator_mark_unix_ms"), f.integer("reserved_through_unix_ms"),
        f.integer("clock_pauses"), f.integer("clock_behind_ms"), f.integer("started_unix_ms"),
        f.integer("state_since_unix_ms"), Collections.unmodifiableMap(services),
        f.integer("segments_retired"), f.text("segment_retired_reason"), renewal,
        List.copyOf(fronts), clockWait);
    f.unread(unread, CONTROL_KEYS_NOT_READ);
    return out;
  }

  // --- Reading JSON (Gson: Debian's libgoogle-gson-java) -----------------------------------

  // The parser of JSON values, strict (RFC 8259): Gson's own JsonParser reads leniently
  // (single quotes, comments, NaN), which no writer of this JSON produces. Stateless, so
  // shared by every thread.
  private static final TypeAdapter<JsonElement> PARSER = new Gson().getAdapter(JsonElement.class);

  private static JsonElement parse(String json) {
    try {
      JsonReader reader = new JsonReader(new StringReader(json));
      reader.setLenient(false);
      JsonElement value = PARSER.read(reader);
      if (reader.peek() != JsonToken.END_DOCUMENT) throw malformed("text follows the JSON value");
      return value;
    } catch (IOException | JsonParseException | IllegalStateException e) {
      throw malformed("it is not one JSON value: " + e.getMessage());
    }
  }

  private static JsonObject object(JsonElement value, String what) {
    if (!value.isJsonObject()) throw malformed(what + " is " + value + ", not an object");
    return value.getAsJsonObject();
  }

  private static String text(JsonElement value, String path) {
    if (!value.isJsonPrimitive() || !value.getAsJsonPrimitive().isString()) {
      throw malformed("\"" + path + "\" is " + value + ", not a string");
    }
    return value.getAsString();
  }

  // An ID: a decimal string of at most 64 bits (IDs are strings in JSON), as a long's bits.
  private static long id(String text, String path) {
    try {
      if (!text.isEmpty() && text.chars().allMatch(c -> c >= '0' && c <= '9')) {
        return Long.parseUnsignedLong(text);
      }
    } catch (NumberFormatException e) {
      // beyond 64 bits: refused below
    }
    throw malformed("\"" + path + "\" is \"" + text + "\", not a decimal ID of 64 bits");
  }

  /**
   * One JSON object read key by key: each read names the key and checks its type, and the
   * object remembers which keys were read, so the keys nobody read can be listed.
   */
  private static final class Fields {
    private final JsonObject object;
    // The object's path with a dot, for messages and the unread list: "", "daemon.".
    final String path;
    private final Set<String> read = new HashSet<>();

    Fields(JsonObject object, String path) {
      this.object = object;
      this.path = path;
    }

    Set<String> keys() {
      read.addAll(object.keySet());
      return object.keySet();
    }

    private JsonElement get(String key) {
      read.add(key);
      JsonElement value = object.get(key);
      if (value == null) throw malformed("\"" + path + key + "\" is missing");
      return value;
    }

    private SnowflakeException wrongType(String key, JsonElement value, String type) {
      return malformed("\"" + path + key + "\" is " + value + ", not " + type);
    }

    String text(String key) {
      return Status.text(get(key), path + key);
    }

    String textOrNull(String key) {
      JsonElement value = get(key);
      return value.isJsonNull() ? null : Status.text(value, path + key);
    }

    String textOrEmpty(String key) {
      String value = textOrNull(key);
      return value == null ? "" : value;
    }

    boolean bool(String key) {
      JsonElement value = get(key);
      if (!value.isJsonPrimitive() || !value.getAsJsonPrimitive().isBoolean()) {
        throw wrongType(key, value, "true or false");
      }
      return value.getAsBoolean();
    }

    // An integer of -2^63..2^64-1: one above 2^63-1 (a uint64 count) keeps its bits, as
    // Java reads an unsigned 64-bit number into a long.
    long integer(String key) {
      JsonElement value = get(key);
      if (value.isJsonPrimitive()) {
        JsonPrimitive number = value.getAsJsonPrimitive();
        if (number.isNumber()) {
          try {
            BigInteger n = new BigInteger(number.getAsString());
            if (n.bitLength() <= 63 || (n.signum() > 0 && n.bitLength() <= 64)) {
              return n.longValue();
            }
          } catch (NumberFormatException e) {
            // a fraction or an exponent: refused below
          }
        }
      }
      throw wrongType(key, value, "an integer of at most 64 bits");
    }

    // A count of the consumer region: null when it is unknown, -1 here.
    long count(String key) {
      return get(key).isJsonNull() ? -1 : integer(key);
    }

    Fields objectOrNull(String key) {
      JsonElement value = get(key);
      if (value.isJsonNull()) return null;
      if (!value.isJsonObject()) throw wrongType(key, value, "an object or null");
      return new Fields(value.getAsJsonObject(), path + key + ".");
    }

    Fields object(String key) {
      JsonElement value = get(key);
      if (!value.isJsonObject()) throw wrongType(key, value, "an object");
      return new Fields(value.getAsJsonObject(), path + key + ".");
    }

    JsonArray array(String key) {
      JsonElement value = get(key);
      if (!value.isJsonArray()) throw wrongType(key, value, "an array");
      return value.getAsJsonArray();
    }

    // Adds to `out` each key of the object that was not read and is not in `skipped`.
    void unread(List<String> out, Set<String> skipped) {
      for (String key : object.keySet()) {
        if (!read.contains(key) && !skipped.contains(key)) out.add(path + key);
      }
    }
  }

  private static SnowflakeException malformed(String what) {
    int status = Arrays.asList(Native.errorCodes()).indexOf("system_error") + 1;
    return new SnowflakeException("system_error", status, "fix_the_host",
        "the status from libsnowflake_jni.so is not what this snowflake.jar reads: " + what
            + "; are snowflake.jar and libsnowflake_jni.so from one build?");
  }
}
