// What every front answers about the daemon, whatever its wire format: its health (the
// ring's state as a client sees it) and its status (the object `snowflakectl status
// --json` prints, key for key, libclient/status/status_report.h). A front only encodes
// these; it never assembles them.
//
// Thread-safe: each call reads the segment (Client::Inspect()) and the board (a copy).

#ifndef SNOWFLAKE_DAEMON_FRONTS_DAEMON_ANSWERS_H_
#define SNOWFLAKE_DAEMON_FRONTS_DAEMON_ANSWERS_H_

#include <filesystem>
#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "daemon/control/status_board.h"
#include "snowflake/client.h"

namespace snowflake::daemon {

struct HealthAnswer {
  bool serving = false;  // the ring says "serving"; false also when it cannot be read
  // {"state","reason_code","reason","machine"}; with no segment to read, state is
  // "not_running" and reason_code the library's error code.
  nlohmann::json body;
};

// The ring's health in `runtime_dir`.
HealthAnswer Health(const std::filesystem::path& runtime_dir);

// The status object: the segment's view as one client sees it, plus the daemon's own
// status (`board`'s snapshot, what the control socket would reply) under "daemon".
// Errors: the library's, when the segment cannot be read (no status to give).
tl::expected<nlohmann::json, Error> StatusAnswer(const std::filesystem::path& runtime_dir,
                                                 const StatusBoard& board);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_FRONTS_DAEMON_ANSWERS_H_
