#include "protocol/control_protocol.h"

#include <charconv>
#include <cstdint>
#include <exception>
#include <utility>

namespace snowflake::protocol {
namespace {

using json = nlohmann::json;

// The reply's keys: every one the protocol writes or reads is named here and nowhere else.
namespace key {
constexpr const char* kOk = "ok";
constexpr const char* kCode = "code";
constexpr const char* kError = "error";
constexpr const char* kCommand = "command";
constexpr const char* kResumed = "resumed";
constexpr const char* kSegmentId = "segment_id";
constexpr const char* kFormatVersion = "format_version";
constexpr const char* kRegionBytes = "region_bytes";
constexpr const char* kState = "state";
constexpr const char* kReasonCode = "reason_code";
constexpr const char* kReason = "reason";
constexpr const char* kReasonDetail = "reason_detail";
constexpr const char* kPid = "pid";
constexpr const char* kVersion = "version";
constexpr const char* kInstance = "instance";
constexpr const char* kRuntimeDir = "runtime_dir";
constexpr const char* kStateDir = "state_dir";
constexpr const char* kRegisterBackend = "register_backend";
constexpr const char* kRegisterLocation = "register_location";
constexpr const char* kHolderId = "holder_id";
constexpr const char* kMachine = "machine";
constexpr const char* kEpochUnixMs = "epoch_unix_ms";
constexpr const char* kRingCapacity = "ring_capacity";
constexpr const char* kRingFill = "ring_fill";
constexpr const char* kFillTarget = "fill_target";
constexpr const char* kPublishedTotal = "published_total";
constexpr const char* kDrainedTotal = "drained_total";
constexpr const char* kIncarnation = "incarnation";
constexpr const char* kSegmentReopened = "segment_reopened";
constexpr const char* kLastIssuedId = "last_issued_id";
constexpr const char* kGeneratorMarkUnixMs = "generator_mark_unix_ms";
// Deprecated: the same value as generator_mark_unix_ms, written for one release.
constexpr const char* kLastIssuedUnixMs = "last_issued_unix_ms";
constexpr const char* kReservedThroughUnixMs = "reserved_through_unix_ms";
constexpr const char* kClockPauses = "clock_pauses";
constexpr const char* kClockBehindMs = "clock_behind_ms";
constexpr const char* kStartedUnixMs = "started_unix_ms";
constexpr const char* kStateSinceUnixMs = "state_since_unix_ms";
constexpr const char* kServices = "services";
constexpr const char* kSegmentsRetired = "segments_retired";
constexpr const char* kSegmentRetiredReason = "segment_retired_reason";
constexpr const char* kRenewal = "renewal";
constexpr const char* kClockWait = "clock_wait";
constexpr const char* kUntilUnixMs = "until_unix_ms";
constexpr const char* kSetBy = "set_by";
constexpr const char* kClockPassesInMs = "clock_passes_in_ms";
constexpr const char* kStore = "store";
constexpr const char* kLocation = "location";
constexpr const char* kSinceUnixMs = "since_unix_ms";
constexpr const char* kWaitedMs = "waited_ms";
constexpr const char* kUnanswered = "unanswered";
constexpr const char* kLastError = "last_error";
constexpr const char* kLastErrorStore = "last_error_store";
constexpr const char* kFronts = "fronts";
constexpr const char* kName = "name";
constexpr const char* kListen = "listen";
constexpr const char* kConnections = "connections";
constexpr const char* kRequests = "requests";
constexpr const char* kRefused = "refused";
}  // namespace key

json TextOrNull(const std::string& text) { return text.empty() ? json() : json(text); }

// "\"<path>\"", built by appending: GCC 12 at -O2 reports -Wrestrict on a string literal
// plus a temporary string (GCC bug 105329, a false positive).
std::string Quoted(std::string_view path) {
  std::string out = "\"";
  out += path;
  out += '"';
  return out;
}

// Reads the keys of one JSON object into typed fields. The first key with the wrong type
// is remembered, named with its path ("renewal.waited_ms"); missing keys are left alone.
class Reader {
 public:
  Reader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

