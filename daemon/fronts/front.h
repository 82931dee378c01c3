// A front: a way in to this host's ring for callers other than local processes (the HTTP
// front, docs/http.md). A front is a client of the ring and never generates IDs: it takes
// through the shared RingServices (ring_services.h) and answers health and status with
// the shared daemon answers (daemon_answers.h), so a new front only adds its transport
// and its encoding. The daemon makes every front from a FrontContext, starts them last
// and stops them first (stage "front"), so their callers fail over while the ring still
// stands behind every answer they already got.
//
// Implementations: Start() and Stop() are called from the thread that owns the daemon;
// Status() from any thread (the control socket's, another front's) between them; what a
// front runs meanwhile (its own threads) is its business.

#ifndef SNOWFLAKE_DAEMON_FRONTS_FRONT_H_
#define SNOWFLAKE_DAEMON_FRONTS_FRONT_H_

#include <string>
#include <tl/expected.hpp>

#include "daemon/config/config.h"
#include "daemon/control/status_board.h"
#include "daemon/metrics/metrics.h"
#include "snowflake/clock.h"

namespace snowflake::daemon {

// What the daemon hands a front it makes. Every reference outlives the front.
struct FrontContext {
  const Config& config;
  StatusBoard& board;  // the daemon's status (what the control socket serves)
  Metrics& metrics;    // the daemon's registry: the front reports its figures into it
  Clock& clock;        // the daemon's (DaemonParts::clock): every interval a front measures
};

class Front {
 public:
  virtual ~Front();  // must Stop() if started and not stopped

  // Starts answering: binds its listeners and starts its threads. Errors: the sentence to
  // log (the daemon's start then fails with exit status 1); nothing is left open.
  // REQUIRES: called once.
  [[nodiscard]] virtual tl::expected<void, std::string> Start() noexcept = 0;

  // Stops answering: closes the listeners and every connection and ends its threads.
  // Idempotent; never throws.
  virtual void Stop() noexcept = 0;

  // Its contribution to the daemon's status (`snowflakectl status`, /v1/status): its name,
  // where it listens and what it served. Thread-safe; cheap (reads counters).
  virtual FrontStatus Status() const = 0;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_FRONTS_FRONT_H_
