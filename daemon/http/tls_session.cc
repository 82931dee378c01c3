#include "daemon/http/tls_session.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/ssl/verify_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "daemon/http/reply_framing.h"
#include "daemon/http/tls_credentials.h"

namespace snowflake::daemon::transport {
namespace {

// A closing TLS connection waits this long for the peer's close_notify.
constexpr std::chrono::milliseconds kTlsShutdownTimeout{200};

}  // namespace

void TlsSession::Start() {
  deadline_.ExpireAt(accepted_ +
                     std::chrono::milliseconds(std::min(front_.options().tls_handshake_timeout_ms,
                                                        front_.options().idle_timeout_ms)));
  deadline_.Watch(weak_from_this(), [this] {
    expired_ = true;
    beast::error_code ignored;
    stream_.next_layer().close(ignored);
  });
  if (!front_.options().tls_client_ca_file.empty()) {
    // The certificate a refused caller presented, for the audit log. The verdict stays
    // OpenSSL's: `preverified` is returned as it is.
    stream_.set_verify_callback([this](bool preverified, asio::ssl::verify_context& context) {
      X509* leaf = X509_STORE_CTX_get0_cert(context.native_handle());
      if (!preverified && !certificate_ && leaf != nullptr) {
        client_ = CertificateClientKey(leaf);
        serial_ = CertificateSerialHex(leaf);
        certificate_ = true;
      }
      return preverified;
    });
  }
  stream_.async_handshake(
      asio::ssl::stream_base::server,
      [self = shared_from_this()](beast::error_code ec) { self->OnHandshake(ec); });
}

void TlsSession::OnHandshake(beast::error_code ec) {
  front_.Release(held_);  // the handshake's place
  held_ = Held::kNothing;
  if (ec) return front_.HandshakeFailed(ec, stream_.native_handle(), expired_, Peer());
  // With mutual TLS the caller is its certificate (stable across addresses).
  if (X509* peer = SSL_get0_peer_certificate(stream_.native_handle()); peer != nullptr) {
    client_ = CertificateClientKey(peer);
    serial_ = CertificateSerialHex(peer);
    certificate_ = true;
  }
  held_ = front_.Admit(refusal_, Peer());
  if (held_ == Held::kNothing) {
    beast::error_code ignored;
    stream_.next_layer().close(ignored);
    return;
  }
  Read();
}

void TlsSession::Read() {
  parser_.emplace(request_);
  parser_->header_limit(static_cast<uint32_t>(front_.options().max_header_bytes));
  parser_->body_limit(kMaxBodyBytes);
  if (requests_ == 0 && !refusal_) {
    deadline_.ExpireAt(accepted_ + Timeout());
  } else {
    deadline_.ExpireAfter(Timeout());
  }
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
}

void TlsSession::OnRead(beast::error_code ec) {
  // The peer closed, reset, timed out (the deadline closed the socket), or the front
  // stopped: nothing to answer.
  if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
      ec == asio::ssl::error::stream_truncated ||
      (ec && ec.category() != http::make_error_code(http::error::bad_method).category() &&
       ec != http::error::buffer_overflow)) {
    return;
  }
  Answer answer =
      AnswerRequest(front_, ec, request_, refusal_, requests_, client_, Peer(), accepted_);
  close_ = answer.close;
  Frame(front_, answer, head_, body_);
  // The reply goes out as one buffer, never as the pair (head_, body_): Asio's
  // async_write of a two-buffer std::array keeps the spent first buffer at the front as
  // an empty one, and Beast's ssl_stream (a flat_stream) writes only the first buffer of
  // a sequence when the first two together exceed 16 KiB; an empty first buffer is a
  // 0-byte write, which async_write takes as done. A body over 16 KiB (a batch of ~800
  // IDs or more) was never sent after its header.
  head_.append(body_);
  deadline_.ExpireAfter(std::chrono::milliseconds(front_.options().write_timeout_ms));
  asio::async_write(stream_, asio::buffer(head_),
                    [self = shared_from_this()](beast::error_code error, size_t) {
                      if (!error) self->AfterWrite();
                    });
}

void TlsSession::AfterWrite() {
  if (!close_) return Read();
  // close_notify, then wait briefly for the peer's, so our close is not a reset that
  // could discard the reply on its side.
  deadline_.ExpireAfter(kTlsShutdownTimeout);
  stream_.async_shutdown([self = shared_from_this()](beast::error_code) {});
}

}  // namespace snowflake::daemon::transport
