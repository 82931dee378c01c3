// The HTTP front of the real snowflaked, over real TCP on 127.0.0.1 (docs/http.md).
//
// Properties: every ID handed out over HTTP comes from the ring in one host-wide order
// with local clients' IDs; a batch is strictly increasing; a malformed, oversized, slow or
// excess request gets the documented status (or a close) and never disturbs the ring or
// other connections.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "front_daemon.h"
#include "http_probe.h"
#include "snowflake/client.h"
#include "stress_seed.h"
#include "wait_until.h"

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kMaxConnections = 8;

class HttpFront : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = FreePort();
    DaemonOptions options = harness_.Options();
    options.config_path = harness_.WriteFile(
        "http.toml", HttpFrontToml(port_, "max_connections = " + std::to_string(kMaxConnections) +
                                              "\nidle_timeout_ms = 1500\nthreads = 2\n"));
    daemon_.emplace(harness_.Start(options));
    ASSERT_TRUE(daemon_->ready()) << daemon_->Describe();
  }

  // The ring still serves local clients and a fresh HTTP connection still gets an ID.
  void ExpectStillServing(const std::string& after) {
    auto client = Client::Open("local", harness_.Clients());
    ASSERT_TRUE(client) << client.error().message;
    auto id = client->Next();
    EXPECT_TRUE(id) << after << ": local take failed: " << id.error().message;
    const HttpReply reply = FetchOnce(port_, "/v1/id?service=probe");
    EXPECT_EQ(reply.status, 200) << after << ": " << reply.body;
    ASSERT_TRUE(daemon_->Running()) << after << ": " << daemon_->Describe();
  }

  DaemonHarness harness_{"http"};
  uint16_t port_ = 0;
  std::optional<Daemon> daemon_;
};

TEST_F(HttpFront, IdIsADecimalStringBetweenLocalTakes) {
  // One order for local and remote callers: local, http, local are strictly increasing.
  auto client = Client::Open("local", harness_.Clients());
  ASSERT_TRUE(client) << client.error().message;

  const auto before = client->Next();
  const HttpReply reply = FetchOnce(port_, "/v1/id?service=orders");
  const auto after = client->Next();

  ASSERT_TRUE(before && after);
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Header("content-type"), "application/json");
  const auto doc = nlohmann::json::parse(reply.body);
  ASSERT_TRUE(doc["id"].is_string()) << reply.body;
  const uint64_t id = std::stoull(doc["id"].get<std::string>());
  EXPECT_LT(*before, id);
  EXPECT_LT(id, *after);
}

TEST_F(HttpFront, BatchOfMaximumSizeIsStrictlyIncreasing) {
  const HttpReply reply = FetchOnce(port_, "/v1/ids?service=orders&count=4096");

  ASSERT_EQ(reply.status, 200) << reply.body;
  const std::vector<uint64_t> ids = IdsOf(reply.body);
  ASSERT_EQ(ids.size(), 4096u);
  for (size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]) << "at " << i;
}

TEST_F(HttpFront, TextPlainGivesOneDecimalPerLine) {
  const HttpReply reply =
      FetchOnce(port_, "/v1/ids?service=orders&count=5", "Accept: text/plain\r\n");

  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Header("content-type").rfind("text/plain", 0), 0u);
  std::vector<uint64_t> ids;
  size_t start = 0;
  for (size_t nl; (nl = reply.body.find('\n', start)) != std::string::npos; start = nl + 1) {
    ids.push_back(std::stoull(reply.body.substr(start, nl - start)));
  }
  EXPECT_EQ(start, reply.body.size()) << "the last line ends with a newline";
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
}

TEST_F(HttpFront, KeepAliveAndPipelinedRequestsAreAnsweredInOrder) {
  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  // 300 in one send: more than one recv's worth (4 KB) and many runs of the requests a
  // session answers in one call chain before it posts the rest (16).
  constexpr int kRequests = 300;
  std::string burst;
  for (int i = 0; i < kRequests; ++i) burst += Get("/v1/id?service=pipe");
  ASSERT_TRUE(probe.Send(burst));

  uint64_t last = 0;
  for (int i = 0; i < kRequests; ++i) {
    const HttpReply reply = probe.Read();
    ASSERT_EQ(reply.status, 200) << "reply " << i << ": " << reply.body;
    const auto ids = IdsOf(reply.body);
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_LT(last, ids[0]);
    last = ids[0];
  }
  // The connection stays usable.
  EXPECT_EQ(probe.Exchange(Get("/healthz")).status, 200);
}

// What a reply should be for one request of a kept-alive connection.
struct KeptAliveStep {
  std::string target;
  std::string accept;  // the Accept line with its CRLF, or ""
  int status;
  size_t ids;  // in the reply's body (200 only)
  bool plain;  // text/plain, else JSON (200 only)
};

// Checks `reply` is `step`'s own answer: its status, format and number of IDs.
void ExpectAnswerOf(const KeptAliveStep& step, const HttpReply& reply) {
  SCOPED_TRACE(step.target + " with " + (step.accept.empty() ? "no Accept" : step.accept));
  ASSERT_EQ(reply.status, step.status) << reply.body;
  if (step.status != 200) return;
  if (step.plain) {
    EXPECT_EQ(reply.Header("content-type").rfind("text/plain", 0), 0u);
    EXPECT_EQ(LinesOf(reply.body).size(), step.ids) << reply.body;
  } else {
    EXPECT_EQ(reply.Header("content-type"), "application/json");
    EXPECT_EQ(IdsOf(reply.body).size(), step.ids) << reply.body;
  }
}

