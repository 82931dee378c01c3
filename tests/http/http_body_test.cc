// The HTTP front's replies (daemon/http/http_body.h): a refusal is the protocol's error
// body (protocol/id_reply.h, tested in tests/protocol) with its status, and asks for a
// retry (Retry-After) only where the status means "later".

#include "daemon/http/http_body.h"

#include <gtest/gtest.h>

namespace snowflake::daemon {
namespace {

TEST(HttpBody, ErrorRepliesAreJsonAndAskForRetryOnlyFor429And503) {
  const HttpReply unavailable = ErrorReply(503, "daemon_paused", "the clock moved back");
  EXPECT_EQ(unavailable.body,
            R"({"error":{"code":"daemon_paused","message":"the clock moved back"}})");
  EXPECT_EQ(unavailable.content_type, kJsonContentType);
  EXPECT_GT(unavailable.retry_after_s, 0u);
  EXPECT_GT(ErrorReply(429, "too_many_services", "").retry_after_s, 0u);
  EXPECT_EQ(ErrorReply(400, "bad_count", "").retry_after_s, 0u);
  EXPECT_EQ(ErrorReply(500, "system_error", "").retry_after_s, 0u);
}

}  // namespace
}  // namespace snowflake::daemon
