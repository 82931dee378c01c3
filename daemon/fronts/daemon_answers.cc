#include "daemon/fronts/daemon_answers.h"


#include "daemon/control/status_board.h"
#include "daemon/fronts/ring_services.h"
#include "libclient/status/status_report.h"  // the keys of `status --json`
#include "protocol/vocabulary.h"

namespace snowflake::daemon {

HealthAnswer Health(const std::filesystem::path& runtime_dir) {
  auto status = Client::Inspect(FrontClientOptions(runtime_dir));
  if (!status) {
    return HealthAnswer{.serving = false,
                        .body = {{"state", vocab::kNoDaemonHealth.code},
                                 {"reason_code", ClientErrorName(status.error().code)},
                                 {"reason", status.error().message}}};
  }
  return HealthAnswer{.serving = status->health == vocab::HealthCode(shm::ProducerHealth::kServing),
                      .body = {{"state", status->health},
                               {"reason_code", status->reason},
                               {"reason", status->reason_text},
                               {"machine", status->machine}}};
}

tl::expected<nlohmann::json, Error> StatusAnswer(const std::filesystem::path& runtime_dir,
                                                 const StatusBoard& board) {
  auto segment = Client::Inspect(FrontClientOptions(runtime_dir));
  if (!segment) return tl::unexpected(std::move(segment.error()));
  // The same StatusReport the CLI builds, with the board's record standing in for the
  // control socket's reply (it is the record the socket sends), so the keys cannot drift.
  status::StatusReport report;
  report.segment = *segment;
  report.daemon = board.Snapshot();
  // On the clock that stamped the board's times (state_since, started): the ages are
  // differences of two readings of one clock.
  report.now_unix_ms = board.clock().NowUnixMs();
  report.runtime_dir = runtime_dir.string();
  return status::StatusToJson(report);
}

}  // namespace snowflake::daemon
