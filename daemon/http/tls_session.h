// One TLS connection of the HTTP front's transport (docs/http.md, "TLS"): its handshake,
// under a deadline and in one of the front's handshake places, then its requests as a
// plain session's, through Beast's SSL stream. Made by the front at accept
// (http_transport.cc), which it sees through a SessionFront.
//
// Thread-compatible: every call runs on the context its socket belongs to.

#ifndef SNOWFLAKE_DAEMON_HTTP_TLS_SESSION_H_
#define SNOWFLAKE_DAEMON_HTTP_TLS_SESSION_H_

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
//
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/config/net_address.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/connection_deadline.h"
#include "daemon/http/http_body.h"
#include "daemon/http/request_parser.h"
#include "daemon/http/session_front.h"

namespace snowflake::daemon::transport {

// One TLS connection: the handshake, then what a plain Session does, with Beast's
// asynchronous reads and writes through the SSL stream (its synchronous calls on a
// non-blocking socket could lose the part of a record the socket did not take). The
// session keeps the TLS context it started with, so a rotation never touches a connection
// in progress.
//
// Until its handshake ends the session holds one of tls_max_handshakes places, not a
// connection slot, and has until tls_handshake_timeout_ms (or the idle timeout, if
// shorter) after it was accepted; then it takes a slot (or its 429). Its first request is
// due idle_timeout_ms after it was accepted, not after the handshake, so a slow handshake
// does not buy a second idle timeout.
class TlsSession : public std::enable_shared_from_this<TlsSession> {
 public:
  // `client`: the peer's address key, until a client certificate names the caller;
  // `peer`: its address.
  TlsSession(tcp::socket socket, std::shared_ptr<asio::ssl::context> context, SessionFront& front,
             std::string client, SourcePlace place, Steady::time_point accepted,
             const IpAddress& peer)
      : context_(std::move(context)),
        client_(std::move(client)),
        place_(std::move(place)),
        accepted_(accepted),
        peer_(peer),
        stream_(std::move(socket), *context_),
        deadline_(stream_.next_layer().get_executor(), front.options()),
        front_(front),
        buffer_(front.options().max_header_bytes + kMaxBodyBytes + kReadChunk) {}
  ~TlsSession() { front_.Release(held_); }

  tcp::socket::executor_type executor() { return stream_.next_layer().get_executor(); }

  void Start();

 private:
  using Held = SessionFront::Held;

  std::chrono::milliseconds Timeout() const {
    return refusal_ ? kRefuseTimeout : std::chrono::milliseconds(front_.options().idle_timeout_ms);
  }

  // Who the session serves, for the audit log: with a certificate (verified, or refused
  // by the handshake), its identity and serial.
  AuditPeer Peer() const {
    return AuditPeer{&peer_, certificate_ ? std::string_view(client_) : std::string_view(),
                     serial_};
  }

  void OnHandshake(beast::error_code ec);
  void Read();
  void OnRead(beast::error_code ec);
  void AfterWrite();

  std::shared_ptr<asio::ssl::context> context_;  // before stream_: it outlives it
  std::string client_;
  const SourcePlace place_;
  const Steady::time_point accepted_;
  const IpAddress peer_;
  bool certificate_ = false;  // client_ is a client certificate's identity
  std::string serial_;        // that certificate's serial (hex)
  beast::ssl_stream<tcp::socket> stream_;
  ConnectionDeadline deadline_;
  SessionFront& front_;
  Held held_ = Held::kHandshake;  // taken by OnAccept
  bool expired_ = false;          // the deadline closed the socket
  std::optional<HttpReply> refusal_;
  beast::flat_buffer buffer_;
  ParsedRequest request_;  // before parser_: the parser writes it
  std::optional<LeanRequestParser> parser_;
  std::string head_;  // the reply being sent: its status line, header and body
  std::string body_;  // its body, as Frame() leaves it (then appended to head_)
  uint64_t requests_ = 0;
  bool close_ = false;
};

}  // namespace snowflake::daemon::transport

#endif  // SNOWFLAKE_DAEMON_HTTP_TLS_SESSION_H_
