#include "daemon/control/status_metrics.h"

#include <chrono>
#include <utility>

#include "snowflake/client.h"

namespace snowflake::daemon {

DaemonFigures FiguresOf(const DaemonStatus& status, const std::filesystem::path& runtime_dir,
                        uint64_t heartbeats, std::map<std::string, double> paused_seconds) {
  DaemonFigures figures{.state = status.state,
                        .ring_fill = status.ring_fill,
                        .ring_capacity = status.ring_capacity,
                        .fill_target = status.fill_target,
                        .published_total = status.published_total,
                        .drained_total = status.drained_total,
                        .clock_pauses = status.clock_pauses,
                        .segments_retired = status.segments_retired,
                        .heartbeats = heartbeats,
                        .reserved_through_unix_ms = status.reserved_through_unix_ms,
                        .paused_seconds = std::move(paused_seconds),
                        .services = status.services};
  // A pause for the clock whose clock passed the millisecond it names: what it really
  // waits for is something else (the alert SnowflakePauseOutlastsItsCause).
  if (status.state == "paused" && status.clock_wait && status.clock_wait->clock_passes_in_ms < 0) {
    figures.pause_beyond_cause_seconds =
        static_cast<double>(-status.clock_wait->clock_passes_in_ms) / 1000.0;
  }
  // The ring's counters live in the segment header and are exact now; the board's copy
  // is as old as its last refresh.
  ClientOptions options;
  options.runtime_dir = runtime_dir;
  options.max_heartbeat_age = std::chrono::milliseconds(250);
  if (auto segment = Client::Inspect(options)) {
    figures.published_total = segment->published_total;
    figures.drained_total = segment->drained_total;
    figures.clock_pauses = segment->clock_pauses;
  }
  return figures;
}

}  // namespace snowflake::daemon
