// The JSON of an ID's fields and of a time range's bounds, defined once: `snowflakectl
// decode --json` and `bounds --json` (cli/) and the HTTP front's /v1/decode and /v1/bounds
// (daemon/http/layout_replies.cc) write them with these functions, so their keys cannot
// drift apart (docs/cli.md and docs/http.md list them).
//
//   DecodedIdJson  {"id":"123","unix_ms":…,"time":"…","machine":…,"sequence":…}
//   IdBoundsJson   {"first_id":"…","last_id":"…","first_unix_ms":…,"last_unix_ms":…,
//                   "first_time":"…","last_time":"…","from_unix_ms":…,"to_unix_ms":…,
//                   "clamped":…}
//   AddLayoutJson  appends "epoch_unix_ms", ["epoch_source"], "layout", ["layout_source"]
//
// IDs are decimal strings (a 63-bit number does not survive a double); times are Unix
// milliseconds and RFC 3339 (snowflake/time_text.h). Pure functions, safe from any thread.

#ifndef SNOWFLAKE_PROTOCOL_ID_FIELDS_H_
#define SNOWFLAKE_PROTOCOL_ID_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "snowflake/id_layout.h"

namespace snowflake::protocol {

// The fields of `id` (IdLayout::Decode), in the keys' documented order, id first.
nlohmann::ordered_json DecodedIdJson(uint64_t id, const DecodedId& fields);

// The bounds of the range asked for as [from_unix_ms, to_unix_ms] (IdLayout::Bounds);
// "clamped" says the range was cut to what the epoch's IDs can carry.
nlohmann::ordered_json IdBoundsJson(const IdBounds& bounds, int64_t from_unix_ms,
                                    int64_t to_unix_ms);

// Appends which epoch and layout the figures are in; each source only when given (the CLI
// says where it took them from: an option, the config, the daemon's segment, the default).
void AddLayoutJson(nlohmann::ordered_json& object, const IdLayout& layout,
                   std::string_view epoch_source = {}, std::string_view layout_source = {});

}  // namespace snowflake::protocol

#endif  // SNOWFLAKE_PROTOCOL_ID_FIELDS_H_
