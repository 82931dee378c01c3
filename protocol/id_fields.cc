#include "protocol/id_fields.h"

#include <string>

#include "snowflake/time_text.h"

namespace snowflake::protocol {

nlohmann::ordered_json DecodedIdJson(uint64_t id, const DecodedId& fields) {
  nlohmann::ordered_json object;
  object["id"] = std::to_string(id);
  object["unix_ms"] = fields.unix_ms;
  object["time"] = FormatTimeText(fields.unix_ms);
  object["machine"] = fields.machine;
  object["sequence"] = fields.sequence;
  return object;
}

nlohmann::ordered_json IdBoundsJson(const IdBounds& bounds, int64_t from_unix_ms,
                                    int64_t to_unix_ms) {
  nlohmann::ordered_json object;
  object["first_id"] = std::to_string(bounds.first_id);
  object["last_id"] = std::to_string(bounds.last_id);
  object["first_unix_ms"] = bounds.first_unix_ms;
  object["last_unix_ms"] = bounds.last_unix_ms;
  object["first_time"] = FormatTimeText(bounds.first_unix_ms);
  object["last_time"] = FormatTimeText(bounds.last_unix_ms);
  object["from_unix_ms"] = from_unix_ms;
  object["to_unix_ms"] = to_unix_ms;
  object["clamped"] = bounds.first_unix_ms != from_unix_ms || bounds.last_unix_ms != to_unix_ms;
  return object;
}

void AddLayoutJson(nlohmann::ordered_json& object, const IdLayout& layout,
                   std::string_view epoch_source, std::string_view layout_source) {
  object["epoch_unix_ms"] = layout.epoch_unix_ms();
  if (!epoch_source.empty()) object["epoch_source"] = epoch_source;
  object["layout"] = FormatIdBits(layout.bits());
  if (!layout_source.empty()) object["layout_source"] = layout_source;
}

}  // namespace snowflake::protocol