// The session keeps what it parsed of a request (method, target, Accept) for the next
// one: on one kept-alive connection, requests whose target and Accept change from one to
// the next (long then short, present then absent) each get their own answer, never one
// shaped by what an earlier request left. One by one, then all pipelined in one send.
TEST_F(HttpFront, KeptAliveRequestsAreAnsweredFromTheirOwnTargetAndAccept) {
  const std::string plain = "Accept: text/plain\r\n";
  const std::string json = "Accept: application/json\r\n";
  const std::vector<KeptAliveStep> steps = {
      {"/v1/ids?service=a-rather-long-service-name.for.this-test&count=7", plain, 200, 7, true},
      {"/v1/id?service=b", "", 200, 1, false},
      {"/v1/ids?service=c&count=3", plain, 200, 3, true},
      {"/v1/ids?service=c&count=3", "", 200, 3, false},
      {"/v1/id?service=d", plain, 200, 1, true},
      {"/v1/id?service=d", json, 200, 1, false},
      {"/v1/id?service=e", plain, 200, 1, true},
      {"/v1/id", plain, 400, 0, false},  // shorter than the last: no service left over
      {"/v1/ids?service=f&count=12", "", 200, 12, false},
      {"/v1/ids?service=f&count=1", "", 200, 1, false},
      {"/healthz", plain, 200, 0, false},
      {"/v1/id?service=g", "", 200, 1, false},
  };
  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  for (const KeptAliveStep& step : steps) {
    ExpectAnswerOf(step, probe.Exchange(Get(step.target, step.accept)));
  }
  std::string burst;
  for (const KeptAliveStep& step : steps) burst += Get(step.target, step.accept);
  ASSERT_TRUE(probe.Send(burst));
  for (const KeptAliveStep& step : steps) ExpectAnswerOf(step, probe.Read());
}

// A GET with a small body (within the limit) is answered as without one, and the body's
// bytes are not taken for the next request on the connection; so is a chunked one.
TEST_F(HttpFront, ASmallBodyIsReadAndDropped) {
  const std::string sized =
      "GET /v1/ids?service=b&count=2 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
  const std::string chunked =
      "GET /v1/ids?service=b&count=3 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\n\r\n";
  const KeptAliveStep two{"", "", 200, 2, false};
  const KeptAliveStep three{"", "", 200, 3, false};
  const KeptAliveStep next{"/v1/id?service=c", "Accept: text/plain\r\n", 200, 1, true};
  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  ExpectAnswerOf(two, probe.Exchange(sized));
  ExpectAnswerOf(next, probe.Exchange(Get(next.target, next.accept)));
  ExpectAnswerOf(three, probe.Exchange(chunked));
  ExpectAnswerOf(next, probe.Exchange(Get(next.target, next.accept)));
  // Pipelined: the next request starts right after the body.
  ASSERT_TRUE(probe.Send(sized + Get(next.target, next.accept) + chunked + sized));
  ExpectAnswerOf(two, probe.Read());
  ExpectAnswerOf(next, probe.Read());
  ExpectAnswerOf(three, probe.Read());
  ExpectAnswerOf(two, probe.Read());
}

// Batches pipelined faster than they are read: the replies (60 of 4096 IDs, about 5 MB)
// outgrow the socket's buffers, a send would block, and the rest of a reply goes out when
// the socket is writable again. Each must arrive whole, in order, header and body.
TEST_F(HttpFront, PipelinedBatchesThatFillTheSendWindowArriveWholeInOrder) {
  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  constexpr int kRequests = 60;
  std::string burst;
  for (int i = 0; i < kRequests; ++i) {
    burst += Get("/v1/ids?service=pipe&count=4096", i % 2 ? "Accept: text/plain\r\n" : "");
  }
  ASSERT_TRUE(probe.Send(burst));
  std::this_thread::sleep_for(300ms);  // the front writes until the window is full

  uint64_t last = 0;
  for (int i = 0; i < kRequests; ++i) {
    const HttpReply reply = probe.Read();
    ASSERT_EQ(reply.status, 200) << "reply " << i << ": " << reply.body.substr(0, 200);
    EXPECT_EQ(reply.Header("content-length"), std::to_string(reply.body.size()));
    const auto ids = i % 2 ? LinesOf(reply.body) : IdsOf(reply.body);
    ASSERT_EQ(ids.size(), 4096u) << "reply " << i;
    ASSERT_LT(last, ids.front()) << "reply " << i;
    for (size_t k = 1; k < ids.size(); ++k) ASSERT_LT(ids[k - 1], ids[k]) << "reply " << i;
    last = ids.back();
  }
}

