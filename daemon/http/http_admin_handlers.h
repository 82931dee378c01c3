// The admin listener's handlers (docs/http.md, "The admin listener"): /healthz,
// /v1/status and /metrics for operators and scrapers, on addresses of their own
// ([http] admin_listen). Status and health are the local view, what `snowflakectl status
// --json` prints (runtime directory, pid, holder id, the register's location): the admin
// listener is for the operator's networks (admin_allow), not for remote callers. Every
// other path is 404, /v1/id, /v1/ids, /v1/decode and /v1/bounds too: these handlers hold
// no way to the ring's IDs (no RingServices), so no request can make them hand one out.
//
// Thread-safe: Handle() runs on every serving thread at once.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_ADMIN_HANDLERS_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_ADMIN_HANDLERS_H_

#include <filesystem>
#include <string_view>

#include "daemon/config/config.h"
#include "daemon/control/status_board.h"
#include "daemon/http/http_body.h"
#include "daemon/http/http_request.h"
#include "daemon/http/http_transport.h"
#include "daemon/metrics/metrics.h"

namespace snowflake::daemon {

class HttpAdminHandlers final : public HttpRequestHandler {
 public:
  // `board` and `metrics` must outlive the handlers.
  HttpAdminHandlers(const Config& config, const StatusBoard& board, Metrics& metrics);

  HttpReply Handle(std::string_view method, std::string_view target, std::string_view accept,
                   std::string_view client, const AuditPeer& peer,
                   HttpEndpoint& endpoint) noexcept override;

 private:
  HttpReply Route(std::string_view method, std::string_view target, std::string_view accept,
                  HttpEndpoint& endpoint);

  // Constant after construction.
  const std::filesystem::path runtime_dir_;
  const StatusBoard& board_;
  Metrics& metrics_;  // Scrape() only
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_ADMIN_HANDLERS_H_
