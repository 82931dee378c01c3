#include "daemon/http/id_share.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>
#include <vector>

namespace snowflake::daemon {

IdShare::IdShare(double max_share, uint64_t per_client_ids_per_s, double machine_ids_per_ms)
    : share_per_ns_(max_share * machine_ids_per_ms / 1e6),
      share_capacity_(std::max(1.0, max_share * machine_ids_per_ms * kShareBurstMs)),
      client_per_ns_(static_cast<double>(per_client_ids_per_s) / 1e9),
      // One second of a client's rate: a client that paused may catch up by that much.
      client_capacity_(std::max(1.0, static_cast<double>(per_client_ids_per_s))),
      front_{share_capacity_, SteadyTime::min()} {}

void IdShare::Refill(Bucket& bucket, double per_ns, double capacity, SteadyTime now) {
  if (bucket.at == SteadyTime::min()) {
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

void IdShare::ForgetIdleClients(SteadyTime now) {
  // A full bucket is the state a new client starts in: forgetting it changes nothing.
  for (auto it = clients_.begin(); it != clients_.end();) {
    Refill(it->second, client_per_ns_, client_capacity_, now);
    it = it->second.tokens >= client_capacity_ ? clients_.erase(it) : std::next(it);
  }
  if (clients_.size() < kMaxTrackedClients) return;
  // Every one of them active. A forgotten client comes back with a full bucket, gaining
  // what its bucket lacks: forget the fullest (they gain least), an eighth at once so
  // the scan is paid once per eighth of the table. A throttled client, deep in debt, is
  // the last to go; clearing the whole table would hand every one of them a full bucket.
  std::vector<std::pair<double, Clients::iterator>> by_tokens;
  by_tokens.reserve(clients_.size());
  for (auto it = clients_.begin(); it != clients_.end(); ++it) {
    by_tokens.emplace_back(it->second.tokens, it);
  }
  const size_t forget = std::max<size_t>(1, by_tokens.size() / 8);
  std::nth_element(by_tokens.begin(), by_tokens.begin() + static_cast<std::ptrdiff_t>(forget - 1),
                   by_tokens.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < forget; ++i) clients_.erase(by_tokens[i].second);
}

IdShare::Admission IdShare::Refused(Verdict why, const Bucket& bucket, double per_ns,
                                    double capacity) {
  const double deficit_ns = (capacity - bucket.tokens) / per_ns;
  return Admission{why, static_cast<uint32_t>(std::max(1.0, std::ceil(deficit_ns / 1e9)))};
}

IdShare::Admission IdShare::Admit(std::string_view client, uint64_t count, SteadyTime now) {
  const double ids = static_cast<double>(count);
  std::lock_guard lock(mutex_);
  Refill(front_, share_per_ns_, share_capacity_, now);
  if (!Holds(front_, ids, share_capacity_)) {
    return Refused(Verdict::kFrontShare, front_, share_per_ns_, share_capacity_);
  }
  if (client_per_ns_ > 0) {
    auto found = clients_.find(client);
    if (found == clients_.end()) {
      if (clients_.size() >= kMaxTrackedClients) ForgetIdleClients(now);
      found = clients_.emplace(std::string(client), Bucket{0, SteadyTime::min()}).first;
    }
    Bucket& bucket = found->second;
    Refill(bucket, client_per_ns_, client_capacity_, now);
    if (!Holds(bucket, ids, client_capacity_)) {
      return Refused(Verdict::kClientRate, bucket, client_per_ns_, client_capacity_);
    }
    bucket.tokens -= ids;
  }
  front_.tokens -= ids;
  return Admission{};
}

}  // namespace snowflake::daemon
