// The client end of the control protocol (control_protocol.h): connect to
// <runtime_dir>/control.sock, send one request line, read one reply line.
//
// Stateless functions; safe to call from any thread. Each call opens its own connection.

#ifndef SNOWFLAKE_PROTOCOL_CONTROL_CLIENT_H_
#define SNOWFLAKE_PROTOCOL_CONTROL_CLIENT_H_

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "protocol/control_protocol.h"

namespace snowflake::protocol {

inline constexpr std::chrono::milliseconds kDefaultControlTimeout{5000};

// Sends `command` and returns the reply object when the daemon accepted it ("ok": true).
// Errors, each a sentence naming the socket and what to do:
//   daemon_not_running  the socket is missing or refuses connections,
//   permission_denied   this user may not connect (the message names the user, the
//                       socket's group and the command that adds the user to it),
//   timed_out           no answer within `timeout`,
//   bad_reply           an answer that is not one reply object,
//   usage               a runtime directory whose socket path is too long for AF_UNIX,
//   system_error        anything else (the message has the OS error),
// or the daemon's own refusal (ControlError::refused: its code and sentence).
tl::expected<nlohmann::json, ControlError> Exchange(
    const std::filesystem::path& runtime_dir, Command command,
    std::chrono::milliseconds timeout = kDefaultControlTimeout) noexcept;

// {"command":"status"}, read into the record.
tl::expected<StatusRecord, ControlError> QueryStatus(
    const std::filesystem::path& runtime_dir,
    std::chrono::milliseconds timeout = kDefaultControlTimeout) noexcept;

// {"command":"resume"}: whether the daemon left out-of-service, and its status after.
tl::expected<ResumeResult, ControlError> Resume(
    const std::filesystem::path& runtime_dir,
    std::chrono::milliseconds timeout = kDefaultControlTimeout) noexcept;

}  // namespace snowflake::protocol

#endif  // SNOWFLAKE_PROTOCOL_CONTROL_CLIENT_H_
