#include "daemon/metrics/metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>
#include <utility>

#include "protocol/vocabulary.h"

namespace snowflake::daemon {
namespace {

prometheus::Histogram::BucketBoundaries DaemonBuckets() {
  return {kDaemonLatencyBoundsSeconds.begin(), kDaemonLatencyBoundsSeconds.end()};
}

// A request's handling is microseconds to milliseconds.
prometheus::Histogram::BucketBoundaries HttpBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
          0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    1.0};
}

// Raises a counter to `target` (counters that mirror a total the daemon keeps).
void RaiseTo(prometheus::Counter& counter, double target) {
  const double now = counter.Value();
  if (target > now) counter.Increment(target - now);
}

template <typename Builder>
auto& Declare(Builder builder, const char* name, const char* help, prometheus::Registry& registry) {
  return builder.Name(name).Help(help).Register(registry);
}

}  // namespace

// Every family the daemon exports: the one place a metric is declared (docs/metrics.md
// documents each). Names and labels are a contract with dashboards and alerts: never
// rename one; add a new family instead.
struct Metrics::Families {
  explicit Families(prometheus::Registry& r)
      : ids(Declare(prometheus::BuildCounter(), "snowflake_ids_issued_total",
                    "IDs handed out, by service and path (ring: local clients, http: this front)",
                    r)),
        requests(Declare(prometheus::BuildCounter(), "snowflake_http_requests_total",
                         "HTTP replies sent, by status code", r)),
        refused(
            Declare(prometheus::BuildCounter(), "snowflake_http_connections_refused_total",
                    "Connections refused, by reason (limit: max_connections, allow: not in allow, "
                    "closed at accept; handshakes: tls_max_handshakes under way, closed at accept; "
                    "source: max_connections_per_source held, closed at accept)",
                    r)),
        tls_failures(Declare(prometheus::BuildCounter(),
                             "snowflake_http_tls_handshake_failures_total",
                             "TLS handshakes the front failed, by reason (client_certificate: "
                             "none or not signed by tls_client_ca_file; timeout: not done "
                             "within tls_handshake_timeout_ms; other)",
                             r)),
        tls_reloads(Declare(prometheus::BuildCounter(), "snowflake_http_tls_reloads_total",
                            "Changed TLS certificate/key files taken (ok) or refused, the old "
                            "pair kept (refused)",
                            r)),
        throttled(Declare(prometheus::BuildCounter(), "snowflake_http_throttled_total",
                          "Takes answered 429 throttled, by limit (share: http.max_share; "
                          "client: http.per_client_ids_per_s)",
                          r)),
        latency(Declare(prometheus::BuildHistogram(), "snowflake_http_request_duration_seconds",
                        "Time from a parsed request to its reply, by endpoint", r)),
        connections(Declare(prometheus::BuildGauge(), "snowflake_http_connections",
                            "Open HTTP connections", r)),
        certificate_expiry(Declare(prometheus::BuildGauge(),
                                   "snowflake_http_tls_certificate_expiry_timestamp_seconds",
                                   "Unix time at which the HTTP front's certificate in use "
                                   "expires (its notAfter); 0 without TLS",
                                   r)),
        client_ca_expiry(Declare(prometheus::BuildGauge(),
                                 "snowflake_http_tls_client_ca_expiry_timestamp_seconds",
                                 "Unix time at which the first of the HTTP front's client CA "
                                 "certificates in use expires (its notAfter); 0 without a "
                                 "client CA",
                                 r)),
        client_crl_next_update(Declare(
            prometheus::BuildGauge(), "snowflake_http_tls_client_crl_next_update_timestamp_seconds",
            "Unix time of the earliest nextUpdate of the HTTP front's client CRLs in "
            "use; past it every client certificate of that CA is refused; 0 without a "
            "CRL",
            r)),
        totals(Declare(prometheus::BuildCounter(), "snowflake_ring_ids_total",
                       "IDs the daemon published into the ring (refills) and drained from it", r)),
        pauses(Declare(prometheus::BuildCounter(), "snowflake_clock_pauses_total",
                       "Times generation paused because the clock stepped back", r)),
        paused(Declare(prometheus::BuildCounter(), "snowflake_paused_seconds_total",
                       "Time generation was paused, by reason code", r)),
        beyond_cause(Declare(prometheus::BuildGauge(), "snowflake_pause_beyond_cause_seconds",
                             "While paused for the clock: how long ago the clock passed the "
                             "millisecond the pause waits for (0 otherwise)",
                             r)),
        state(Declare(prometheus::BuildGauge(), "snowflake_state",
                      "1 for the daemon's current state, 0 for the others", r)),
        ring(Declare(prometheus::BuildGauge(), "snowflake_ring_ids",
                     "IDs in the ring (fill), its capacity and the fill target", r)),
        reservation(
            Declare(prometheus::BuildHistogram(), "snowflake_reservation_duration_seconds",
                    "Time one high-water reservation renewal took (state file, then register)", r)),
        register_calls(
            Declare(prometheus::BuildHistogram(), "snowflake_register_call_duration_seconds",
                    "Time one call to the machine register took (raise, renew, clean stop)", r)),
        renewals(Declare(prometheus::BuildCounter(), "snowflake_reservation_renewals_total",
                         "High-water reservation renewals, by result (ok, state_file_error, "
                         "register_error)",
                         r)),
        register_errors(Declare(prometheus::BuildCounter(), "snowflake_register_errors_total",
                                "Failed calls to the machine register, by call (raise, renew, "
                                "clean_stop) and error code",
                                r)),
        claim(Declare(prometheus::BuildGauge(), "snowflake_register_claim",
                      "1 for the machine-number claim's state (held, lost), 0 for the other", r)),
        retired(Declare(prometheus::BuildCounter(), "snowflake_segments_retired_total",
                        "Segments retired and replaced because a client damaged them", r)),
        heartbeats(Declare(prometheus::BuildCounter(), "snowflake_heartbeats_total",
                           "Heartbeats written into the segment", r)),
        reserved_through(Declare(prometheus::BuildGauge(),
                                 "snowflake_reserved_through_timestamp_seconds",
                                 "The confirmed high-water reservation: the newest Unix time "
                                 "both stores hold",
                                 r)) {}