TEST_F(HttpFront, HealthzStatusAndMetricsServe) {
  const HttpReply health = FetchOnce(port_, "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(nlohmann::json::parse(health.body)["state"], "serving");

  // /v1/status has exactly the keys of `snowflakectl status --json` but those a remote
  // caller is not shown, and the daemon's own object under "daemon" has those of the
  // control socket's reply but the same.
  const std::set<std::string> withheld = {"pid",       "runtime_dir",       "state_dir",
                                          "holder_id", "register_location", "location",
                                          "last_error"};
  const HttpReply status = FetchOnce(port_, "/v1/status");
  ASSERT_EQ(status.status, 200) << status.body;
  const RunResult cli = RunCommand(
      {kSnowflakectlPath, "status", "--json", "--runtime-dir", harness_.runtime_dir().string()});
  ASSERT_TRUE(cli.status.ExitedWith(0)) << cli.err;
  std::set<std::string> http_keys;
  std::set<std::string> cli_keys;
  const auto http_doc = nlohmann::json::parse(status.body);
  const auto cli_doc = nlohmann::json::parse(cli.out);
  for (const auto& [key, value] : http_doc.items()) http_keys.insert(key);
  for (const auto& [key, value] : cli_doc.items()) {
    if (withheld.count(key) == 0) cli_keys.insert(key);
  }
  EXPECT_EQ(http_keys, cli_keys);
  std::set<std::string> http_daemon_keys;
  std::set<std::string> cli_daemon_keys;
  for (const auto& [key, value] : http_doc["daemon"].items()) http_daemon_keys.insert(key);
  for (const auto& [key, value] : cli_doc["daemon"].items()) {
    if (withheld.count(key) == 0) cli_daemon_keys.insert(key);
  }
  EXPECT_EQ(http_daemon_keys, cli_daemon_keys);
  EXPECT_EQ(http_doc["daemon"]["machine"], cli_doc["daemon"]["machine"]);
  // Both sides are built by one formatter, so the comparison above cannot catch a key both
  // lose: check the documented keys (docs/cli.md, docs/http.md) and values read elsewhere.
  for (const char* key : {"ok",
                          "daemon_reachable",
                          "state",
                          "version",
                          "instance",
                          "register_backend",
                          "uptime_ms",
                          "state_age_ms",
                          "last_issued_id",
                          "reserved_through_unix_ms",
                          "last_issued_id_unix_ms",
                          "services",
                          "started_unix_ms",
                          "state_since_unix_ms",
                          "reserved_through_time",
                          "uncounted_taken",
                          "health",
                          "reason",
                          "reason_code",
                          "machine",
                          "epoch_unix_ms",
                          "drained_total"}) {
    EXPECT_TRUE(http_doc.contains(key)) << key << " missing from /v1/status: " << status.body;
  }
  auto segment = Client::Inspect(harness_.Clients());
  ASSERT_TRUE(segment) << segment.error().message;
  EXPECT_EQ(http_doc["machine"], segment->machine);
  EXPECT_EQ(http_doc["state"], "serving");
  EXPECT_EQ(http_doc["daemon_reachable"], true);

  const HttpReply metrics = FetchOnce(port_, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("snowflake_http_requests_total"), std::string::npos);
}

TEST_F(HttpFront, StatusCarriesTheFrontsAddressAndWhatItServed) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(FetchOnce(port_, "/v1/id?service=counted").status, 200);
  const std::string address = "127.0.0.1:" + std::to_string(port_);

  // snowflakectl status --json: the daemon's object lists the front.
  const RunResult cli = RunCommand(
      {kSnowflakectlPath, "status", "--json", "--runtime-dir", harness_.runtime_dir().string()});
  ASSERT_TRUE(cli.status.ExitedWith(0)) << cli.err;
  const auto doc = nlohmann::json::parse(cli.out);
  ASSERT_TRUE(doc["daemon"]["fronts"].is_array()) << cli.out;
  ASSERT_EQ(doc["daemon"]["fronts"].size(), 1u) << cli.out;
  const auto& front = doc["daemon"]["fronts"][0];
  EXPECT_EQ(front["name"], "http") << cli.out;
  EXPECT_EQ(front["listen"], nlohmann::json::array({address})) << cli.out;
  EXPECT_GE(front["requests"].get<uint64_t>(), 3u) << cli.out;
  EXPECT_EQ(front["refused"], 0) << cli.out;
  EXPECT_TRUE(front["connections"].is_number_unsigned()) << cli.out;

  // /v1/status carries it too, counting the request being answered's predecessors.
  const HttpReply status = FetchOnce(port_, "/v1/status");
  ASSERT_EQ(status.status, 200) << status.body;
  const auto http_doc = nlohmann::json::parse(status.body);
  ASSERT_EQ(http_doc["daemon"]["fronts"].size(), 1u) << status.body;
  EXPECT_EQ(http_doc["daemon"]["fronts"][0]["listen"], nlohmann::json::array({address}));
  EXPECT_GE(http_doc["daemon"]["fronts"][0]["requests"].get<uint64_t>(), 3u);
  // This request's own connection is open while its status is assembled.
  EXPECT_GE(http_doc["daemon"]["fronts"][0]["connections"].get<uint64_t>(), 1u);

  // And the human text has one line for it.
  const RunResult text =
      RunCommand({kSnowflakectlPath, "status", "--runtime-dir", harness_.runtime_dir().string()});
  ASSERT_TRUE(text.status.ExitedWith(0)) << text.err;
  EXPECT_NE(text.out.find("front:          http on " + address + ": "), std::string::npos)
      << text.out;
}

// A remote caller learns what it needs to fail over (state, reason codes, machine, the
// fronts' figures), not where the daemon keeps its files, its pid, its register holder or
// the register's location: /v1/status leaves them out, as the local status keeps them.
TEST_F(HttpFront, StatusShowsRemoteCallersNoPathsPidOrRegisterLocation) {
  const HttpReply status = FetchOnce(port_, "/v1/status");
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(status.body.find(harness_.runtime_dir().string()), std::string::npos) << status.body;
  const auto doc = nlohmann::json::parse(status.body);
  for (const char* key : {"pid", "runtime_dir", "holder_id"}) {
    EXPECT_FALSE(doc.contains(key)) << key << " in " << status.body;
    EXPECT_FALSE(doc["daemon"].contains(key)) << "daemon." << key << " in " << status.body;
  }
  for (const char* key : {"state_dir", "register_location"}) {
    EXPECT_FALSE(doc["daemon"].contains(key)) << "daemon." << key << " in " << status.body;
  }
  EXPECT_EQ(doc["state"], "serving") << status.body;
  EXPECT_TRUE(doc["machine"].is_number()) << status.body;

  // The local status still has them.
  const RunResult cli = RunCommand(
      {kSnowflakectlPath, "status", "--json", "--runtime-dir", harness_.runtime_dir().string()});
  ASSERT_TRUE(cli.status.ExitedWith(0)) << cli.err;
  const auto local = nlohmann::json::parse(cli.out);
  EXPECT_EQ(local["runtime_dir"], harness_.runtime_dir().string()) << cli.out;
  EXPECT_TRUE(local["pid"].is_number()) << cli.out;
}

// A daemon paused for its register says where the register is and what it answered, in
// its own sentences (status_text, the reason). A remote caller gets the vocabulary's
// sentence for the same reason code instead: no path, no endpoint, no error text.
TEST(HttpFrontRemoteStatus, APausedDaemonsStatusNamesNoRegisterLocationToRemoteCallers) {
  // Arrange: the file register outside the state directory.
  DaemonHarness harness("http-paused");
  const uint16_t port = FreePort();
  const std::filesystem::path register_path = harness.root() / "elsewhere" / "numbers.json";
  std::filesystem::create_directories(register_path.parent_path());
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile(
      "http.toml", HttpFrontToml(port) + "[register]\npath = \"" + register_path.string() +
                       "\"\n[persistence]\nreservation_ms = 200\n");
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();

  // Act: the register can no longer be written (a directory where its file was: root
  // passes any mode check), so renewals fail and the daemon pauses at its horizon.
  std::filesystem::remove(register_path);
  std::filesystem::create_directories(register_path / "not-a-file");
  // The segment's state is the reply's top-level "state"; the daemon's own record under
  // "daemon" may say paused a moment before the segment does, so match the top level and
  // judge the reason in that same reply.
  HttpReply status;
  const bool paused = WaitUntil(
      [&] {
        status = FetchOnce(port, "/v1/status");
        if (status.status != 200) return false;
        const auto doc = nlohmann::json::parse(status.body, nullptr, false);
        return doc.is_object() && doc.value("state", "") == "paused";
      },
      20s, "the daemon's segment says paused for its register");
  const RunResult cli = RunCommand(
      {kSnowflakectlPath, "status", "--json", "--runtime-dir", harness.runtime_dir().string()});

  // Assert: the local status names the register; the remote one does not, and still says
  // why the daemon waits.
  ASSERT_TRUE(paused) << status.body;
  EXPECT_NE(cli.out.find(register_path.string()), std::string::npos)
      << "the test proves nothing: the local status does not name the register: " << cli.out;
  EXPECT_EQ(status.body.find(register_path.string()), std::string::npos) << status.body;
  EXPECT_EQ(status.body.find("elsewhere"), std::string::npos) << status.body;
  const auto doc = nlohmann::json::parse(status.body);
  EXPECT_FALSE(doc["reason"].get<std::string>().empty()) << status.body;
}

