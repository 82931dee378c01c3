// RouteHttpRequest (daemon/http/http_request.h): the HTTP front's routing and validation as a
// pure function, case by case. The fuzz target tests/fuzz/http_fuzzer.cc checks the same
// properties on arbitrary requests.
#include "daemon/http/http_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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
      {"GET", "/v1/ids?service=Bad&count=1", 400, "invalid_service"},
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
// (a 500 "internal" instead of the 400).
TEST(HttpRequest, ErrorBodyOfANonUtf8QueryIsValidJson) {
  const auto sut = RouteHttpRequest("GET", "/v1/id?service=a&\xff\xfe=1", "");
  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().status, 400u);

  const auto body = nlohmann::json::parse(HttpErrorBody(sut.error().code, sut.error().message),
                                          nullptr, false);

  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["error"]["code"], "bad_query");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("\xef\xbf\xbd"), std::string::npos)
      << "the bad bytes are shown as U+FFFD";
}

}  // namespace
}  // namespace snowflake::daemon
