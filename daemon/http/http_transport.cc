#include "daemon/http/http_transport.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
//
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/status.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "daemon/config/net_address.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/plain_session.h"
#include "daemon/http/reply_framing.h"
#include "daemon/http/session_front.h"
#include "daemon/http/tls_credentials.h"
#include "daemon/http/tls_session.h"
#include "protocol/vocabulary.h"

namespace snowflake::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Steady = std::chrono::steady_clock;
using Endpoint = HttpEndpoint;
using transport::ParsedRequest;
using transport::Refusal;
using transport::Session;
using transport::SourcePlace;
using transport::TlsSession;

// Connections refused over max_connections get their 429 after reading the request, so the
// peer sees it instead of a reset; they are bounded apart. (An address outside `allow` is
// closed as it is accepted: nothing is read or sent before the caller is known.)
constexpr uint64_t kMaxRefusing = 64;
// How often the TLS files are looked at for a replacement (a stat of each).
constexpr std::chrono::milliseconds kTlsReloadInterval{1000};
// How often the audit log's counts of dropped lines are looked at (AuditLog::Flush).
constexpr std::chrono::milliseconds kAuditFlushInterval{1000};

static_assert(static_cast<size_t>(Endpoint::kOther) + 1 == kHttpEndpointLabels.size(),
              "one duration label per endpoint");

// Why a handshake failed, in OpenSSL's words: its reason ("certificate verify failed",
// "peer did not return a certificate", "wrong version number") and, when the client's
// certificate did not verify, the verification's error ("certificate has expired").
std::string HandshakeFailure(beast::error_code ec, SSL* ssl) {
  std::string reason;
  if (ec.category() == asio::error::get_ssl_category()) {
    const char* text = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    reason = text != nullptr ? text : ec.message();
  } else {
    reason = ec.message();  // the peer closed or reset the connection
  }
  if (const long verified = ssl != nullptr ? SSL_get_verify_result(ssl) : X509_V_OK;
      verified != X509_V_OK) {
    reason += ": ";
    reason += X509_verify_cert_error_string(verified);
  }
  return reason;
}

// The serial of the certificate `context` serves.
std::string ServedSerial(asio::ssl::context& context) {
  return CertificateSerialHex(SSL_CTX_get0_certificate(context.native_handle()));
}

}  // namespace

HttpRequestHandler::~HttpRequestHandler() = default;

class HttpTransport::Impl final : public transport::SessionFront {
 public:
  Impl(const Config::Http& options, HttpRequestHandler& handler, Metrics& metrics, AuditLog& audit,
       Clock& clock)
      : SessionFront(options), handler_(handler), metrics_(metrics), audit_(audit), clock_(clock) {
    for (const std::string& text : options_.allow) allow_.push_back(ParseCidr(text).value());
    // One io_context per thread, each run by that thread alone (concurrency hint 1): a
    // connection lives on one context, so its reads, its handler and its write run on one
    // thread with no hand-off, no strand and no scheduler lock shared between threads.
    const uint64_t threads = std::max<uint64_t>(1, options_.threads);
    for (uint64_t i = 0; i < threads; ++i)
      contexts_.push_back(std::make_unique<asio::io_context>(1));
  }

  ~Impl() { Stop(); }

