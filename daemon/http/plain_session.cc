#include "daemon/http/plain_session.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/http/error.hpp>

namespace snowflake::daemon::transport {
namespace {

// Pipelined requests answered in one call chain before the next is posted (bounds the
// recursion Send -> AfterWrite -> Read -> Parse -> OnRequest -> Send).
constexpr uint64_t kMaxInlineRequests = 16;

}  // namespace

void Session::Start() {
  // The synchronous reads and writes below must never block the serving thread: a
  // socket that cannot be made non-blocking is closed unserved.
  beast::error_code ec;
  socket_.non_blocking(true, ec);
  if (ec) {
    spdlog::warn("http front: closing a connection that cannot be made non-blocking: {}",
                 ec.message());
    socket_.close(ec);
    return;
  }
  Read();
  deadline_.Watch(weak_from_this(), [this] {
    beast::error_code ignored;
    socket_.close(ignored);
  });
}

void Session::Read() {
  parser_.emplace(request_);
  header_bytes_ = 0;
  parser_->header_limit(static_cast<uint32_t>(front_.options().max_header_bytes));
  parser_->body_limit(kMaxBodyBytes);
  ExpireAfter(refusal_ ? kRefuseTimeout
                       : std::chrono::milliseconds(front_.options().idle_timeout_ms));
  // A pipelined request is (partly) here already: parse it.
  if (buffer_.size() != 0) return Parse();
  WaitReadable();
}

void Session::WaitReadable() {
  inline_requests_ = 0;
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->ReadAsync(); });
}

void Session::ReadAsync() {
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            // Closed by the deadline, the front stopped, EOF or reset:
                            // nothing to answer.
                            if (ec) return;
                            self->buffer_.commit(n);
                            self->Parse();
                          });
}

bool Session::ReadSome() {
  beast::error_code ec;
  const size_t n = socket_.read_some(buffer_.prepare(kReadChunk), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    WaitReadable();
    return false;
  }
  if (ec) return false;
  buffer_.commit(n);
  return true;
}

void Session::Parse() {
  const uint64_t header_limit = front_.options().max_header_bytes;
  for (;;) {
    beast::error_code ec;
    const bool in_header = !parser_->is_header_done();
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (in_header) {
      // The header so far, and what is buffered of it when it is not complete yet.
      header_bytes_ += used;
      const uint64_t pending = parser_->is_header_done() ? 0 : buffer_.size();
      if (header_bytes_ + pending > header_limit) return OnRequest(http::error::header_limit);
    }
    if (!ec && parser_->is_done()) return OnRequest({});
    if (ec && ec != http::error::need_more) return OnRequest(ec);
    if (!ec && used != 0) continue;  // the header is done: the body follows
    if (!ReadSome()) return;
  }
}

void Session::Send(Answer answer) {
  close_ = answer.close;
  Frame(front_, answer, head_, body_);
  ExpireAfter(std::chrono::milliseconds(front_.options().write_timeout_ms));
  const std::array<asio::const_buffer, 2> reply{asio::buffer(head_), asio::buffer(body_)};
  beast::error_code ec;
  // All of it in one send, or as much as the socket takes.
  const size_t sent = asio::write(socket_, reply, ec);
  if (!ec) return AfterWrite(/*inline_call=*/true);
  if (ec != asio::error::would_block && ec != asio::error::try_again) return;  // peer gone
  // The peer's window is full: the rest when the socket is writable.
  beast::buffers_suffix<std::array<asio::const_buffer, 2>> rest(reply);
  rest.consume(sent);
  asio::async_write(socket_, rest, [self = shared_from_this()](beast::error_code error, size_t) {
    if (!error) self->AfterWrite(/*inline_call=*/false);
  });
}

void Session::AfterWrite(bool inline_call) {
  if (close_) {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    // Read what the peer still sends until it closes (bounded by the timeout), so our
    // close does not turn into a reset that could discard the reply on its side.
    ExpireAfter(std::chrono::milliseconds(200));
    Drain();
    return;
  }
  if (inline_call && ++inline_requests_ >= kMaxInlineRequests) {
    inline_requests_ = 0;
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Read(); });
    return;
  }
  Read();
}

void Session::Drain() {
  socket_.async_read_some(asio::buffer(drain_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (!ec) self->Drain();
                          });
}

}  // namespace snowflake::daemon::transport
