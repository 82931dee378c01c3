#include "daemon/http/layout_replies.h"

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/id_fields.h"
#include "protocol/vocabulary.h"
#include "snowflake/time_text.h"

namespace snowflake::daemon {
namespace {

using vocab::ErrorCode;

// "2026-01-01T00:00:00.000Z (1767225600000)", for messages.
std::string Shown(int64_t unix_ms) {
  return FormatTimeText(unix_ms) + " (" + std::to_string(unix_ms) + ")";
}

// "the epoch 2026-01-01T00:00:00.000Z (1767225600000), layout 41/10/12", for messages.
std::string EpochAndLayout(const IdLayout& layout) {
  return "this daemon's epoch " + Shown(layout.epoch_unix_ms()) + ", layout " +
         FormatIdBits(layout.bits());
}

HttpReply JsonReply(const nlohmann::ordered_json& object) {
  HttpReply reply;
  reply.body = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return reply;
}

}  // namespace

HttpReply DecodeReply(const IdLayout& layout, uint64_t id) {
  const auto fields = layout.Decode(id);
  if (!fields) {
    return ErrorReply(400, vocab::ErrorName(ErrorCode::kInvalidArgument),
                      "bad id " + std::to_string(id) + ": " +
                          std::string(IdErrorMessage(fields.error())) +
                          "; expected a decimal number from 0 to 9223372036854775807 (2^63-1)");
  }
  nlohmann::ordered_json object = protocol::DecodedIdJson(id, *fields);
  protocol::AddLayoutJson(object, layout);
  return JsonReply(object);
}

HttpReply BoundsReply(const IdLayout& layout, int64_t from_unix_ms, int64_t to_unix_ms) {
  const auto bounds = layout.Bounds(from_unix_ms, to_unix_ms);
  if (!bounds) {
    switch (bounds.error()) {
      case IdError::kRangeReversed:
        return ErrorReply(400, vocab::ErrorName(ErrorCode::kInvalidArgument),
                          "the range ends before it begins: from " + Shown(from_unix_ms) +
                              " is later than to " + Shown(to_unix_ms) + "; swap them");
      case IdError::kTimeBeforeEpoch:
        return ErrorReply(400, vocab::ErrorName(ErrorCode::kTimeOutOfRange),
                          "no ID carries a time in this range: it ends at " + Shown(to_unix_ms) +
                              ", before " + EpochAndLayout(layout) +
                              " (its IDs start at the epoch); ask for a range that reaches it");
      default:
        return ErrorReply(400, vocab::ErrorName(ErrorCode::kTimeOutOfRange),
                          "no ID carries a time in this range: it starts at " +
                              Shown(from_unix_ms) + ", after " + Shown(layout.max_unix_ms()) +
                              ", the last millisecond IDs of " + EpochAndLayout(layout) +
                              " can carry (" + std::to_string(layout.bits().time) +
                              " bits of milliseconds); ask for a range that starts before it");
    }
  }
  nlohmann::ordered_json object = protocol::IdBoundsJson(*bounds, from_unix_ms, to_unix_ms);
  protocol::AddLayoutJson(object, layout);
  return JsonReply(object);
}

}  // namespace snowflake::daemon
