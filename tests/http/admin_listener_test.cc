// The HTTP front's admin listener ([http] admin_listen, docs/http.md "The admin
// listener"), on the real snowflaked over real TCP on 127.0.0.1.
//
// Properties: the admin listener answers /healthz, /v1/status (the local view) and
// /metrics and nothing else, and never hands out an ID, whatever it is asked; with it set,
// the ID listeners no longer answer /v1/status or /metrics but still serve IDs, /v1/decode,
// /v1/bounds and /healthz; an address outside admin_allow is closed as it is accepted, whatever
// `allow` says.

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon_harness.h"
#include "http_probe.h"
#include "snowflake/client.h"

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;

// A daemon with its ID listener on one free port and its admin listener on another.
class HttpAdmin : public ::testing::Test {
 protected:
  // Starts the daemon with `extra` lines of [http] after admin_listen.
  void StartWith(const std::string& extra) {
    port_ = FreePort();
    do {
      admin_port_ = FreePort();
    } while (admin_port_ == port_);
    DaemonOptions options = harness_.Options();
    options.config_path = harness_.WriteFile(
        "admin.toml", HttpFrontToml(port_, "admin_listen = [\"127.0.0.1:" +
                                               std::to_string(admin_port_) + "\"]\n" + extra));
    daemon_.emplace(harness_.Start(options));
    ASSERT_TRUE(daemon_->ready()) << daemon_->Describe();
  }

  // The vocabulary code of an error body {"error":{"code","message"}}.
  static std::string ErrorCode(const HttpReply& reply) {
    try {
      return nlohmann::json::parse(reply.body).at("error").at("code").get<std::string>();
    } catch (const std::exception&) {
      return "(no error code in " + reply.body + ")";
    }
  }

  DaemonHarness harness_{"http-admin"};
  uint16_t port_ = 0;
  uint16_t admin_port_ = 0;
  std::optional<Daemon> daemon_;
};

