#include "daemon/http/reply_framing.h"

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <chrono>
#include <iterator>
#include <utility>

namespace snowflake::daemon::transport {
namespace {

std::string_view View(beast::string_view text) { return {text.data(), text.size()}; }

void AppendNumber(std::string& out, uint64_t value) {
  char digits[20];
  const auto end = std::to_chars(std::begin(digits), std::end(digits), value).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

}  // namespace

HttpReply Refusal(unsigned status, vocab::ErrorCode code, std::string_view message) {
  return ErrorReply(status, vocab::ErrorName(code), message);
}

Answer AnswerRequest(SessionFront& front, beast::error_code ec, const ParsedRequest& request,
                     std::optional<HttpReply>& refusal, uint64_t& requests, std::string_view client,
                     const AuditPeer& peer, Steady::time_point accepted) {
  Answer answer;
  answer.start = Steady::now();
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    answer.reply = Refusal(static_cast<unsigned>(http::status::request_header_fields_too_large),
                           vocab::ErrorCode::kHeadersTooLarge,
                           "the request line and headers exceed " +
                               std::to_string(front.options().max_header_bytes) + " bytes");
    return answer;
  }
  if (ec == http::error::body_limit) {
    answer.reply = Refusal(static_cast<unsigned>(http::status::payload_too_large),
                           vocab::ErrorCode::kBodyTooLarge,
                           "a request body may have at most " + std::to_string(kMaxBodyBytes) +
                               " bytes (GET needs none)");
    return answer;
  }
  if (ec) {
    answer.reply =
        Refusal(static_cast<unsigned>(http::status::bad_request), vocab::ErrorCode::kBadRequest,
                "malformed HTTP/1.1 request: " + ec.message());
    return answer;
  }
  if (refusal) {
    answer.reply = std::move(*refusal);
    return answer;
  }
  if (request.version != 10 && request.version != 11) {
    answer.reply = Refusal(static_cast<unsigned>(http::status::http_version_not_supported),
                           vocab::ErrorCode::kBadVersion, "only HTTP/1.0 and HTTP/1.1 are served");
    return answer;
  }
  ++requests;
  answer.reply = front.Handle(request, client, peer, answer.endpoint);
  const int64_t max_age_ms = front.options().max_connection_age_ms;
  answer.close =
      answer.reply.close || !request.keep_alive ||
      requests >= front.options().max_requests_per_connection ||
      (max_age_ms > 0 && answer.start - accepted >= std::chrono::milliseconds(max_age_ms));
  answer.version = request.version;
  return answer;
}

void Frame(SessionFront& front, Answer& answer, std::string& head, std::string& body) {
  HttpReply& reply = answer.reply;
  head.clear();
  head.append("HTTP/");
  head.push_back(static_cast<char>('0' + answer.version / 10));
  head.push_back('.');
  head.push_back(static_cast<char>('0' + answer.version % 10));
  head.push_back(' ');
  AppendNumber(head, reply.status);
  head.push_back(' ');
  head.append(View(http::obsolete_reason(static_cast<http::status>(reply.status))));
  head.append("\r\nContent-Type: ");
  head.append(reply.content_type);
  head.append("\r\n");
  if (reply.retry_after_s != 0) {
    head.append("Retry-After: ");
    AppendNumber(head, reply.retry_after_s);
    head.append("\r\n");
  }
  if (reply.status == static_cast<unsigned>(http::status::method_not_allowed)) {
    head.append("Allow: GET\r\n");
  }
  // HTTP/1.1 keeps the connection unless told; HTTP/1.0 closes it unless told.
  if (answer.version >= 11 && answer.close) head.append("Connection: close\r\n");
  if (answer.version < 11 && !answer.close) head.append("Connection: keep-alive\r\n");
  // A status that has no body (1xx, 204, 304) has no Content-Length either.
  const bool bodiless = reply.status / 100 == 1 || reply.status == 204 || reply.status == 304;
  if (!bodiless) {
    head.append("Content-Length: ");
    AppendNumber(head, reply.body.size());
    head.append("\r\n");
  }
  head.append("\r\n");
  body = std::move(reply.body);
  if (bodiless) body.clear();
  front.Replied(reply.status, answer.endpoint, answer.start);
}

}  // namespace snowflake::daemon::transport