  prometheus::Family<prometheus::Counter>& ids;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Counter>& refused;
  prometheus::Family<prometheus::Counter>& tls_failures;
  prometheus::Family<prometheus::Counter>& tls_reloads;
  prometheus::Family<prometheus::Counter>& throttled;
  prometheus::Family<prometheus::Histogram>& latency;
  prometheus::Family<prometheus::Gauge>& connections;
  prometheus::Family<prometheus::Gauge>& certificate_expiry;
  prometheus::Family<prometheus::Gauge>& client_ca_expiry;
  prometheus::Family<prometheus::Gauge>& client_crl_next_update;
  prometheus::Family<prometheus::Counter>& totals;
  prometheus::Family<prometheus::Counter>& pauses;
  prometheus::Family<prometheus::Counter>& paused;
  prometheus::Family<prometheus::Gauge>& beyond_cause;
  prometheus::Family<prometheus::Gauge>& state;
  prometheus::Family<prometheus::Gauge>& ring;
  prometheus::Family<prometheus::Histogram>& reservation;
  prometheus::Family<prometheus::Histogram>& register_calls;
  prometheus::Family<prometheus::Counter>& renewals;
  prometheus::Family<prometheus::Counter>& register_errors;
  prometheus::Family<prometheus::Gauge>& claim;
  prometheus::Family<prometheus::Counter>& retired;
  prometheus::Family<prometheus::Counter>& heartbeats;
  prometheus::Family<prometheus::Gauge>& reserved_through;
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      families_(std::make_unique<Families>(*registry_)),
      reservation_{.duration = families_->reservation.Add({}, DaemonBuckets()),
                   .renewed = families_->renewals.Add({{"result", "ok"}}),
                   .state_file_failed = families_->renewals.Add({{"result", "state_file_error"}}),
                   .register_failed = families_->renewals.Add({{"result", "register_error"}}),
                   .register_call = families_->register_calls.Add({}, DaemonBuckets()),
                   .claim_held = families_->claim.Add({{"state", "held"}}),
                   .claim_lost = families_->claim.Add({{"state", "lost"}})},
      http_{
          .connections = families_->connections.Add({}),
          .refused_limit = families_->refused.Add({{"reason", "limit"}}),
          .refused_allow = families_->refused.Add({{"reason", "allow"}}),
          .refused_handshakes = families_->refused.Add({{"reason", "handshakes"}}),
          .refused_source = families_->refused.Add({{"reason", "source"}}),
          .tls_failed_client_cert = families_->tls_failures.Add({{"reason", "client_certificate"}}),
          .tls_failed_timeout = families_->tls_failures.Add({{"reason", "timeout"}}),
          .tls_failed_other = families_->tls_failures.Add({{"reason", "other"}}),
          .tls_reloaded = families_->tls_reloads.Add({{"result", "ok"}}),
          .tls_reload_refused = families_->tls_reloads.Add({{"result", "refused"}}),
          .throttled_share = families_->throttled.Add({{"limit", "share"}}),
          .throttled_client = families_->throttled.Add({{"limit", "client"}}),
          .tls_certificate_expiry = families_->certificate_expiry.Add({}),
          .tls_client_ca_expiry = families_->client_ca_expiry.Add({}),
          .tls_client_crl_next_update = families_->client_crl_next_update.Add({}),
          .duration = {}} {
  for (size_t i = 0; i < kHttpEndpointLabels.size(); ++i) {
    http_.duration[i] =
        &families_->latency.Add({{"endpoint", std::string(kHttpEndpointLabels[i])}}, HttpBuckets());
  }
  // Present from the start, so a dashboard sees 0 rather than no series.
  families_->pauses.Add({});
  families_->retired.Add({});
  families_->heartbeats.Add({});
}

Metrics::~Metrics() = default;

prometheus::Counter& Metrics::RegisterError(std::string_view call, std::string_view code) {
  return families_->register_errors.Add({{"call", std::string(call)}, {"code", std::string(code)}});
}

prometheus::Counter& Metrics::HttpRequests(unsigned status) {
  // Family::Add takes a lock and builds a label map: it runs once per code; later replies
  // read the cached pointer (a racing first Add is harmless: Add returns the same counter
  // for the same labels).
  std::atomic<prometheus::Counter*>& slot =
      requests_by_code_[status < requests_by_code_.size() ? status : 0];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &families_->requests.Add({{"code", std::to_string(status)}});
    if (status < requests_by_code_.size()) slot.store(counter, std::memory_order_release);
  }
  return *counter;
}

