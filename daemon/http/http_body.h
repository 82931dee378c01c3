// The HTTP front's serialisation (docs/http.md): what a request produced as a reply
// (status, content type, body, and whether it asks for Retry-After or a close), the
// bodies of a take (JSON and text/plain) and of an error. No sockets, no Beast: the
// transport (http_transport.h) frames an HttpReply; the handlers (http_handlers.h) make
// them.
//
// Thread-safe: pure functions.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_BODY_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_BODY_H_

#include <cstdint>
#include <span>
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

// The body of a take:
//   kJsonOne   {"id":"123"}            (/v1/id; `ids` holds one ID)
//   kJsonBatch {"ids":["123","124"]}   (/v1/ids)
//   kText      "123\n124\n"            (either, with Accept: text/plain)
enum class IdsFormat { kJsonOne, kJsonBatch, kText };

// The most bytes AppendIdsBody() writes for `count` IDs in `format`.
constexpr size_t MaxIdsBodyBytes(size_t count) noexcept {
  // 20 digits, two quotes and a comma per ID, and the frame {"ids":[ ]}.
  return count * 23 + 16;
}

// Appends the body of a take of `ids` to `out`: one resize of `out` to the bound above,
// the digits written in place, then one shrink. An ID that is the previous one + 1 (most
// of a batch: one millisecond's sequence) is written by incrementing the previous ID's
// digits; any other with std::to_chars. No allocation per ID (none at all when `out`
// has the capacity). REQUIRES: kJsonOne has exactly one ID.
void AppendIdsBody(std::span<const uint64_t> ids, IdsFormat format, std::string& out);

// The JSON body of a refusal: {"error":{"code":…,"message":…}}. Bytes of the request
// quoted in the message that are not UTF-8 are replaced (U+FFFD), so the body is always
// valid JSON. Never throws.
[[nodiscard]] std::string HttpErrorBody(std::string_view code, std::string_view message) noexcept;

// A refusal: HttpErrorBody(code, message) with `status`; Retry-After for 429 and 503.
HttpReply ErrorReply(unsigned status, std::string_view code, std::string_view message);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_BODY_H_
