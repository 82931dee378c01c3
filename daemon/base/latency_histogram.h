// A fixed-bucket latency histogram that a daemon thread fills with one relaxed atomic add
// per observation and the HTTP front reads for /metrics (docs/http.md): the reservation
// service records each renewal and each register call here. Buckets are the upper bounds in
// kLatencyBoundsSeconds (Prometheus "le"), plus +Inf.
//
// Thread-safe: Observe() from any thread, Snapshot() from any other. A snapshot is read
// field by field, so it may miss an observation in flight (the next one includes it).

#ifndef SNOWFLAKE_DAEMON_LATENCY_HISTOGRAM_H_
#define SNOWFLAKE_DAEMON_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace snowflake::daemon {

// From 100 µs (a state-file fsync on a fast disk) to 10 s (an etcd call with quorum lost).
inline constexpr std::array<double, 16> kLatencyBoundsSeconds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};

class LatencyHistogram {
 public:
  struct Snapshot {
    // counts[i]: observations in bucket i alone (not cumulative); the last is +Inf.
    std::array<uint64_t, kLatencyBoundsSeconds.size() + 1> counts{};
    uint64_t sum_ns = 0;
  };

  void Observe(std::chrono::nanoseconds elapsed) noexcept {
    const double seconds = std::chrono::duration<double>(elapsed).count();
    size_t bucket = 0;
    while (bucket < kLatencyBoundsSeconds.size() && seconds > kLatencyBoundsSeconds[bucket]) {
      ++bucket;
    }
    counts_[bucket].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())),
                      std::memory_order_relaxed);
  }

  Snapshot Read() const noexcept {
    Snapshot out;
    for (size_t i = 0; i < counts_.size(); ++i) {
      out.counts[i] = counts_[i].load(std::memory_order_relaxed);
    }
    out.sum_ns = sum_ns_.load(std::memory_order_relaxed);
    return out;
  }

 private:
  std::array<std::atomic<uint64_t>, kLatencyBoundsSeconds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

// The daemon's latency histograms, owned by main and filled by the reservation service.
struct DaemonLatencies {
  LatencyHistogram reservation;  // one renewal: state file, then register
  LatencyHistogram register_call;  // one call to the register (raise, renew, clean stop)
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_LATENCY_HISTOGRAM_H_