  void Text(const char* name, std::string& out) {
    if (const json* value = Find(name)) {
      if (value->is_string()) {
        out = value->get<std::string>();
      } else {
        Wrong(name, "a string", *value);
      }
    }
  }
  // A string, or null for "".
  void TextOrEmpty(const char* name, std::string& out) {
    if (const json* value = Find(name)) {
      if (value->is_null()) {
        out.clear();
      } else {
        Text(name, out);
      }
    }
  }
  void Signed(const char* name, int64_t& out) {
    if (const json* value = Find(name)) {
      if (value->is_number_integer() &&
          (!value->is_number_unsigned() || value->get<uint64_t>() <= INT64_MAX)) {
        out = value->get<int64_t>();
      } else {
        Wrong(name, "an integer", *value);
      }
    }
  }
  void Unsigned(const char* name, uint64_t& out) {
    if (const json* value = Find(name)) {
      if (value->is_number_unsigned()) {
        out = value->get<uint64_t>();
      } else {
        Wrong(name, "a non-negative integer", *value);
      }
    }
  }
  void Bool(const char* name, bool& out) {
    if (const json* value = Find(name)) {
      if (value->is_boolean()) {
        out = value->get<bool>();
      } else {
        Wrong(name, "true or false", *value);
      }
    }
  }
  // A decimal string of a 64-bit ID, or null.
  void Id(const char* name, std::optional<uint64_t>& out) {
    const json* value = Find(name);
    if (value == nullptr) return;
    if (value->is_null()) {
      out.reset();
      return;
    }
    if (!value->is_string()) return Wrong(name, "a decimal string or null", *value);
    const std::string& text = value->get_ref<const std::string&>();
    uint64_t id = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
      return Wrong(name, "a decimal string of a 64-bit ID", *value);
    }
    out = id;
  }
  // An object (or array, or null), for the caller to read; nullptr if absent or null.
  const json* Nested(const char* name, json::value_t type, const char* expected) {
    const json* value = Find(name);
    if (value == nullptr || value->is_null()) return nullptr;
    if (value->type() != type) {
      Wrong(name, expected, *value);
      return nullptr;
    }
    return value;
  }
  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

  std::string Path(const char* name) const { return path_.empty() ? name : path_ + "." + name; }
  const std::string& error() const { return error_; }
  bool Has(const char* name) const { return object_.contains(name); }

 private:
  const json* Find(const char* name) const {
    const auto found = object_.find(name);
    return found == object_.end() ? nullptr : &*found;
  }
  void Wrong(const char* name, const char* expected, const json& value) {
    std::string shown = Dump(value);
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    Fail(Quoted(Path(name)) + " is " + shown + ", not " + expected);
  }

  const json& object_;
  std::string path_;
  std::string error_;
};

void ReadRenewal(const json& object, RenewalStatus& out, Reader& parent) {
  Reader r(object, parent.Path(key::kRenewal));
  r.Text(key::kStore, out.store);
  r.Text(key::kLocation, out.location);
  r.Signed(key::kSinceUnixMs, out.since_unix_ms);
  r.Signed(key::kWaitedMs, out.waited_ms);
  r.Bool(key::kUnanswered, out.unanswered);
  r.TextOrEmpty(key::kLastError, out.last_error);
  r.TextOrEmpty(key::kLastErrorStore, out.last_error_store);
  if (!r.error().empty()) parent.Fail(r.error());
}

void ReadClockWait(const json& object, ClockWait& out, Reader& parent) {
  Reader r(object, parent.Path(key::kClockWait));
  r.Signed(key::kUntilUnixMs, out.until_unix_ms);
  r.Text(key::kSetBy, out.set_by);
  r.Signed(key::kClockPassesInMs, out.clock_passes_in_ms);
  if (!r.error().empty()) parent.Fail(r.error());
}

void ReadFronts(const json& array, std::vector<FrontStatus>& out, Reader& parent) {
  out.clear();
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string path = parent.Path(key::kFronts) + "[" + std::to_string(i) + "]";
    if (!array[i].is_object()) {
      parent.Fail(Quoted(path) + " is not an object");
      return;
    }
    FrontStatus front;
    Reader r(array[i], path);
    r.Text(key::kName, front.name);
    if (const json* listen = r.Nested(key::kListen, json::value_t::array, "an array")) {
      for (const json& address : *listen) {
        if (!address.is_string()) {
          r.Fail(Quoted(r.Path(key::kListen)) + " holds " + Dump(address) + ", not a string");
          break;
        }
        front.listen.push_back(address.get<std::string>());
      }
    }
    r.Unsigned(key::kConnections, front.connections);
    r.Unsigned(key::kRequests, front.requests);
    r.Unsigned(key::kRefused, front.refused);
    if (!r.error().empty()) {
      parent.Fail(r.error());
      return;
    }
    out.push_back(std::move(front));
  }
}

