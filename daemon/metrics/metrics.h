// The daemon's metrics (docs/metrics.md): one Prometheus registry, owned by the Daemon and
// created whatever fronts run, and every metric family the daemon exports, declared once
// in metrics.cc. Parts report into it in one of two ways:
//
//   - where it happens, on a thread that is neither the fill loop nor a client's take
//     (the reservation service's renewals, the HTTP front's requests): through the handles
//     below (`metrics.reservation().renewed.Increment()`);
//   - at scrape time, from what the daemon already keeps (the status board, the segment's
//     header counters, the heartbeat's beats): a Source sets DaemonFigures, which Export()
//     turns into the families. The fill loop and the take path therefore pay nothing.
//
// Scrape() runs every Source and serialises the registry (text format 0.0.4); the HTTP
// front's /metrics serves it, and a test may read it without any front.
//
// A Metrics is safe for concurrent use by multiple threads without external
// synchronization: prometheus-cpp's counters and gauges are atomics, its histograms and
// families take their own locks, and Scrape() runs one at a time.

#ifndef SNOWFLAKE_DAEMON_METRICS_METRICS_H_
#define SNOWFLAKE_DAEMON_METRICS_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace snowflake::daemon {

// The buckets of the daemon's own durations, from 100 µs (a state-file fsync on a fast
// disk) to 10 s (an etcd call with quorum lost); +Inf follows.
inline constexpr std::array<double, 16> kDaemonLatencyBoundsSeconds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};

// The labels of snowflake_http_request_duration_seconds{endpoint}, in HttpEndpoint order.
inline constexpr std::array<std::string_view, 8> kHttpEndpointLabels = {
    "id", "ids", "healthz", "status", "metrics", "decode", "bounds", "other"};

// What the daemon keeps elsewhere and the metrics read at scrape time (a Source fills it).
struct DaemonFigures {
  std::string state;  // vocab::StateCode(): "serving", "paused", ...
  uint64_t ring_fill = 0;
  uint64_t ring_capacity = 0;
  uint64_t fill_target = 0;
  uint64_t published_total = 0;  // the segment header's counters
  uint64_t drained_total = 0;
  uint64_t clock_pauses = 0;
  uint64_t segments_retired = 0;
  uint64_t heartbeats = 0;
  int64_t reserved_through_unix_ms = 0;
  // Seconds spent paused so far, per reason code (StatusBoard::PausedSeconds()).
  std::map<std::string, double> paused_seconds;
  // While paused for the clock: how long ago the clock passed the millisecond the pause
  // says it waits for (0 otherwise, and while the clock has not passed it yet).
  double pause_beyond_cause_seconds = 0;
  // IDs taken per service name, every path (local clients and fronts) together.
  std::map<std::string, uint64_t> services;
};

class Metrics {
 public:
  // Reported by the reservation service on its own thread.
  struct Reservation {
    prometheus::Histogram& duration;         // snowflake_reservation_duration_seconds
    prometheus::Counter& renewed;            // snowflake_reservation_renewals_total{result="ok"}
    prometheus::Counter& state_file_failed;  // {result="state_file_error"}
    prometheus::Counter& register_failed;    // {result="register_error"}
    prometheus::Histogram& register_call;    // snowflake_register_call_duration_seconds
    prometheus::Gauge& claim_held;           // snowflake_register_claim{state="held"}
    prometheus::Gauge& claim_lost;           // snowflake_register_claim{state="lost"}
  };

