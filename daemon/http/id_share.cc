#include "daemon/http/id_share.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace snowflake::daemon {

IdShare::IdShare(double max_share, uint64_t per_client_ids_per_s)
    : share_per_ns_(max_share * kMachineIdsPerMs / 1e6),
      share_capacity_(std::max(1.0, max_share * kMachineIdsPerMs * kShareBurstMs)),
      client_per_ns_(static_cast<double>(per_client_ids_per_s) / 1e9),
      // One second of a client's rate: a client that paused may catch up by that much.
      client_capacity_(std::max(1.0, static_cast<double>(per_client_ids_per_s))),
      front_{share_capacity_, Clock::time_point::min()} {}

void IdShare::Refill(Bucket& bucket, double per_ns, double capacity, Clock::time_point now) {
  if (bucket.at == Clock::time_point::min()) {
    bucket.tokens = capacity;
  } else if (now > bucket.at) {
    const double elapsed_ns = static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - bucket.at).count());
    bucket.tokens = std::min(capacity, bucket.tokens + elapsed_ns * per_ns);
  }
  bucket.at = std::max(bucket.at, now);
}

bool IdShare::Holds(const Bucket& bucket, double ids, double capacity) {
  // A take larger than the whole bucket waits for a full one and leaves it in debt: it is
  // served, at the average rate, instead of never.
  return bucket.tokens >= std::min(ids, capacity);
}

void IdShare::ForgetIdleClients(Clock::time_point now) {
  // A full bucket is the state a new client starts in: forgetting it changes nothing.
  for (auto it = clients_.begin(); it != clients_.end();) {
    Refill(it->second, client_per_ns_, client_capacity_, now);
    it = it->second.tokens >= client_capacity_ ? clients_.erase(it) : std::next(it);
  }
  // Every one of them active: forget them all rather than grow without bound (they
  // start again with a full bucket; the front's share still holds).
  if (clients_.size() >= kMaxTrackedClients) clients_.clear();
}

IdShare::Verdict IdShare::Admit(std::string_view client, uint64_t count, Clock::time_point now) {
  const double ids = static_cast<double>(count);
  std::lock_guard lock(mutex_);
  // A share of 1 is the whole machine number: the ring itself is the limit, and a bucket
  // aligned differently from the milliseconds would only refuse takes the ring can give.
  const bool front_limited = share_per_ns_ < kMachineIdsPerMs / 1e6;
  if (front_limited) {
    Refill(front_, share_per_ns_, share_capacity_, now);
    if (!Holds(front_, ids, share_capacity_)) return Verdict::kFrontShare;
  }
  if (client_per_ns_ > 0) {
    auto found = clients_.find(client);
    if (found == clients_.end()) {
      if (clients_.size() >= kMaxTrackedClients) ForgetIdleClients(now);
      found = clients_.emplace(std::string(client), Bucket{0, Clock::time_point::min()}).first;
    }
    Bucket& bucket = found->second;
    Refill(bucket, client_per_ns_, client_capacity_, now);
    if (!Holds(bucket, ids, client_capacity_)) return Verdict::kClientRate;
    bucket.tokens -= ids;
  }
  if (front_limited) front_.tokens -= ids;
  return Verdict::kAdmitted;
}

uint64_t IdShare::RetryAfterMs(std::string_view client, Verdict why, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  double deficit = 0;
  double per_ns = share_per_ns_;
  if (why == Verdict::kFrontShare) {
    Refill(front_, share_per_ns_, share_capacity_, now);
    deficit = share_capacity_ - front_.tokens;
  } else if (why == Verdict::kClientRate) {
    per_ns = client_per_ns_;
    if (auto found = clients_.find(client); found != clients_.end()) {
      Refill(found->second, client_per_ns_, client_capacity_, now);
      deficit = client_capacity_ - found->second.tokens;
    }
  }
  if (per_ns <= 0 || deficit <= 0) return 1;
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(deficit / per_ns / 1e6)));
}

}  // namespace snowflake::daemon