tl::unexpected<ControlError> BadReply(std::string_view where, const std::string& what) {
  return tl::unexpected(ControlError{vocab::ErrorCode::kBadReply,
                                     "snowflaked's reply on " + std::string(where) +
                                         " does not follow the control protocol: " + what +
                                         "; are snowflaked and this client the same version?",
                                     false});
}

}  // namespace

std::string_view CommandName(Command command) noexcept {
  switch (command) {
    case Command::kStatus:
      return "status";
    case Command::kResume:
      return "resume";
    case Command::kAttach:
      return "attach";
  }
  return "status";
}

std::string RequestLine(Command command) {
  return Dump(json{{key::kCommand, CommandName(command)}}) + "\n";
}

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json RenewalToJson(const RenewalStatus& r) {
  return {
      {key::kStore, r.store},
      {key::kLocation, r.location},
      {key::kSinceUnixMs, r.since_unix_ms},
      {key::kWaitedMs, r.waited_ms},
      {key::kUnanswered, r.unanswered},
      {key::kLastError, TextOrNull(r.last_error)},
      {key::kLastErrorStore, TextOrNull(r.last_error_store)},
  };
}

json ClockWaitToJson(const ClockWait& w) {
  return {
      {key::kUntilUnixMs, w.until_unix_ms},
      {key::kSetBy, w.set_by},
      {key::kClockPassesInMs, w.clock_passes_in_ms},
  };
}

json StatusToJson(const StatusRecord& s) {
  json out = {
      {key::kState, s.state},
      {key::kReasonCode, s.reason_code},
      {key::kReason, s.reason},
      {key::kReasonDetail, s.reason_detail},
      {key::kPid, s.pid},
      {key::kVersion, s.version},
      {key::kInstance, s.instance},
      {key::kRuntimeDir, s.runtime_dir},
      {key::kStateDir, s.state_dir},
      {key::kRegisterBackend, s.register_backend},
      {key::kRegisterLocation, s.register_location},
      {key::kHolderId, s.holder_id},
      {key::kMachine, s.machine},
      {key::kEpochUnixMs, s.epoch_unix_ms},
      {key::kRingCapacity, s.ring_capacity},
      {key::kRingFill, s.ring_fill},
      {key::kFillTarget, s.fill_target},
      {key::kPublishedTotal, s.published_total},
      {key::kDrainedTotal, s.drained_total},
      {key::kIncarnation, s.incarnation},
      {key::kSegmentReopened, s.segment_reopened},
      // IDs are decimal strings in JSON: JavaScript loses precision above 2^53.
      {key::kLastIssuedId, s.last_issued_id ? json(std::to_string(*s.last_issued_id)) : json()},
      {key::kGeneratorMarkUnixMs, s.generator_mark_unix_ms},
      {key::kLastIssuedUnixMs, s.generator_mark_unix_ms},
      {key::kReservedThroughUnixMs, s.reserved_through_unix_ms},
      {key::kClockPauses, s.clock_pauses},
      {key::kClockBehindMs, s.clock_behind_ms},
      {key::kStartedUnixMs, s.started_unix_ms},
      {key::kStateSinceUnixMs, s.state_since_unix_ms},
      {key::kServices, s.services},
      {key::kSegmentsRetired, s.segments_retired},
      {key::kSegmentRetiredReason, s.segment_retired_reason},
  };
  out[key::kRenewal] = s.renewal ? RenewalToJson(*s.renewal) : json();
  out[key::kClockWait] = s.clock_wait ? ClockWaitToJson(*s.clock_wait) : json();
  json fronts = json::array();
  for (const FrontStatus& front : s.fronts) {
    fronts.push_back({{key::kName, front.name},
                      {key::kListen, front.listen},
                      {key::kConnections, front.connections},
                      {key::kRequests, front.requests},
                      {key::kRefused, front.refused}});
  }
  out[key::kFronts] = std::move(fronts);
  return out;
}

