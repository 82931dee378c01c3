// The exit statuses every snowflakectl command uses, so scripts can tell "fix your
// command line" from "the daemon is not there".

#ifndef SNOWFLAKE_CLI_EXIT_CODES_H_
#define SNOWFLAKE_CLI_EXIT_CODES_H_

namespace snowflake::cli {

inline constexpr int kExitOk = 0;
// The daemon is not running, not reachable, refused the request or is not serving.
inline constexpr int kExitUnavailable = 1;
// Bad command line or bad input (an unparsable ID or epoch, an unknown option).
inline constexpr int kExitUsage = 2;

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_EXIT_CODES_H_
