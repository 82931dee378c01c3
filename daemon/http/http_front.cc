#include "daemon/http/http_front.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
//
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "daemon/config/net_address.h"
#include "daemon/control/control_server.h"  // StatusReply: what the control socket would reply
#include "daemon/http/http_request.h"
#include "libclient/status/status_report.h"  // /v1/status has the keys of `status --json`
#include "snowflake/client.h"
#include "snowflake/vocabulary.h"

namespace snowflake::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A GET carries no body; a small one is read and ignored, a larger one is refused (413).
constexpr uint64_t kMaxBodyBytes = 4096;
// The front's Clients are in the daemon's own process: a heartbeat older than this means
// the fill loop is stuck, and callers should go elsewhere.
constexpr std::chrono::milliseconds kHeartbeatLimit{250};
// How long a take may wait on an empty ring while the daemon looks healthy.
constexpr std::chrono::milliseconds kTakeWait{250};
// Refused connections (over the limit, or from outside `allow`) get their reply after
// reading the request, so the peer sees it instead of a reset; they are bounded apart.
constexpr uint64_t kMaxRefusing = 64;
constexpr std::chrono::milliseconds kRefuseTimeout{1000};
// Bytes asked of one recv: a few requests' worth (a GET is well under 1 KB).
constexpr size_t kReadChunk = 4096;
// Pipelined requests answered in one call chain before the next is posted (bounds the
// recursion Send -> AfterWrite -> Read -> Parse -> OnRequest -> Send).
constexpr uint64_t kMaxInlineRequests = 16;

using Endpoint = HttpEndpoint;
constexpr const char* kEndpointNames[] = {"id", "ids", "healthz", "status", "metrics", "other"};

// What one request produced.
struct Reply {
  http::status status = http::status::ok;
  std::string content_type = "application/json";
  std::string body;
  bool retry_after = false;  // 429 and 503: "Retry-After: 1"
  bool close = false;
};

Reply ErrorReply(http::status status, std::string_view code, std::string_view message) {
  Reply reply;
  reply.status = status;
  reply.body = HttpErrorBody(code, message);
  reply.retry_after =
      status == http::status::too_many_requests || status == http::status::service_unavailable;
  return reply;
}

Reply ErrorReply(http::status status, vocab::ErrorCode code, std::string_view message) {
  return ErrorReply(status, vocab::ErrorName(code), message);
}

// The reply to a take (or an open of the ring) that failed: the vocabulary's code, the
// library's own for the condition.
Reply ErrorReply(const Error& error) {
  const HttpFailure failure = HttpFailureFor(error.code);
  return ErrorReply(static_cast<http::status>(failure.status), failure.code, error.message);
}

// The metrics of /metrics. Families are created once; their Add() is thread-safe.
struct Metrics {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& ids = prometheus::BuildCounter()
                                                     .Name("snowflake_ids_issued_total")
                                                     .Help(
                                                         "IDs handed out, by service and path "
                                                         "(ring: local clients, http: this front)")
                                                     .Register(*registry);
  prometheus::Family<prometheus::Counter>& requests = prometheus::BuildCounter()
                                                          .Name("snowflake_http_requests_total")
                                                          .Help("HTTP replies sent, by status code")
                                                          .Register(*registry);
  prometheus::Family<prometheus::Counter>& refused =
      prometheus::BuildCounter()
          .Name("snowflake_http_connections_refused_total")
          .Help("Connections refused, by reason (limit: max_connections, allow: not in allow)")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& latency =
      prometheus::BuildHistogram()
          .Name("snowflake_http_request_duration_seconds")
          .Help("Time from a parsed request to its reply, by endpoint")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& totals =
      prometheus::BuildCounter()
          .Name("snowflake_ring_ids_total")
          .Help("IDs the daemon published into the ring (refills) and drained from it")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& pauses =
      prometheus::BuildCounter()
          .Name("snowflake_clock_pauses_total")
          .Help("Times generation paused because the clock stepped back")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& state =
      prometheus::BuildGauge()
          .Name("snowflake_state")
          .Help("1 for the daemon's current state, 0 for the others")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& ring =
      prometheus::BuildGauge()
          .Name("snowflake_ring_ids")
          .Help("IDs in the ring (fill), its capacity and the fill target")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& reservation =
      prometheus::BuildHistogram()
          .Name("snowflake_reservation_duration_seconds")
          .Help("Time one high-water reservation renewal took (state file, then register)")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& register_calls =
      prometheus::BuildHistogram()
          .Name("snowflake_register_call_duration_seconds")
          .Help("Time one call to the machine register took (raise, renew, clean stop)")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& connections = prometheus::BuildGauge()
                                                           .Name("snowflake_http_connections")
                                                           .Help("Open HTTP connections")
                                                           .Register(*registry);

