// libFuzzer target: the control socket's request handling (daemon/control/control_server.h) —
// framing, size bound, JSON parsing and commands — through ControlSession, which is what
// the server runs for every connection, without sockets.
// Input: byte 0 picks the peer (bit 0: privileged) and the chunk size the bytes arrive
// in (bits 1-7); the rest is what the peer sends, then it half-closes.
// Property: every reply is one JSON object line with a boolean "ok"; there is at most one
// reply per request line (plus one for a too-large request or the half-close); nothing
// crashes.
// The same bytes are also read as a reply by the client's end (protocol/): a line that
// ParseReply accepts is an object with "ok": true; a status record read from it writes
// back as JSON that reads as the same record, so what a reader accepts, it keeps whole.

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "daemon/control/control_server.h"
#include "daemon/control/status_board.h"
#include "protocol/control_protocol.h"

namespace {

void CheckReplies(const std::string& output, size_t max_replies) {
  size_t replies = 0;
  size_t start = 0;
  while (start < output.size()) {
    const size_t end = output.find('\n', start);
    if (end == std::string::npos) __builtin_trap();  // a reply without its newline
    const auto reply = nlohmann::json::parse(output.substr(start, end - start), nullptr, false);
    if (!reply.is_object() || !reply.contains("ok") || !reply["ok"].is_boolean()) {
      __builtin_trap();
    }
    ++replies;
    start = end + 1;
  }
  if (replies > max_replies) __builtin_trap();
}

// The client's end: `line` read as a reply to status.
void CheckReplyReading(std::string_view line) {
  namespace protocol = snowflake::protocol;
  const auto reply = protocol::ParseReply(line, "fuzz");
  if (!reply) {
    if (reply.error().message.empty()) __builtin_trap();
    return;
  }
  if (!reply->is_object() || !reply->value("ok", false)) __builtin_trap();
  const auto record = protocol::ReadStatusReply(*reply, "fuzz");
  if (!record) return;
  const auto again = protocol::StatusFromJson(protocol::StatusReplyJson(*record));
  if (!again || !(*again == *record)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static snowflake::daemon::StatusBoard board(snowflake::Clock::Real());
  static const snowflake::daemon::ControlServerOptions options{
      .socket_path = "/nonexistent/control.sock",
      .resume_timeout = std::chrono::milliseconds(0),  // no fill loop here: fail at once
  };
  const bool privileged = (data[0] & 1) != 0;
  const size_t chunk = (data[0] >> 1) + 1;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  snowflake::daemon::ControlSession session(privileged ? geteuid() : 65534, options, board);
  for (size_t at = 0; at < input.size(); at += chunk) session.OnReceive(input.substr(at, chunk));
  session.OnPeerClosed();
  if (!session.closing()) __builtin_trap();
  size_t lines = 0;
  for (const char c : input) lines += c == '\n';
  CheckReplies(session.output(), lines + 1);
  CheckReplyReading(input);
  return 0;
}
