// A front: a way in to this host's ring for callers other than local processes (the HTTP
// front, docs/http.md). A front is a client of the ring and never generates IDs. The
// daemon starts it last and stops it first, so its callers fail over while the ring still
// stands behind every answer they already got.
//
// Implementations: Stop() is called from the thread that owns the daemon; what a front
// runs meanwhile (its own threads) is its business.

#ifndef SNOWFLAKE_DAEMON_FRONT_H_
#define SNOWFLAKE_DAEMON_FRONT_H_

namespace snowflake::daemon {

class Front {
 public:
  virtual ~Front();  // must Stop() if not stopped

  // Stops answering: closes the listeners and every connection and ends its threads.
  // Idempotent; never throws.
  virtual void Stop() noexcept = 0;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_FRONT_H_