tl::expected<StatusRecord, std::string> StatusFromJson(const json& reply) {
  if (!reply.is_object()) return tl::unexpected(std::string("the reply is not a JSON object"));
  StatusRecord s;
  Reader r(reply, "");
  if (!r.Has(key::kState)) return tl::unexpected(std::string("it has no \"state\""));
  r.Text(key::kState, s.state);
  r.Text(key::kReasonCode, s.reason_code);
  r.Text(key::kReason, s.reason);
  r.Signed(key::kReasonDetail, s.reason_detail);
  r.Signed(key::kPid, s.pid);
  r.Text(key::kVersion, s.version);
  r.Text(key::kInstance, s.instance);
  r.Text(key::kRuntimeDir, s.runtime_dir);
  r.Text(key::kStateDir, s.state_dir);
  r.Text(key::kRegisterBackend, s.register_backend);
  r.Text(key::kRegisterLocation, s.register_location);
  r.Text(key::kHolderId, s.holder_id);
  r.Signed(key::kMachine, s.machine);
  r.Signed(key::kEpochUnixMs, s.epoch_unix_ms);
  r.Unsigned(key::kRingCapacity, s.ring_capacity);
  r.Unsigned(key::kRingFill, s.ring_fill);
  r.Unsigned(key::kFillTarget, s.fill_target);
  r.Unsigned(key::kPublishedTotal, s.published_total);
  r.Unsigned(key::kDrainedTotal, s.drained_total);
  r.Unsigned(key::kIncarnation, s.incarnation);
  r.Bool(key::kSegmentReopened, s.segment_reopened);
  r.Id(key::kLastIssuedId, s.last_issued_id);
  // A daemon of the release before sends only the deprecated key.
  if (r.Has(key::kGeneratorMarkUnixMs)) {
    r.Signed(key::kGeneratorMarkUnixMs, s.generator_mark_unix_ms);
  } else {
    r.Signed(key::kLastIssuedUnixMs, s.generator_mark_unix_ms);
  }
  r.Signed(key::kReservedThroughUnixMs, s.reserved_through_unix_ms);
  r.Unsigned(key::kClockPauses, s.clock_pauses);
  r.Signed(key::kClockBehindMs, s.clock_behind_ms);
  r.Signed(key::kStartedUnixMs, s.started_unix_ms);
  r.Signed(key::kStateSinceUnixMs, s.state_since_unix_ms);
  if (const json* services = r.Nested(key::kServices, json::value_t::object, "an object")) {
    for (const auto& [name, taken] : services->items()) {
      if (!taken.is_number_unsigned()) {
        r.Fail(Quoted(r.Path(key::kServices) + "." + name) + " is " + Dump(taken) +
               ", not a non-negative integer");
        break;
      }
      s.services[name] = taken.get<uint64_t>();
    }
  }
  r.Unsigned(key::kSegmentsRetired, s.segments_retired);
  r.Text(key::kSegmentRetiredReason, s.segment_retired_reason);
  if (const json* renewal = r.Nested(key::kRenewal, json::value_t::object, "an object or null")) {
    ReadRenewal(*renewal, s.renewal.emplace(), r);
  }
  if (const json* wait = r.Nested(key::kClockWait, json::value_t::object, "an object or null")) {
    ReadClockWait(*wait, s.clock_wait.emplace(), r);
  }
  if (const json* fronts = r.Nested(key::kFronts, json::value_t::array, "an array")) {
    ReadFronts(*fronts, s.fronts, r);
  }
  if (!r.error().empty()) return tl::unexpected(r.error());
  return s;
}

json StatusReplyJson(const StatusRecord& status) {
  json out = StatusToJson(status);
  out[key::kOk] = true;
  return out;
}

json ResumeReplyJson(const StatusRecord& status, bool resumed) {
  json out = StatusReplyJson(status);
  out[key::kResumed] = resumed;
  return out;
}

json ErrorReplyJson(vocab::ErrorCode code, std::string_view message) {
  return json{{key::kOk, false}, {key::kCode, vocab::ErrorName(code)}, {key::kError, message}};
}

