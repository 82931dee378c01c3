// What every front does to hand out IDs: one libsnowflake Client per service name, opened
// on first use and kept, at most `max_services` of them (each holds a counter slot in the
// segment), and the take of a request's IDs. The Clients take from this host's ring only:
// no remotes, whatever $SNOWFLAKE_REMOTES the daemon inherited, so a front never hands
// out another daemon's IDs as its own and fronts naming each other cannot forward in a
// loop. Each service's IDs are counted in snowflake_ids_issued_total{path=<front>}.
//
// A RingServices is safe for concurrent use by multiple threads without external
// synchronization: the first take of a service name takes a lock; later ones find it under
// that lock and then take through the Client, which is lock-free.

#ifndef SNOWFLAKE_DAEMON_FRONTS_RING_SERVICES_H_
#define SNOWFLAKE_DAEMON_FRONTS_RING_SERVICES_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "daemon/metrics/metrics.h"
#include "snowflake/client.h"

namespace snowflake::daemon {

// Why a take gave no IDs.
struct TakeRefusal {
  enum class Why {
    kInvalidServiceName,  // the name is not 1-63 of [a-z0-9._-]: the caller's mistake
    kTooManyServices,     // max_services names are served already: a new one is refused
    kRing,                // the ring could not give IDs: `ring_error` says why
  };
  Why why;
  ClientError ring_error{};  // kRing only
  std::string message;       // what was wrong and what to do
};

// The options of the Clients a front takes through: this host's ring in `runtime_dir`,
// no remotes; a take waits at most 250 ms on an empty ring, and a heartbeat older than
// 250 ms means the fill loop is stuck (the Client is in the daemon's own process).
ClientOptions FrontClientOptions(const std::filesystem::path& runtime_dir);

class RingServices {
 public:
  // `front` names the path label ("http"). `metrics` must outlive this object.
  RingServices(std::string front, std::filesystem::path runtime_dir, uint64_t max_services,
               Metrics& metrics);
  RingServices(const RingServices&) = delete;
  RingServices& operator=(const RingServices&) = delete;

  // Fills `ids` (strictly increasing) from the ring for `service`. IDs already taken for
  // a take that then fails are dropped: wasted, never reissued.
  // Errors: kInvalidServiceName, kTooManyServices (nothing taken), kRing (the library's
  // error: the daemon is not serving, not there, or the ring is unusable).
  [[nodiscard]] tl::expected<void, TakeRefusal> Take(std::string_view service,
                                                     std::span<uint64_t> ids);

 private:
  struct Service {
    Client client;
    prometheus::Counter& issued;  // snowflake_ids_issued_total{service, path=front_}
  };
  tl::expected<Service*, TakeRefusal> ServiceFor(std::string_view service);

  // Constant after construction.
  const std::string front_;
  const std::filesystem::path runtime_dir_;
  const uint64_t max_services_;
  Metrics& metrics_;

  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Service>, std::less<>> services_;  // guarded by mutex_
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_FRONTS_RING_SERVICES_H_
