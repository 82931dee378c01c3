// Talking to snowflaked's control socket, `<runtime_dir>/control.sock` (an AF_UNIX
// stream socket; docs/control-protocol.md): one JSON object per line each way.
//
// Stateless functions; safe to call from any thread.

#ifndef SNOWFLAKE_CLI_CONTROL_CLIENT_H_
#define SNOWFLAKE_CLI_CONTROL_CLIENT_H_

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>

namespace snowflake::cli {

inline constexpr std::string_view kControlSocketName = "control.sock";

// Sends `request` as one line and returns the reply line parsed as a JSON object (which
// may be {"ok":false,"error":...}: that is a reply, not a failure). Fails, with a
// sentence naming the socket and what to do, when the socket is missing, refuses the
// connection, does not answer within `timeout`, or answers something that is not one
// JSON object.
tl::expected<nlohmann::json, std::string> SendControlRequest(
    const std::filesystem::path& runtime_dir, const nlohmann::json& request,
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) noexcept;

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_CONTROL_CLIENT_H_