// ---- hostile input ----

struct HostileCase {
  const char* name;
  std::string request;
  int status;  // expected reply status; 0: the connection is closed without a reply
};

std::vector<HostileCase> HostileCases() {
  const std::string huge_header = "X-Big: " + std::string(20000, 'a') + "\r\n";
  std::string many_headers;
  for (int i = 0; i < 600; ++i) many_headers += "X-H" + std::to_string(i) + ": 0123456789\r\n";
  return {
      {"WellFormedControl", Get("/v1/id?service=t"), 200},
      {"CountZero", Get("/v1/ids?service=t&count=0"), 400},
      {"CountNegative", Get("/v1/ids?service=t&count=-1"), 400},
      {"CountAboveLimit", Get("/v1/ids?service=t&count=4097"), 400},
      {"CountNotANumber", Get("/v1/ids?service=t&count=abc"), 400},
      {"CountEmpty", Get("/v1/ids?service=t&count="), 400},
      {"CountHuge", Get("/v1/ids?service=t&count=99999999999999999999999"), 400},
      {"CountMissing", Get("/v1/ids?service=t"), 400},
      {"ServiceMissing", Get("/v1/id"), 400},
      {"ServiceUppercase", Get("/v1/id?service=Orders"), 400},
      {"ServiceEscaped", Get("/v1/id?service=a%2Fb"), 400},
      {"ServiceTooLong", Get("/v1/id?service=" + std::string(64, 'a')), 400},
      {"ServiceRepeated", Get("/v1/id?service=a&service=b"), 400},
      {"UnknownParameter", Get("/v1/id?service=t&x=1"), 400},
      {"ParameterWithoutValue", Get("/v1/id?service"), 400},
      {"UnknownPath", Get("/v2/id?service=t"), 404},
      {"RootPath", Get("/"), 404},
      {"RelativeTarget", Get("v1/id?service=t"), 404},
      {"PostMethod", "POST /v1/id?service=t HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 405},
      {"DeleteMethod", "DELETE /v1/ids?service=t&count=1 HTTP/1.1\r\nHost: t\r\n\r\n", 405},
      {"HeadMethod", "HEAD /healthz HTTP/1.1\r\nHost: t\r\n\r\n", 405},
      {"GarbageRequestLine", "GARBAGE\r\n\r\n", 400},
      {"MissingVersion", "GET /v1/id?service=t\r\n\r\n", 400},
      {"UnknownVersion", "GET /v1/id?service=t HTTP/9.9\r\nHost: t\r\n\r\n", 400},
      {"NulInRequestLine", std::string("GET /v1/id\0?service=t HTTP/1.1\r\n\r\n", 34), 400},
      {"HeaderWithoutColon", "GET /healthz HTTP/1.1\r\nHost t\r\n\r\n", 400},
      {"BadContentLength", "GET /healthz HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400},
      {"BadChunk",
       "GET /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nx\r\n0\r\n\r\n", 400},
      {"HugeHeader", Get("/healthz", huge_header), 431},
      {"TooManyHeaders", Get("/healthz", many_headers), 431},
      {"BodyTooLarge", "GET /healthz HTTP/1.1\r\nContent-Length: 100000\r\n\r\n", 413},
      {"BinaryNoise", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + "\r\n\r\n",
       400},
  };
}

TEST_F(HttpFront, HostileRequestsGetTheRightStatusAndHarmNothing) {
  const auto cases = HostileCases();
  ASSERT_GE(cases.size(), 25u);
  for (const HostileCase& c : cases) {
    SCOPED_TRACE(c.name);
    HttpProbe probe(port_);
    ASSERT_TRUE(probe.connected());
    const HttpReply reply = probe.Exchange(c.request);
    EXPECT_EQ(reply.status, c.status) << c.name << ": " << reply.body;
    if (reply.status >= 400) {
      const auto doc = nlohmann::json::parse(reply.body, nullptr, false);
      EXPECT_TRUE(doc.is_object() && doc.contains("error") && doc["error"].contains("code") &&
                  doc["error"].contains("message"))
          << c.name << ": " << reply.body;
    }
    if (reply.status == 405) {
      EXPECT_EQ(reply.Header("allow"), "GET");
    }
    ExpectStillServing(c.name);
  }
}

TEST_F(HttpFront, PipelinedGarbageAfterAGoodRequestGetsAnswerThenError) {
  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  ASSERT_TRUE(probe.Send(Get("/v1/id?service=t") + "NOT HTTP AT ALL\r\n\r\n"));

  EXPECT_EQ(probe.Read().status, 200);
  EXPECT_EQ(probe.Read().status, 400);
  EXPECT_TRUE(probe.ClosedByPeer(5s));
  ExpectStillServing("pipelined garbage");
}

TEST_F(HttpFront, SlowlorisPeerIsDisconnectedWhileOthersAreServed) {
  // A peer that sends one header byte every 100 ms never completes a request: it is cut off
  // after idle_timeout_ms (1.5 s), and meanwhile others are served.
  HttpProbe slow(port_);
  ASSERT_TRUE(slow.connected());
  const std::string request = Get("/healthz", "X-Slow: " + std::string(200, 's') + "\r\n");
  const auto start = std::chrono::steady_clock::now();
  bool cut_off = false;
  for (size_t i = 0; i < request.size() && !cut_off; ++i) {
    if (!slow.Send(std::string_view(&request[i], 1))) cut_off = true;
    if (i % 5 == 0) ExpectStillServing("during slowloris");
    if (slow.ClosedByPeer(100ms)) cut_off = true;
    if (std::chrono::steady_clock::now() - start > 15s) break;
  }
  EXPECT_TRUE(cut_off) << "the slow peer was never disconnected";
  ExpectStillServing("after slowloris");
}

TEST_F(HttpFront, ConnectionsBeyondTheLimitGet429AndRetryAfter) {
  std::vector<std::unique_ptr<HttpProbe>> held;
  for (int i = 0; i < kMaxConnections; ++i) {
    held.push_back(std::make_unique<HttpProbe>(port_));
    // Each held connection is counted once it is accepted: prove it with a request.
    ASSERT_EQ(held.back()->Exchange(Get("/healthz")).status, 200) << "connection " << i;
  }

  const HttpReply refused = FetchOnce(port_, "/v1/id?service=t");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.Header("retry-after"), "1");

  // The held connections still work, and a freed slot is usable again.
  EXPECT_EQ(held.front()->Exchange(Get("/v1/id?service=t")).status, 200);
  held.pop_back();
  const HttpReply again =
      testing::AttemptUntil([&] { return FetchOnce(port_, "/v1/id?service=t"); },
                            [](const HttpReply& reply) { return reply.status == 200; }, 10s, 20ms);
  EXPECT_EQ(again.status, 200) << again.body;
}

// ---- load ----

// /v1/decode and /v1/bounds answer in the daemon's own [id] layout and epoch: here 41/16/6
// from 2020-06-15T00:00:00Z, with a machine number only that layout's 16 bits can hold.
// Property: every figure is the layout's arithmetic (time above bit 22, machine in bits
// 6..21, sequence in bits 0..5, written out below), the same `snowflakectl decode --json`
// and `bounds --json` print for that epoch and layout, and asking costs the share nothing.
class HttpFrontLayout : public ::testing::Test {
 protected:
  static constexpr int64_t kEpoch = 1592179200000;  // 2020-06-15T00:00:00Z
  static constexpr uint32_t kMachine = 40000;
  static constexpr int kPerClientIdsPerS = 64;

  void SetUp() override {
    port_ = FreePort();
    DaemonOptions options = harness_.Options();
    options.config_path = harness_.WriteFile(
        "layout.toml",
        "[id]\nlayout = \"41/16/6\"\nepoch = \"2020-06-15T00:00:00Z\"\n"
        "[register]\nbackend = \"static\"\nmachine = " +
            std::to_string(kMachine) + "\n" +
            HttpFrontToml(port_,
                          "per_client_ids_per_s = " + std::to_string(kPerClientIdsPerS) + "\n"));
    daemon_.emplace(harness_.Start(options));
    ASSERT_TRUE(daemon_->ready()) << daemon_->Describe();
  }

  // What snowflakectl prints with --json for this daemon's epoch and layout, less the keys
  // that say where it took them from (the front's are always its config).
  static nlohmann::json Cli(std::vector<std::string> args) {
    args.insert(args.begin(), kSnowflakectlPath);
    for (const char* more : {"--epoch", "1592179200000", "--layout", "41/16/6", "--json"}) {
      args.push_back(more);
    }
    const RunResult cli = RunCommand(args);
    EXPECT_TRUE(cli.status.ExitedWith(0)) << cli.err;
    auto doc = nlohmann::json::parse(cli.out, nullptr, false);
    for (const char* key : {"ok", "epoch_source", "layout_source"}) doc.erase(key);
    return doc;
  }

  static std::string ErrorCode(const HttpReply& reply) {
    const auto doc = nlohmann::json::parse(reply.body, nullptr, false);
    return doc.is_object() && doc.contains("error") ? doc["error"].value("code", "") : "";
  }

  DaemonHarness harness_{"http-layout"};
  uint16_t port_ = 0;
  std::optional<Daemon> daemon_;
};

TEST_F(HttpFrontLayout, DecodeOfATakenIdGivesThisDaemonsMachineInItsLayout) {
  const auto unix_ms_now = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before = unix_ms_now();
  const HttpReply taken = FetchOnce(port_, "/v1/id?service=orders");
  const int64_t after = unix_ms_now();
  ASSERT_EQ(taken.status, 200) << taken.body;
  const uint64_t id = IdsOf(taken.body).at(0);

  const HttpReply reply = FetchOnce(port_, "/v1/decode?id=" + std::to_string(id));

  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Header("content-type"), "application/json");
  const auto doc = nlohmann::json::parse(reply.body);
  EXPECT_EQ(doc["id"], std::to_string(id));
  EXPECT_EQ(doc["unix_ms"], kEpoch + static_cast<int64_t>(id >> 22));
  EXPECT_EQ(doc["machine"], kMachine);
  EXPECT_EQ(doc["machine"], (id >> 6) & 0xffff);
  EXPECT_EQ(doc["sequence"], id & 63);
  EXPECT_EQ(doc["epoch_unix_ms"], kEpoch);
  EXPECT_EQ(doc["layout"], "41/16/6");
  // Made around the take: the ring holds IDs of the last moments only (max_age_ms), and
  // a daemon of another epoch or layout would be off by years or by a factor.
  EXPECT_GE(doc["unix_ms"].get<int64_t>(), before - 10'000) << reply.body;
  EXPECT_LE(doc["unix_ms"].get<int64_t>(), after + 1'000) << reply.body;
  EXPECT_EQ(doc, Cli({"decode", std::to_string(id)}));
}

TEST_F(HttpFrontLayout, DecodeGivesEachFieldOfAnyId) {
  // 123456789 ms after the epoch, machine 65535 (the largest), sequence 5.
  const uint64_t id = (uint64_t{123456789} << 22) | (uint64_t{65535} << 6) | 5;

  const HttpReply reply = FetchOnce(port_, "/v1/decode?id=" + std::to_string(id));

  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto doc = nlohmann::json::parse(reply.body);
  EXPECT_EQ(doc["unix_ms"], kEpoch + 123456789);
  EXPECT_EQ(doc["time"], "2020-06-16T10:17:36.789Z");
  EXPECT_EQ(doc["machine"], 65535);
  EXPECT_EQ(doc["sequence"], 5);
  EXPECT_EQ(doc, Cli({"decode", std::to_string(id)}));
}

TEST_F(HttpFrontLayout, BoundsAreTheLayoutsFirstAndLastIdsOfTheRange) {
  // 2020-06-15T00:00:01Z .. 00:00:01.001Z, the second percent-encoded as a form encoder
  // sends it, with an offset: 2020-06-15T05:30:01.001+05:30.
  const HttpReply reply = FetchOnce(
      port_, "/v1/bounds?from=2020-06-15T00:00:01Z&to=2020-06-15T05%3A30%3A01.001%2B05%3A30");

  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto doc = nlohmann::json::parse(reply.body);
  EXPECT_EQ(doc["first_id"], std::to_string(uint64_t{1000} << 22));
  EXPECT_EQ(doc["last_id"], std::to_string((uint64_t{1001} << 22) | (uint64_t{65535} << 6) | 63));
  EXPECT_EQ(doc["first_unix_ms"], kEpoch + 1000);
  EXPECT_EQ(doc["last_unix_ms"], kEpoch + 1001);
  EXPECT_EQ(doc["clamped"], false);
  EXPECT_EQ(doc["epoch_unix_ms"], kEpoch);
  EXPECT_EQ(doc["layout"], "41/16/6");
  EXPECT_EQ(doc, Cli({"bounds", "--from", "1592179201000", "--to", "1592179201001"}));

  // Begun before the epoch: cut to it, and said so.
  const HttpReply cut = FetchOnce(port_, "/v1/bounds?from=1592179199000&to=1592179200000");
  ASSERT_EQ(cut.status, 200) << cut.body;
  const auto cut_doc = nlohmann::json::parse(cut.body);
  EXPECT_EQ(cut_doc["first_id"], "0");
  EXPECT_EQ(cut_doc["first_unix_ms"], kEpoch);
  EXPECT_EQ(cut_doc["from_unix_ms"], kEpoch - 1000);
  EXPECT_EQ(cut_doc["clamped"], true);
  EXPECT_EQ(cut_doc, Cli({"bounds", "--from", "1592179199000", "--to", "1592179200000"}));
}

TEST_F(HttpFrontLayout, BadInputIsA400SayingWhatWasWrongAndWhatToDo) {
  struct Case {
    std::string target;
    const char* code;
    const char* says;
  };
  const Case cases[] = {
      {"/v1/decode", "bad_query", "id=N is required"},
      {"/v1/decode?id=1&id=1", "bad_query", "each key once"},
      {"/v1/decode?id=1&service=a", "bad_query", "(known: id)"},
      {"/v1/decode?id=abc", "invalid_argument", "not a decimal number"},
      {"/v1/decode?id=9223372036854775808", "invalid_argument", "sign bit"},
      {"/v1/bounds?to=1", "bad_query", "from=TIME is required"},
      {"/v1/bounds?from=1&count=2", "bad_query", "(known: from, to)"},
      {"/v1/bounds?from=soon", "invalid_argument", "RFC 3339"},
      {"/v1/bounds?from=1592179200002&to=1592179200001", "invalid_argument", "swap them"},
      // Wholly before the epoch, and wholly after its last millisecond (2090-02-19).
      {"/v1/bounds?from=2020-06-14T00:00:00Z&to=2020-06-14T23:59:59.999Z", "time_out_of_range",
       "before this daemon's epoch 2020-06-15T00:00:00.000Z (1592179200000), layout 41/16/6"},
      {"/v1/bounds?from=2090-02-19T15:47:35.552Z&to=2100-01-01T00:00:00Z", "time_out_of_range",
       "after 2090-02-19T15:47:35.551Z"},
  };
  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  for (const Case& c : cases) {
    const HttpReply reply = probe.Exchange(Get(c.target));
    EXPECT_EQ(reply.status, 400) << c.target << ": " << reply.body;
    EXPECT_EQ(reply.Header("content-type"), "application/json") << c.target;
    EXPECT_EQ(ErrorCode(reply), c.code) << c.target << ": " << reply.body;
    EXPECT_NE(reply.body.find(c.says), std::string::npos) << c.target << ": " << reply.body;
  }
  const HttpReply post =
      probe.Exchange("POST /v1/decode?id=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 405) << post.body;
  // Counted under their own endpoint label, not "other".
  const std::string metrics = FetchOnce(port_, "/metrics").body;
  EXPECT_GE(
      SampleValue(metrics, "snowflake_http_request_duration_seconds_count{endpoint=\"decode\"}"),
      6.0)
      << metrics;
  EXPECT_GE(
      SampleValue(metrics, "snowflake_http_request_duration_seconds_count{endpoint=\"bounds\"}"),
      6.0)
      << metrics;
}

// Decode and bounds hand out no ID, so the share's buckets (here this client's: 64 IDs a
// second, a bucket of 64) never see them: after many, the client still takes its whole
// bucket at once, and once it is throttled it may still decode.
TEST_F(HttpFrontLayout, DecodeAndBoundsAreNotChargedAgainstTheShare) {
  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  for (int i = 0; i < 2 * kPerClientIdsPerS; ++i) {
    ASSERT_EQ(probe.Exchange(Get("/v1/decode?id=" + std::to_string(i))).status, 200) << i;
    ASSERT_EQ(probe.Exchange(Get("/v1/bounds?from=1592179200000")).status, 200) << i;
  }

  const HttpReply whole =
      probe.Exchange(Get("/v1/ids?service=orders&count=" + std::to_string(kPerClientIdsPerS)));
  const HttpReply more = probe.Exchange(Get("/v1/id?service=orders"));
  const HttpReply decode = probe.Exchange(Get("/v1/decode?id=1"));

  EXPECT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(more.status, 429) << "the bucket was full and is now empty: " << more.body;
  EXPECT_EQ(ErrorCode(more), "throttled") << more.body;
  EXPECT_EQ(decode.status, 200) << decode.body;
}

// With [[http.authorize]] entries, /v1/decode and /v1/bounds are endpoints an entry lists
// ("decode", "bounds") like the others: a caller allowed only to decode is refused bounds.
TEST(HttpFrontAuthorize, DecodeAndBoundsAreServedOnlyWhereTheEntryListsThem) {
  FrontDaemon front("http-authz", 7,
                    "[[http.authorize]]\nidentity = \"addr:127.0.0.1\"\nservices = []\n"
                    "endpoints = [\"decode\"]\n");
  ASSERT_NO_FATAL_FAILURE(front.Start());

  const HttpReply decode = FetchOnce(front.port, "/v1/decode?id=1");
  const HttpReply bounds = FetchOnce(front.port, "/v1/bounds?from=2026-01-01T00:00:00Z");

  EXPECT_EQ(decode.status, 200) << decode.body;
  EXPECT_EQ(bounds.status, 403) << bounds.body;
  EXPECT_NE(bounds.body.find("does not list endpoint \\\"bounds\\\""), std::string::npos)
      << bounds.body;
}

TEST(HttpFrontLoad, SixtyFourConnectionsGetUniqueIncreasingIds) {
  // Property: over 64 keep-alive connections for a bounded time, every request succeeds,
  // each connection sees strictly increasing IDs, and no ID is handed out twice.
  DaemonHarness harness("http-load");
  const uint16_t port = FreePort();
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile(
      // A 5 s reservation window: on a loaded machine a state-file fsync can lag past the
      // default's 500 ms margin and pause the daemon (503), which is not what this test is
      // about.
      "http.toml", HttpFrontToml(port, "threads = 2\nmax_connections_per_source = 64\n") +
                       "[persistence]\nreservation_ms = 5000\n");
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  const uint64_t seed = StressSeedFromEnv();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));

  constexpr int kConnections = 64;
  constexpr auto kDuration = 3s;
  constexpr int kMaxRequestsEach = 2000;
  std::vector<std::vector<uint64_t>> ids(kConnections);
  std::vector<std::string> errors(kConnections);
  std::vector<std::thread> threads;
  const auto stop_at = std::chrono::steady_clock::now() + kDuration;
  for (int c = 0; c < kConnections; ++c) {
    threads.emplace_back([&, c] {
      HttpProbe probe(port, 30s);
      if (!probe.connected()) {
        errors[c] = "cannot connect";
        return;
      }
      const uint64_t count = 1 + (seed + static_cast<uint64_t>(c)) % 16;
      const std::string request =
          Get(c % 2 == 0 ? std::string("/v1/id?service=load")
                         : "/v1/ids?service=load&count=" + std::to_string(count));
      for (int r = 0; r < kMaxRequestsEach && std::chrono::steady_clock::now() < stop_at; ++r) {
        const HttpReply reply = probe.Exchange(request);
        const auto got = IdsOf(reply.body);
        if (reply.status != 200 || got.empty()) {
          errors[c] = "request " + std::to_string(r) + ": " + std::to_string(reply.status) + " " +
                      reply.body;
          return;
        }
        ids[c].insert(ids[c].end(), got.begin(), got.end());
      }
    });
  }
  for (auto& t : threads) t.join();

  std::vector<uint64_t> all;
  for (int c = 0; c < kConnections; ++c) {
    EXPECT_EQ(errors[c], "") << "connection " << c;
    for (size_t i = 1; i < ids[c].size(); ++i) {
      ASSERT_LT(ids[c][i - 1], ids[c][i]) << "connection " << c << " at " << i;
    }
    all.insert(all.end(), ids[c].begin(), ids[c].end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a duplicate ID";
  std::printf("64 connections: %zu IDs, 0 duplicates\n", all.size());
  EXPECT_GT(all.size(), static_cast<size_t>(kConnections));
  EXPECT_TRUE(daemon.Stop().value_or(ExitStatus{}).ExitedWith(0));
}

// ---- /metrics through a real Prometheus text parser ----

TEST(HttpFrontMetrics, ExpositionParsesAndCountsWhatWasTaken) {
  DaemonHarness harness("http-metrics");
  const uint16_t port = FreePort();
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile("http.toml", HttpFrontToml(port));
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();

  // 3 single takes + 2 batches of 100 for "metered"; one 404; one 400.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(FetchOnce(port, "/v1/id?service=metered").status, 200);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(FetchOnce(port, "/v1/ids?service=metered&count=100").status, 200);
  }
  ASSERT_EQ(FetchOnce(port, "/nowhere").status, 404);
  ASSERT_EQ(FetchOnce(port, "/v1/ids?service=metered&count=0").status, 400);
  // From before the first scrape: the parser below runs between the two scrapes.
  const auto first_scrape = std::chrono::steady_clock::now();
  const HttpReply metrics = FetchOnce(port, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  // "name{labels} value" per sample, labels sorted, as Prometheus' parser understood them.
  const ParsedExposition parsed = ParseExposition(metrics.body);
  ASSERT_TRUE(parsed.error.empty()) << parsed.error << "\n" << metrics.body;
  auto value_of = [&](const std::string& sample) -> double {
    const size_t at = parsed.samples.find(sample + " ");
    if (at == std::string::npos) return -1;
    return std::stod(parsed.samples.substr(at + sample.size() + 1));
  };
  EXPECT_EQ(value_of("snowflake_ids_issued_total{path=http,service=metered}"), 203.0)
      << parsed.samples;
  EXPECT_EQ(value_of("snowflake_http_requests_total{code=200}"), 5.0) << parsed.samples;
  EXPECT_EQ(value_of("snowflake_http_requests_total{code=404}"), 1.0) << parsed.samples;
  EXPECT_EQ(value_of("snowflake_http_requests_total{code=400}"), 1.0) << parsed.samples;
  EXPECT_EQ(value_of("snowflake_state{state=serving}"), 1.0) << parsed.samples;
  EXPECT_GE(value_of("snowflake_ring_ids_total{kind=published}"), 203.0) << parsed.samples;
  EXPECT_EQ(value_of("snowflake_http_request_duration_seconds_count{endpoint=ids}"), 3.0)
      << parsed.samples;
  EXPECT_EQ(value_of("snowflake_ring_ids{kind=capacity}"), 4096.0) << parsed.samples;

  // The reservation service renewed at least once at start (state file, then register):
  // each histogram counts it, its buckets are cumulative and end at +Inf = count, and its
  // sum is a plausible duration.
  auto check_histogram = [&](const std::string& name) -> double {
    const double count = value_of(name + "_count{}");
    EXPECT_GE(count, 1.0) << name << "\n" << parsed.samples;
    EXPECT_EQ(value_of(name + "_bucket{le=+Inf}"), count) << name << "\n" << parsed.samples;
    const double sum = value_of(name + "_sum{}");
    EXPECT_GT(sum, 0.0) << name;
    EXPECT_LT(sum, 60.0 * count) << name;
    double previous = 0;
    int buckets = 0;
    for (size_t at = 0; (at = parsed.samples.find(name + "_bucket{le=", at)) != std::string::npos;
         ++at) {
      const size_t space = parsed.samples.find(' ', at);
      const double value = std::stod(parsed.samples.substr(space + 1));
      EXPECT_GE(value, previous) << name << ": buckets must be cumulative";
      previous = value;
      ++buckets;
    }
    EXPECT_EQ(buckets, 17) << name << ": 16 bounds and +Inf";
    return count;
  };
  const double renewals = check_histogram("snowflake_reservation_duration_seconds");
  const double register_calls = check_histogram("snowflake_register_call_duration_seconds");
  // Every renewal calls the register once; the lease renewal may add more.
  EXPECT_GE(register_calls, renewals) << parsed.samples;

  // A second scrape mirrors only what happened since: no observation counted twice.
  const HttpReply again = FetchOnce(port, "/metrics");
  ASSERT_EQ(again.status, 200);
  const double elapsed_ms = std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - first_scrape)
                                .count();
  const std::string key = "snowflake_reservation_duration_seconds_count ";
  const size_t at = again.body.find(key);
  ASSERT_NE(at, std::string::npos) << again.body;
  const double renewals_again = std::stod(again.body.substr(at + key.size()));
  EXPECT_GE(renewals_again, renewals);
  // Renewals come about every 250 ms (a quarter of reservation_ms) and retries every
  // 100 ms; allow one per 100 ms since the first scrape, and two more.
  EXPECT_LE(renewals_again, renewals + 2 + elapsed_ms / 100) << again.body;
}

TEST(HttpFrontMetrics, RenewalsAndTheClaimAreExportedAndRenewalsMove) {
  DaemonHarness harness("http-renewals");
  const uint16_t port = FreePort();
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile("http.toml", HttpFrontToml(port));
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();

  const std::string renewed = "snowflake_reservation_renewals_total{result=\"ok\"}";
  const HttpReply first = FetchOnce(port, "/metrics");
  ASSERT_EQ(first.status, 200);
  const double renewals = SampleValue(first.body, renewed);
  EXPECT_GE(renewals, 1.0) << first.body;  // the first renewal comes before READY=1
  EXPECT_EQ(
      SampleValue(first.body, "snowflake_reservation_renewals_total{result=\"state_file_error\"}"),
      0.0)
      << first.body;
  EXPECT_EQ(
      SampleValue(first.body, "snowflake_reservation_renewals_total{result=\"register_error\"}"),
      0.0)
      << first.body;
  EXPECT_EQ(SampleValue(first.body, "snowflake_register_claim{state=\"held\"}"), 1.0) << first.body;
  EXPECT_EQ(SampleValue(first.body, "snowflake_register_claim{state=\"lost\"}"), 0.0) << first.body;
  EXPECT_GE(SampleValue(first.body, "snowflake_heartbeats_total"), 1.0) << first.body;
  EXPECT_EQ(SampleValue(first.body, "snowflake_segments_retired_total"), 0.0) << first.body;
  EXPECT_GT(SampleValue(first.body, "snowflake_reserved_through_timestamp_seconds"), 1.6e9)
      << first.body;
  // Every renewal is timed, the failed ones too.
  EXPECT_GE(SampleValue(first.body, "snowflake_reservation_duration_seconds_count"), renewals)
      << first.body;

  // The reservation is renewed about every 250 ms while the clock runs: the counter moves
  // and the timings with it (the deadline only ends a test that would hang).
  const std::string later = testing::AttemptUntil(
      [&] { return FetchOnce(port, "/metrics").body; },
      [&](const std::string& body) { return SampleValue(body, renewed) > renewals; }, 60s, 50ms);
  const double renewals_later = SampleValue(later, renewed);
  EXPECT_GT(renewals_later, renewals) << later;
  EXPECT_GE(SampleValue(later, "snowflake_reservation_duration_seconds_count"), renewals_later)
      << later;
  EXPECT_TRUE(daemon.Stop().value_or(ExitStatus{}).ExitedWith(0));
}

TEST(HttpFrontConfig, OffByDefaultOpensNoSocket) {
  // Without [http] the daemon listens on no TCP port: /proc/net/tcp* lists none of its
  // sockets' inodes.
  DaemonHarness harness("http-off");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  std::set<std::string> inodes;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(daemon.pid()) + "/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    const RunResult listing = RunCommand({"cat", table});
    for (const std::string& inode : inodes) {
      EXPECT_EQ(listing.out.find(" " + inode + " "), std::string::npos)
          << "a TCP socket of the daemon in " << table;
    }
  }
}

TEST(HttpFrontConfig, AStopSignalStopsTheFrontBeforeTheRing) {
  // Callers of the front fail over while the ring still stands behind every answer: the
  // front stops before the clean stop is recorded (it used to answer until scope exit).
  DaemonHarness harness("http-stop");
  const uint16_t port = FreePort();
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile("http.toml", HttpFrontToml(port));
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  ASSERT_EQ(FetchOnce(port, "/v1/id?service=orders").status, 200);

  auto stopped = daemon.Stop();

  ASSERT_TRUE(stopped && stopped->ExitedWith(0)) << daemon.Describe();
  const std::string err = daemon.err();
  const size_t front = err.find("http front stopped");
  const size_t clean = err.find("stopped cleanly");
  ASSERT_NE(front, std::string::npos) << err;
  ASSERT_NE(clean, std::string::npos) << err;
  EXPECT_LT(front, clean) << err;
}

TEST(HttpFrontConfig, UnbindableAddressFailsAtStartWithTheAddress) {
  DaemonHarness harness("http-bind");
  const uint16_t port = FreePort();
  // Occupy the port with a first daemon; the second cannot bind it.
  DaemonOptions first = harness.Options();
  first.config_path = harness.WriteFile("a.toml", HttpFrontToml(port));
  Daemon a = harness.Start(first);
  ASSERT_TRUE(a.ready()) << a.Describe();

  DaemonHarness other("http-bind2");
  DaemonOptions second = other.Options();
  second.config_path = other.WriteFile("b.toml", HttpFrontToml(port));
  Daemon b = Daemon::Spawn(second);
  const auto status = b.Wait(30s);
  ASSERT_TRUE(status) << b.Describe();
  EXPECT_TRUE(status->ExitedWith(1)) << status->ToString();
  EXPECT_NE(b.err().find("127.0.0.1:" + std::to_string(port)), std::string::npos) << b.err();
}

}  // namespace
}  // namespace snowflake::testing