prometheus::Counter& Metrics::IssuedByFront(std::string_view path, std::string_view service) {
  prometheus::Counter& counter =
      families_->ids.Add({{"service", std::string(service)}, {"path", std::string(path)}});
  std::lock_guard lock(front_issued_mutex_);
  for (auto [it, end] = front_issued_.equal_range(service); it != end; ++it) {
    if (it->second == &counter) return counter;
  }
  front_issued_.emplace(std::string(service), &counter);
  return counter;
}

void Metrics::Export(const DaemonFigures& figures) {
  Families& f = *families_;
  // Ring path = everything the daemon counted for a service minus what the fronts took
  // (their Clients count in the same slots). The daemon scans services about once a
  // second, so the ring figures lag by that much.
  for (const auto& [name, taken] : figures.services) {
    double via_fronts = 0;
    {
      std::lock_guard lock(front_issued_mutex_);
      for (auto [it, end] = front_issued_.equal_range(name); it != end; ++it) {
        via_fronts += it->second->Value();
      }
    }
    const double ring = static_cast<double>(taken) - via_fronts;
    if (ring > 0) RaiseTo(f.ids.Add({{"service", name}, {"path", "ring"}}), ring);
  }
  RaiseTo(f.totals.Add({{"kind", "published"}}), static_cast<double>(figures.published_total));
  RaiseTo(f.totals.Add({{"kind", "drained"}}), static_cast<double>(figures.drained_total));
  RaiseTo(f.pauses.Add({}), static_cast<double>(figures.clock_pauses));
  RaiseTo(f.retired.Add({}), static_cast<double>(figures.segments_retired));
  RaiseTo(f.heartbeats.Add({}), static_cast<double>(figures.heartbeats));
  for (const auto& [reason, seconds] : figures.paused_seconds) {
    RaiseTo(f.paused.Add({{"reason", reason}}), seconds);
  }
  f.beyond_cause.Add({}).Set(figures.pause_beyond_cause_seconds);
  for (const vocab::StateWords& state : vocab::kStates) {
    f.state.Add({{"state", std::string(state.code)}}).Set(figures.state == state.code ? 1 : 0);
  }
  f.ring.Add({{"kind", "fill"}}).Set(static_cast<double>(figures.ring_fill));
  f.ring.Add({{"kind", "capacity"}}).Set(static_cast<double>(figures.ring_capacity));
  f.ring.Add({{"kind", "target"}}).Set(static_cast<double>(figures.fill_target));
  f.reserved_through.Add({}).Set(static_cast<double>(figures.reserved_through_unix_ms) / 1000.0);
}

Metrics::Source::Source(Source&& other) noexcept
    : metrics_(std::exchange(other.metrics_, nullptr)), id_(other.id_) {}

Metrics::Source& Metrics::Source::operator=(Source&& other) noexcept {
  if (this != &other) {
    Reset();
    metrics_ = std::exchange(other.metrics_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

Metrics::Source::~Source() { Reset(); }

void Metrics::Source::Reset() noexcept {
  if (metrics_ != nullptr) metrics_->RemoveSource(id_);
  metrics_ = nullptr;
}

Metrics::Source Metrics::AddSource(std::function<void(Metrics&)> refresh) {
  std::lock_guard lock(scrape_mutex_);
  const uint64_t id = next_source_++;
  sources_.emplace(id, std::move(refresh));
  return Source(this, id);
}

void Metrics::RemoveSource(uint64_t id) noexcept {
  std::lock_guard lock(scrape_mutex_);  // waits for a scrape that may be running it
  sources_.erase(id);
}

std::string Metrics::Scrape() {
  std::lock_guard lock(scrape_mutex_);
  for (auto& [id, refresh] : sources_) refresh(*this);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace snowflake::daemon