  prometheus::Gauge& open = connections.Add({});
  prometheus::Counter& refused_limit = refused.Add({{"reason", "limit"}});
  prometheus::Counter& refused_allow = refused.Add({{"reason", "allow"}});
  std::vector<prometheus::Histogram*> latency_by_endpoint;
  prometheus::Histogram& reservation_latency = reservation.Add({}, DaemonBuckets());
  prometheus::Histogram& register_latency = register_calls.Add({}, DaemonBuckets());

  static prometheus::Histogram::BucketBoundaries DaemonBuckets() {
    return {daemon::kLatencyBoundsSeconds.begin(), daemon::kLatencyBoundsSeconds.end()};
  }

  Metrics() {
    const prometheus::Histogram::BucketBoundaries buckets = {
        0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
        0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    1.0};
    for (const char* name : kEndpointNames) {
      latency_by_endpoint.push_back(&latency.Add({{"endpoint", name}}, buckets));
    }
  }

  // The counter of one status code. Family::Add takes a lock and builds a label map: it
  // runs once per code; later replies read the cached pointer (a racing first Add is
  // harmless: Add returns the same counter for the same labels).
  prometheus::Counter& Requests(unsigned code) {
    std::atomic<prometheus::Counter*>& slot = by_code[code < by_code.size() ? code : 0];
    prometheus::Counter* counter = slot.load(std::memory_order_acquire);
    if (counter == nullptr) {
      counter = &requests.Add({{"code", std::to_string(code)}});
      if (code < by_code.size()) slot.store(counter, std::memory_order_release);
    }
    return *counter;
  }
  std::array<std::atomic<prometheus::Counter*>, 600> by_code{};
};

// Adds to `histogram` what `source` observed since `exported` (then updates `exported`):
// the daemon's threads record into lock-free buckets, /metrics mirrors them.
void Mirror(const daemon::LatencyHistogram& source, daemon::LatencyHistogram::Snapshot& exported,
            prometheus::Histogram& histogram) {
  const daemon::LatencyHistogram::Snapshot now = source.Read();
  std::vector<double> increments(now.counts.size());
  bool any = false;
  for (size_t i = 0; i < now.counts.size(); ++i) {
    const uint64_t delta = now.counts[i] >= exported.counts[i] ? now.counts[i] - exported.counts[i] : 0;
    increments[i] = static_cast<double>(delta);
    any = any || delta > 0;
  }
  if (!any) return;
  const uint64_t sum_ns = now.sum_ns >= exported.sum_ns ? now.sum_ns - exported.sum_ns : 0;
  histogram.ObserveMultiple(increments, static_cast<double>(sum_ns) / 1e9);
  exported = now;
}

// Raises a counter to `target` (counters mirror totals the daemon keeps).
void RaiseTo(prometheus::Counter& counter, double target) {
  const double now = counter.Value();
  if (target > now) counter.Increment(target - now);
}

}  // namespace

class HttpFront::Impl {
 public:
  Impl(const Config& config, StatusBoard& board, const daemon::DaemonLatencies* latencies)
      : options_(config.http),
        runtime_dir_(config.daemon.runtime_dir),
        board_(board),
        latencies_(latencies) {
    for (const std::string& text : options_.allow) allow_.push_back(ParseCidr(text).value());
    // One io_context per thread, each run by that thread alone (concurrency hint 1): a
    // connection lives on one context, so its reads, its handler and its write run on one
    // thread with no hand-off, no strand and no scheduler lock shared between threads.
    const uint64_t threads = std::max<uint64_t>(1, options_.threads);
    for (uint64_t i = 0; i < threads; ++i) contexts_.push_back(std::make_unique<asio::io_context>(1));
  }

