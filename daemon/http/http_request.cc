#include "daemon/http/http_request.h"

#include <limits>
#include <map>
#include <optional>

#include "protocol/vocabulary.h"
#include "snowflake/client.h"
#include "snowflake/time_text.h"
#include "util/decimal.h"

namespace snowflake::daemon {
namespace {

using vocab::ErrorCode;

HttpRefusal Refuse(unsigned status, ErrorCode code, std::string message,
                   HttpEndpoint endpoint = HttpEndpoint::kOther) {
  return HttpRefusal{status, std::string(vocab::ErrorName(code)), std::move(message), endpoint};
}

using Params = std::map<std::string_view, std::string_view>;

// "a=1&b=2" -> {{"a","1"},{"b","2"}}; nullopt on a repeated key or a key without '='.
std::optional<Params> ParseQuery(std::string_view query) {
  Params out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    if (!out.emplace(pair.substr(0, eq), pair.substr(eq + 1)).second) return std::nullopt;
  }
  return out;
}

// At most 64 bytes of what the caller sent, to quote in a message.
// Appended piece by piece: GCC 12 at -O3 warns falsely (-Wstringop-overflow) on
// "'" + std::string(...), a bound it cannot see through the substr.
std::string Quoted(std::string_view text) {
  std::string quoted;
  quoted.reserve(70);
  quoted.push_back('\'');
  quoted.append(text.substr(0, 64));
  quoted.append(text.size() > 64 ? "...'" : "'");
  return quoted;
}

// `text` with each %XX replaced by its byte (RFC 3986: '+' stays a plus, so a time's
// "+05:30" may be sent as it is or as %2B05%3A30); nullopt if a '%' is not followed by
// two hex digits.
std::optional<std::string> PercentDecoded(std::string_view text) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex(text[i + 1]);
    const int low = hex(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

// The value of parameter `key`, percent-decoded, or the refusal of one that is not
// percent-encoding.
tl::expected<std::string, HttpRefusal> DecodedValue(std::string_view key, std::string_view value,
                                                    HttpEndpoint endpoint) {
  auto decoded = PercentDecoded(value);
  if (!decoded) {
    return tl::unexpected(Refuse(400, ErrorCode::kBadQuery,
                                 "bad " + std::string(key) + " " + Quoted(value) +
                                     ": a '%' must begin %XX, two hex digits (percent-encoding)",
                                 endpoint));
  }
  return std::move(*decoded);
}

tl::expected<HttpRoute, HttpRefusal> RouteTake(HttpRoute route, const Params& params,
                                               std::string_view accept) {
  const bool batch = route.endpoint == HttpEndpoint::kIds;
  std::string_view service;
  bool has_count = false;
  for (const auto& [key, value] : params) {
    if (key == "service") {
      service = value;
    } else if (key == "count" && batch) {
      has_count = true;
      const std::optional<uint64_t> n = util::ParseDecimal<uint64_t>(value, 5);
      if (!n || *n < 1 || *n > kMaxHttpBatch) {
        return tl::unexpected(Refuse(400, ErrorCode::kBadCount,
                                     "count must be a whole number from 1 to 4096, got \"" +
                                         std::string(value.substr(0, 32)) + "\"",
                                     route.endpoint));
      }
      route.count = *n;
    } else {
      return tl::unexpected(Refuse(400, ErrorCode::kBadQuery,
                                   "unknown query parameter \"" + std::string(key.substr(0, 32)) +
                                       "\" (known: service" + (batch ? ", count" : "") + ")",
                                   route.endpoint));
    }
  }
  if (service.empty()) {
    return tl::unexpected(Refuse(400, ErrorCode::kMissingService,
                                 "service=NAME is required (1-63 of a-z, 0-9, '.', '_', '-')",
                                 route.endpoint));
  }
  if (batch && !has_count) {
    return tl::unexpected(
        Refuse(400, ErrorCode::kBadCount, "count=N is required (1 to 4096)", route.endpoint));
  }
  if (auto valid = ValidateServiceName(service); !valid) {
    return tl::unexpected(
        Refuse(400, ErrorCode::kInvalidServiceName, valid.error().message, route.endpoint));
  }
  route.service = std::string(service);
  route.plain = accept.find("text/plain") != std::string_view::npos &&
                accept.find("application/json") == std::string_view::npos;
  return route;
}

constexpr std::string_view kIdExpected =
    "expected a decimal number from 0 to 9223372036854775807 (2^63-1)";

// /v1/decode?id=N. A bad ID is invalid_argument, as sf_decode_in's.
tl::expected<HttpRoute, HttpRefusal> RouteDecode(HttpRoute route, const Params& params) {
  std::optional<std::string_view> given;
  for (const auto& [key, value] : params) {
    if (key != "id") {
      return tl::unexpected(
          Refuse(400, ErrorCode::kBadQuery,
                 "unknown query parameter \"" + std::string(key.substr(0, 32)) + "\" (known: id)",
                 route.endpoint));
    }
    given = value;
  }
  if (!given) {
    return tl::unexpected(Refuse(400, ErrorCode::kBadQuery,
                                 "id=N is required: the ID to decode, " + std::string(kIdExpected),
                                 route.endpoint));
  }
  auto text = DecodedValue("id", *given, route.endpoint);
  if (!text) return tl::unexpected(std::move(text.error()));
  const auto bad = [&](std::string_view why) {
    return tl::unexpected(Refuse(
        400, ErrorCode::kInvalidArgument,
        "bad id " + Quoted(*text) + ": " + std::string(why) + "; " + std::string(kIdExpected),
        route.endpoint));
  };
  const auto all_digits = [](std::string_view digits) {
    return !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const std::string_view digits = *text;
  if (digits.empty()) return bad("it is empty");
  if (digits[0] == '-' && all_digits(digits.substr(1))) return bad("it is negative");
  if (!all_digits(digits)) return bad("not a decimal number");
  // Leading zeros are allowed, as `snowflakectl decode` allows them; from_chars refuses a
  // value past uint64_t.
  const std::optional<uint64_t> id = util::ParseDecimal<uint64_t>(digits, 64);
  if (!id || *id > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return bad("too large: IDs have the sign bit (bit 63) clear");
  }
  route.id = *id;
  return route;
}

// /v1/bounds?from=T&to=T. A bad time is invalid_argument, as sf_parse_time's. The range
// itself (reversed, outside the epoch) is judged by IdLayout::Bounds in the handler.
tl::expected<HttpRoute, HttpRefusal> RouteBounds(HttpRoute route, const Params& params) {
  std::optional<std::string_view> from_given;
  std::optional<std::string_view> to_given;
  for (const auto& [key, value] : params) {
    if (key == "from") {
      from_given = value;
    } else if (key == "to") {
      to_given = value;
    } else {
      return tl::unexpected(Refuse(
          400, ErrorCode::kBadQuery,
          "unknown query parameter \"" + std::string(key.substr(0, 32)) + "\" (known: from, to)",
          route.endpoint));
    }
  }
  if (!from_given) {
    return tl::unexpected(Refuse(400, ErrorCode::kBadQuery,
                                 "from=TIME is required, to=TIME optional (default: from), each " +
                                     std::string(kTimeTextForms),
                                 route.endpoint));
  }
  const auto time = [&](std::string_view key,
                        std::string_view value) -> tl::expected<int64_t, HttpRefusal> {
    auto text = DecodedValue(key, value, route.endpoint);
    if (!text) return tl::unexpected(std::move(text.error()));
    auto parsed = ParseTimeText(*text);
    if (!parsed) {
      return tl::unexpected(Refuse(400, ErrorCode::kInvalidArgument,
                                   "bad " + std::string(key) + " " + Quoted(*text) + ": " +
                                       parsed.error() + "; expected " + std::string(kTimeTextForms),
                                   route.endpoint));
    }
    return *parsed;
  };
  const auto from = time("from", *from_given);
  if (!from) return tl::unexpected(from.error());
  const auto to = to_given ? time("to", *to_given) : from;
  if (!to) return tl::unexpected(to.error());
  route.from_unix_ms = *from;
  route.to_unix_ms = *to;
  return route;
}

tl::expected<HttpRoute, HttpRefusal> Route(std::string_view method, std::string_view target,
                                           std::string_view accept) {
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  HttpRoute route;
  if (path == "/v1/id") {
    route.endpoint = HttpEndpoint::kId;
  } else if (path == "/v1/ids") {
    route.endpoint = HttpEndpoint::kIds;
  } else if (path == "/healthz") {
    route.endpoint = HttpEndpoint::kHealthz;
  } else if (path == "/v1/status") {
    route.endpoint = HttpEndpoint::kStatus;
  } else if (path == "/metrics") {
    route.endpoint = HttpEndpoint::kMetrics;
  } else if (path == "/v1/decode") {
    route.endpoint = HttpEndpoint::kDecode;
  } else if (path == "/v1/bounds") {
    route.endpoint = HttpEndpoint::kBounds;
  } else {
    return tl::unexpected(Refuse(404, ErrorCode::kNotFound,
                                 "no such endpoint; use /v1/id, /v1/ids, /v1/decode, /v1/bounds, "
                                 "/healthz, /v1/status or /metrics"));
  }
  if (method != "GET") {
    return tl::unexpected(
        Refuse(405, ErrorCode::kMethodNotAllowed, "only GET is served here", route.endpoint));
  }
  const bool take = route.endpoint == HttpEndpoint::kId || route.endpoint == HttpEndpoint::kIds;
  if (!take && route.endpoint != HttpEndpoint::kDecode && route.endpoint != HttpEndpoint::kBounds) {
    return route;
  }
  const auto params = ParseQuery(query);
  if (!params) {
    return tl::unexpected(Refuse(400, ErrorCode::kBadQuery,
                                 "the query must be key=value pairs joined by '&', each key once",
                                 route.endpoint));
  }
  if (take) return RouteTake(std::move(route), *params, accept);
  if (route.endpoint == HttpEndpoint::kDecode) return RouteDecode(std::move(route), *params);
  return RouteBounds(std::move(route), *params);
}

}  // namespace

tl::expected<HttpRoute, HttpRefusal> RouteHttpRequest(std::string_view method,
                                                      std::string_view target,
                                                      std::string_view accept) noexcept {
  try {
    return Route(method, target, accept);
  } catch (...) {
    return tl::unexpected(HttpRefusal{});
  }
}

HttpFailure HttpFailureFor(ClientError error) noexcept {
  const std::string_view code = ClientErrorName(error);
  const std::optional<ErrorCode> known = vocab::ErrorFromName(code);
  if (!known) return {500, vocab::ErrorName(ErrorCode::kSystemError)};
  // The vocabulary's action column decides, as it does for every taker.
  switch (vocab::ActionOf(*known)) {
    case vocab::ErrorAction::kFailOver:
      // The local daemon cannot serve now: the caller should go to another daemon.
      return {503, code};
    case vocab::ErrorAction::kRetryHere:
      // The front's ring stayed empty while its daemon is alive and refilling: this front
      // again, after Retry-After (429, as throttled: no failover, no 5xx alert).
      return {429, code};
    case vocab::ErrorAction::kFixTheCall:
      if (error == ClientError::kInvalidServiceName) return {400, code};
      // Any other bad call (an invalid argument) is the front's own call to its ring.
      return {500, code};
    case vocab::ErrorAction::kFixTheHost:
      // The front's own ring is unusable to it (permissions, version, a bad segment) or
      // the call failed: the front's fault, not the caller's.
      return {500, code};
  }
  return {500, vocab::ErrorName(ErrorCode::kSystemError)};
}

}  // namespace snowflake::daemon
