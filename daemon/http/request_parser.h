// How the HTTP front's transport reads a request (docs/http.md): a Beast basic_parser that
// keeps only the method, target, Accept header, version and keep-alive of a request and
// drops its body. Used by both kinds of session (plain_session.h, tls_session.h).
//
// Thread-compatible: one parser per request, on its session's thread.

#ifndef SNOWFLAKE_DAEMON_HTTP_REQUEST_PARSER_H_
#define SNOWFLAKE_DAEMON_HTTP_REQUEST_PARSER_H_

#include <boost/beast/http/basic_parser.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

namespace snowflake::daemon::transport {

namespace beast = boost::beast;
namespace http = beast::http;

// A GET carries no body; a small one is read and ignored, a larger one is refused (413).
inline constexpr uint64_t kMaxBodyBytes = 4096;
// Bytes asked of one recv: a few requests' worth (a GET is well under 1 KB).
inline constexpr size_t kReadChunk = 4096;

// The parts of a request the front uses, as a LeanRequestParser leaves them. A session
// keeps one for all its requests and the parser clears it when it starts on a request:
// the strings keep their capacity, so a warm keep-alive connection parses without
// allocating.
struct ParsedRequest {
  std::string method;       // as on the request line
  std::string target;       // as on the request line
  std::string accept;       // the first Accept field's value; "" if none
  unsigned version = 0;     // 10 for HTTP/1.0, 11 for HTTP/1.1
  bool keep_alive = false;  // set once the header is parsed

  void Clear() {
    method.clear();
    target.clear();
    accept.clear();
    version = 0;
    keep_alive = false;
  }
};

// A request parser that keeps only a ParsedRequest and drops the body. Beast's
// request_parser<string_body> builds a field list (a node per field) and the method,
// target and body strings for every request, which the front never reads. The syntax,
// the header and body limits and every error are basic_parser's own, so the same bytes
// get the same answer. One parser per request (a basic_parser cannot be reused); it
// allocates nothing itself, as the buffer it is given is one contiguous sequence.
class LeanRequestParser final : public http::basic_parser<true> {
 public:
  // `request` must outlive the parser; it is cleared here.
  explicit LeanRequestParser(ParsedRequest& request) : request_(request) { request_.Clear(); }

 private:
  void on_request_impl(http::verb, beast::string_view method, beast::string_view target,
                       int version, beast::error_code&) override;

  void on_response_impl(int, beast::string_view, int, beast::error_code&) override {}

  // Only the first Accept and the first Connection count, as in a Beast message
  // (operator[] and keep_alive() look at the first field of a name).
  void on_field_impl(http::field name, beast::string_view, beast::string_view value,
                     beast::error_code&) override;

  // Beast's message::keep_alive(): HTTP/1.1 keeps the connection unless the first
  // Connection field says close; HTTP/1.0 closes it unless that field says keep-alive.
  // (basic_parser::keep_alive() would also heed later Connection fields and
  // Proxy-Connection, which the front has never done.)
  void on_header_impl(beast::error_code&) override {
    request_.keep_alive = request_.version < 11 ? connection_keep_alive_ : !connection_close_;
  }

  // The body (GET needs none) is dropped; basic_parser counts it against body_limit().
  void on_body_init_impl(const boost::optional<uint64_t>&, beast::error_code&) override {}
  size_t on_body_impl(beast::string_view body, beast::error_code&) override { return body.size(); }
  void on_chunk_header_impl(uint64_t, beast::string_view, beast::error_code&) override {}
  size_t on_chunk_body_impl(uint64_t, beast::string_view body, beast::error_code&) override {
    return body.size();
  }
  void on_finish_impl(beast::error_code&) override {}

  ParsedRequest& request_;  // the session's
  bool seen_accept_ = false;
  bool seen_connection_ = false;
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;
};

}  // namespace snowflake::daemon::transport

#endif  // SNOWFLAKE_DAEMON_HTTP_REQUEST_PARSER_H_