  tl::expected<void, std::string> Listen() {
    if (options_.tls()) {
      auto loaded = TlsCredentials::Load(options_, clock_);
      if (!loaded) return tl::unexpected(loaded.error());
      tls_ = std::move(*loaded);
      served_serial_ = ServedSerial(*tls_->Current());
      served_not_after_ = tls_->not_after_unix();
      metrics_.http().tls_certificate_expiry.Set(static_cast<double>(tls_->not_after_unix()));
      metrics_.http().tls_client_ca_expiry.Set(
          static_cast<double>(tls_->client_ca_not_after_unix()));
      metrics_.http().tls_client_crl_next_update.Set(
          static_cast<double>(tls_->client_crl_next_update_unix()));
    }
    for (const std::string& text : options_.listen) {
      auto address = ParseListenAddress(text);
      if (!address) return tl::unexpected("http.listen: " + text + ": " + address.error());
      beast::error_code ec;
      const tcp::endpoint endpoint(asio::ip::make_address(address->host, ec), address->port);
      auto acceptor = std::make_unique<tcp::acceptor>(*contexts_[0]);
      if (!ec) acceptor->open(endpoint.protocol(), ec);
      if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
      if (!ec && endpoint.address().is_v6()) acceptor->set_option(asio::ip::v6_only(true), ec);
      if (!ec) acceptor->bind(endpoint, ec);
      if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
      if (ec) return tl::unexpected("cannot listen on " + text + ": " + ec.message());
      ports_.push_back(acceptor->local_endpoint().port());
      acceptors_.push_back(std::move(acceptor));
    }
    for (auto& acceptor : acceptors_) Accept(*acceptor);
    if (tls_ != nullptr) {
      reload_timer_.emplace(*contexts_[0]);
      WatchTlsFiles();
    }
    audit_timer_.emplace(*contexts_[0]);
    FlushAudit();
    for (auto& context : contexts_) {
      guards_.emplace_back(asio::make_work_guard(*context));
      threads_.emplace_back([ioc = context.get()] {
        for (;;) {
          try {
            ioc->run();
            return;
          } catch (const std::exception& e) {
            // A handler threw (allocation failure): log and keep serving.
            spdlog::error("http front: {}", e.what());
          }
        }
      });
    }
    return {};
  }

  void Stop() noexcept {
    for (auto& context : contexts_) context->stop();
    for (auto& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    threads_.clear();
  }

  const std::vector<uint16_t>& ports() const { return ports_; }
  uint64_t connections() const noexcept { return connections_.load(std::memory_order_relaxed); }
  uint64_t replies() const noexcept { return replies_.load(std::memory_order_relaxed); }
  uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }

  // ---- used by sessions (transport::SessionFront) ----
  void Release(Held held) override {
    switch (held) {
      case Held::kNothing:
        return;
      case Held::kHandshake:
        handshaking_.fetch_sub(1, std::memory_order_relaxed);
        return;
      case Held::kConnection:
        connections_.fetch_sub(1, std::memory_order_relaxed);
        metrics_.http().connections.Decrement();
        return;
      case Held::kRefusal:
        refusing_.fetch_sub(1, std::memory_order_relaxed);
        return;
    }
  }

  // One more connection of `source` (an address key: an IPv4 address, an IPv6 /64), from
  // accept to its end, unless the source holds max_connections_per_source already.
  bool TakeSourcePlace(const std::string& source) {
    std::lock_guard lock(sources_mutex_);
    uint64_t& held = sources_[source];
    if (held >= options_.max_connections_per_source) return false;
    ++held;
    return true;
  }
  void ReleaseSourcePlace(const std::string& source) override {
    std::lock_guard lock(sources_mutex_);
    const auto it = sources_.find(source);
    if (it != sources_.end() && --it->second == 0) sources_.erase(it);
  }

  Held Admit(std::optional<HttpReply>& refusal, const AuditPeer& peer) override {
    if (connections_.fetch_add(1, std::memory_order_relaxed) < options_.max_connections) {
      metrics_.http().connections.Increment();
      return Held::kConnection;
    }
    connections_.fetch_sub(1, std::memory_order_relaxed);
    metrics_.http().refused_limit.Increment();
    refused_.fetch_add(1, std::memory_order_relaxed);
    audit_.Record(AuditEvent::kRefusedConnections, [&](AuditLine& line) {
      line.Peer(peer).Quoted("reason",
                             "max_connections " + std::to_string(options_.max_connections));
    });
    if (refusing_.fetch_add(1, std::memory_order_relaxed) >= kMaxRefusing) {
      refusing_.fetch_sub(1, std::memory_order_relaxed);
      return Held::kNothing;
    }
    refusal = Refusal(static_cast<unsigned>(http::status::too_many_requests),
                      vocab::ErrorCode::kTooManyConnections,
                      "this daemon's HTTP front already serves " +
                          std::to_string(options_.max_connections) +
                          " connections ([http] max_connections); retry shortly or use "
                          "another daemon");
    return Held::kRefusal;
  }

