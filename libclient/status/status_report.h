// The status model both sides share: what `snowflakectl status` gathers (the segment's
// view plus the daemon's status record, protocol/control_protocol.h), turned into the
// stable --json object (docs/cli.md) and the human text. No I/O, so the HTTP front's
// /v1/status and the Python module's status() serve exactly the object the CLI prints.
// It sits below the CLI and the daemon
// (neither includes the other) and above libsnowflake, whose ClientStatus it reads.
//
// All functions are safe to call from any thread.

#ifndef SNOWFLAKE_LIBCLIENT_STATUS_STATUS_REPORT_H_
#define SNOWFLAKE_LIBCLIENT_STATUS_STATUS_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "protocol/control_protocol.h"
#include "snowflake/client.h"

namespace snowflake::status {

// What the status command gathered.
struct StatusReport {
  ClientStatus segment;
  // The daemon's answer to {"command":"status"} on its control socket, or why there is
  // none (no answer, a refusal, or a reply that does not follow the protocol).
  std::optional<protocol::StatusRecord> daemon;
  std::string daemon_error;
  // The wall clock when the report was gathered (Unix ms), for ages and uptime.
  int64_t now_unix_ms = 0;
  std::string runtime_dir;
};

// Puts the control socket's answer (protocol::QueryStatus) into `report`: the record, or
// why there is none in daemon_error ("snowflaked refused status: ..." for a refusal).
void SetDaemonAnswer(StatusReport& report,
                     tl::expected<protocol::StatusRecord, protocol::ControlError> answer);

// "450 ms", "12s", "3m 05s", "2h 03m", "4d 02h".
std::string FormatDuration(int64_t ms);

// The stable --json object (docs/cli.md).
nlohmann::json StatusToJson(const StatusReport& report);

// The human-readable form, several lines.
std::string StatusToText(const StatusReport& report);

// Whether the ring says "serving" and the daemon answered on its control socket.
bool ServingAndAnswered(const StatusReport& report);

}  // namespace snowflake::status

#endif  // SNOWFLAKE_LIBCLIENT_STATUS_STATUS_REPORT_H_