  // Reported by the HTTP front on its serving threads.
  struct Http {
    prometheus::Gauge& connections;      // snowflake_http_connections
    prometheus::Counter& refused_limit;  // snowflake_http_connections_refused_total{reason="limit"}
    prometheus::Counter& refused_allow;  // {reason="allow"}
    prometheus::Counter& refused_handshakes;  // {reason="handshakes"}: tls_max_handshakes
    prometheus::Counter& refused_source;      // {reason="source"}: max_connections_per_source
    // snowflake_http_tls_handshake_failures_total{reason}: a caller without a certificate
    // the client CA signed ("client_certificate"), a handshake not done within
    // tls_handshake_timeout_ms ("timeout"), or any other failed handshake ("other": plain
    // HTTP to a TLS port, an old protocol version, no common cipher, a reset).
    prometheus::Counter& tls_failed_client_cert;
    prometheus::Counter& tls_failed_timeout;
    prometheus::Counter& tls_failed_other;
    // snowflake_http_tls_reloads_total{result}: a changed certificate or key taken ("ok")
    // or refused, the old pair kept ("refused").
    prometheus::Counter& tls_reloaded;
    prometheus::Counter& tls_reload_refused;
    // snowflake_http_throttled_total{limit}: takes answered 429 `throttled`, past the
    // front's share of the machine number ("share") or one client's rate ("client").
    prometheus::Counter& throttled_share;
    prometheus::Counter& throttled_client;
    // snowflake_http_tls_certificate_expiry_timestamp_seconds: the notAfter (Unix seconds)
    // of the certificate new connections are served; 0 without TLS.
    prometheus::Gauge& tls_certificate_expiry;
    // snowflake_http_tls_client_ca_expiry_timestamp_seconds: the earliest notAfter of the
    // client CA certificates new connections are verified against; 0 without a client CA.
    prometheus::Gauge& tls_client_ca_expiry;
    // snowflake_http_tls_client_crl_next_update_timestamp_seconds: the earliest nextUpdate
    // of the client CRLs new connections are checked against; 0 without a CRL.
    prometheus::Gauge& tls_client_crl_next_update;
    // snowflake_http_request_duration_seconds{endpoint}, by kHttpEndpointLabels' index.
    std::array<prometheus::Histogram*, kHttpEndpointLabels.size()> duration{};
  };

  // Runs a refresh at every Scrape() until destroyed. Destroying it waits for a scrape in
  // progress, so the refresh never runs on what its owner has destroyed.
  class Source {
   public:
    Source() = default;
    Source(Source&& other) noexcept;
    Source& operator=(Source&& other) noexcept;
    ~Source();

   private:
    friend class Metrics;
    Source(Metrics* metrics, uint64_t id) : metrics_(metrics), id_(id) {}
    void Reset() noexcept;
    Metrics* metrics_ = nullptr;
    uint64_t id_ = 0;
  };

  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  Reservation& reservation() noexcept { return reservation_; }
  Http& http() noexcept { return http_; }

  // snowflake_register_errors_total{call, code}: `call` is "raise", "renew" or
  // "clean_stop"; `code` the register's error (RegisterErrorName-like, lower_snake_case).
  // Takes the family's lock; meant for errors, which are rare.
  prometheus::Counter& RegisterError(std::string_view call, std::string_view code);

  // snowflake_http_requests_total{code}. The first reply with a code takes the family's
  // lock; later ones read a cached pointer (one atomic load).
  prometheus::Counter& HttpRequests(unsigned status);

  // snowflake_ids_issued_total{service, path}: IDs a front (`path`, e.g. "http") handed
  // out for `service`. The front keeps the reference and increments it per request; the
  // ring path (path="ring") is what the daemon counted for the service minus every
  // front's counter. Takes a lock; call once per service.
  prometheus::Counter& IssuedByFront(std::string_view path, std::string_view service);

  // Sets the families read at scrape time. Called by a Source during Scrape().
  void Export(const DaemonFigures& figures);

  // `refresh` runs at each Scrape(), before the registry is read (it calls Export()).
  [[nodiscard]] Source AddSource(std::function<void(Metrics&)> refresh);

  // Runs every Source, then the Prometheus text exposition (format 0.0.4) of every
  // family. One scrape at a time.
  std::string Scrape();

 private:
  struct Families;
  void RemoveSource(uint64_t id) noexcept;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
  Reservation reservation_;
  Http http_;
  std::array<std::atomic<prometheus::Counter*>, 600> requests_by_code_{};

  std::mutex front_issued_mutex_;
  // Every front's counter per service: the ring's share is the rest.
  std::multimap<std::string, prometheus::Counter*, std::less<>> front_issued_;  // guarded

  std::mutex scrape_mutex_;  // one Scrape() at a time; guards sources_
  std::map<uint64_t, std::function<void(Metrics&)>> sources_;
  uint64_t next_source_ = 1;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_METRICS_METRICS_H_