  HttpReply Handle(const ParsedRequest& request, std::string_view client, const AuditPeer& peer,
                   Endpoint& endpoint) override {
    return handler_.Handle(request.method, request.target, request.accept, client, peer, endpoint);
  }

  void HandshakeFailed(beast::error_code ec, SSL* ssl, bool timed_out,
                       const AuditPeer& peer) override {
    if (timed_out) {
      metrics_.http().tls_failed_timeout.Increment();
      spdlog::debug("http front: a TLS handshake did not end within {} ms",
                    options_.tls_handshake_timeout_ms);
      audit_.Record(AuditEvent::kHandshakeFailed, [&](AuditLine& line) {
        line.Peer(peer).Quoted("reason",
                               "no handshake within " +
                                   std::to_string(std::min(options_.tls_handshake_timeout_ms,
                                                           options_.idle_timeout_ms)) +
                                   " ms");
      });
      return;
    }
    bool client_certificate = false;
    if (!options_.tls_client_ca_file.empty()) {
      const int reason = ec.category() == asio::error::get_ssl_category()
                             ? ERR_GET_REASON(static_cast<unsigned long>(ec.value()))
                             : 0;
      client_certificate = reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
                           reason == SSL_R_CERTIFICATE_VERIFY_FAILED ||
                           reason == SSL_R_NO_CERTIFICATES_RETURNED ||
                           (ssl != nullptr && SSL_get_verify_result(ssl) != X509_V_OK);
    }
    (client_certificate ? metrics_.http().tls_failed_client_cert : metrics_.http().tls_failed_other)
        .Increment();
    spdlog::debug("http front: a TLS handshake failed{}: {}",
                  client_certificate ? " (client certificate)" : "", ec.message());
    audit_.Record(
        client_certificate ? AuditEvent::kHandshakeRefused : AuditEvent::kHandshakeFailed,
        [&](AuditLine& line) { line.Peer(peer).Quoted("reason", HandshakeFailure(ec, ssl)); });
  }

  void Replied(unsigned status, Endpoint endpoint, Steady::time_point start) override {
    // Relaxed: a figure for the status, ordered with nothing.
    replies_.fetch_add(1, std::memory_order_relaxed);
    metrics_.HttpRequests(status).Increment();
    metrics_.http().duration[static_cast<size_t>(endpoint)]->Observe(
        std::chrono::duration<double>(Steady::now() - start).count());
  }

