package example.snowflaked;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The takers' conformance table (tests/conformance/cases.json) for the Java package: every
 * row, from the fixtures conformance_fixture writes ($SNOWFLAKE_CONFORMANCE_FIXTURE; ctest
 * sets it). The C++ client, Python, Go and Node.js run the same rows. For a row that
 * expects an error, the exception's class must follow the vocabulary's action for its code
 * (conformance_fixture --vocabulary): an UnavailableException exactly for fail_over.
 */
class ConformanceTest {
  /**
   * What one row gave: the stage, the code, the message, the IDs, the published IDs, and the
   * exception (null without one).
   */
  record Outcome(String stage, String code, String message, List<Long> ids, List<Long> published,
      SnowflakeException error) {}

  private static Map<String, String> actions;

  /** {code: action} of the library's error codes, from the C++ tables. */
  static synchronized Map<String, String> actions() throws Exception {
    if (actions != null) return actions;
    Process process = new ProcessBuilder(TestDaemon.env("SNOWFLAKE_CONFORMANCE_FIXTURE"),
        "--vocabulary").redirectError(ProcessBuilder.Redirect.INHERIT).start();
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(process.waitFor(30, TimeUnit.SECONDS));
    assertEquals(0, process.exitValue(), "conformance_fixture --vocabulary failed");
    JsonObject vocabulary = JsonParser.parseString(out).getAsJsonObject();
    JsonArray codes = vocabulary.getAsJsonArray("errors");
    JsonArray codeActions = vocabulary.getAsJsonArray("error_actions");
    Map<String, String> read = new HashMap<>();
    for (int i = 0; i < codes.size(); i++) {
      read.put(codes.get(i).getAsString(), codeActions.get(i).getAsString());
    }
    actions = read;
    return actions;
  }

  static JsonObject table() throws IOException {
    return JsonParser.parseString(
        Files.readString(Path.of(TestDaemon.env("SNOWFLAKE_CONFORMANCE_CASES")))).getAsJsonObject();
  }

  static List<Long> fixture(String name, Path directory, boolean afterOpen) throws Exception {
    List<String> args = new ArrayList<>(List.of(TestDaemon.env("SNOWFLAKE_CONFORMANCE_FIXTURE"),
        "--cases", TestDaemon.env("SNOWFLAKE_CONFORMANCE_CASES"), "--case", name, "--dir",
        directory.toString(), "--live-pid", Long.toString(ProcessHandle.current().pid())));
    if (afterOpen) args.add("--after-open");
    Process process = new ProcessBuilder(args).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(process.waitFor(30, TimeUnit.SECONDS));
    assertEquals(0, process.exitValue(), "conformance_fixture failed for " + name);
    List<Long> ids = new ArrayList<>();
    for (JsonElement id : JsonParser.parseString(out).getAsJsonObject().getAsJsonArray("ids")) {
      ids.add(Long.parseUnsignedLong(id.getAsString()));
    }
    return ids;
  }

  static Outcome run(JsonObject row, Path directory) throws Exception {
    String name = row.get("name").getAsString();
    List<Long> published = fixture(name, directory, false);
    JsonObject take = row.getAsJsonObject("take");
    int timeoutMs = take.has("timeout_ms") ? take.get("timeout_ms").getAsInt() : 100;
    SnowflakeClient client;
    try {
      // No remotes, whatever $SNOWFLAKE_REMOTES says: the row is about the local ring.
      client = SnowflakeClient.open("conformance", new Options().withRuntimeDir(directory)
          .withWaitTimeoutMs(timeoutMs).withRemotes(List.of()));
    } catch (SnowflakeException e) {
      return new Outcome("open", e.code(), e.getMessage(), List.of(), published, e);
    }
    try (client) {
      if (row.has("after_open")) {
        List<Long> after = fixture(name, directory, true);
        if (!after.isEmpty()) published = after;
      }
      List<Long> ids = new ArrayList<>();
      try {
        if (take.get("call").getAsString().equals("next")) {
          ids.add(client.next());
        } else {
          for (long id : client.nextBatch(take.get("count").getAsInt())) ids.add(id);
        }
      } catch (SnowflakeException e) {
        return new Outcome("take", e.code(), e.getMessage(), List.of(), published, e);
      }
      return new Outcome("take", "ok", "", ids, published, null);
    }
  }

  /**
   * The expect keys this runner checks: a row whose expect has another fails rather than
   * pass with the check left out.
   */
  static final Set<String> KNOWN_EXPECT_KEYS = Set.of("stage", "code", "message_contains",
      "count", "ids", "refill_hint", "refill_request_min", "waiters", "uncounted",
      "service_taken");
  static final List<String> REGION_KEYS =
      List.of("refill_hint", "refill_request_min", "waiters", "uncounted", "service_taken");

