// The daemon's logging: spdlog to the systemd journal when systemd started us
// (JOURNAL_STREAM or INVOCATION_ID set), to stderr otherwise. spdlog's journald sink
// fails silently without a journald, hence the explicit choice.

#ifndef SNOWFLAKE_DAEMON_LOGGING_H_
#define SNOWFLAKE_DAEMON_LOGGING_H_

#include <string_view>

namespace snowflake::daemon {

// True if the environment says systemd started this process.
bool StartedBySystemd() noexcept;

// Installs the default logger at `level` (a name IsValidLogLevel accepts). Call once,
// before other threads log.
void SetUpLogging(std::string_view level) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_LOGGING_H_
