// The status model both sides share: what `snowflakectl status` gathers (the segment's
// view plus the daemon's reply), turned into the stable --json object (docs/cli.md) and
// the human text. No I/O, so the HTTP front's /v1/status and the Python module's
// status() serve exactly the object the CLI prints. It sits below the CLI and the daemon
// (neither includes the other) and above libsnowflake, whose ClientStatus it reads.
//
// All functions are safe to call from any thread.

#ifndef SNOWFLAKE_LIBCLIENT_STATUS_STATUS_REPORT_H_
#define SNOWFLAKE_LIBCLIENT_STATUS_STATUS_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "snowflake/client.h"

namespace snowflake::status {

// What the status command gathered.
struct StatusReport {
  ClientStatus segment;
  // The control socket's reply to {"command":"status"}, or why there is none.
  std::optional<nlohmann::json> daemon_reply;
  std::string daemon_error;
  // The wall clock when the report was gathered (Unix ms), for ages and uptime.
  int64_t now_unix_ms = 0;
  std::string runtime_dir;
};

// Per-service totals from a daemon reply (its "services" member), as {name: count};
// null when the reply has none.
nlohmann::json ServicesOf(const nlohmann::json& reply);

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
