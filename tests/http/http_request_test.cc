// RouteHttpRequest (daemon/http/http_request.h): the HTTP front's routing and validation as a
// pure function, case by case; then the replies of /v1/decode and /v1/bounds
// (daemon/http/layout_replies.h) in a layout other than the default. The fuzz target
// tests/fuzz/http_fuzzer.cc checks the same properties on arbitrary requests.
#include "daemon/http/http_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/http/http_body.h"
#include "daemon/http/layout_replies.h"
#include "protocol/id_reply.h"
#include "protocol/vocabulary.h"
#include "snowflake/client_error.h"
#include "snowflake/id_layout.h"
#include "snowflake/time_text.h"

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
  for (const char* target :
       {"/nowhere", "/v1/id?x", "/v1/ids?service=a&count=0", "/v1/ids?count=1",
        "/v1/id?service=Bad", "/v1/id?service=a&z=1", "/v1/decode", "/v1/decode?id=x",
        "/v1/bounds?to=0", "/v1/bounds?from=yesterday", "/v1/bounds?from=%zz"}) {
    const auto sut = RouteHttpRequest("GET", target, "");
    ASSERT_FALSE(sut) << target;
    bool found = false;
    for (const vocab::ErrorWords& row : vocab::kErrors)
      found = found || row.code == sut.error().code;
    EXPECT_TRUE(found) << target << ": " << sut.error().code << " is not in the vocabulary";
  }
}

TEST(HttpRequest, DecodeRouteCarriesTheIdFromZeroToTheLargest) {
  const auto largest = RouteHttpRequest("GET", "/v1/decode?id=9223372036854775807", "");
  const auto zero = RouteHttpRequest("GET", "/v1/decode?id=0", "");
  const auto encoded = RouteHttpRequest("GET", "/v1/decode?id=%34%32", "");

  ASSERT_TRUE(largest) << largest.error().message;
  EXPECT_EQ(largest->endpoint, HttpEndpoint::kDecode);
  EXPECT_EQ(largest->id, 9223372036854775807u);
  ASSERT_TRUE(zero) << zero.error().message;
  EXPECT_EQ(zero->id, 0u);
  ASSERT_TRUE(encoded) << encoded.error().message;
  EXPECT_EQ(encoded->id, 42u) << "percent-encoding is decoded";
}

// Each bad decode query is a 400 whose message says what was wrong (`why`) and what to send.
TEST(HttpRequest, DecodeRefusalsSayWhatWasWrongAndWhatToSend) {
  struct Case {
    const char* target;
    const char* code;
    const char* why;
  };
  const Case cases[] = {
      {"/v1/decode", "bad_query", "id=N is required"},
      {"/v1/decode?ids=1", "bad_query", "unknown query parameter \"ids\" (known: id)"},
      {"/v1/decode?id=1&id=2", "bad_query", "each key once"},
      {"/v1/decode?id=1&from=2", "bad_query", "unknown query parameter \"from\""},
      {"/v1/decode?id=", "invalid_argument", "it is empty"},
      {"/v1/decode?id=-1", "invalid_argument", "it is negative"},
      {"/v1/decode?id=0x10", "invalid_argument", "not a decimal number"},
      {"/v1/decode?id=+1", "invalid_argument", "not a decimal number"},
      {"/v1/decode?id=1e3", "invalid_argument", "not a decimal number"},
      {"/v1/decode?id=9223372036854775808", "invalid_argument", "sign bit"},
      {"/v1/decode?id=18446744073709551616", "invalid_argument", "sign bit"},
      {"/v1/decode?id=%4", "bad_query", "percent-encoding"},
  };
  for (const Case& c : cases) {
    const auto sut = RouteHttpRequest("GET", c.target, "");
    ASSERT_FALSE(sut) << c.target;
    EXPECT_EQ(sut.error().status, 400u) << c.target;
    EXPECT_EQ(sut.error().code, c.code) << c.target;
    EXPECT_EQ(sut.error().endpoint, HttpEndpoint::kDecode) << c.target;
    EXPECT_NE(sut.error().message.find(c.why), std::string::npos)
        << c.target << ": " << sut.error().message;
    if (std::string(c.code) == "invalid_argument") {
      EXPECT_NE(sut.error().message.find("expected a decimal number from 0 to 9223372036854775807"),
                std::string::npos)
          << c.target << ": " << sut.error().message;
    }
  }
  const auto post = RouteHttpRequest("POST", "/v1/decode?id=1", "");
  ASSERT_FALSE(post);
  EXPECT_EQ(post.error().status, 405u);
}