  ~Impl() { Stop(); }

  tl::expected<void, std::string> Listen() {
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

  // ---- used by sessions ----
  const Config::Http& options() const { return options_; }
  Metrics& metrics() { return metrics_; }
  void ConnectionClosed(bool refusing) {
    (refusing ? refusing_ : connections_).fetch_sub(1, std::memory_order_relaxed);
    if (!refusing) metrics_.open.Decrement();
  }

  Reply Handle(const http::request<http::string_body>& request, Endpoint& endpoint);

 private:
  void Accept(tcp::acceptor& acceptor) {
    // New connections go to the contexts in turn.
    asio::io_context& target = *contexts_[next_context_++ % contexts_.size()];
    acceptor.async_accept(
        target, [this, &acceptor](beast::error_code ec, tcp::socket socket) {
          if (ec == asio::error::operation_aborted) return;
          if (ec) {
            // Out of descriptors or memory: try again shortly rather than spin.
            auto timer = std::make_shared<asio::steady_timer>(*contexts_[0],
                                                              std::chrono::milliseconds(10));
            timer->async_wait([this, timer, &acceptor](beast::error_code) { Accept(acceptor); });
            return;
          }
          OnAccept(std::move(socket));
          Accept(acceptor);
        });
  }

  void OnAccept(tcp::socket socket);

  struct Service;
  tl::expected<Service*, Reply> ServiceFor(std::string_view service);
  Reply TakeIds(const HttpRoute& route);
  Reply Healthz();
  Reply Status();
  Reply MetricsText();

  const Config::Http options_;
  const std::filesystem::path runtime_dir_;
  StatusBoard& board_;
  const daemon::DaemonLatencies* const latencies_;  // may be null
  daemon::LatencyHistogram::Snapshot reservation_exported_;  // guarded by scrape_mutex_
  daemon::LatencyHistogram::Snapshot register_exported_;     // guarded by scrape_mutex_
  std::vector<Cidr> allow_;
  Metrics metrics_;
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> refusing_{0};

  struct Service {
    Client client;
    prometheus::Counter* issued;  // path="http"
  };
  std::mutex services_mutex_;
  std::map<std::string, std::unique_ptr<Service>, std::less<>> services_;  // guarded
  std::mutex scrape_mutex_;  // one /metrics refresh at a time

  std::vector<uint16_t> ports_;
  // Declared last: destroyed first, so the sessions they still hold see the rest alive.
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors_;
  uint64_t next_context_ = 0;  // only the first context's thread accepts
  std::vector<std::thread> threads_;
};

namespace {

// One connection: read a request (bounded header size and time), reply, repeat while
// keep-alive. Pipelined requests wait in buffer_ and are answered in order. A refusing
// session answers its first request with `refusal` and closes.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpFront::Impl& front, std::optional<Reply> refusal)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        front_(front),
        refusal_(std::move(refusal)),
        tick_(std::max<std::chrono::milliseconds>(
            std::chrono::milliseconds(10),
            std::min<std::chrono::milliseconds>(
                {std::chrono::milliseconds(front.options().idle_timeout_ms),
                 std::chrono::milliseconds(front.options().write_timeout_ms), kRefuseTimeout}) /
                4)) {}
  ~Session() { front_.ConnectionClosed(refusal_.has_value()); }

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
    Watch();
  }

 private:
  // Timeouts are a deadline checked by one timer per connection, not a timer armed per
  // operation: a request costs a store to deadline_, no timer syscall and no cancelled
  // wait to complete. The timer wakes at least every tick_ (a quarter of the shortest
  // timeout), so a deadline is enforced at most that late; a deadline earlier than the
  // armed wake re-arms it.
  void ExpireAfter(std::chrono::milliseconds timeout) {
    deadline_ = Clock::now() + timeout;
    if (watching_ && deadline_ < armed_) Arm();
  }

  void Watch() {
    watching_ = true;
    Arm();
  }