TEST_F(HttpAdmin, AdminListenerServesHealthzStatusAndMetrics) {
  ASSERT_NO_FATAL_FAILURE(StartWith(""));

  const HttpReply health = FetchOnce(admin_port_, "/healthz");
  ASSERT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(nlohmann::json::parse(health.body)["state"], "serving") << health.body;

  // The local view, for operators: where the daemon keeps its files and its pid, and both
  // listeners with their figures.
  const HttpReply status = FetchOnce(admin_port_, "/v1/status");
  ASSERT_EQ(status.status, 200) << status.body;
  // Not const: a missing key reads as null, not as an assertion.
  auto doc = nlohmann::json::parse(status.body);
  EXPECT_EQ(doc["state"], "serving") << status.body;
  EXPECT_EQ(doc["runtime_dir"], harness_.runtime_dir().string()) << status.body;
  EXPECT_EQ(doc["pid"], daemon_->pid()) << status.body;
  ASSERT_EQ(doc["daemon"]["fronts"].size(), 2u) << status.body;
  EXPECT_EQ(doc["daemon"]["fronts"][0]["name"], "http") << status.body;
  EXPECT_EQ(doc["daemon"]["fronts"][0]["listen"],
            nlohmann::json::array({"127.0.0.1:" + std::to_string(port_)}));
  EXPECT_EQ(doc["daemon"]["fronts"][1]["name"], "http-admin") << status.body;
  EXPECT_EQ(doc["daemon"]["fronts"][1]["listen"],
            nlohmann::json::array({"127.0.0.1:" + std::to_string(admin_port_)}));
  // The health request before this one.
  EXPECT_GE(doc["daemon"]["fronts"][1]["requests"].get<uint64_t>(), 1u) << status.body;

  const HttpReply metrics = FetchOnce(admin_port_, "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.body;
  const ParsedExposition parsed = ParseExposition(metrics.body);
  ASSERT_TRUE(parsed.error.empty()) << parsed.error << "\n" << metrics.body;
  EXPECT_NE(parsed.samples.find("snowflake_state{state=serving} 1.0"), std::string::npos)
      << parsed.samples;
  EXPECT_NE(parsed.samples.find("snowflake_http_request_duration_seconds_count{endpoint=status}"),
            std::string::npos)
      << parsed.samples;
}

// Whatever it is asked, the admin listener hands out no ID: the takes are unknown paths
// there (404, before their query is read), and the ring counts no ID taken over HTTP.
TEST_F(HttpAdmin, AdminListenerNeverHandsOutAnId) {
  ASSERT_NO_FATAL_FAILURE(StartWith(""));

  HttpProbe probe(admin_port_);
  ASSERT_TRUE(probe.connected());
  for (const char* target :
       {"/v1/id?service=orders", "/v1/ids?service=orders&count=10", "/v1/id", "/v1/ids?count=0",
        "/v1/decode?id=1", "/v1/bounds?from=0", "/v1/decode", "/nowhere", "/"}) {
    const HttpReply reply = probe.Exchange(Get(target, "Accept: text/plain\r\n"));
    EXPECT_EQ(reply.status, 404) << target << ": " << reply.body;
    EXPECT_EQ(ErrorCode(reply), "not_found") << target;
    EXPECT_TRUE(IdsOf(reply.body).empty() && LinesOf(reply.body).empty()) << reply.body;
  }
  const HttpReply post =
      probe.Exchange("POST /v1/id?service=orders HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 404) << post.body;

  const HttpReply metrics = FetchOnce(admin_port_, "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.body;
  EXPECT_EQ(metrics.body.find("snowflake_ids_issued_total{path=\"http\""), std::string::npos)
      << metrics.body;
  // The same take on the ID listener is served, and counted there.
  ASSERT_EQ(FetchOnce(port_, "/v1/id?service=orders").status, 200);
  EXPECT_EQ(SampleValue(FetchOnce(admin_port_, "/metrics").body,
                        "snowflake_ids_issued_total{path=\"http\",service=\"orders\"}"),
            1.0);
}

TEST_F(HttpAdmin, IdListenerLeavesStatusAndMetricsToTheAdminListener) {
  ASSERT_NO_FATAL_FAILURE(StartWith(""));

  HttpProbe probe(port_);
  ASSERT_TRUE(probe.connected());
  for (const char* target : {"/v1/status", "/metrics", "/metrics?x=1"}) {
    const HttpReply reply = probe.Exchange(Get(target));
    EXPECT_EQ(reply.status, 404) << target << ": " << reply.body;
    EXPECT_EQ(ErrorCode(reply), "not_found") << target;
    EXPECT_NE(reply.body.find("admin_listen"), std::string::npos) << reply.body;
    // Neither what /metrics or /v1/status would have carried.
    EXPECT_EQ(reply.body.find("snowflake_"), std::string::npos) << reply.body;
    EXPECT_EQ(reply.body.find("\"machine\""), std::string::npos) << reply.body;
  }
  const HttpReply post =
      probe.Exchange("POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 404) << post.body;
  // An unknown path's 404 no longer offers them.
  const HttpReply unknown = probe.Exchange(Get("/nowhere"));
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("admin listener"), std::string::npos) << unknown.body;

  // IDs and /healthz as before, on the same connection.
  const HttpReply health = probe.Exchange(Get("/healthz"));
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(nlohmann::json::parse(health.body)["state"], "serving") << health.body;
  const HttpReply id = probe.Exchange(Get("/v1/id?service=orders"));
  ASSERT_EQ(id.status, 200) << id.body;
  EXPECT_EQ(IdsOf(id.body).size(), 1u) << id.body;
  const HttpReply ids = probe.Exchange(Get("/v1/ids?service=orders&count=3"));
  ASSERT_EQ(ids.status, 200) << ids.body;
  EXPECT_EQ(IdsOf(ids.body).size(), 3u) << ids.body;
  // Decode and bounds stay with the callers of IDs (docs/http.md, "The admin listener").
  const HttpReply decode =
      probe.Exchange(Get("/v1/decode?id=" + std::to_string(IdsOf(id.body)[0])));
  EXPECT_EQ(decode.status, 200) << decode.body;
  const HttpReply bounds = probe.Exchange(Get("/v1/bounds?from=2026-01-01T00:00:00Z"));
  EXPECT_EQ(bounds.status, 200) << bounds.body;
}

// admin_allow is the admin listener's own allow-list, checked at accept as `allow` is on
// the ID listeners: an address outside it gets no byte, even one the ID listener serves.
TEST_F(HttpAdmin, AnAddressOutsideAdminAllowIsClosedAtAccept) {
  ASSERT_NO_FATAL_FAILURE(StartWith("admin_allow = [\"127.0.0.2\"]\n"));

  HttpProbe probe(admin_port_);
  ASSERT_TRUE(probe.connected());
  probe.Send(Get("/metrics"));
  const auto [bytes, closed] = probe.ReadUntilClosed(10s);
  EXPECT_EQ(bytes, 0u) << "an address outside admin_allow was answered";
  EXPECT_TRUE(closed) << "an address outside admin_allow was left open";

  // Inside admin_allow: served. The ID listener keeps its own list (loopback by default).
  EXPECT_EQ(FetchFrom("127.0.0.2", admin_port_, "/healthz").status, 200);
  EXPECT_EQ(FetchOnce(port_, "/v1/id?service=orders").status, 200);
  const HttpReply status = FetchFrom("127.0.0.2", admin_port_, "/v1/status");
  ASSERT_EQ(status.status, 200) << status.body;
  auto doc = nlohmann::json::parse(status.body);
  ASSERT_EQ(doc["daemon"]["fronts"].size(), 2u) << status.body;
  EXPECT_EQ(doc["daemon"]["fronts"][1]["refused"], 1) << status.body;
  EXPECT_EQ(doc["daemon"]["fronts"][0]["refused"], 0) << status.body;
}

}  // namespace
}  // namespace snowflake::testing
