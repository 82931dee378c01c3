package example.snowflaked;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigInteger;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Status as Java reads it: the status JSON of libsnowflake_jni.so (the object
 * `snowflakectl status --json` prints, with the control protocol's status reply under
 * "daemon"), against real snowflaked daemons. Every key a daemon sends is read, or named in
 * Status's lists of keys it leaves out on purpose, so a fact the protocol adds fails here
 * until Java reads it (Go's TestControlStatusHasAFieldForEveryKeyTheDaemonSends, for Java,
 * and for the renewal, clock_wait and fronts objects too); a status that is not that object
 * is refused, naming the key.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StatusTest {
  // Serving, with an HTTP front (so "fronts" has an entry), one ID taken.
  private static TestDaemon daemon;
  // Its status as libsnowflake_jni.so writes it.
  private static String statusJson;

  @BeforeAll
  static void startDaemon() throws Exception {
    daemon = TestDaemon.create();
    daemon.start(httpFront());
    daemon.waitReady();
    try (SnowflakeClient client = SnowflakeClient.open("orders", daemon.options())) {
      client.next();
    }
    statusJson = Native.status(daemon.runtimeDir.toString(), 0, true);
  }

  @AfterAll
  static void stopDaemon() throws Exception {
    if (daemon != null) daemon.close();
  }

  static String httpFront() throws IOException {
    int port;
    try (java.net.ServerSocket probe = new java.net.ServerSocket(0, 1,
             java.net.InetAddress.getLoopbackAddress())) {
      port = probe.getLocalPort();
    }
    return "[http]\nlisten = [\"127.0.0.1:" + port + "\"]\n";
  }

  /** One status reply line of the daemon's control socket, as any tool reads it. */
  static String controlReply(Path runtimeDir) throws IOException {
    try (SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX)) {
      channel.connect(UnixDomainSocketAddress.of(runtimeDir.resolve("control.sock")));
      channel.write(ByteBuffer.wrap("{\"command\":\"status\"}\n".getBytes(StandardCharsets.UTF_8)));
      ByteArrayOutputStream line = new ByteArrayOutputStream();
      ByteBuffer buffer = ByteBuffer.allocate(1 << 16);
      while (true) {
        buffer.clear();
        int n = channel.read(buffer);
        if (n < 0) throw new IOException("the reply ended without a newline: " + line);
        for (int i = 0; i < n; i++) {
          if (buffer.get(i) == '\n') return line.toString(StandardCharsets.UTF_8);
          line.write(buffer.get(i));
        }
      }
    }
  }

  /** The daemon's first status reply that `wanted` accepts; fails the test after 30 s. */
  static JsonObject awaitReply(TestDaemon own, Predicate<JsonObject> wanted) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    String last = "(none: the socket did not answer)";
    while (System.nanoTime() < deadline) {
      try {
        last = controlReply(own.runtimeDir);
        JsonObject reply = JsonParser.parseString(last).getAsJsonObject();
        if (wanted.test(reply)) return reply;
      } catch (IOException e) {  // not listening yet
        last = e.toString();
      }
      Thread.sleep(20);
    }
    return fail("no such status reply in 30 s; the last: " + last + "; the log: " + own.log());
  }

  static boolean present(JsonObject reply, String key) {
    return reply.has(key) && !reply.get(key).isJsonNull();
  }

  // --- Every key, from real daemons ------------------------------------------------------

  @Test
  void everyKeyOfTheDaemonsStatusReplyIsRead() throws Exception {
    String reply = controlReply(daemon.runtimeDir);
    JsonObject keys = JsonParser.parseString(reply).getAsJsonObject();
    assertTrue(keys.size() >= 30, "a reply of " + keys.size() + " keys: " + reply);
    assertEquals(1, keys.getAsJsonArray("fronts").size(), reply);
    assertEquals(List.of(), Status.controlKeysNotRead(reply),
        "keys the daemon sends that Status.Control is not read from: " + reply);
  }

  @Test
  void everyKeyOfTheStatusJsonIsRead() {
    assertEquals(List.of(), Status.keysNotRead(statusJson),
        "keys of the status JSON that Status is not read from: " + statusJson);
    // And no key is left out that the JSON no longer has: each list is exact.
    JsonObject top = JsonParser.parseString(statusJson).getAsJsonObject();
    for (String key : Status.TOP_KEYS_NOT_READ) {
      assertTrue(top.has(key), "TOP_KEYS_NOT_READ names \"" + key + "\", which is gone");
    }
    JsonObject reply = top.getAsJsonObject("daemon");
    for (String key : Status.CONTROL_KEYS_NOT_READ) {
      assertTrue(reply.has(key), "CONTROL_KEYS_NOT_READ names \"" + key + "\", which is gone");
    }
  }

  @Test
  void everyKeyOfAFailingRenewalIsRead() throws Exception {
    try (TestDaemon own = TestDaemon.serving();
         SnowflakeClient sut = SnowflakeClient.open("orders", own.options())) {
      sut.next();
      // A state directory that is a file now: every renewal of the reservation fails.
      Path state = own.root.resolve("state");
      Files.move(state, own.root.resolve("state.gone"));
      Files.writeString(state, "");
      JsonObject reply = awaitReply(own,
          r -> present(r, "renewal") && present(r.getAsJsonObject("renewal"), "last_error"));
      assertEquals(List.of(), Status.controlKeysNotRead(reply.toString()), reply.toString());
      Status.Renewal renewal = sut.status().control().renewal();
      assertNotNull(renewal);
      assertEquals("state_file", renewal.store());
      assertEquals("state_file", renewal.lastErrorStore());
      assertTrue(renewal.lastError().contains("Not a directory"), renewal.toString());
      assertTrue(renewal.location().startsWith(state.toString()), renewal.toString());
    }
  }

  @Test
  void everyKeyOfAClockWaitIsRead() throws Exception {
    try (TestDaemon own = TestDaemon.serving()) {
      try (SnowflakeClient client = SnowflakeClient.open("orders", own.options())) {
        client.next();
      }
      own.stop();
      // Started again with its clock 30 s behind what it issued: out of service, waiting
      // for the clock to pass its mark.
      own.start(null, Map.of("LD_PRELOAD", TestDaemon.env("SNOWFLAKE_FAKETIME_LIBRARY"),
          "FAKETIME", "-30s", "FAKETIME_DONT_FAKE_MONOTONIC", "1"));
      JsonObject reply = awaitReply(own, r -> present(r, "clock_wait"));
      assertEquals(List.of(), Status.controlKeysNotRead(reply.toString()), reply.toString());
      try (SnowflakeClient sut = SnowflakeClient.open("orders", own.options())) {
        Status status = sut.status();
        assertEquals("out_of_service", status.state());
        assertEquals("behind_high_water", status.reasonCode());
        Status.ClockWait wait = status.control().clockWait();
        assertNotNull(wait, status.toString());
        assertTrue(!wait.setBy().isEmpty() && wait.clockPassesInMs() > 0, wait.toString());
        // Ahead of the daemon's clock (30 s behind the test's).
        assertTrue(wait.untilUnixMs() > status.control().startedUnixMs(), status.toString());
      }
    }
  }

  @Test
  void countsOfAStoppedDaemonAreMinusOne() throws Exception {
    try (TestDaemon own = TestDaemon.serving();
         SnowflakeClient sut = SnowflakeClient.open("orders", own.options())) {
      sut.next();
      own.stop();
      Status status = sut.status();
      assertEquals("stopped", status.state());
      assertEquals(-1, status.ringFill(), status.toString());
      assertEquals(-1, status.takenTotal(), status.toString());
      assertEquals(-1, status.uncounted(), status.toString());
      assertTrue(status.publishedTotal() > 0, status.toString());
      assertNull(status.control());
    }
  }

  // --- The reader on its own -------------------------------------------------------------

  @Test
  void readsTheValuesOfTheStatusJson() {
    Status status = Status.fromJson(statusJson);
    assertEquals("serving", status.state());
    assertEquals("", status.statusText());
    assertTrue(status.takenTotal() >= 1 && status.takenTotal() <= status.publishedTotal(),
        status.toString());
    assertNull(status.controlError());
    Status.Control control = status.control();
    assertEquals(daemon.pid(), control.pid());
    assertTrue(control.lastIssuedId() > 0);
    assertNull(control.renewal());
    assertNull(control.clockWait());
    assertEquals("http", control.fronts().get(0).name());
    assertEquals(1, control.fronts().get(0).listen().size());
  }

  /** `json` with the value at `path` ("daemon.fronts.0.listen.0") set, or removed (null). */
  static String edit(String json, String path, JsonElement value) {
    JsonElement root = JsonParser.parseString(json);
    String[] steps = path.split("\\.");
    JsonElement at = root;
    for (int i = 0; i < steps.length - 1; i++) {
      at = at.isJsonArray() ? at.getAsJsonArray().get(Integer.parseInt(steps[i]))
                            : at.getAsJsonObject().get(steps[i]);
    }
    String last = steps[steps.length - 1];
    if (at.isJsonArray()) {
      at.getAsJsonArray().set(Integer.parseInt(last), value);
    } else if (value == null) {
      at.getAsJsonObject().remove(last);
    } else {
      at.getAsJsonObject().add(last, value);
    }
    return root.toString();
  }

  /** The live daemon's status JSON, edited so. */
  static String with(String path, JsonElement value) {
    return edit(statusJson, path, value);
  }

  static JsonElement number(String digits) {
    return new JsonPrimitive(new BigInteger(digits));
  }

  static JsonObject object(String json) {
    return JsonParser.parseString(json).getAsJsonObject();
  }

  @Test
  void keysNotReadNamesEveryKeyStatusDoesNotRead() {
    String json = with("new_fact", new JsonPrimitive(1));
    json = edit(json, "daemon.new_fact", new JsonPrimitive("x"));
    json = edit(json, "daemon.fronts.0.new_fact", JsonNull.INSTANCE);
    json = edit(json, "daemon.renewal", object("{\"store\":\"register\",\"location\":\"l\","
        + "\"since_unix_ms\":1,\"waited_ms\":2,\"unanswered\":true,\"last_error\":null,"
        + "\"last_error_store\":null,\"new_fact\":3}"));
    json = edit(json, "daemon.clock_wait", object("{\"until_unix_ms\":1,\"set_by\":\"fence\","
        + "\"clock_passes_in_ms\":-4,\"new_fact\":[]}"));
    List<String> unread = new ArrayList<>(Status.keysNotRead(json));
    unread.sort(null);
    assertEquals(List.of("daemon.clock_wait.new_fact", "daemon.fronts[0].new_fact",
                     "daemon.new_fact", "daemon.renewal.new_fact", "new_fact"),
        unread);
    // Read past in use: a key nobody reads is no error.
    Status status = Status.fromJson(json);
    assertEquals(new Status.Renewal("register", "l", 1, 2, true, "", ""),
        status.control().renewal());
    assertEquals(new Status.ClockWait(1, "fence", -4), status.control().clockWait());
  }

  @Test
  void unknownCountsAreMinusOneAndUnsignedNumbersKeepTheirBits() {
    String json = with("ring_fill", JsonNull.INSTANCE);
    json = edit(json, "taken_total", JsonNull.INSTANCE);
    json = edit(json, "uncounted", JsonNull.INSTANCE);
    json = edit(json, "heartbeat_age_ns", number("18446744073709551615"));
    json = edit(json, "published_total", number("9223372036854775808"));
    json = edit(json, "daemon", JsonNull.INSTANCE);
    json = edit(json, "daemon_error", new JsonPrimitive("no control socket"));
    Status status = Status.fromJson(json);
    assertEquals(-1, status.ringFill());
    assertEquals(-1, status.takenTotal());
    assertEquals(-1, status.uncounted());
    assertEquals(-1, status.heartbeatAgeNs());
    assertEquals(Long.MIN_VALUE, status.publishedTotal());
    assertNull(status.control());
    assertEquals("no control socket", status.controlError());
    assertEquals(-1L, Status.fromJson(with("daemon.last_issued_id",
        new JsonPrimitive("18446744073709551615"))).control().lastIssuedId());
    assertEquals(0, Status.fromJson(with("daemon.last_issued_id", JsonNull.INSTANCE))
        .control().lastIssuedId());
  }

  @Test
  void aStatusThatIsNotTheWritersIsRefusedNamingWhy() {
    List<String[]> cases = new ArrayList<>(List.of(
        new String[] {"", "not one JSON value"},
        new String[] {"{", "not one JSON value"},
        new String[] {"[]", "the status is [], not an object"},
        new String[] {"\"serving\"", "not an object"},
        // Lenient JSON, which Gson's own JsonParser would take: no writer makes it.
        new String[] {"{'state':'serving'}", "not one JSON value"},
        new String[] {"{\"state\":NaN}", "not one JSON value"},
        new String[] {"{\"state\":serving}", "not one JSON value"},
        new String[] {"{} // a comment", "not one JSON value"},
        new String[] {statusJson + " {}", "not one JSON value"},
        new String[] {statusJson + "x", "not one JSON value"},
        new String[] {with("health", null), "\"health\" is missing"},
        new String[] {with("state", JsonNull.INSTANCE), "\"state\" is null, not a string"},
        new String[] {with("state", new JsonPrimitive(1)), "\"state\" is 1, not a string"},
        new String[] {with("pid", new JsonPrimitive("12")), "\"pid\" is \"12\", not an integer"},
        new String[] {with("pid", new JsonPrimitive(1.5)), "\"pid\" is 1.5, not an integer"},
        new String[] {with("pid", JsonParser.parseString("1e3")), "\"pid\" is 1e3, not an"},
        new String[] {with("pid", new JsonPrimitive(true)), "\"pid\" is true, not an integer"},
        new String[] {with("pid", number("18446744073709551616")), "not an integer of at most"},
        new String[] {with("pid", number("-9223372036854775809")), "not an integer of at most"},
        new String[] {with("ring_fill", new JsonArray()), "\"ring_fill\" is [], not an integer"},
        new String[] {with("daemon_error", new JsonPrimitive(2)), "\"daemon_error\" is 2"},
        new String[] {with("daemon", new JsonPrimitive("x")), "not an object or null"},
        new String[] {with("daemon.machine", new JsonPrimitive("three")),
            "\"daemon.machine\" is \"three\", not an integer"},
        new String[] {with("daemon.segment_reopened", new JsonPrimitive(1)),
            "\"daemon.segment_reopened\" is 1, not true or false"},
        new String[] {with("daemon.last_issued_id", new JsonPrimitive("12a")),
            "\"daemon.last_issued_id\" is \"12a\", not a decimal ID"},
        new String[] {with("daemon.last_issued_id", new JsonPrimitive("-1")), "not a decimal ID"},
        new String[] {with("daemon.last_issued_id", new JsonPrimitive("18446744073709551616")),
            "not a decimal ID"},
        new String[] {with("daemon.last_issued_id", new JsonPrimitive(5)), "not a string"},
        new String[] {with("daemon.services", new JsonArray()), "\"daemon.services\" is []"},
        new String[] {with("daemon.services.orders", new JsonPrimitive("x")),
            "\"daemon.services.orders\" is \"x\""},
        new String[] {with("daemon.fronts", JsonNull.INSTANCE), "not an array"},
        new String[] {with("daemon.fronts.0", new JsonPrimitive(1)),
            "daemon.fronts[0] is 1, not an object"},
        new String[] {with("daemon.fronts.0.listen.0", new JsonPrimitive(80)),
            "\"daemon.fronts[0].listen[0]\" is 80, not a string"},
        new String[] {with("daemon.fronts.0.requests", null),
            "\"daemon.fronts[0].requests\" is missing"},
        new String[] {with("daemon.renewal", object("{\"store\":\"register\"}")),
            "\"daemon.renewal.location\" is missing"},
        new String[] {with("daemon.clock_wait", new JsonArray()), "not an object or null"}));
    for (String[] c : cases) {
      SnowflakeException error =
          assertThrows(SnowflakeException.class, () -> Status.fromJson(c[0]), c[0]);
      assertEquals("system_error", error.code(), c[0]);
      assertTrue(error.getMessage().contains(c[1])
              && error.getMessage().contains("snowflake.jar and libsnowflake_jni.so"),
          c[0] + " -> " + error.getMessage());
    }
  }
}
