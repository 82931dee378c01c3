// The HTTP front's replies (docs/http.md): what a request produced (status, content type,
// body, and whether it asks for Retry-After or a close). The bodies of a take and of a
// refusal are the protocol's (protocol/id_reply.h), which the failover client reads. No
// sockets, no Beast: the transport (http_transport.h) frames an HttpReply; the handlers
// (http_handlers.h) make them.
//
// Thread-safe: pure functions.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_BODY_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_BODY_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace snowflake::daemon {

inline constexpr std::string_view kJsonContentType = "application/json";
inline constexpr std::string_view kTextContentType = "text/plain; charset=utf-8";
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// What one request produced.
struct HttpReply {
  unsigned status = 200;
  std::string_view content_type = kJsonContentType;  // static storage
  std::string body;
  uint32_t retry_after_s = 0;  // "Retry-After: <s>" (429 and 503); 0: no such header
  bool close = false;        // close the connection after this reply
};

// A refusal: protocol::ErrorBody(code, message) with `status`; Retry-After for 429 and
// 503.
HttpReply ErrorReply(unsigned status, std::string_view code, std::string_view message);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_BODY_H_