tl::expected<Command, ControlError> ParseRequest(std::string_view line) {
  const json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) {
    return tl::unexpected(ControlError{vocab::ErrorCode::kMalformedRequest,
                                       "malformed request: expected one JSON object per line, "
                                       "like {\"command\":\"status\"}",
                                       true});
  }
  const auto command = request.is_object() ? request.find(key::kCommand) : request.end();
  if (!request.is_object() || command == request.end() || !command->is_string()) {
    return tl::unexpected(
        ControlError{vocab::ErrorCode::kMalformedRequest,
                     "malformed request: expected an object with a string \"command\"", true});
  }
  const std::string& name = command->get_ref<const std::string&>();
  for (const Command known : kCommands) {
    if (name == CommandName(known)) return known;
  }
  return tl::unexpected(ControlError{
      vocab::ErrorCode::kUnknownCommand,
      "unknown command \"" + name + "\": expected \"status\", \"resume\" or \"attach\"", true});
}

tl::expected<json, ControlError> ParseReply(std::string_view line, std::string_view where) {
  json reply = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || !reply.is_object()) {
    return tl::unexpected(ControlError{
        vocab::ErrorCode::kBadReply,
        "snowflaked answered on " + std::string(where) +
            " with something that is not a JSON object: " + std::string(line.substr(0, 200)),
        false});
  }
  const auto ok = reply.find(key::kOk);
  if (ok == reply.end() || !ok->is_boolean()) {
    return BadReply(where, "no \"ok\" of true or false");
  }
  if (ok->get<bool>()) return reply;
  // A refusal: the code decides (one this reader does not know, or none, is "refused");
  // the sentence is for people.
  std::optional<vocab::ErrorCode> code;
  if (const auto found = reply.find(key::kCode); found != reply.end() && found->is_string()) {
    code = vocab::ErrorFromName(found->get_ref<const std::string&>());
  }
  std::string message = "no reason given";
  if (const auto found = reply.find(key::kError); found != reply.end() && found->is_string()) {
    message = found->get<std::string>();
  }
  return tl::unexpected(
      ControlError{code.value_or(vocab::ErrorCode::kRefused), std::move(message), true});
}

tl::expected<StatusRecord, ControlError> ReadStatusReply(const json& reply,
                                                         std::string_view where) {
  auto status = StatusFromJson(reply);
  if (!status) return BadReply(where, status.error());
  return std::move(*status);
}

tl::expected<ResumeResult, ControlError> ReadResumeReply(const json& reply,
                                                         std::string_view where) {
  auto status = ReadStatusReply(reply, where);
  if (!status) return tl::unexpected(std::move(status.error()));
  const auto resumed = reply.find(key::kResumed);
  if (resumed == reply.end() || !resumed->is_boolean()) {
    return BadReply(where, "a resume reply without \"resumed\" of true or false");
  }
  return ResumeResult{resumed->get<bool>(), std::move(*status)};
}

json AttachReplyJson(const AttachRecord& attach) {
  return json{{key::kOk, true},
              {key::kSegmentId, std::to_string(attach.segment_id)},
              {key::kFormatVersion, attach.format_version},
              {key::kRegionBytes, attach.region_bytes}};
}

tl::expected<AttachRecord, ControlError> ReadAttachReply(const json& reply,
                                                         std::string_view where) {
  AttachRecord attach;
  const auto id = reply.find(key::kSegmentId);
  if (id == reply.end() || !id->is_string()) {
    return BadReply(where, "an attach reply without \"segment_id\" as a decimal string");
  }
  const std::string& text = id->get_ref<const std::string&>();
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), attach.segment_id);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return BadReply(
        where, "an attach reply whose \"segment_id\" is not a decimal u64: " + text.substr(0, 40));
  }
  const auto version = reply.find(key::kFormatVersion);
  const auto bytes = reply.find(key::kRegionBytes);
  if (version == reply.end() || !version->is_number_unsigned() || bytes == reply.end() ||
      !bytes->is_number_unsigned()) {
    return BadReply(where,
                    "an attach reply without \"format_version\" and \"region_bytes\" as numbers");
  }
  attach.format_version = version->get<uint64_t>();
  attach.region_bytes = bytes->get<uint64_t>();
  return attach;
}

}  // namespace snowflake::protocol