  void Arm() {
    armed_ = std::min(deadline_, Clock::now() + tick_);
    timer_.expires_at(armed_);  // cancels a pending wait: it completes as aborted
    timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      const std::shared_ptr<Session> self = weak.lock();
      if (self == nullptr || ec == asio::error::operation_aborted) return;
      if (Clock::now() >= self->deadline_) {
        // Timed out: closing cancels the pending read or write; the session then ends.
        beast::error_code ignored;
        self->socket_.close(ignored);
        return;
      }
      self->Arm();
    });
  }

  // Reading, parsing and answering are synchronous calls on the non-blocking socket as
  // long as they can proceed; the session waits in the reactor only for readability (or,
  // for a reply the peer does not take in at once, writability). A request costs one wait,
  // one recv, one send and one re-arm of the wait, with no completion posted through the
  // scheduler between them (each of which would cost another epoll_wait).
  void Read() {
    parser_.emplace();
    header_bytes_ = 0;
    parser_->header_limit(static_cast<uint32_t>(front_.options().max_header_bytes));
    parser_->body_limit(kMaxBodyBytes);
    ExpireAfter(refusal_ ? kRefuseTimeout
                         : std::chrono::milliseconds(front_.options().idle_timeout_ms));
    // A pipelined request is (partly) here already: parse it. Otherwise wait: a recv now
    // would find nothing (the next request has not come yet).
    if (buffer_.size() != 0) return Parse();
    WaitReadable();
  }

  void WaitReadable() {
    inline_requests_ = 0;
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](beast::error_code ec) {
                         if (ec) return;  // closed by the deadline, or the front stopped
                         if (self->ReadSome()) self->Parse();
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
    if (ec == http::error::header_limit) {
      return Send(ErrorReply(http::status::request_header_fields_too_large,
                             vocab::ErrorCode::kHeadersTooLarge,
                             "the request line and headers exceed " +
                                 std::to_string(front_.options().max_header_bytes) + " bytes"),
                  Endpoint::kOther, Clock::now(), true);
    }
    if (ec == http::error::body_limit) {
      return Send(ErrorReply(http::status::payload_too_large, vocab::ErrorCode::kBodyTooLarge,
                             "a request body may have at most " + std::to_string(kMaxBodyBytes) +
                                 " bytes (GET needs none)"),
                  Endpoint::kOther, Clock::now(), true);
    }
    if (ec) {
      return Send(ErrorReply(http::status::bad_request, vocab::ErrorCode::kBadRequest,
                             "malformed HTTP/1.1 request: " + ec.message()),
                  Endpoint::kOther, Clock::now(), true);
    }
    const auto start = Clock::now();
    const http::request<http::string_body>& request = parser_->get();
    if (refusal_) return Send(std::move(*refusal_), Endpoint::kOther, start, true);
    if (request.version() != 10 && request.version() != 11) {
      return Send(
          ErrorReply(http::status::http_version_not_supported, vocab::ErrorCode::kBadVersion,
                     "only HTTP/1.0 and HTTP/1.1 are served"),
          Endpoint::kOther, start, true);
    }
    ++requests_;
    Endpoint endpoint = Endpoint::kOther;
    Reply reply = front_.Handle(request, endpoint);
    const bool close = reply.close || !request.keep_alive() ||
                       requests_ >= front_.options().max_requests_per_connection;
    Send(std::move(reply), endpoint, start, close, request.version());
  }

  void Send(Reply reply, Endpoint endpoint, Clock::time_point start, bool close,
            unsigned version = 11) {
    response_.emplace(reply.status, version);
    response_->set(http::field::content_type, reply.content_type);
    if (reply.retry_after) response_->set(http::field::retry_after, "1");
    if (reply.status == http::status::method_not_allowed) {
      response_->set(http::field::allow, "GET");
    }
    response_->body() = std::move(reply.body);
    response_->keep_alive(!close);
    response_->prepare_payload();
    close_ = close;
    Metrics& metrics = front_.metrics();
    metrics.Requests(static_cast<unsigned>(reply.status)).Increment();
    metrics.latency_by_endpoint[static_cast<size_t>(endpoint)]->Observe(
        std::chrono::duration<double>(Clock::now() - start).count());
    ExpireAfter(std::chrono::milliseconds(front_.options().write_timeout_ms));
    serializer_.emplace(*response_);
    beast::error_code ec;
    http::write(socket_, *serializer_, ec);  // all of it, or as much as the socket takes
    if (!ec) return AfterWrite(/*inline_call=*/true);
    if (ec != asio::error::would_block && ec != asio::error::try_again) return;  // peer gone
    // The peer's window is full: the rest when the socket is writable.
    http::async_write(socket_, *serializer_,
                      [self = shared_from_this()](beast::error_code error, size_t) {
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
  asio::steady_timer timer_;
  HttpFront::Impl& front_;
  std::optional<Reply> refusal_;
  const std::chrono::milliseconds tick_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point armed_ = Clock::time_point::max();
  bool watching_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  std::optional<http::response_serializer<http::string_body>> serializer_;
  std::array<char, 512> drain_{};
  uint64_t inline_requests_ = 0;  // answered in one call chain since the last wait
  uint64_t header_bytes_ = 0;     // of the request being parsed, consumed by the parser
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

void HttpFront::Impl::OnAccept(tcp::socket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  std::optional<Reply> refusal;
  const std::optional<IpAddress> peer = PeerAddress(socket);
  const bool allowed = peer && std::any_of(allow_.begin(), allow_.end(),
                                           [&](const Cidr& cidr) { return cidr.Contains(*peer); });
  if (!allowed) {
    metrics_.refused_allow.Increment();
    refusal = ErrorReply(http::status::forbidden, vocab::ErrorCode::kForbidden,
                         "this client's address is not in [http] allow");
  } else if (connections_.fetch_add(1, std::memory_order_relaxed) >= options_.max_connections) {
    connections_.fetch_sub(1, std::memory_order_relaxed);
    metrics_.refused_limit.Increment();
    refusal = ErrorReply(http::status::too_many_requests, vocab::ErrorCode::kTooManyConnections,
                         "this front already serves " + std::to_string(options_.max_connections) +
                             " connections ([http] max_connections); retry shortly or use "
                             "another daemon");
  } else {
    metrics_.open.Increment();
  }
  if (refusal && refusing_.fetch_add(1, std::memory_order_relaxed) >= kMaxRefusing) {
    // Too many refusals pending at once: just close.
    refusing_.fetch_sub(1, std::memory_order_relaxed);
    socket.close(ignored);
    return;
  }
  // Started on the context its socket belongs to, whose one thread runs all its handlers.
  auto session = std::make_shared<Session>(std::move(socket), *this, std::move(refusal));
  const auto executor = session->executor();
  asio::post(executor, [session = std::move(session)] { session->Start(); });
}

Reply HttpFront::Impl::Handle(const http::request<http::string_body>& request, Endpoint& endpoint) {
  try {
    const auto accept = request[http::field::accept];
    auto route = RouteHttpRequest(
        std::string_view(request.method_string().data(), request.method_string().size()),
        std::string_view(request.target().data(), request.target().size()),
        std::string_view(accept.data(), accept.size()));
    if (!route) {
      endpoint = route.error().endpoint;
      return ErrorReply(static_cast<http::status>(route.error().status), route.error().code,
                        route.error().message);
    }
    endpoint = route->endpoint;
    switch (route->endpoint) {
      case Endpoint::kId:
      case Endpoint::kIds:
        return TakeIds(*route);
      case Endpoint::kHealthz:
        return Healthz();
      case Endpoint::kStatus:
        return Status();
      case Endpoint::kMetrics:
        return MetricsText();
      case Endpoint::kOther:
        break;
    }
    return ErrorReply(http::status::not_found, vocab::ErrorCode::kNotFound, "no such endpoint");
  } catch (const std::exception& e) {
    return ErrorReply(http::status::internal_server_error, vocab::ErrorCode::kSystemError,
                      e.what());
  }
}

tl::expected<HttpFront::Impl::Service*, Reply> HttpFront::Impl::ServiceFor(
    std::string_view service) {
  std::lock_guard lock(services_mutex_);
  if (auto found = services_.find(service); found != services_.end()) {
    return found->second.get();
  }
  if (auto valid = ValidateServiceName(service); !valid) {
    return tl::unexpected(ErrorReply(http::status::bad_request,
                                     vocab::ErrorCode::kInvalidServiceName, valid.error().message));
  }
  if (services_.size() >= options_.max_services) {
    return tl::unexpected(
        ErrorReply(http::status::too_many_requests, vocab::ErrorCode::kTooManyServices,
                   "this front already serves " + std::to_string(options_.max_services) +
                       " service names ([http] max_services)"));
  }
  ClientOptions options;
  options.runtime_dir = runtime_dir_;
  options.wait_timeout = kTakeWait;
  options.max_heartbeat_age = kHeartbeatLimit;
  // This host's IDs only, whatever $SNOWFLAKE_REMOTES the daemon inherited (set for its
  // clients): a front that forwarded would hand out another daemon's IDs as this one's,
  // and fronts naming each other would forward in a loop while both are down.
  options.remotes.clear();
  options.remotes_from_environment = false;
  auto client = Client::Open(service, options);
  if (!client) {
    return tl::unexpected(ErrorReply(client.error()));
  }
  auto entry = std::make_unique<Service>(
      Service{std::move(*client),
              &metrics_.ids.Add({{"service", std::string(service)}, {"path", "http"}})});
  Service* raw = entry.get();
  services_.emplace(std::string(service), std::move(entry));
  return raw;
}

Reply HttpFront::Impl::TakeIds(const HttpRoute& route) {
  const std::string_view service = route.service;
  const uint64_t count = route.count;
  const bool batch = route.endpoint == Endpoint::kIds;
  auto found = ServiceFor(service);
  if (!found) return std::move(found.error());
  Client& client = (*found)->client;

  // One ID (the common request) needs no allocation.
  uint64_t one_id = 0;
  std::vector<uint64_t> many;
  if (count > 1) many.resize(count);
  const std::span<uint64_t> ids = count > 1 ? std::span<uint64_t>(many) : std::span(&one_id, 1);
  size_t filled = 0;
  while (filled < count) {
    auto taken = client.NextBatch(ids.subspan(filled));
    if (!taken) {
      // IDs already taken for this request are dropped: wasted, never reissued.
      return ErrorReply(taken.error());
    }
    filled += *taken;
  }
  (*found)->issued->Increment(static_cast<double>(count));  // atomic: no lock

  Reply reply;
  const bool plain = route.plain;
  reply.body.reserve(count * 22 + 16);
  if (plain) {
    reply.content_type = "text/plain; charset=utf-8";
    char digits[24];
    for (const uint64_t id : ids) {
      const auto end = std::to_chars(digits, digits + sizeof digits, id).ptr;
      reply.body.append(digits, end);
      reply.body += '\n';
    }
    return reply;
  }
  if (!batch) {
    reply.body = "{\"id\":\"" + std::to_string(ids[0]) + "\"}";
    return reply;
  }
  reply.body = "{\"ids\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) reply.body += ',';
    reply.body += '"';
    reply.body += std::to_string(ids[i]);
    reply.body += '"';
  }
  reply.body += "]}";
  return reply;
}

Reply HttpFront::Impl::Healthz() {
  ClientOptions options;
  options.runtime_dir = runtime_dir_;
  options.max_heartbeat_age = kHeartbeatLimit;
  auto status = Client::Inspect(options);
  Reply reply;
  if (!status) {
    reply.status = http::status::service_unavailable;
    reply.retry_after = true;
    reply.body = json{{"state", vocab::kNoDaemonHealth.code},
                      {"reason_code", ClientErrorName(status.error().code)},
                      {"reason", status.error().message}}
                     .dump();
    return reply;
  }
  const bool serving = status->health == vocab::HealthCode(shm::ProducerHealth::kServing);
  reply.status = serving ? http::status::ok : http::status::service_unavailable;
  reply.retry_after = !serving;
  reply.body = json{{"state", status->health},
                    {"reason_code", status->reason},
                    {"reason", status->reason_text},
                    {"machine", status->machine}}
                   .dump();
  return reply;
}

// The object `snowflakectl status --json` prints, key for key (docs/cli.md): the segment's
// view as one client sees it, plus the daemon's own status (the control socket's reply) under
// "daemon". Built from the same two sources the CLI reads.
Reply HttpFront::Impl::Status() {
  ClientOptions options;
  options.runtime_dir = runtime_dir_;
  options.max_heartbeat_age = kHeartbeatLimit;
  auto segment = Client::Inspect(options);
  if (!segment) {
    // 503 whatever the cause, as /healthz: no status to give; the code says why.
    return ErrorReply(http::status::service_unavailable, ClientErrorName(segment.error().code),
                      segment.error().message);
  }
  // The same StatusReport the CLI builds, with the board standing in for the control
  // socket's reply (it is what the socket would send), so the keys cannot drift apart.
  status::StatusReport report;
  report.segment = *segment;
  report.daemon_reply = StatusReply(board_.Snapshot());
  report.now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  report.runtime_dir = runtime_dir_.string();
  const json out = status::StatusToJson(report);
  Reply reply;
  reply.body = out.dump();
  return reply;
}

Reply HttpFront::Impl::MetricsText() {
  std::lock_guard lock(scrape_mutex_);
  DaemonStatus status = board_.Snapshot();
  // The ring's counters live in the segment header and are exact now; the board's copy is
  // as old as its last refresh.
  ClientOptions options;
  options.runtime_dir = runtime_dir_;
  options.max_heartbeat_age = kHeartbeatLimit;
  if (auto segment = Client::Inspect(options)) {
    status.published_total = segment->published_total;
    status.drained_total = segment->drained_total;
    status.clock_pauses = segment->clock_pauses;
  }
  // Ring path = everything the daemon counted for a service minus what this front took
  // (the front's own Clients count in the same slots). The daemon scans services about
  // once a second, so the ring figures lag by that much.
  std::map<std::string, double> http_by_service;
  {
    std::lock_guard services_lock(services_mutex_);
    for (const auto& [name, service] : services_) http_by_service[name] = service->issued->Value();
  }
  for (const auto& [name, taken] : status.services) {
    const double via_http = http_by_service.count(name) ? http_by_service[name] : 0.0;
    const double ring = static_cast<double>(taken) - via_http;
    if (ring > 0) RaiseTo(metrics_.ids.Add({{"service", name}, {"path", "ring"}}), ring);
  }
  RaiseTo(metrics_.totals.Add({{"kind", "published"}}),
          static_cast<double>(status.published_total));
  RaiseTo(metrics_.totals.Add({{"kind", "drained"}}), static_cast<double>(status.drained_total));
  RaiseTo(metrics_.pauses.Add({}), static_cast<double>(status.clock_pauses));
  for (const vocab::StateWords& state : vocab::kStates) {
    const std::string code(state.code);
    metrics_.state.Add({{"state", code}}).Set(status.state == code ? 1 : 0);
  }
  metrics_.ring.Add({{"kind", "fill"}}).Set(static_cast<double>(status.ring_fill));
  metrics_.ring.Add({{"kind", "capacity"}}).Set(static_cast<double>(status.ring_capacity));
  metrics_.ring.Add({{"kind", "target"}}).Set(static_cast<double>(status.fill_target));
  if (latencies_ != nullptr) {
    Mirror(latencies_->reservation, reservation_exported_, metrics_.reservation_latency);
    Mirror(latencies_->register_call, register_exported_, metrics_.register_latency);
  }

  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, metrics_.registry->Collect());
  Reply reply;
  reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
  reply.body = out.str();
  return reply;
}

HttpFront::HttpFront(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

HttpFront::~HttpFront() { Stop(); }

void HttpFront::Stop() noexcept {
  if (impl_) impl_->Stop();
}

std::vector<uint16_t> HttpFront::ports() const { return impl_->ports(); }

tl::expected<std::unique_ptr<HttpFront>, std::string> HttpFront::Start(
    const Config& config, StatusBoard& board, const daemon::DaemonLatencies* latencies) noexcept {
  if (config.http.listen.empty()) return std::unique_ptr<HttpFront>();
  try {
    auto impl = std::make_unique<Impl>(config, board, latencies);
    if (auto listening = impl->Listen(); !listening) return tl::unexpected(listening.error());
    std::string where;
    for (size_t i = 0; i < config.http.listen.size(); ++i) {
      where += (i ? ", " : "") + config.http.listen[i];
    }
    spdlog::info("http front listening on {} ({} threads, at most {} connections)", where,
                 config.http.threads, config.http.max_connections);
    return std::unique_ptr<HttpFront>(new HttpFront(std::move(impl)));
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("http front: ") + e.what());
  }
}

}  // namespace snowflake::daemon
