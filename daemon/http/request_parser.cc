#include "daemon/http/request_parser.h"

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

namespace snowflake::daemon::transport {

void LeanRequestParser::on_request_impl(http::verb, beast::string_view method,
                                        beast::string_view target, int version,
                                        beast::error_code&) {
  request_.method.assign(method.data(), method.size());
  request_.target.assign(target.data(), target.size());
  request_.version = static_cast<unsigned>(version);
}

void LeanRequestParser::on_field_impl(http::field name, beast::string_view,
                                      beast::string_view value, beast::error_code&) {
  if (name == http::field::accept && !seen_accept_) {
    seen_accept_ = true;
    request_.accept.assign(value.data(), value.size());
  } else if (name == http::field::connection && !seen_connection_) {
    seen_connection_ = true;
    http::token_list tokens{value};  // exists() is not const
    connection_close_ = tokens.exists("close");
    connection_keep_alive_ = tokens.exists("keep-alive");
  }
}

}  // namespace snowflake::daemon::transport