// Both of the time grammar's forms (snowflake/time_text.h), sent as they are or
// percent-encoded; to= defaults to from=, as `snowflakectl bounds --to` does.
TEST(HttpRequest, BoundsRouteReadsBothTimeFormsAndToDefaultsToFrom) {
  const auto ms = RouteHttpRequest("GET", "/v1/bounds?from=1767225600000&to=1767225600999", "");
  const auto rfc = RouteHttpRequest(
      "GET", "/v1/bounds?from=2026-01-01T05:30:00.250+05:30&to=2026-01-01T00:00:01Z", "");
  const auto encoded = RouteHttpRequest(
      "GET", "/v1/bounds?to=2026-01-01T00%3A00%3A01Z&from=2026-01-01T05%3A30%3A00%2B05%3A30", "");
  const auto one = RouteHttpRequest("GET", "/v1/bounds?from=-5", "");

  ASSERT_TRUE(ms) << ms.error().message;
  EXPECT_EQ(ms->endpoint, HttpEndpoint::kBounds);
  EXPECT_EQ(ms->from_unix_ms, 1767225600000);
  EXPECT_EQ(ms->to_unix_ms, 1767225600999);
  ASSERT_TRUE(rfc) << rfc.error().message;
  EXPECT_EQ(rfc->from_unix_ms, 1767225600250);
  EXPECT_EQ(rfc->to_unix_ms, 1767225601000);
  ASSERT_TRUE(encoded) << encoded.error().message;
  EXPECT_EQ(encoded->from_unix_ms, 1767225600000);
  EXPECT_EQ(encoded->to_unix_ms, 1767225601000);
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->from_unix_ms, -5);
  EXPECT_EQ(one->to_unix_ms, -5);
}

TEST(HttpRequest, BoundsRefusalsSayWhatWasWrongAndWhatToSend) {
  struct Case {
    const char* target;
    const char* code;
    const char* why;
  };
  const Case cases[] = {
      {"/v1/bounds", "bad_query", "from=TIME is required"},
      {"/v1/bounds?to=1", "bad_query", "from=TIME is required"},
      {"/v1/bounds?from=1&from=2", "bad_query", "each key once"},
      {"/v1/bounds?from=1&until=2", "bad_query",
       "unknown query parameter \"until\" (known: from, to)"},
      {"/v1/bounds?from=yesterday", "invalid_argument", "bad from 'yesterday'"},
      {"/v1/bounds?from=1&to=2026-01-01T00:00:00", "invalid_argument",
       "bad to '2026-01-01T00:00:00'"},
      {"/v1/bounds?from=2026-01-01+00:00:00Z", "invalid_argument", "bad from"},
      {"/v1/bounds?from=", "invalid_argument", "bad from ''"},
      {"/v1/bounds?from=1%", "bad_query", "percent-encoding"},
  };
  for (const Case& c : cases) {
    const auto sut = RouteHttpRequest("GET", c.target, "");
    ASSERT_FALSE(sut) << c.target;
    EXPECT_EQ(sut.error().status, 400u) << c.target;
    EXPECT_EQ(sut.error().code, c.code) << c.target;
    EXPECT_EQ(sut.error().endpoint, HttpEndpoint::kBounds) << c.target;
    EXPECT_NE(sut.error().message.find(c.why), std::string::npos)
        << c.target << ": " << sut.error().message;
    if (std::string(c.code) == "invalid_argument") {
      EXPECT_NE(sut.error().message.find(kTimeTextForms), std::string::npos)
          << c.target << ": the accepted forms are named: " << sut.error().message;
    }
  }
}

// 41/16/6 from 2020-06-15T00:00:00Z: the figures below are the layout's arithmetic written
// out (time above bit 22, machine in bits 6..21, sequence in bits 0..5), not IdLayout's.
constexpr int64_t kEpoch = 1592179200000;
IdLayout Hosts65536() { return IdLayout::Create(kEpoch, {41, 16, 6}).value(); }

