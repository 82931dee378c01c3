// The HTTP front's routing and handlers (docs/http.md): a request's method, target and
// Accept header are routed (RouteHttpRequest, http_request.h) and answered: /v1/id and
// /v1/ids take from the ring through the fronts' shared RingServices, within remote
// callers' share (id_share.h), /v1/decode and /v1/bounds answer in the daemon's layout and
// epoch (layout_replies.h) and take nothing, so the share does not count them, /healthz and
// /v1/status encode the fronts' shared answers (daemon/fronts/daemon_answers.h) without
// the daemon's paths, pid, holder id or register location, /metrics
// serves the daemon's registry; with an admin listener ([http] admin_listen,
// http_admin_handlers.h) /v1/status and /metrics are answered 404 here, as unknown paths.
// Replies are http_body.h's; their bodies are the protocol's (protocol/id_reply.h). No
// sockets.
//
// Thread-safe: Handle() runs on every serving thread at once.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_HANDLERS_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_HANDLERS_H_

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/config/config.h"
#include "daemon/control/status_board.h"
#include "daemon/fronts/daemon_answers.h"
#include "daemon/fronts/ring_services.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/http_body.h"
#include "daemon/http/http_request.h"
#include "daemon/http/http_transport.h"
#include "daemon/http/id_share.h"
#include "daemon/metrics/metrics.h"

namespace snowflake::daemon {

// The replies of /healthz, /v1/status and /metrics from their answers, for the ID
// listeners (HttpHandlers, which first scrubs the answers for remote callers) and the
// admin listener (the answers whole). /healthz: 200 serving, else 503 with Retry-After 1;
// /v1/status: 503 with the library's code when there is no status to give.
HttpReply HealthzReply(const HealthAnswer& health);
HttpReply StatusReply(const tl::expected<nlohmann::json, Error>& status);
HttpReply MetricsReply(Metrics& metrics);

class HttpHandlers final : public HttpRequestHandler {
 public:
  // `board`, `metrics` and `audit` must outlive the handlers. Throttled and forbidden
  // requests go to `audit`.
  HttpHandlers(const Config& config, StatusBoard& board, Metrics& metrics, AuditLog& audit);

  HttpReply Handle(std::string_view method, std::string_view target, std::string_view accept,
                   std::string_view client, const AuditPeer& peer,
                   HttpEndpoint& endpoint) noexcept override;

 private:
  // Whether [[http.authorize]] lets `client` use `route` (always with no entries, and
  // for /healthz); if not, its 403, audited with `peer`.
  std::optional<HttpReply> Unauthorized(const HttpRoute& route, std::string_view client,
                                        const AuditPeer& peer) const;
  HttpReply Route(std::string_view method, std::string_view target, std::string_view accept,
                  std::string_view client, const AuditPeer& peer, HttpEndpoint& endpoint);
  HttpReply TakeIds(const HttpRoute& route, std::string_view client, const AuditPeer& peer);
  HttpReply Healthz();
  HttpReply Status();
  // `text` with the runtime and state directories' paths replaced by "<runtime_dir>" and
  // "<state_dir>": error messages of the ring name its files.
  std::string Scrubbed(std::string text) const;
  // A health or status object as remote callers see it: without the keys that say where
  // the daemon keeps its files, its pid, its holder id and the register's location and
  // errors; its own sentences ("reason", "status_text") replaced by the vocabulary's for
  // the same reason code and detail; and its other strings Scrubbed().
  void ForRemoteCallers(nlohmann::json& doc) const;

  // Constant after construction.
  const std::filesystem::path runtime_dir_;
  const std::filesystem::path state_dir_;
  // [id] epoch and layout: what /v1/decode and /v1/bounds answer in, and the IDs per ms
  // the share is a fraction of.
  const IdLayout layout_;
  // [http] admin_listen is set: /v1/status and /metrics are the admin listener's.
  const bool admin_elsewhere_;
  // [[http.authorize]] by identity ("*" among them); empty: no authorization.
  std::map<std::string, Config::Http::Grant, std::less<>> grants_;
  // The limits a throttled request passed, as the audit log names them.
  const std::string share_limit_;
  const std::string client_limit_;
  StatusBoard& board_;
  Metrics& metrics_;
  AuditLog& audit_;        // thread-safe
  RingServices services_;  // thread-safe
  IdShare share_;          // thread-safe
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_HANDLERS_H_
