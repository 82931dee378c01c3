// Talking to snowflaked's control socket, `<runtime_dir>/control.sock` (an AF_UNIX
// stream socket; docs/control-protocol.md): one JSON object per line each way.
//
// Stateless functions; safe to call from any thread.

#ifndef SNOWFLAKE_CLI_CONTROL_CLIENT_H_
#define SNOWFLAKE_CLI_CONTROL_CLIENT_H_

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "command_error.h"

namespace snowflake::cli {

inline constexpr std::string_view kControlSocketName = "control.sock";

// Sends `request` as one line and returns the reply line parsed as a JSON object (which
// may be {"ok":false,"error":...}: that is a reply, not a failure). Fails (exit status
// kExitUnavailable) with a sentence naming the socket and what to do, and a code:
//   daemon_not_running  the socket is missing or refuses connections,
//   permission_denied   this user may not connect (the message names the user, the
//                       socket's group and the command that adds the user to it),
//   timed_out           no answer within `timeout`,
//   bad_reply           an answer that is not one JSON object,
//   system_error        anything else (the message has the OS error).
tl::expected<nlohmann::json, CommandError> SendControlRequest(
    const std::filesystem::path& runtime_dir, const nlohmann::json& request,
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) noexcept;

// The daemon's answer to {"command":"status"}, as `status` reports it: the reply (also a
// refusal, whose "error" is then in `error`), or why there is none; stamped with the wall
// clock (Unix ms) when it came.
struct StatusAnswer {
  std::optional<nlohmann::json> reply;
  std::string error;
  int64_t now_unix_ms = 0;
};
StatusAnswer AskStatus(const std::filesystem::path& runtime_dir,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5)) noexcept;

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_CONTROL_CLIENT_H_