  /** A JSON object of counts as a map, so two compare by value whatever the number types. */
  static Map<String, Long> counts(JsonObject object) {
    Map<String, Long> out = new TreeMap<>();
    for (Map.Entry<String, JsonElement> entry : object.entrySet()) {
      out.put(entry.getKey(), entry.getValue().getAsLong());
    }
    return out;
  }

  /**
   * The region's words (refill, waiters, counts), read by the fixture attached to the row's
   * socket as a taker attaches (the region is a memfd: no file to read).
   */
  static JsonObject regionWords(Path directory) throws Exception {
    Process process = new ProcessBuilder(TestDaemon.env("SNOWFLAKE_CONFORMANCE_FIXTURE"),
        "--region-words", "--dir", directory.toString())
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(process.waitFor(30, TimeUnit.SECONDS));
    assertEquals(0, process.exitValue(), "conformance_fixture --region-words failed");
    return JsonParser.parseString(out).getAsJsonObject();
  }

  @TestFactory
  Stream<DynamicTest> everyRow() throws IOException {
    JsonArray cases = table().getAsJsonArray("cases");
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonElement element : cases) {
      JsonObject row = element.getAsJsonObject();
      tests.add(DynamicTest.dynamicTest(row.get("name").getAsString(), () -> check(row)));
    }
    assertTrue(tests.size() > 10, "the table has only " + tests.size() + " rows");
    return tests.stream();
  }

  private static void check(JsonObject row) throws Exception {
    JsonObject expect = row.getAsJsonObject("expect");
    if (row.has("expect_by_taker") && row.getAsJsonObject("expect_by_taker").has("java")) {
      expect = row.getAsJsonObject("expect_by_taker").getAsJsonObject("java");
      System.out.println(row.get("name").getAsString()
          + ": this taker's own expectation, because: " + row.get("why").getAsString());
    }
    for (String key : expect.keySet()) {
      assertTrue(KNOWN_EXPECT_KEYS.contains(key),
          "expect key \"" + key + "\" is not checked by this runner: add its check");
    }
    Path directory = Files.createTempDirectory(Path.of("/tmp"), "sf-java-conf-");
    try {
      Outcome outcome = run(row, directory);
      assertEquals(expect.get("stage").getAsString() + "/" + expect.get("code").getAsString(),
          outcome.stage() + "/" + outcome.code(), outcome.message());
      String code = expect.get("code").getAsString();
      if (!code.equals("ok")) {
        String action = actions().get(code);
        assertNotNull(action, code + " is no library error code of the vocabulary");
        assertEquals(action.equals("fail_over"), outcome.error() instanceof UnavailableException,
            code + " (action " + action + ") was thrown as "
                + outcome.error().getClass().getSimpleName());
        assertEquals(action, outcome.error().action(), code);
      }
      if (expect.has("message_contains")) {
        String phrase = expect.get("message_contains").getAsString();
        assertTrue(outcome.message().contains(phrase), outcome.message() + " lacks " + phrase);
      }
      if (expect.has("count")) assertEquals(expect.get("count").getAsInt(), outcome.ids().size());
      if (expect.has("ids") && expect.get("ids").getAsString().equals("published")) {
        assertEquals(outcome.published().subList(0, outcome.ids().size()), outcome.ids());
      }
      final JsonObject expected = expect;
      if (REGION_KEYS.stream().anyMatch(expected::has)) {
        // Read after the client is closed (run's try-with-resources).
        JsonObject words = regionWords(directory);
        if (expect.has("refill_hint")) {
          assertEquals(expect.get("refill_hint").getAsInt(), words.get("refill_hint").getAsInt());
        }
        if (expect.has("refill_request_min")) {
          assertTrue(words.get("refill_request").getAsInt()
              >= expect.get("refill_request_min").getAsInt());
        }
        if (expect.has("waiters")) {
          assertEquals(expect.get("waiters").getAsLong(), words.get("waiters").getAsLong(),
              "waiters");
        }
        if (expect.has("uncounted")) {
          assertEquals(expect.get("uncounted").getAsLong(), words.get("uncounted").getAsLong(),
              "uncounted");
        }
        if (expect.has("service_taken")) {
          assertEquals(counts(expect.getAsJsonObject("service_taken")),
              counts(words.getAsJsonObject("service_taken")), "IDs taken per service");
        }
      }
    } finally {
      try (Stream<Path> paths = Files.walk(directory)) {
        paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }
}
