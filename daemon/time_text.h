// Unix milliseconds as ISO-8601 UTC text, for logs, messages and status.

#ifndef SNOWFLAKE_DAEMON_TIME_TEXT_H_
#define SNOWFLAKE_DAEMON_TIME_TEXT_H_

#include <cstdint>
#include <string>

namespace snowflake {

// "2026-01-01T00:00:00.000Z". Thread-safe.
std::string FormatIsoUtc(int64_t unix_ms);

}  // namespace snowflake

#endif  // SNOWFLAKE_DAEMON_TIME_TEXT_H_
