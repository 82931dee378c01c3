// The metrics read at scrape time (docs/metrics.md): the daemon's figures taken from the
// status board's snapshot and, exact at the moment of the scrape, the segment header's
// counters (read as a client reads them, through libsnowflake's Client::Inspect()). The
// fill loop and the take path therefore report nothing themselves.
//
// Thread-safe: pure functions over their arguments, plus a read of the segment.

#ifndef SNOWFLAKE_DAEMON_CONTROL_STATUS_METRICS_H_
#define SNOWFLAKE_DAEMON_CONTROL_STATUS_METRICS_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "daemon/control/status_board.h"
#include "daemon/metrics/metrics.h"

namespace snowflake::daemon {

// The figures of `status` (a board snapshot), with the segment's published, drained and
// clock-pause counters in `runtime_dir` when it can be read (else the board's, as old as
// its last refresh), `heartbeats` (Heartbeat::beats()) and `paused_seconds`
// (StatusBoard::PausedSeconds()).
DaemonFigures FiguresOf(const DaemonStatus& status, const std::filesystem::path& runtime_dir,
                        uint64_t heartbeats, std::map<std::string, double> paused_seconds = {});

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CONTROL_STATUS_METRICS_H_
