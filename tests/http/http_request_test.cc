// RouteHttpRequest (daemon/http/http_request.h): the HTTP front's routing and validation as a
// pure function, case by case. The fuzz target tests/fuzz/http_fuzzer.cc checks the same
// properties on arbitrary requests.
#include "daemon/http/http_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/http/http_body.h"
#include "protocol/id_reply.h"
#include "protocol/vocabulary.h"
#include "snowflake/client_error.h"

namespace snowflake::daemon {
namespace {

TEST(HttpRequest, IdsRouteCarriesServiceCountAndFormat) {
  const auto sut = RouteHttpRequest("GET", "/v1/ids?count=4096&service=a.b_c-1", "text/plain");

  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->endpoint, HttpEndpoint::kIds);
  EXPECT_EQ(sut->service, "a.b_c-1");
  EXPECT_EQ(sut->count, 4096u);
  EXPECT_TRUE(sut->plain);
}

TEST(HttpRequest, RefusalsComeInTheDocumentedOrder) {
  struct Case {
    const char* method;
    const char* target;
    unsigned status;
    const char* code;
  };
  const Case cases[] = {
      {"GET", "/v2/id", 404, "not_found"},
      {"POST", "/v1/id?service=a", 405, "method_not_allowed"},
      {"GET", "/v1/id?service", 400, "bad_query"},
      {"GET", "/v1/id?service=a&service=b", 400, "bad_query"},
      {"GET", "/v1/id?count=2&service=a", 400, "bad_query"},
      {"GET", "/v1/ids?service=a&count=0", 400, "bad_count"},
      {"GET", "/v1/ids?service=a&count=4097", 400, "bad_count"},
      {"GET", "/v1/ids?service=a&count=+1", 400, "bad_count"},
      {"GET", "/v1/ids?count=1", 400, "missing_service"},
      {"GET", "/v1/ids?service=Bad", 400, "bad_count"},
      {"GET", "/v1/ids?service=Bad&count=1", 400, "invalid_service_name"},
  };
  for (const Case& c : cases) {
    const auto sut = RouteHttpRequest(c.method, c.target, "");
    ASSERT_FALSE(sut) << c.target;
    EXPECT_EQ(sut.error().status, c.status) << c.target;
    EXPECT_EQ(sut.error().code, c.code) << c.target;
    EXPECT_FALSE(sut.error().message.empty()) << c.target;
  }
}

// The message quotes the bad key; bytes that are not UTF-8 used to make the JSON body throw
// (a 500 instead of the 400).
TEST(HttpRequest, ErrorBodyOfANonUtf8QueryIsValidJson) {
  const auto sut = RouteHttpRequest("GET", "/v1/id?service=a&\xff\xfe=1", "");
  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().status, 400u);

  const auto body = nlohmann::json::parse(
      protocol::ErrorBody(sut.error().code, sut.error().message), nullptr, false);

  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["error"]["code"], "bad_query");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("\xef\xbf\xbd"), std::string::npos)
      << "the bad bytes are shown as U+FFFD";
}

// Every refusal's code is the vocabulary's (one code per condition on every surface).
TEST(HttpRequest, RefusalCodesAreTheVocabularys) {
  for (const char* target : {"/nowhere", "/v1/id?x", "/v1/ids?service=a&count=0", "/v1/ids?count=1",
                             "/v1/id?service=Bad", "/v1/id?service=a&z=1"}) {
    const auto sut = RouteHttpRequest("GET", target, "");
    ASSERT_FALSE(sut) << target;
    bool found = false;
    for (const vocab::ErrorWords& row : vocab::kErrors)
      found = found || row.code == sut.error().code;
    EXPECT_TRUE(found) << target << ": " << sut.error().code << " is not in the vocabulary";
  }
}

// Every ClientError: 0 .. kSystemError, then kRingEmpty after sf_bounds' gap.
std::vector<ClientError> EveryClientError() {
  std::vector<ClientError> all;
  for (int e = 0; e <= static_cast<int>(ClientError::kSystemError); ++e) {
    all.push_back(static_cast<ClientError>(e));
  }
  all.push_back(ClientError::kRingEmpty);
  return all;
}

// A take or an open that fails answers with the library's own code for the condition (the
// C++ and C APIs' ClientErrorName / sf_status_str), never one of the front's own: before,
// /v1/id said "not_running" where /healthz said "daemon_not_running".
TEST(HttpRequest, FailedTakesAnswerWithTheLibrarysCode) {
  for (const ClientError error : EveryClientError()) {
    const HttpFailure sut = HttpFailureFor(error);
    EXPECT_EQ(sut.code, ClientErrorName(error)) << static_cast<int>(error);
    const auto body = nlohmann::json::parse(protocol::ErrorBody(sut.code, "m"), nullptr, false);
    EXPECT_EQ(body["error"]["code"], ClientErrorName(error)) << static_cast<int>(error);
  }
  // Not serving: 503, go to another daemon. A bad name: the caller's fault. Else the front's.
  for (const ClientError error :
       {ClientError::kDaemonNotRunning, ClientError::kDaemonStarting, ClientError::kDaemonPaused,
        ClientError::kDaemonOutOfService, ClientError::kDaemonStopped,
        ClientError::kDaemonNotHeartbeating, ClientError::kDaemonDead, ClientError::kTimedOut}) {
    EXPECT_EQ(HttpFailureFor(error).status, 503u) << ClientErrorName(error);
  }
  EXPECT_EQ(HttpFailureFor(ClientError::kInvalidServiceName).status, 400u);
  EXPECT_EQ(HttpFailureFor(ClientError::kPermissionDenied).status, 500u);
  EXPECT_EQ(HttpFailureFor(ClientError::kSystemError).status, 500u);
  EXPECT_EQ(HttpFailureFor(ClientError::kDaemonNotRunning).code, "daemon_not_running");
}

// The status follows the vocabulary's action column, as every taker's error class does:
// exactly the fail_over codes are 503 (what a load balancer and the failover clients take
// as "go elsewhere"), and a retry_here code is a 429 with Retry-After, never a 5xx.
TEST(HttpRequest, TheStatusFollowsTheVocabularysAction) {
  for (const ClientError error : EveryClientError()) {
    const auto code = vocab::ErrorFromName(ClientErrorName(error));
    ASSERT_TRUE(code.has_value()) << static_cast<int>(error);
    const vocab::ErrorAction action = vocab::ActionOf(*code);
    const HttpFailure sut = HttpFailureFor(error);
    EXPECT_EQ(sut.status == 503, action == vocab::ErrorAction::kFailOver) << sut.code;
    EXPECT_EQ(sut.status == 429, action == vocab::ErrorAction::kRetryHere) << sut.code;
    const HttpReply reply = ErrorReply(sut.status, sut.code, "m");
    if (action == vocab::ErrorAction::kFailOver || action == vocab::ErrorAction::kRetryHere) {
      EXPECT_GT(reply.retry_after_s, 0u) << sut.code << ": no Retry-After";
    }
  }
}

// A ring that stayed empty while its daemon heartbeats is the daemon refilling: the front
// says so with 429 ring_empty and Retry-After, not with a 503 that sends callers (and
// failover clients) to another daemon.
TEST(HttpRequest, AnEmptyRingIsA429RingEmptyWithRetryAfter) {
  const HttpFailure sut = HttpFailureFor(ClientError::kRingEmpty);
  EXPECT_EQ(sut.status, 429u);
  EXPECT_EQ(sut.code, "ring_empty");
  EXPECT_EQ(ErrorReply(sut.status, sut.code, "m").retry_after_s, 1u);
}

}  // namespace
}  // namespace snowflake::daemon
