// How every snowflakectl command fails: one sentence on stderr ("snowflakectl: ..."),
// and, when the command was given --json, one JSON object on stdout so a script that
// parses stdout always gets JSON:
//   {"ok": false, "error_code": "daemon_not_running", "error": "<the sentence>",
//    "exit_status": 1}
// The error codes are stable (docs/cli.md) and are the vocabulary's
// (protocol/vocabulary.h): the library's, and snowflakectl's own `usage`, `bad_reply` and
// `refused`.

#ifndef SNOWFLAKE_CLI_COMMAND_ERROR_H_
#define SNOWFLAKE_CLI_COMMAND_ERROR_H_

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/control_protocol.h"
#include "protocol/vocabulary.h"

namespace snowflake::cli {

struct CommandError {
  int exit_status;      // kExitUnavailable or kExitUsage
  std::string code;     // CodeName(): "daemon_not_running", "permission_denied", "usage", ...
  std::string message;  // what is wrong and what to do, without "snowflakectl: "
};

// The vocabulary's code for `code`, as CommandError::code holds it.
inline std::string CodeName(vocab::ErrorCode code) { return std::string(vocab::ErrorName(code)); }

// A control exchange's failure as a command's: usage (a runtime directory too long for a
// socket path) exits kExitUsage, everything else kExitUnavailable. A daemon's refusal is
// said as "<what> refused: <the daemon's sentence>", with the daemon's code.
CommandError FromControlError(const protocol::ControlError& error, std::string_view what);

// The --json form of `error`.
nlohmann::ordered_json ErrorJson(const CommandError& error);

// Prints `error` (stderr; also stdout as JSON if `json`) and throws
// CLI::RuntimeError(error.exit_status), which main() turns into the exit status.
[[noreturn]] void FailCommand(const CommandError& error, bool json);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_COMMAND_ERROR_H_
