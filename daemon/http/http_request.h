// What the HTTP front (docs/http.md) does with a parsed request, as a pure function: which
// endpoint it names, its query's service and count (a take), ID (a decode) or time range (a
// bounds), and the reply format it asks for, or the refusal (status, code and message) it
// gets. No sockets, no Beast, no state, so it
// can be unit-tested and fuzzed on crafted requests (tests/fuzz/http_fuzzer.cc).
//
// Thread-safe: pure functions.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_REQUEST_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_REQUEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake {
// snowflake/client_error.h (libsnowflake's, which the daemon links privately).
enum class ClientError;
}  // namespace snowflake

namespace snowflake::daemon {

// Every endpoint, and kOther for any other path (the metrics' "endpoint" label).
enum class HttpEndpoint { kId, kIds, kHealthz, kStatus, kMetrics, kDecode, kBounds, kOther };

// The most IDs one GET /v1/ids may ask for.
inline constexpr uint64_t kMaxHttpBatch = 4096;

struct HttpRoute {
  HttpEndpoint endpoint = HttpEndpoint::kOther;
  std::string service;  // kId, kIds: a valid service name (1-63 of [a-z0-9._-])
  uint64_t count = 1;   // kIds: 1 to kMaxHttpBatch; kId: 1
  bool plain = false;   // kId, kIds: the caller accepts text/plain and not JSON
  uint64_t id = 0;      // kDecode: 0 to 2^63-1 (the sign bit clear)
  int64_t from_unix_ms = 0;  // kBounds: the range's first millisecond
  int64_t to_unix_ms = 0;    // kBounds: its last, included (not checked against from)
};

struct HttpRefusal {
  unsigned status = 400;  // 400, 404 or 405
  std::string code;       // vocab::ErrorName(): "bad_query", "bad_count", "missing_service", ...
  std::string message;    // what was wrong and what to send instead
  HttpEndpoint endpoint = HttpEndpoint::kOther;  // for the metrics' label
};

// Routes one request: `method` and `target` as on the request line ("GET",
// "/v1/ids?service=a&count=3"), `accept` the Accept header ("" if none). Path first (404
// for an unknown one), then the method (405 unless GET), then the query of /v1/id,
// /v1/ids, /v1/decode and /v1/bounds: key=value pairs joined by '&', each key once, no
// other key. /v1/id and /v1/ids: service= required and valid; count= required for /v1/ids
// only, a whole number from 1 to 4096. /v1/decode: id= required, a decimal from 0 to
// 2^63-1. /v1/bounds: from= required and to= (default: from), each a time of
// snowflake/time_text.h, percent-encoding decoded ('+' is a plus, not a space); the range
// itself (reversed, outside the epoch) is judged with the layout (layout_replies.h). Never
// throws (an allocation failure becomes a 400 with an empty message).
[[nodiscard]] tl::expected<HttpRoute, HttpRefusal> RouteHttpRequest(
    std::string_view method, std::string_view target, std::string_view accept) noexcept;

// How the front answers a request its ring could not serve: the HTTP status and the
// vocabulary's code for `error`, the same code libsnowflake gives (ClientErrorName), by
// the code's action: 503 (fail_over) while the local daemon is not serving or not there
// (the caller should go to another daemon), 429 (retry_here: ring_empty) while its ring
// stays empty with the daemon alive (the caller retries this front after Retry-After),
// 400 for a bad service name, 500 when the front cannot use its own ring.
struct HttpFailure {
  unsigned status;
  std::string_view code;  // static storage
};
[[nodiscard]] HttpFailure HttpFailureFor(ClientError error) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_REQUEST_H_