 private:
  void Accept(tcp::acceptor& acceptor) {
    // New connections go to the contexts in turn.
    asio::io_context& target = *contexts_[next_context_++ % contexts_.size()];
    acceptor.async_accept(target, [this, &acceptor](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // Out of descriptors or memory: try again shortly rather than spin.
        auto timer =
            std::make_shared<asio::steady_timer>(*contexts_[0], std::chrono::milliseconds(10));
        timer->async_wait([this, timer, &acceptor](beast::error_code) { Accept(acceptor); });
        return;
      }
      OnAccept(std::move(socket));
      Accept(acceptor);
    });
  }

  void OnAccept(tcp::socket socket);

  // Every kTlsReloadInterval on the first context: a replaced certificate or key is in use
  // for the next connection, or refused with the old pair kept (tls_credentials.h).
  void WatchTlsFiles() {
    reload_timer_->expires_after(kTlsReloadInterval);
    reload_timer_->async_wait([this](beast::error_code ec) {
      if (ec) return;
      switch (tls_->Reload()) {
        case TlsCredentials::Reloaded::kTaken:
          metrics_.http().tls_reloaded.Increment();
          metrics_.http().tls_certificate_expiry.Set(static_cast<double>(tls_->not_after_unix()));
          metrics_.http().tls_client_ca_expiry.Set(
              static_cast<double>(tls_->client_ca_not_after_unix()));
          metrics_.http().tls_client_crl_next_update.Set(
              static_cast<double>(tls_->client_crl_next_update_unix()));
          AuditRotation();
          break;
        case TlsCredentials::Reloaded::kRefused:
          metrics_.http().tls_reload_refused.Increment();
          audit_.Record(AuditEvent::kTlsRotationRefused, [&](AuditLine& line) {
            line.Field("file", options_.tls_cert_file.string())
                .Field("serial", served_serial_)
                .Time("not_after", served_not_after_)
                .Quoted("reason", tls_->refusal());
          });
          break;
        case TlsCredentials::Reloaded::kUnchanged:
          break;
      }
      WatchTlsFiles();
    });
  }

  // New TLS files taken: the certificate served before and the one served now.
  void AuditRotation() {
    std::string serial = ServedSerial(*tls_->Current());
    const int64_t not_after = tls_->not_after_unix();
    audit_.Record(AuditEvent::kTlsRotated, [&](AuditLine& line) {
      line.Field("file", options_.tls_cert_file.string())
          .Field("old_serial", served_serial_)
          .Time("old_not_after", served_not_after_)
          .Field("new_serial", serial)
          .Time("new_not_after", not_after);
    });
    served_serial_ = std::move(serial);
    served_not_after_ = not_after;
  }

  // Every kAuditFlushInterval on the first context: the counts of lines the audit log
  // dropped, once their interval is over.
  void FlushAudit() {
    audit_timer_->expires_after(kAuditFlushInterval);
    audit_timer_->async_wait([this](beast::error_code ec) {
      if (ec) return;
      audit_.Flush();
      FlushAudit();
    });
  }

  // Constant after construction (and options_, SessionFront's).
  HttpRequestHandler& handler_;
  Metrics& metrics_;  // the daemon's
  AuditLog& audit_;   // the front's; thread-safe
  Clock& clock_;      // the daemon's; session-ticket keys rotate on it
  std::vector<Cidr> allow_;
  std::unique_ptr<TlsCredentials> tls_;  // set by Listen() with TLS; thread-safe
  // The certificate served, for the audit of a rotation: set by Listen(), then on the
  // first context's thread (WatchTlsFiles) only.
  std::string served_serial_;
  int64_t served_not_after_ = 0;

  // Any serving thread; relaxed (counts, ordered with nothing).
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> handshaking_{0};  // TLS connections accepted, handshake not done
  std::atomic<uint64_t> refusing_{0};
  std::atomic<uint64_t> replies_{0};
  std::atomic<uint64_t> refused_{0};
  // Connections each source holds (TakeSourcePlace); entries at 0 are erased, so it holds
  // at most one per connection alive.
  std::mutex sources_mutex_;
  std::unordered_map<std::string, uint64_t> sources_;

  std::vector<uint16_t> ports_;
  // Declared last: destroyed first, so the sessions they still hold see the rest alive.
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors_;
  std::optional<asio::steady_timer> reload_timer_;  // on the first context
  std::optional<asio::steady_timer> audit_timer_;   // on the first context
  uint64_t next_context_ = 0;                       // only the first context's thread accepts
  std::vector<std::thread> threads_;
};

namespace {

std::optional<IpAddress> PeerAddress(const tcp::socket& socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return std::nullopt;
  IpAddress out;
  if (peer.address().is_v4()) {
    out.v4 = true;
    out.bytes[10] = 0xff;
    out.bytes[11] = 0xff;
    const auto bytes = peer.address().to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin() + 12);
  } else {
    const auto bytes = peer.address().to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
    out.v4 = peer.address().to_v6().is_v4_mapped();
  }
  return out;
}

}  // namespace

