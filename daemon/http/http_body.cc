#include "daemon/http/http_body.h"

#include "protocol/id_reply.h"

namespace snowflake::daemon {

HttpReply ErrorReply(unsigned status, std::string_view code, std::string_view message) {
  HttpReply reply;
  reply.status = status;
  reply.body = protocol::ErrorBody(code, message);
  reply.retry_after_s = status == 429 || status == 503 ? 1 : 0;
  return reply;
}

}  // namespace snowflake::daemon
