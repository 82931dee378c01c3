// Remote callers' share of this host's IDs (docs/http.md, "Remote callers' share"): the
// front may take at most `max_share` of the machine number's IDs per millisecond (2^sequence
// bits of the layout: 4,096 in the default),
// and each client (its address or IPv6 /64, or its certificate's identity with mutual TLS)
// at most `per_client_ids_per_s`. Two token buckets, pure logic over the time the caller passes:
// the HTTP handlers ask before they take from the ring, so a throttled request costs the
// ring nothing. Local takers never pass through here and never wait for it.
//
// A bucket admits a take when it holds the whole take, or, for a take larger than the
// bucket (a millisecond's IDs at a small share), when it is full; it then subtracts the take, so
// the large take leaves it in debt and is served at the average rate instead of never. Over any T
// ms the front therefore hands out at most max_share * ids_per_ms * T plus one bucket
// (kShareBurstMs of the share) plus one take. The bucket holds 100 ms of the share: a
// failover client taking batches back to back, far below the share over any 100 ms, is
// not refused for the milliseconds between them, and at a share of 1 the bucket never
// refuses what the machine number could give.
//
// An IdShare is safe for concurrent use by multiple threads: one mutex guards both
// buckets (the HTTP serving threads only; the ring path never takes it).

#ifndef SNOWFLAKE_DAEMON_HTTP_ID_SHARE_H_
#define SNOWFLAKE_DAEMON_HTTP_ID_SHARE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "snowflake/clock.h"

namespace snowflake::daemon {

// The front's bucket holds this many milliseconds of its share.
inline constexpr double kShareBurstMs = 100;
// Clients remembered at once; past it, idle ones (full buckets) are forgotten first, then
// the fullest eighth (never the whole table: a throttled client keeps its debt).
inline constexpr size_t kMaxTrackedClients = 10000;

class IdShare {
 public:
  // A reading of the daemon's steady clock (snowflake::Clock::SteadyNow()): Admit() is pure.
  using SteadyTime = Clock::SteadyTime;
  enum class Verdict { kAdmitted, kFrontShare, kClientRate };
  struct Admission {
    Verdict verdict = Verdict::kAdmitted;
    // Refused: whole seconds until the refusing bucket is full again (at least 1), for
    // Retry-After. 0 when admitted.
    uint32_t retry_after_s = 0;
  };

  // `max_share` in (0, 1]; `per_client_ids_per_s` 0 for no per-client limit;
  // `machine_ids_per_ms` the machine number's ceiling: IdLayout::ids_per_ms() of id.layout.
  IdShare(double max_share, uint64_t per_client_ids_per_s, double machine_ids_per_ms);

  // Whether `client` may take `count` IDs at `now`; if so they are counted. `now` must
  // not go backwards between calls (a steady clock).
  Admission Admit(std::string_view client, uint64_t count, SteadyTime now);

 private:
  struct Bucket {
    double tokens;
    SteadyTime at;
  };
  static void Refill(Bucket& bucket, double per_ns, double capacity, SteadyTime now);
  static bool Holds(const Bucket& bucket, double ids, double capacity);
  // A refusal by `bucket`, with the seconds until it is full again.
  static Admission Refused(Verdict why, const Bucket& bucket, double per_ns, double capacity);
  void ForgetIdleClients(SteadyTime now);

  // Constant after construction.
  const double share_per_ns_;
  const double share_capacity_;
  const double client_per_ns_;  // 0: no per-client limit
  const double client_capacity_;

  std::mutex mutex_;
  Bucket front_;                                        // guarded by mutex_
  using Clients = std::map<std::string, Bucket, std::less<>>;
  Clients clients_;  // guarded by mutex_
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_ID_SHARE_H_