void HttpTransport::Impl::OnAccept(tcp::socket socket) {
  beast::error_code ignored;
  const Steady::time_point accepted = Steady::now();
  const std::optional<IpAddress> peer = PeerAddress(socket);
  const bool allowed = peer && std::any_of(allow_.begin(), allow_.end(),
                                           [&](const Cidr& cidr) { return cidr.Contains(*peer); });
  const AuditPeer who{peer ? &*peer : nullptr, {}, {}};
  if (!allowed) {
    // Closed before anything is read, sent or computed for it: no handshake, no 403.
    metrics_.http().refused_allow.Increment();
    refused_.fetch_add(1, std::memory_order_relaxed);
    socket.close(ignored);
    audit_.Record(AuditEvent::kRefusedAllow,
                  [&](AuditLine& line) { line.Peer(who).Quoted("reason", "not in allow"); });
    return;
  }
  std::string client = AddressClientKey(*peer);
  if (!TakeSourcePlace(client)) {
    // This source holds max_connections_per_source already (handshakes included): it
    // cannot take the front's every slot, or every handshake place.
    metrics_.http().refused_source.Increment();
    refused_.fetch_add(1, std::memory_order_relaxed);
    socket.close(ignored);
    audit_.Record(AuditEvent::kRefusedSource, [&](AuditLine& line) {
      line.Peer(who).Quoted(
          "reason", "per-source cap " + std::to_string(options_.max_connections_per_source));
    });
    return;
  }
  SourcePlace place(*this, client);
  socket.set_option(tcp::no_delay(true), ignored);
  // Started on the context its socket belongs to, whose one thread runs all its handlers.
  if (tls_ != nullptr) {
    if (handshaking_.fetch_add(1, std::memory_order_relaxed) >= options_.tls_max_handshakes) {
      // As many handshakes as allowed are under way (peers that may never finish theirs):
      // this one is closed before its handshake costs anything.
      handshaking_.fetch_sub(1, std::memory_order_relaxed);
      metrics_.http().refused_handshakes.Increment();
      refused_.fetch_add(1, std::memory_order_relaxed);
      socket.close(ignored);
      audit_.Record(AuditEvent::kRefusedHandshakes, [&](AuditLine& line) {
        line.Peer(who).Quoted("reason",
                              "handshakes cap " + std::to_string(options_.tls_max_handshakes));
      });
      return;
    }
    auto session =
        std::make_shared<TlsSession>(std::move(socket), tls_->Current(), *this, std::move(client),
                                     std::move(place), accepted, *peer);
    const auto executor = session->executor();
    asio::post(executor, [session = std::move(session)] { session->Start(); });
    return;
  }
  std::optional<HttpReply> refusal;
  const Held held = Admit(refusal, who);
  if (held == Held::kNothing) {
    socket.close(ignored);  // too many refusals pending at once: just close
    return;
  }
  auto session = std::make_shared<Session>(std::move(socket), *this, held, std::move(refusal),
                                           std::move(client), std::move(place), accepted, *peer);
  const auto executor = session->executor();
  asio::post(executor, [session = std::move(session)] { session->Start(); });
}

HttpTransport::HttpTransport(const Config::Http& options, HttpRequestHandler& handler,
                             Metrics& metrics, AuditLog& audit, Clock& clock)
    : impl_(std::make_unique<Impl>(options, handler, metrics, audit, clock)) {}

HttpTransport::~HttpTransport() { Stop(); }

tl::expected<void, std::string> HttpTransport::Listen() { return impl_->Listen(); }

void HttpTransport::Stop() noexcept { impl_->Stop(); }

std::vector<uint16_t> HttpTransport::ports() const { return impl_->ports(); }
uint64_t HttpTransport::connections() const noexcept { return impl_->connections(); }
uint64_t HttpTransport::replies() const noexcept { return impl_->replies(); }
uint64_t HttpTransport::refused() const noexcept { return impl_->refused(); }

}  // namespace snowflake::daemon
