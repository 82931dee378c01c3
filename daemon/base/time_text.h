// Unix milliseconds as ISO-8601 UTC text, for logs, messages and status: the one format
// of shm/time_text.h (FormatTimeText), under the name the daemon's code uses.

#ifndef SNOWFLAKE_DAEMON_TIME_TEXT_H_
#define SNOWFLAKE_DAEMON_TIME_TEXT_H_

#include <cstdint>
#include <string>

#include "snowflake/time_text.h"

namespace snowflake::daemon {

// "2026-01-01T00:00:00.000Z". Thread-safe.
inline std::string FormatIsoUtc(int64_t unix_ms) { return FormatTimeText(unix_ms); }

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_TIME_TEXT_H_
