// The client end of the control protocol (control_protocol.h): connect to
// <runtime_dir>/control.sock, send one request line, read one reply line.
//
// Stateless functions; safe to call from any thread. Each call opens its own connection.

#ifndef SNOWFLAKE_PROTOCOL_CONTROL_CLIENT_H_
#define SNOWFLAKE_PROTOCOL_CONTROL_CLIENT_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "protocol/control_protocol.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/unique_fd.h"

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

// What "attach" hands over: the consumer region's descriptor (close-on-exec, not checked
// yet: shm::CheckConsumerDescriptor does that before anything maps it) and the reply.
struct Attached {
  UniqueFd region;
  AttachRecord record;
};

// {"command":"attach"}: the consumer region of the daemon's current segment, a descriptor
// passed with SCM_RIGHTS (docs/control-protocol.md, "attach"). Before it sends anything it
// checks that the process listening on the socket runs as `daemon_uid` (SO_PEERCRED; the
// owner of the segment's ring file), else untrusted_segment naming both users. Errors as
// Exchange(), and bad_reply for an attach reply without a descriptor; the daemon's own
// refusals (ControlError::refused) include too_many_connections and daemon_starting (retry
// shortly), and unknown_command from a daemon that predates attach. `give_up`, when set,
// is asked every 10 ms of waiting whether to stop (the daemon's heartbeat stopped):
// daemon_not_heartbeating.
tl::expected<Attached, ControlError> Attach(
    const std::filesystem::path& runtime_dir, uid_t daemon_uid,
    std::chrono::milliseconds timeout = kDefaultControlTimeout,
    const std::function<bool()>& give_up = {}) noexcept;

// The ring file of runtime_dir observed (shm::RingConsumer::Observe, for the daemon's
// user), Attach(), then shm::RingConsumer::Open() with the region: a consumer that can take,
// for tools, benchmarks and tests that use the ring directly (libsnowflake's Client does
// this itself, with its retries and a daemon that does not answer). Retries, within
// `timeout`, a daemon that says it is busy (too_many_connections, daemon_starting) and a
// segment replaced in between. Errors: a sentence naming what failed.
tl::expected<shm::RingConsumer, std::string> AttachConsumer(
    const std::filesystem::path& runtime_dir,
    std::chrono::milliseconds timeout = kDefaultControlTimeout) noexcept;

}  // namespace snowflake::protocol

#endif  // SNOWFLAKE_PROTOCOL_CONTROL_CLIENT_H_
