// The control protocol (docs/control-protocol.md), defined once for both ends: the daemon's
// control server and the HTTP front's answers write it; snowflakectl, the status model and
// the Python module read it. One JSON object per line each way over
// <runtime_dir>/control.sock.
//
// This header holds the words and the records; control_client.h holds the calls.
// Everything here is pure (no I/O) and safe to call from any thread.

#ifndef SNOWFLAKE_PROTOCOL_CONTROL_PROTOCOL_H_
#define SNOWFLAKE_PROTOCOL_CONTROL_PROTOCOL_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "protocol/vocabulary.h"
#include "snowflake/segment_layout.h"

namespace snowflake::protocol {

// The socket's file name in the runtime directory.
inline constexpr std::string_view kControlSocketFileName = "control.sock";
// A request line longer than this is refused and its connection closed.
inline constexpr size_t kMaxControlRequestBytes = 4096;

// The commands a client may send.
enum class Command { kStatus, kResume, kAttach };
inline constexpr Command kCommands[] = {Command::kStatus, Command::kResume, Command::kAttach};

// "status", "resume", "attach".
std::string_view CommandName(Command command) noexcept;

// The request line for `command`, with its newline: {"command":"status"}\n.
std::string RequestLine(Command command);

// Why a control exchange gave no answer, or the daemon's refusal. `code` is the
// vocabulary's (protocol/vocabulary.h); `message` says what was wrong and what to do.
struct ControlError {
  vocab::ErrorCode code = vocab::ErrorCode::kSystemError;
  std::string message;
  // True when the daemon answered and refused ({"ok":false,...}); false when there was
  // no answer, or none that could be read.
  bool refused = false;
};

// --- The status record --------------------------------------------------------------------

// One front's part of the status (the reply's "fronts" array).
struct FrontStatus {
  std::string name;                 // "http"
  std::vector<std::string> listen;  // the bound addresses, "127.0.0.1:8080", "[::1]:8080"
  uint64_t connections = 0;         // open now
  uint64_t requests = 0;            // replies sent since it started
  uint64_t refused = 0;             // connections refused since it started
  friend bool operator==(const FrontStatus&, const FrontStatus&) = default;
};

// A renewal of the high-water reservation that fails, or that the daemon paused waiting
// for: the reply's "renewal" object.
struct RenewalStatus {
  std::string store;          // what it waits on now: "register" or "state_file"
  std::string location;       // the register's location, or the state file's path
  int64_t since_unix_ms = 0;  // when the first renewal not confirmed yet began
  int64_t waited_ms = 0;      // from then to the refresh
  // The last attempt's failure since then ("" if none yet: the first is still under way),
  // in the store's words, and whose it is.
  std::string last_error;
  std::string last_error_store;  // "register", "state_file" or ""
  // The store did not answer (a timeout, no leader, no quorum), or has not answered yet.
  bool unanswered = false;
  friend bool operator==(const RenewalStatus&, const RenewalStatus&) = default;
};

// The millisecond a generator paused for the clock waits for: the reply's "clock_wait"
// object (null unless the daemon waits for its clock: paused or out of service behind its
// mark, for a clock step, a start behind the persisted mark or an operator's fence).
struct ClockWait {
  // Nothing is issued until the clock is past this millisecond (Unix ms).
  int64_t until_unix_ms = 0;
  // Who set it: "state_file" (this daemon's reservation), "register" (the number's last
  // holder), "host_mark" (another daemon of this host), "segment" (the surviving
  // segment's last ID), "fence" (an operator's raise-all), "last_issued" (the clock
  // stepped back behind this daemon's own last ID), "none".
  std::string set_by;
  // until_unix_ms + 1 minus the clock at the refresh: when the clock passes it by this
  // host's clock. 0 or less means it has passed, and a daemon still paused for the clock
  // then waits for something its reason does not name (an alert condition).
  int64_t clock_passes_in_ms = 0;
  friend bool operator==(const ClockWait&, const ClockWait&) = default;
};

// Every fact of the status reply, one member per key (docs/control-protocol.md, "Status
// keys"). The daemon fills it; readers get it back from StatusFromJson.
struct StatusRecord {
  // vocab::StateCode(): starting, serving, paused, out_of_service, stopped.
  std::string state = std::string(vocab::StateCode(shm::DaemonState::kStarting));
  // vocab::ReasonCode(): none, clock_behind, ...
  std::string reason_code = std::string(vocab::ReasonCode(shm::StateReason::kStarting));
  std::string reason;         // human text, "" when serving
  int64_t reason_detail = 0;  // see reason_code (ms of a clock step, errno, ...)
  int64_t pid = 0;
  std::string version;
  std::string instance;
  std::string runtime_dir;
  std::string state_dir;
  std::string register_backend;
  std::string register_location;
  std::string holder_id;
  int64_t machine = -1;  // -1 until claimed
  int64_t epoch_unix_ms = 0;
  uint64_t ring_capacity = 0;
  uint64_t ring_fill = 0;    // IDs in the ring at the last refresh
  uint64_t fill_target = 0;  // IDs the loop aims to keep
  uint64_t published_total = 0;
  uint64_t drained_total = 0;
  uint64_t incarnation = 0;
  // This start continued a surviving segment of this boot: its IDs go on above the old
  // one's last ID without waiting out the reservation (the name predates fresh segments at
  // every start; the wire keeps it).
  bool segment_reopened = false;
  std::optional<uint64_t> last_issued_id;
  // The generator's mark: the newest ms that may carry an ID of this machine. Sent as
  // "generator_mark_unix_ms", and for one release also as the deprecated
  // "last_issued_unix_ms" (which read as the last ID's ms, which it need not be).
  int64_t generator_mark_unix_ms = 0;
  int64_t reserved_through_unix_ms = 0;
  uint64_t clock_pauses = 0;
  int64_t clock_behind_ms = 0;
  int64_t started_unix_ms = 0;
  // When state or reason_code last changed (Unix ms).
  int64_t state_since_unix_ms = 0;
  // IDs taken per client service name (finished clients folded in).
  std::map<std::string, uint64_t> services;
  // Segments retired because a client tampered with them, and why the last one was.
  uint64_t segments_retired = 0;
  std::string segment_retired_reason;
  // Set while a renewal fails, or while the daemon is paused waiting for one.
  std::optional<RenewalStatus> renewal;
  // Set while the generator waits for the clock to pass its mark.
  std::optional<ClockWait> clock_wait;
  // The running fronts.
  std::vector<FrontStatus> fronts;
  friend bool operator==(const StatusRecord&, const StatusRecord&) = default;
};

// The record as the reply's keys, without "ok". Never throws on text that is not UTF-8:
// Dump() replaces such bytes.
nlohmann::json StatusToJson(const StatusRecord& status);

// The "renewal" object alone.
nlohmann::json RenewalToJson(const RenewalStatus& renewal);
// The "clock_wait" object alone.
nlohmann::json ClockWaitToJson(const ClockWait& wait);

// The record from a status or resume reply (extra keys, such as "ok" and "resumed", are
// ignored, so a newer daemon's additions are read past). A key that is present must have
// its type (IDs: decimal strings); a missing key keeps the record's default, so an older
// daemon's reply is read too, except "state", without which it is no status. Errors name
// the key and what it held.
tl::expected<StatusRecord, std::string> StatusFromJson(const nlohmann::json& reply);

// --- The attach record --------------------------------------------------------------------

// The reply to "attach" (docs/control-protocol.md, "attach"): it comes with one descriptor
// (SCM_RIGHTS), the consumer region of the segment `segment_id`, a sealed memfd of
// `region_bytes` bytes; `format_version` is the daemon's segment format.
struct AttachRecord {
  uint64_t segment_id = 0;
  uint64_t format_version = shm::kVersion;
  uint64_t region_bytes = shm::kConsumerRegionSize;
  friend bool operator==(const AttachRecord&, const AttachRecord&) = default;
};

// {"ok":true,"segment_id":"<decimal>","format_version":5,"region_bytes":163840}.
nlohmann::json AttachReplyJson(const AttachRecord& attach);

// A reply object that ParseReply accepted, read as an attach reply; bad_reply naming the
// key for one that does not follow the protocol. Checks the types only: the caller judges
// the values against the descriptor and its own format.
tl::expected<AttachRecord, ControlError> ReadAttachReply(const nlohmann::json& reply,
                                                         std::string_view where);

// --- Replies ------------------------------------------------------------------------------

// One JSON value as one line's text (no newline); bytes that are not UTF-8 are replaced.
std::string Dump(const nlohmann::json& value);

// {"ok":true, <status keys>}.
nlohmann::json StatusReplyJson(const StatusRecord& status);
// {"ok":true,"resumed":<resumed>, <status keys>}.
nlohmann::json ResumeReplyJson(const StatusRecord& status, bool resumed);
// {"ok":false,"code":"<vocabulary code>","error":"<message>"}.
nlohmann::json ErrorReplyJson(vocab::ErrorCode code, std::string_view message);

// What the server makes of one request line: the command, or the refusal to send back
// (malformed_request, unknown_command).
tl::expected<Command, ControlError> ParseRequest(std::string_view line);

// A reply line read by a client: the object if "ok" is true; else the daemon's refusal
// (its code, or refused for one this reader does not know; refused = true), or bad_reply
// for a line that is not a reply. `where` names the socket in messages.
tl::expected<nlohmann::json, ControlError> ParseReply(std::string_view line,
                                                      std::string_view where);

// The answer to "resume": whether the daemon left out-of-service, and its status after.
struct ResumeResult {
  bool resumed = false;
  StatusRecord status;
};

// A reply object that ParseReply accepted, read as a status or resume reply; bad_reply
// naming the key for one that does not follow the protocol.
tl::expected<StatusRecord, ControlError> ReadStatusReply(const nlohmann::json& reply,
                                                         std::string_view where);
tl::expected<ResumeResult, ControlError> ReadResumeReply(const nlohmann::json& reply,
                                                         std::string_view where);

}  // namespace snowflake::protocol

#endif  // SNOWFLAKE_PROTOCOL_CONTROL_PROTOCOL_H_
