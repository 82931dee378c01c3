// The daemon's view of the one vocabulary (protocol/vocabulary.h): its states and reasons
// in words for logs, STATUS= and `snowflakectl status`, with what happens next. The words
// themselves live in the vocabulary's tables; this adds only what the daemon appends (the
// store or bound that explains a reason).
//
// Thread-safe: pure functions over constant tables.

#ifndef SNOWFLAKE_DAEMON_CORE_STATE_WORDS_H_
#define SNOWFLAKE_DAEMON_CORE_STATE_WORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/vocabulary.h"
#include "snowflake/segment_layout.h"

namespace snowflake::daemon {

using vocab::Recovery;
using vocab::RecoveryFor;
using vocab::RecoveryText;
using vocab::StateText;

// The whole reason in words: the vocabulary's summary with its detail, then `extra` in
// parentheses (which store failed, a generator's bound). "clock moved back 5 ms". With
// `now_unix_ms`, a detail that is a time also says how long ago it was. Throws
// std::bad_alloc only.
std::string DescribeReason(shm::StateReason reason, int64_t detail, std::string_view extra = "",
                           std::optional<int64_t> now_unix_ms = std::nullopt);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_STATE_WORDS_H_
