// libFuzzer target: the HTTP front's request handling (daemon/http/http_front.cc) without
// sockets: the bytes a peer sends go through the same Beast parser with the front's limits
// (header 8192 bytes, body 4096), and what parses goes to RouteHttpRequest
// (daemon/http/http_request.h), which decides the endpoint, the service, the count, the ID
// or time range and the refusals exactly as the front does; a /v1/decode or /v1/bounds route
// is then answered (daemon/http/layout_replies.h) in a layout other than the default.
// Input: byte 0 picks the mode: even, the rest is raw bytes on the wire; odd, the rest is
// "method\ntarget\naccept" handed to RouteHttpRequest directly (any bytes, even those the
// parser would refuse).
// Property: a route names a real endpoint; /v1/id and /v1/ids routes carry a valid service
// name and a count from 1 to 4096 (1 for /v1/id) and come from a GET; a /v1/decode route
// carries an ID below 2^63 and its reply is a 200 whose fields encode back to that ID; a
// /v1/bounds reply is a 200 with first_id <= last_id, or a 400 invalid_argument or
// time_out_of_range; a refusal is a 400, 404 or 405 with a code and a message, and its JSON
// body parses back; nothing crashes.

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "daemon/http/http_request.h"
#include "daemon/http/layout_replies.h"
#include "protocol/id_reply.h"
#include "snowflake/client.h"
#include "snowflake/id_layout.h"

namespace {

namespace http = boost::beast::http;
using snowflake::daemon::HttpEndpoint;

// 41/16/6 from 2020-06-15T00:00:00Z: a layout whose fields differ from the default's.
const snowflake::IdLayout kLayout = snowflake::IdLayout::Create(1592179200000, {41, 16, 6}).value();

void CheckLayoutReply(const snowflake::daemon::HttpRoute& route) {
  if (route.endpoint == HttpEndpoint::kDecode) {
    if (route.id >> 63) __builtin_trap();
    const auto reply = snowflake::daemon::DecodeReply(kLayout, route.id);
    const auto body = nlohmann::json::parse(reply.body, nullptr, false);
    if (reply.status != 200 || !body.is_object()) __builtin_trap();
    const auto id = kLayout.Encode(body["unix_ms"].get<int64_t>(), body["machine"].get<uint32_t>(),
                                   body["sequence"].get<uint32_t>());
    if (!id || *id != route.id || body["id"] != std::to_string(route.id)) __builtin_trap();
    return;
  }
  const auto reply = snowflake::daemon::BoundsReply(kLayout, route.from_unix_ms, route.to_unix_ms);
  const auto body = nlohmann::json::parse(reply.body, nullptr, false);
  if (!body.is_object()) __builtin_trap();
  if (reply.status == 200) {
    if (std::stoull(body["first_id"].get<std::string>()) >
        std::stoull(body["last_id"].get<std::string>())) {
      __builtin_trap();
    }
    return;
  }
  const std::string code = body["error"]["code"];
  if (reply.status != 400 || (code != "invalid_argument" && code != "time_out_of_range")) {
    __builtin_trap();
  }
}

void CheckRoute(std::string_view method, std::string_view target, std::string_view accept) {
  const auto route = snowflake::daemon::RouteHttpRequest(method, target, accept);
  if (route) {
    if (route->endpoint == HttpEndpoint::kOther) __builtin_trap();
    if (method != "GET") __builtin_trap();
    if (route->endpoint == HttpEndpoint::kId || route->endpoint == HttpEndpoint::kIds) {
      if (!snowflake::ValidateServiceName(route->service)) __builtin_trap();
      if (route->count < 1 || route->count > snowflake::daemon::kMaxHttpBatch) __builtin_trap();
      if (route->endpoint == HttpEndpoint::kId && route->count != 1) __builtin_trap();
    }
    if (route->endpoint == HttpEndpoint::kDecode || route->endpoint == HttpEndpoint::kBounds) {
      CheckLayoutReply(*route);
    }
    return;
  }
  const snowflake::daemon::HttpRefusal& refusal = route.error();
  if (refusal.status != 400 && refusal.status != 404 && refusal.status != 405) __builtin_trap();
  if (refusal.code.empty() || refusal.message.empty()) __builtin_trap();
  const auto body = nlohmann::json::parse(
      snowflake::protocol::ErrorBody(refusal.code, refusal.message), nullptr, false);
  if (!body.is_object() || body["error"]["code"] != refusal.code) __builtin_trap();
}

void ParseAndRoute(std::string_view wire) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(8192);
  parser.body_limit(4096);
  parser.eager(true);
  boost::beast::error_code ec;
  while (!wire.empty() && !parser.is_done()) {
    const size_t used = parser.put(boost::asio::buffer(wire.data(), wire.size()), ec);
    if (ec || used == 0) break;
    wire.remove_prefix(used);
  }
  // The end of the connection, as Beast's read sees it (which never calls put_eof before
  // the first byte: that is a plain end_of_stream).
  if ((ec == http::error::need_more || (!ec && !parser.is_done())) && parser.got_some()) {
    parser.put_eof(ec);
  }
  if (!parser.is_header_done()) return;
  const auto& request = parser.get();
  const auto accept = request[http::field::accept];
  CheckRoute(std::string_view(request.method_string().data(), request.method_string().size()),
             std::string_view(request.target().data(), request.target().size()),
             std::string_view(accept.data(), accept.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    ParseAndRoute(input);
    return 0;
  }
  const size_t first = input.find('\n');
  const std::string_view method = input.substr(0, first);
  std::string_view rest = first == std::string_view::npos ? std::string_view() : input.substr(first + 1);
  const size_t second = rest.find('\n');
  const std::string_view target = rest.substr(0, second);
  const std::string_view accept =
      second == std::string_view::npos ? std::string_view() : rest.substr(second + 1);
  CheckRoute(method, target, accept);
  return 0;
}
