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
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <charconv>
#include <chrono>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "daemon/config/net_address.h"
#include "daemon/http/tls_credentials.h"
#include "protocol/vocabulary.h"

namespace snowflake::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Endpoint = HttpEndpoint;

// A GET carries no body; a small one is read and ignored, a larger one is refused (413).
constexpr uint64_t kMaxBodyBytes = 4096;
// Connections refused over max_connections get their 429 after reading the request, so the
// peer sees it instead of a reset; they are bounded apart. (An address outside `allow` is
// closed as it is accepted: nothing is read or sent before the caller is known.)
constexpr uint64_t kMaxRefusing = 64;
constexpr std::chrono::milliseconds kRefuseTimeout{1000};
// Bytes asked of one recv: a few requests' worth (a GET is well under 1 KB).
constexpr size_t kReadChunk = 4096;
// Pipelined requests answered in one call chain before the next is posted (bounds the
// recursion Send -> AfterWrite -> Read -> Parse -> OnRequest -> Send).
constexpr uint64_t kMaxInlineRequests = 16;
// How often the TLS files are looked at for a replacement (a stat of each).
constexpr std::chrono::milliseconds kTlsReloadInterval{1000};
// A closing TLS connection waits this long for the peer's close_notify.
constexpr std::chrono::milliseconds kTlsShutdownTimeout{200};

static_assert(static_cast<size_t>(Endpoint::kOther) + 1 == kHttpEndpointLabels.size(),
              "one duration label per endpoint");

HttpReply Refusal(unsigned status, vocab::ErrorCode code, std::string_view message) {
  return ErrorReply(status, vocab::ErrorName(code), message);
}

std::string_view View(beast::string_view text) { return {text.data(), text.size()}; }

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
                       int version, beast::error_code&) override {
    request_.method.assign(method.data(), method.size());
    request_.target.assign(target.data(), target.size());
    request_.version = static_cast<unsigned>(version);
  }

  void on_response_impl(int, beast::string_view, int, beast::error_code&) override {}

  // Only the first Accept and the first Connection count, as in a Beast message
  // (operator[] and keep_alive() look at the first field of a name).
  void on_field_impl(http::field name, beast::string_view, beast::string_view value,
                     beast::error_code&) override {
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

}  // namespace

HttpRequestHandler::~HttpRequestHandler() = default;

class HttpTransport::Impl {
 public:
  Impl(const Config::Http& options, HttpRequestHandler& handler, Metrics& metrics)
      : options_(options), handler_(handler), metrics_(metrics) {
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
      auto loaded = TlsCredentials::Load(options_);
      if (!loaded) return tl::unexpected(loaded.error());
      tls_ = std::move(*loaded);
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

  // ---- used by sessions ----
  const Config::Http& options() const { return options_; }

  // What a session holds of the front's bounds, given back when it ends or moves on.
  enum class Held { kNothing, kHandshake, kConnection, kRefusal };
  void Release(Held held) {
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
  void ReleaseSourcePlace(const std::string& source) {
    std::lock_guard lock(sources_mutex_);
    const auto it = sources_.find(source);
    if (it != sources_.end() && --it->second == 0) sources_.erase(it);
  }

  // A connection slot for a caller now known (accepted over plain HTTP, or its handshake
  // done): kConnection; past max_connections its 429 in `refusal` and kRefusal; past the
  // refusals' own bound, kNothing (close it unanswered).
  Held Admit(std::optional<HttpReply>& refusal) {
    if (connections_.fetch_add(1, std::memory_order_relaxed) < options_.max_connections) {
      metrics_.http().connections.Increment();
      return Held::kConnection;
    }
    connections_.fetch_sub(1, std::memory_order_relaxed);
    metrics_.http().refused_limit.Increment();
    refused_.fetch_add(1, std::memory_order_relaxed);
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

  HttpReply Handle(const ParsedRequest& request, std::string_view client, Endpoint& endpoint) {
    return handler_.Handle(request.method, request.target, request.accept, client, endpoint);
  }

  // A TLS handshake failed: counted, by whether its deadline or the caller's certificate
  // was the cause.
  void HandshakeFailed(beast::error_code ec, SSL* ssl, bool timed_out) {
    if (timed_out) {
      metrics_.http().tls_failed_timeout.Increment();
      spdlog::debug("http front: a TLS handshake did not end within {} ms",
                    options_.tls_handshake_timeout_ms);
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
  }

  // One reply sent: its status and how long it took, for the metrics and the status.
  void Replied(unsigned status, Endpoint endpoint, Clock::time_point start) {
    // Relaxed: a figure for the status, ordered with nothing.
    replies_.fetch_add(1, std::memory_order_relaxed);
    metrics_.HttpRequests(status).Increment();
    metrics_.http().duration[static_cast<size_t>(endpoint)]->Observe(
        std::chrono::duration<double>(Clock::now() - start).count());
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
          break;
        case TlsCredentials::Reloaded::kRefused:
          metrics_.http().tls_reload_refused.Increment();
          break;
        case TlsCredentials::Reloaded::kUnchanged:
          break;
      }
      WatchTlsFiles();
    });
  }

  // Constant after construction.
  const Config::Http options_;
  HttpRequestHandler& handler_;
  Metrics& metrics_;  // the daemon's
  std::vector<Cidr> allow_;
  std::unique_ptr<TlsCredentials> tls_;  // set by Listen() with TLS; thread-safe

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
  uint64_t next_context_ = 0;  // only the first context's thread accepts
  std::vector<std::thread> threads_;
};

namespace {

// A connection's place among its source's (Impl::TakeSourcePlace), given back when the
// session that holds it ends.
class SourcePlace {
 public:
  SourcePlace(HttpTransport::Impl& front, std::string source)
      : front_(&front), source_(std::move(source)) {}
  SourcePlace(SourcePlace&& other) noexcept
      : front_(std::exchange(other.front_, nullptr)), source_(std::move(other.source_)) {}
  SourcePlace& operator=(SourcePlace&&) = delete;
  ~SourcePlace() {
    if (front_ != nullptr) front_->ReleaseSourcePlace(source_);
  }

