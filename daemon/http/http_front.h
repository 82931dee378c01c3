// The HTTP front (docs/http.md): remote callers take IDs over HTTP/1.1 from this host's
// ring. GET /v1/id, /v1/ids, /healthz, /v1/status and /metrics (Prometheus text).
//
// The front is a client of the ring, like any local process: it takes IDs through
// libsnowflake's Client (one order for local and remote callers) and never generates any.
// It serves on its own threads, so a slow or hostile peer never blocks the fill loop; it
// reads the daemon's status only through the StatusBoard. Beast and Asio stay inside
// http_front.cc.
//
// Start() and Stop() must be called from one thread; the serving threads are internal.

#ifndef SNOWFLAKE_DAEMON_HTTP_FRONT_H_
#define SNOWFLAKE_DAEMON_HTTP_FRONT_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "daemon/base/latency_histogram.h"
#include "daemon/config/config.h"
#include "daemon/control/status_board.h"

namespace snowflake::daemon {

class HttpFront {
 public:
  // Binds every address of config.http.listen and starts config.http.threads threads.
  // Returns nullptr (and opens nothing) when [http] listen is empty. `board` must outlive
  // the front; IDs come from the segment in config.daemon.runtime_dir. `latencies` (may be
  // null; else must outlive the front) feed /metrics' reservation and register histograms.
  // Errors: a message naming the address that could not be bound and why.
  static tl::expected<std::unique_ptr<HttpFront>, std::string> Start(
      const Config& config, StatusBoard& board,
      const daemon::DaemonLatencies* latencies = nullptr) noexcept;

  ~HttpFront();  // Stop()s
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Closes the listeners and every connection and joins the threads. Idempotent.
  void Stop() noexcept;

  // The bound ports, in the order of config.http.listen.
  std::vector<uint16_t> ports() const;

  class Impl;  // internal (http_front.cc)

 private:
  explicit HttpFront(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_FRONT_H_
