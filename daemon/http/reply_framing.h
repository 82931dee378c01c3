// How the HTTP front's transport answers a request (docs/http.md): the answer to a request
// the parser read or refused (a limit, malformed, a version it does not serve, or the
// connection's 429), and its framing as the bytes of an HTTP/1.x response. Used by both
// kinds of session (plain_session.h, tls_session.h).
//
// Thread-compatible: called on the session's thread, with the session's buffers.

#ifndef SNOWFLAKE_DAEMON_HTTP_REPLY_FRAMING_H_
#define SNOWFLAKE_DAEMON_HTTP_REPLY_FRAMING_H_

#include <boost/beast/core/error.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/http/http_body.h"
#include "daemon/http/request_parser.h"
#include "daemon/http/session_front.h"
#include "protocol/vocabulary.h"

namespace snowflake::daemon::transport {

HttpReply Refusal(unsigned status, vocab::ErrorCode code, std::string_view message);

// What a session sends next: a request's reply, or a refusal of one that could not be read.
struct Answer {
  HttpReply reply;
  Endpoint endpoint = Endpoint::kOther;
  Steady::time_point start;
  bool close = true;
  unsigned version = 11;
};

// The answer to a request the parser read (`ec` clear) or refused (a limit, malformed),
// for both kinds of session. `refusal` is the session's (answered once, then closed);
// `accepted`, when its connection was (past max_connection_age_ms it closes after this);
// `peer`, who asks (for the audit log).
Answer AnswerRequest(SessionFront& front, beast::error_code ec, const ParsedRequest& request,
                     std::optional<HttpReply>& refusal, uint64_t& requests, std::string_view client,
                     const AuditPeer& peer, Steady::time_point accepted);

// The response an answer is framed as: its status line and header in `head` (reused, so
// its capacity outlives the reply), its body moved to `body`. The bytes are those Beast's
// response serializer writes for the same response, built without a field list (an
// allocation per field) or a serializer: the status line with Beast's reason phrase,
// Content-Type, Retry-After, Allow, the Connection token keep_alive() sets, and the
// Content-Length prepare_payload() sets. Reports the reply to the front's metrics.
void Frame(SessionFront& front, Answer& answer, std::string& head, std::string& body);

}  // namespace snowflake::daemon::transport

#endif  // SNOWFLAKE_DAEMON_HTTP_REPLY_FRAMING_H_