TEST(LayoutReplies, DecodeGivesTheFieldsOfTheDaemonsLayoutAndNamesIt) {
  const uint64_t id = (uint64_t{123456789} << 22) | (uint64_t{40000} << 6) | 63;

  const HttpReply sut = DecodeReply(Hosts65536(), id);

  ASSERT_EQ(sut.status, 200u) << sut.body;
  EXPECT_EQ(sut.content_type, kJsonContentType);
  EXPECT_EQ(sut.body,
            "{\"id\":\"517815306489919\",\"unix_ms\":1592302656789,"
            "\"time\":\"2020-06-16T10:17:36.789Z\",\"machine\":40000,\"sequence\":63,"
            "\"epoch_unix_ms\":1592179200000,\"layout\":\"41/16/6\"}");
}

TEST(LayoutReplies, BoundsCoverEveryMachineAndSequenceOfTheRange) {
  const HttpReply sut = BoundsReply(Hosts65536(), kEpoch + 1000, kEpoch + 1001);

  ASSERT_EQ(sut.status, 200u) << sut.body;
  const auto body = nlohmann::json::parse(sut.body);
  EXPECT_EQ(body["first_id"], std::to_string(uint64_t{1000} << 22));
  EXPECT_EQ(body["last_id"], std::to_string((uint64_t{1001} << 22) | (uint64_t{65535} << 6) | 63));
  EXPECT_EQ(body["first_unix_ms"], kEpoch + 1000);
  EXPECT_EQ(body["last_unix_ms"], kEpoch + 1001);
  EXPECT_EQ(body["first_time"], "2020-06-15T00:00:01.000Z");
  EXPECT_EQ(body["last_time"], "2020-06-15T00:00:01.001Z");
  EXPECT_EQ(body["from_unix_ms"], kEpoch + 1000);
  EXPECT_EQ(body["to_unix_ms"], kEpoch + 1001);
  EXPECT_EQ(body["clamped"], false);
  EXPECT_EQ(body["epoch_unix_ms"], kEpoch);
  EXPECT_EQ(body["layout"], "41/16/6");
}

TEST(LayoutReplies, BoundsCutARangeToTheEpochAndSaySo) {
  const int64_t last = kEpoch + (int64_t{1} << 41) - 1;  // 2090-02-19T15:47:35.551Z

  const HttpReply sut = BoundsReply(Hosts65536(), kEpoch - 5, last + 5);

  ASSERT_EQ(sut.status, 200u) << sut.body;
  const auto body = nlohmann::json::parse(sut.body);
  EXPECT_EQ(body["first_id"], "0");
  EXPECT_EQ(body["last_id"], "9223372036854775807");
  EXPECT_EQ(body["first_unix_ms"], kEpoch);
  EXPECT_EQ(body["last_unix_ms"], last);
  EXPECT_EQ(body["last_time"], "2090-02-19T15:47:35.551Z");
  EXPECT_EQ(body["from_unix_ms"], kEpoch - 5);
  EXPECT_EQ(body["to_unix_ms"], last + 5);
  EXPECT_EQ(body["clamped"], true);
}

// A range no ID of the epoch carries, or a reversed one, is the caller's to fix: 400, with
// the codes sf_bounds_in gives, naming the epoch and layout it was judged in.
TEST(LayoutReplies, BoundsRefuseARangeOutsideTheEpochOrReversed) {
  const int64_t last = kEpoch + (int64_t{1} << 41) - 1;
  struct Case {
    int64_t from;
    int64_t to;
    const char* code;
    const char* why;
  };
  const Case cases[] = {
      {0, kEpoch - 1, "time_out_of_range",
       "before this daemon's epoch 2020-06-15T00:00:00.000Z (1592179200000), layout 41/16/6"},
      {last + 1, last + 2, "time_out_of_range",
       "the last millisecond IDs of this daemon's epoch 2020-06-15T00:00:00.000Z "
       "(1592179200000), layout 41/16/6 can carry"},
      {kEpoch + 2, kEpoch + 1, "invalid_argument", "swap them"},
  };
  for (const Case& c : cases) {
    const HttpReply sut = BoundsReply(Hosts65536(), c.from, c.to);
    EXPECT_EQ(sut.status, 400u) << c.from << ".." << c.to;
    const auto body = nlohmann::json::parse(sut.body);
    EXPECT_EQ(body["error"]["code"], c.code) << sut.body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find(c.why), std::string::npos)
        << sut.body;
  }
}

TEST(LayoutReplies, DecodeRefusesTheSignBit) {
  const HttpReply sut = DecodeReply(Hosts65536(), uint64_t{1} << 63);

  EXPECT_EQ(sut.status, 400u);
  EXPECT_EQ(nlohmann::json::parse(sut.body)["error"]["code"], "invalid_argument");
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
