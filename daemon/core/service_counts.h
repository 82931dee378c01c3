// Per-service counts for status: the IDs each client service name has taken, live
// clients' counters plus the folded totals of clients that finished (retired their slot,
// or died). Scanned about once a second by the fill loop.
//
// Not thread-safe: the fill loop owns it.

#ifndef SNOWFLAKE_DAEMON_CORE_SERVICE_COUNTS_H_
#define SNOWFLAKE_DAEMON_CORE_SERVICE_COUNTS_H_

#include <cstdint>
#include <map>
#include <string>

#include "snowflake/ring_producer.h"

namespace snowflake::daemon {

class ServiceCounts {
 public:
  // Reads every client slot; folds and frees those whose client finished.
  void Scan(shm::RingProducer& producer);
  // Folds every client slot's count as final (the segment is being retired; its clients
  // count on in a fresh one).
  void FoldAll(const shm::RingProducer& producer);
  // Totals per service name as of the last Scan().
  const std::map<std::string, uint64_t>& totals() const noexcept { return totals_; }

 private:
  std::map<std::string, uint64_t> folded_;  // finished clients' final counts
  std::map<std::string, uint64_t> totals_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_SERVICE_COUNTS_H_
