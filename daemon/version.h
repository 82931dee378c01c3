// The version snowflaked reports (--version, the start's log line, status).

#ifndef SNOWFLAKE_DAEMON_VERSION_H_
#define SNOWFLAKE_DAEMON_VERSION_H_

#include <string_view>

namespace snowflake::daemon {

// "0.1.0". Thread-safe.
std::string_view SnowflakedVersion() noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_VERSION_H_