 private:
  HttpTransport::Impl* front_;
  std::string source_;
};

// What a session sends next: a request's reply, or a refusal of one that could not be read.
struct Answer {
  HttpReply reply;
  Endpoint endpoint = Endpoint::kOther;
  Clock::time_point start;
  bool close = true;
  unsigned version = 11;
};

// The answer to a request the parser read (`ec` clear) or refused (a limit, malformed),
// for both kinds of session. `refusal` is the session's (answered once, then closed);
// `accepted`, when its connection was (past max_connection_age_ms it closes after this).
Answer AnswerRequest(HttpTransport::Impl& front, beast::error_code ec, const ParsedRequest& request,
                     std::optional<HttpReply>& refusal, uint64_t& requests, std::string_view client,
                     Clock::time_point accepted) {
  Answer answer;
  answer.start = Clock::now();
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    answer.reply = Refusal(static_cast<unsigned>(http::status::request_header_fields_too_large),
                           vocab::ErrorCode::kHeadersTooLarge,
                           "the request line and headers exceed " +
                               std::to_string(front.options().max_header_bytes) + " bytes");
    return answer;
  }
  if (ec == http::error::body_limit) {
    answer.reply = Refusal(static_cast<unsigned>(http::status::payload_too_large),
                           vocab::ErrorCode::kBodyTooLarge,
                           "a request body may have at most " + std::to_string(kMaxBodyBytes) +
                               " bytes (GET needs none)");
    return answer;
  }
  if (ec) {
    answer.reply =
        Refusal(static_cast<unsigned>(http::status::bad_request), vocab::ErrorCode::kBadRequest,
                "malformed HTTP/1.1 request: " + ec.message());
    return answer;
  }
  if (refusal) {
    answer.reply = std::move(*refusal);
    return answer;
  }
  if (request.version != 10 && request.version != 11) {
    answer.reply = Refusal(static_cast<unsigned>(http::status::http_version_not_supported),
                           vocab::ErrorCode::kBadVersion, "only HTTP/1.0 and HTTP/1.1 are served");
    return answer;
  }
  ++requests;
  answer.reply = front.Handle(request, client, answer.endpoint);
  const int64_t max_age_ms = front.options().max_connection_age_ms;
  answer.close =
      answer.reply.close || !request.keep_alive ||
      requests >= front.options().max_requests_per_connection ||
      (max_age_ms > 0 && answer.start - accepted >= std::chrono::milliseconds(max_age_ms));
  answer.version = request.version;
  return answer;
}

void AppendNumber(std::string& out, uint64_t value) {
  char digits[20];
  const auto end = std::to_chars(std::begin(digits), std::end(digits), value).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

// The response an answer is framed as: its status line and header in `head` (reused, so
// its capacity outlives the reply), its body moved to `body`. The bytes are those Beast's
// response serializer writes for the same response, built without a field list (an
// allocation per field) or a serializer: the status line with Beast's reason phrase,
// Content-Type, Retry-After, Allow, the Connection token keep_alive() sets, and the
// Content-Length prepare_payload() sets. Reports the reply to the front's metrics.
void Frame(HttpTransport::Impl& front, Answer& answer, std::string& head, std::string& body) {
  HttpReply& reply = answer.reply;
  head.clear();
  head.append("HTTP/");
  head.push_back(static_cast<char>('0' + answer.version / 10));
  head.push_back('.');
  head.push_back(static_cast<char>('0' + answer.version % 10));
  head.push_back(' ');
  AppendNumber(head, reply.status);
  head.push_back(' ');
  head.append(View(http::obsolete_reason(static_cast<http::status>(reply.status))));
  head.append("\r\nContent-Type: ");
  head.append(reply.content_type);
  head.append("\r\n");
  if (reply.retry_after_s != 0) {
    head.append("Retry-After: ");
    AppendNumber(head, reply.retry_after_s);
    head.append("\r\n");
  }
  if (reply.status == static_cast<unsigned>(http::status::method_not_allowed)) {
    head.append("Allow: GET\r\n");
  }
  // HTTP/1.1 keeps the connection unless told; HTTP/1.0 closes it unless told.
  if (answer.version >= 11 && answer.close) head.append("Connection: close\r\n");
  if (answer.version < 11 && !answer.close) head.append("Connection: keep-alive\r\n");
  // A status that has no body (1xx, 204, 304) has no Content-Length either.
  const bool bodiless = reply.status / 100 == 1 || reply.status == 204 || reply.status == 304;
  if (!bodiless) {
    head.append("Content-Length: ");
    AppendNumber(head, reply.body.size());
    head.append("\r\n");
  }
  head.append("\r\n");
  body = std::move(reply.body);
  if (bodiless) body.clear();
  front.Replied(reply.status, answer.endpoint, answer.start);
}

// Timeouts are a deadline checked by one timer per connection, not a timer armed per
// operation: a request costs a store to the deadline, no timer syscall and no cancelled
// wait to complete. The timer wakes at least every tick (a quarter of the shortest
// timeout), so a deadline is enforced at most that late; a deadline earlier than the
// armed wake re-arms it. A member of its session; runs on the session's thread.
class ConnectionDeadline {
 public:
  ConnectionDeadline(const tcp::socket::executor_type& executor, const Config::Http& options)
      : timer_(executor),
        tick_(std::max<std::chrono::milliseconds>(
            std::chrono::milliseconds(10),
            std::min<std::chrono::milliseconds>(
                {std::chrono::milliseconds(options.idle_timeout_ms),
                 std::chrono::milliseconds(options.write_timeout_ms),
                 std::chrono::milliseconds(options.tls_handshake_timeout_ms), kRefuseTimeout}) /
                4)) {}

  void ExpireAfter(std::chrono::milliseconds timeout) { ExpireAt(Clock::now() + timeout); }
  void ExpireAt(Clock::time_point deadline) {
    deadline_ = deadline;
    if (watching_ && deadline_ < armed_) Arm();
  }

  // Starts the timer. `owner` is the session this is a member of (a wake after it is gone
  // does nothing); `expire` closes its socket, which cancels its pending operations.
  void Watch(std::weak_ptr<void> owner, std::function<void()> expire) {
    owner_ = std::move(owner);
    expire_ = std::move(expire);
    watching_ = true;
    Arm();
  }

 private:
  void Arm() {
    armed_ = std::min(deadline_, Clock::now() + tick_);
    timer_.expires_at(armed_);  // cancels a pending wait: it completes as aborted
    timer_.async_wait([this, weak = owner_](beast::error_code ec) {
      const std::shared_ptr<void> alive = weak.lock();
      if (alive == nullptr || ec == asio::error::operation_aborted) return;
      if (Clock::now() >= deadline_) return expire_();
      Arm();
    });
  }

  asio::steady_timer timer_;
  const std::chrono::milliseconds tick_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point armed_ = Clock::time_point::max();
  bool watching_ = false;
  std::weak_ptr<void> owner_;
  std::function<void()> expire_;
};

// One connection: read a request (bounded header size and time), reply, repeat while
// keep-alive. Pipelined requests wait in buffer_ and are answered in order. A refusing
// session answers its first request with `refusal` and closes.
class Session : public std::enable_shared_from_this<Session> {
 public:
  // `held`: the slot taken for it at accept (a connection, or a refusal with `refusal`).
  Session(tcp::socket socket, HttpTransport::Impl& front, HttpTransport::Impl::Held held,
          std::optional<HttpReply> refusal, std::string client, SourcePlace place,
          Clock::time_point accepted)
      : socket_(std::move(socket)),
        deadline_(socket_.get_executor(), front.options()),
        front_(front),
        held_(held),
        refusal_(std::move(refusal)),
        client_(std::move(client)),
        place_(std::move(place)),
        accepted_(accepted) {}
  ~Session() { front_.Release(held_); }

  tcp::socket::executor_type executor() { return socket_.get_executor(); }

  // Runs on the session's own context (the one its socket belongs to).
  void Start() {
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
  void Read() {
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

  void WaitReadable() {
    inline_requests_ = 0;
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->ReadAsync(); });
  }

  void ReadAsync() {
    socket_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              // Closed by the deadline, the front stopped, EOF or reset:
                              // nothing to answer.
                              if (ec) return;
                              self->buffer_.commit(n);
                              self->Parse();
                            });
  }

