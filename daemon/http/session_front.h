// What a connection of the HTTP front's transport (plain_session.h, tls_session.h) may ask
// of the front that accepted it (HttpTransport::Impl, http_transport.cc): its settings,
// the bounds it holds and gives back, the handler that answers a request, and the reports
// of its handshake and replies. The sessions see this and nothing else of the front.
//
// Thread-safety: every member may be called from any serving thread at once.

#ifndef SNOWFLAKE_DAEMON_HTTP_SESSION_FRONT_H_
#define SNOWFLAKE_DAEMON_HTTP_SESSION_FRONT_H_

#include <boost/beast/core/error.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "daemon/config/config.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/http_body.h"
#include "daemon/http/http_request.h"
#include "daemon/http/request_parser.h"

typedef struct ssl_st SSL;

namespace snowflake::daemon::transport {

namespace beast = boost::beast;
using Steady = std::chrono::steady_clock;
using Endpoint = HttpEndpoint;

class SessionFront {
 public:
  explicit SessionFront(const Config::Http& options) : options_(options) {}
  virtual ~SessionFront();
  SessionFront(const SessionFront&) = delete;
  SessionFront& operator=(const SessionFront&) = delete;

  const Config::Http& options() const { return options_; }

  // What a session holds of the front's bounds, given back when it ends or moves on.
  enum class Held { kNothing, kHandshake, kConnection, kRefusal };
  virtual void Release(Held held) = 0;

  // Gives back a place TakeSourcePlace gave (through SourcePlace, below).
  virtual void ReleaseSourcePlace(const std::string& source) = 0;

  // A connection slot for a caller now known (accepted over plain HTTP, or its handshake
  // done): kConnection; past max_connections its 429 in `refusal` and kRefusal (audited
  // with `peer`); past the refusals' own bound, kNothing (close it unanswered).
  virtual Held Admit(std::optional<HttpReply>& refusal, const AuditPeer& peer) = 0;

  // `client` as HttpRequestHandler::Handle takes it; `peer`, who asks, for the audit log.
  virtual HttpReply Handle(const ParsedRequest& request, std::string_view client,
                           const AuditPeer& peer, Endpoint& endpoint) = 0;

  // A TLS handshake failed: counted, by whether its deadline or the caller's certificate
  // was the cause, and audited with `peer` (the certificate it presented, if any).
  virtual void HandshakeFailed(beast::error_code ec, SSL* ssl, bool timed_out,
                               const AuditPeer& peer) = 0;

  // One reply sent: its status and how long it took, for the metrics and the status.
  virtual void Replied(unsigned status, Endpoint endpoint, Steady::time_point start) = 0;

 protected:
  const Config::Http options_;  // constant after construction
};

// A connection's place among its source's (Impl::TakeSourcePlace), given back when the
// session that holds it ends.
class SourcePlace {
 public:
  SourcePlace(SessionFront& front, std::string source)
      : front_(&front), source_(std::move(source)) {}
  SourcePlace(SourcePlace&& other) noexcept
      : front_(std::exchange(other.front_, nullptr)), source_(std::move(other.source_)) {}
  SourcePlace& operator=(SourcePlace&&) = delete;
  ~SourcePlace() {
    if (front_ != nullptr) front_->ReleaseSourcePlace(source_);
  }

 private:
  SessionFront* front_;
  std::string source_;
};

}  // namespace snowflake::daemon::transport

#endif  // SNOWFLAKE_DAEMON_HTTP_SESSION_FRONT_H_
