// One plain-HTTP connection of the HTTP front's transport (docs/http.md): its requests
// read, parsed, answered and written on its own thread's io_context, within the bounds
// and deadlines of [http]. Made by the front at accept (http_transport.cc), which it sees
// through a SessionFront.
//
// Thread-compatible: every call runs on the context its socket belongs to.

#ifndef SNOWFLAKE_DAEMON_HTTP_PLAIN_SESSION_H_
#define SNOWFLAKE_DAEMON_HTTP_PLAIN_SESSION_H_

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
//
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/config/net_address.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/connection_deadline.h"
#include "daemon/http/http_body.h"
#include "daemon/http/reply_framing.h"
#include "daemon/http/request_parser.h"
#include "daemon/http/session_front.h"

namespace snowflake::daemon::transport {

// One connection: read a request (bounded header size and time), reply, repeat while
// keep-alive. Pipelined requests wait in buffer_ and are answered in order. A refusing
// session answers its first request with `refusal` and closes.
class Session : public std::enable_shared_from_this<Session> {
 public:
  // `held`: the slot taken for it at accept (a connection, or a refusal with `refusal`);
  // `peer`: its address.
  Session(tcp::socket socket, SessionFront& front, SessionFront::Held held,
          std::optional<HttpReply> refusal, std::string client, SourcePlace place,
          Steady::time_point accepted, const IpAddress& peer)
      : socket_(std::move(socket)),
        deadline_(socket_.get_executor(), front.options()),
        front_(front),
        held_(held),
        refusal_(std::move(refusal)),
        client_(std::move(client)),
        place_(std::move(place)),
        accepted_(accepted),
        peer_(peer) {}
  ~Session() { front_.Release(held_); }

  tcp::socket::executor_type executor() { return socket_.get_executor(); }

  // Runs on the session's own context (the one its socket belongs to).
  void Start();

 private:
  void ExpireAfter(std::chrono::milliseconds timeout) { deadline_.ExpireAfter(timeout); }

  // Reading, parsing and answering are synchronous calls on the non-blocking socket as
  // long as they can proceed. When the next request is not buffered, the session reads
  // again only after the rest of the work ready on its thread (the other connections'
  // requests of this pass): by then the peer has often sent it, and the read finds it at
  // once. A request then costs one recv and one send, and a pass of the thread over its
  // ready connections one epoll_wait. A read that finds nothing waits in the reactor
  // without re-arming the socket: Asio re-arms (epoll_ctl) for a wait it starts without a
  // speculative attempt, as async_wait, not for a read whose attempt found nothing.
  void Read();
  void WaitReadable();
  void ReadAsync();

  // One recv into the buffer. False when there is nothing to parse yet: it then waits for
  // readability, or the connection ended (EOF, reset: nothing to answer).
  bool ReadSome();

  // Feeds the buffer to the parser until a request is complete, an error is found, or it
  // needs bytes that have not come yet. The buffer holds at most one partial request and
  // one recv's worth (kReadChunk) beyond it: more is read only when the parser needs it.
  //
  // The parser applies its header limit to each call's input only, and consumes complete
  // lines as they come, so the limit on the whole header is counted here.
  void Parse();

  void OnRequest(beast::error_code ec) {
    Send(AnswerRequest(front_, ec, request_, refusal_, requests_, client_,
                       AuditPeer{&peer_, {}, {}}, accepted_));
  }

  void Send(Answer answer);

  // `inline_call`: straight from Send(), so a run of pipelined requests would recurse;
  // every kMaxInlineRequests the next one is posted instead, which ends the recursion.
  void AfterWrite(bool inline_call);

  void Drain();

  tcp::socket socket_;
  ConnectionDeadline deadline_;
  SessionFront& front_;
  const SessionFront::Held held_;
  std::optional<HttpReply> refusal_;
  const std::string client_;
  const SourcePlace place_;
  const Steady::time_point accepted_;
  const IpAddress peer_;
  beast::flat_buffer buffer_;
  ParsedRequest request_;  // before parser_: the parser writes it
  std::optional<LeanRequestParser> parser_;
  std::string head_;  // the reply being sent: its status line and header
  std::string body_;  // and its body
  std::array<char, 512> drain_{};
  uint64_t inline_requests_ = 0;  // answered in one call chain since the last wait
  uint64_t header_bytes_ = 0;     // of the request being parsed, consumed by the parser
  uint64_t requests_ = 0;
  bool close_ = false;
};

}  // namespace snowflake::daemon::transport

#endif  // SNOWFLAKE_DAEMON_HTTP_PLAIN_SESSION_H_