  // One recv into the buffer. False when there is nothing to parse yet: it then waits for
  // readability, or the connection ended (EOF, reset: nothing to answer).
  bool ReadSome() {
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

  // Feeds the buffer to the parser until a request is complete, an error is found, or it
  // needs bytes that have not come yet. The buffer holds at most one partial request and
  // one recv's worth (kReadChunk) beyond it: more is read only when the parser needs it.
  //
  // The parser applies its header limit to each call's input only, and consumes complete
  // lines as they come, so the limit on the whole header is counted here.
  void Parse() {
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

  void OnRequest(beast::error_code ec) {
    Send(AnswerRequest(front_, ec, request_, refusal_, requests_, client_, accepted_));
  }

  void Send(Answer answer) {
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

  // `inline_call`: straight from Send(), so a run of pipelined requests would recurse;
  // every kMaxInlineRequests the next one is posted instead, which ends the recursion.
  void AfterWrite(bool inline_call) {
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

  void Drain() {
    socket_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) self->Drain();
                            });
  }

  tcp::socket socket_;
  ConnectionDeadline deadline_;
  HttpTransport::Impl& front_;
  const HttpTransport::Impl::Held held_;
  std::optional<HttpReply> refusal_;
  const std::string client_;
  const SourcePlace place_;
  const Clock::time_point accepted_;
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
  // `client`: the peer's address key, until a client certificate names the caller.
  TlsSession(tcp::socket socket, std::shared_ptr<asio::ssl::context> context,
             HttpTransport::Impl& front, std::string client, SourcePlace place,
             Clock::time_point accepted)
      : context_(std::move(context)),
        client_(std::move(client)),
        place_(std::move(place)),
        accepted_(accepted),
        stream_(std::move(socket), *context_),
        deadline_(stream_.next_layer().get_executor(), front.options()),
        front_(front),
        buffer_(front.options().max_header_bytes + kMaxBodyBytes + kReadChunk) {}
  ~TlsSession() { front_.Release(held_); }

  tcp::socket::executor_type executor() { return stream_.next_layer().get_executor(); }

  void Start() {
    deadline_.ExpireAt(accepted_ +
                       std::chrono::milliseconds(std::min(front_.options().tls_handshake_timeout_ms,
                                                          front_.options().idle_timeout_ms)));
    deadline_.Watch(weak_from_this(), [this] {
      expired_ = true;
      beast::error_code ignored;
      stream_.next_layer().close(ignored);
    });
    stream_.async_handshake(
        asio::ssl::stream_base::server,
        [self = shared_from_this()](beast::error_code ec) { self->OnHandshake(ec); });
  }

 private:
  using Held = HttpTransport::Impl::Held;

  std::chrono::milliseconds Timeout() const {
    return refusal_ ? kRefuseTimeout : std::chrono::milliseconds(front_.options().idle_timeout_ms);
  }

  void OnHandshake(beast::error_code ec) {
    front_.Release(held_);  // the handshake's place
    held_ = Held::kNothing;
    if (ec) return front_.HandshakeFailed(ec, stream_.native_handle(), expired_);
    // With mutual TLS the caller is its certificate (stable across addresses).
    if (X509* peer = SSL_get0_peer_certificate(stream_.native_handle()); peer != nullptr) {
      client_ = CertificateClientKey(peer);
    }
    held_ = front_.Admit(refusal_);
    if (held_ == Held::kNothing) {
      beast::error_code ignored;
      stream_.next_layer().close(ignored);
      return;
    }
    Read();
  }

  void Read() {
    parser_.emplace(request_);
    parser_->header_limit(static_cast<uint32_t>(front_.options().max_header_bytes));
    parser_->body_limit(kMaxBodyBytes);
    if (requests_ == 0 && !refusal_) {
      deadline_.ExpireAt(accepted_ + Timeout());
    } else {
      deadline_.ExpireAfter(Timeout());
    }
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    // The peer closed, reset, timed out (the deadline closed the socket), or the front
    // stopped: nothing to answer.
    if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
        ec == asio::ssl::error::stream_truncated ||
        (ec && ec.category() != http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::buffer_overflow)) {
      return;
    }
    Answer answer = AnswerRequest(front_, ec, request_, refusal_, requests_, client_, accepted_);
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

  void AfterWrite() {
    if (!close_) return Read();
    // close_notify, then wait briefly for the peer's, so our close is not a reset that
    // could discard the reply on its side.
    deadline_.ExpireAfter(kTlsShutdownTimeout);
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) {});
  }

  std::shared_ptr<asio::ssl::context> context_;  // before stream_: it outlives it
  std::string client_;
  const SourcePlace place_;
  const Clock::time_point accepted_;
  beast::ssl_stream<tcp::socket> stream_;
  ConnectionDeadline deadline_;
  HttpTransport::Impl& front_;
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
  const Clock::time_point accepted = Clock::now();
  const std::optional<IpAddress> peer = PeerAddress(socket);
  const bool allowed = peer && std::any_of(allow_.begin(), allow_.end(),
                                           [&](const Cidr& cidr) { return cidr.Contains(*peer); });
  if (!allowed) {
    // Closed before anything is read, sent or computed for it: no handshake, no 403.
    metrics_.http().refused_allow.Increment();
    refused_.fetch_add(1, std::memory_order_relaxed);
    socket.close(ignored);
    return;
  }
  std::string client = AddressClientKey(*peer);
  if (!TakeSourcePlace(client)) {
    // This source holds max_connections_per_source already (handshakes included): it
    // cannot take the front's every slot, or every handshake place.
    metrics_.http().refused_source.Increment();
    refused_.fetch_add(1, std::memory_order_relaxed);
    socket.close(ignored);
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
      return;
    }
    auto session = std::make_shared<TlsSession>(std::move(socket), tls_->Current(), *this,
                                                std::move(client), std::move(place), accepted);
    const auto executor = session->executor();
    asio::post(executor, [session = std::move(session)] { session->Start(); });
    return;
  }
  std::optional<HttpReply> refusal;
  const Held held = Admit(refusal);
  if (held == Held::kNothing) {
    socket.close(ignored);  // too many refusals pending at once: just close
    return;
  }
  auto session = std::make_shared<Session>(std::move(socket), *this, held, std::move(refusal),
                                           std::move(client), std::move(place), accepted);
  const auto executor = session->executor();
  asio::post(executor, [session = std::move(session)] { session->Start(); });
}

HttpTransport::HttpTransport(const Config::Http& options, HttpRequestHandler& handler,
                             Metrics& metrics)
    : impl_(std::make_unique<Impl>(options, handler, metrics)) {}

HttpTransport::~HttpTransport() { Stop(); }

tl::expected<void, std::string> HttpTransport::Listen() { return impl_->Listen(); }

void HttpTransport::Stop() noexcept { impl_->Stop(); }

std::vector<uint16_t> HttpTransport::ports() const { return impl_->ports(); }
uint64_t HttpTransport::connections() const noexcept { return impl_->connections(); }
uint64_t HttpTransport::replies() const noexcept { return impl_->replies(); }
uint64_t HttpTransport::refused() const noexcept { return impl_->refused(); }

}  // namespace snowflake::daemon
