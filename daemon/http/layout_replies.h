// The replies of /v1/decode and /v1/bounds (docs/http.md): an ID's fields, and the IDs of a
// time range, in the daemon's own layout and epoch ([id] layout and epoch), each naming
// both. The keys are those of `snowflakectl decode --json` and `bounds --json` (docs/cli.md)
// less their `*_source` keys (here always the daemon's config) and bounds' "ok"; the
// arithmetic is IdLayout's (snowflake/id_layout.h). No sockets, no state.
//
// Thread-safe: pure functions.

#ifndef SNOWFLAKE_DAEMON_HTTP_LAYOUT_REPLIES_H_
#define SNOWFLAKE_DAEMON_HTTP_LAYOUT_REPLIES_H_

#include <cstdint>

#include "daemon/http/http_body.h"
#include "snowflake/id_layout.h"

namespace snowflake::daemon {

// 200 {"id":"…","unix_ms":…,"time":"…","machine":…,"sequence":…,"epoch_unix_ms":…,
// "layout":"41/16/6"}; 400 invalid_argument for an ID with the sign bit set (which
// RouteHttpRequest already refuses).
HttpReply DecodeReply(const IdLayout& layout, uint64_t id);

// 200 {"first_id":"…","last_id":"…","first_unix_ms":…,"last_unix_ms":…,"first_time":"…",
// "last_time":"…","from_unix_ms":…,"to_unix_ms":…,"clamped":…,"epoch_unix_ms":…,
// "layout":"…"}: the range [from, to] as cut to what IDs of the epoch carry (clamped: it
// was cut). 400 time_out_of_range for a range wholly before the epoch or after its last
// millisecond, naming the epoch and the layout; 400 invalid_argument for from > to (which
// RouteHttpRequest already refuses).
HttpReply BoundsReply(const IdLayout& layout, int64_t from_unix_ms, int64_t to_unix_ms);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_LAYOUT_REPLIES_H_
