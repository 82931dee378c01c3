#include "daemon/http/http_request.h"

#include <map>
#include <optional>

#include "protocol/vocabulary.h"
#include "snowflake/client.h"
#include "util/decimal.h"

namespace snowflake::daemon {
namespace {

using vocab::ErrorCode;

HttpRefusal Refuse(unsigned status, ErrorCode code, std::string message,
                   HttpEndpoint endpoint = HttpEndpoint::kOther) {
  return HttpRefusal{status, std::string(vocab::ErrorName(code)), std::move(message), endpoint};
}

// "a=1&b=2" -> {{"a","1"},{"b","2"}}; nullopt on a repeated key or a key without '='.
std::optional<std::map<std::string_view, std::string_view>> ParseQuery(std::string_view query) {
  std::map<std::string_view, std::string_view> out;
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
  } else {
    return tl::unexpected(
        Refuse(404, ErrorCode::kNotFound,
               "no such endpoint; use /v1/id, /v1/ids, /healthz, /v1/status or /metrics"));
  }
  if (method != "GET") {
    return tl::unexpected(
        Refuse(405, ErrorCode::kMethodNotAllowed, "only GET is served here", route.endpoint));
  }
  const bool batch = route.endpoint == HttpEndpoint::kIds;
  if (route.endpoint != HttpEndpoint::kId && !batch) return route;

  const auto params = ParseQuery(query);
  if (!params) {
    return tl::unexpected(Refuse(400, ErrorCode::kBadQuery,
                                 "the query must be key=value pairs joined by '&', each key once",
                                 route.endpoint));
  }
  std::string_view service;
  bool has_count = false;
  for (const auto& [key, value] : *params) {
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
