// Which epoch `decode` and `bounds` use: --epoch when given (any form the daemon's config
// accepts, snowflake/time_text.h), else the local daemon's (read from its segment, so it
// works whenever a daemon ran in the runtime directory), else the default 2026-01-01.
// Both commands say which one they used.
//
// All functions are safe to call from any thread.

#ifndef SNOWFLAKE_CLI_EPOCH_CHOICE_H_
#define SNOWFLAKE_CLI_EPOCH_CHOICE_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "snowflake/id_layout.h"
#include "snowflake/time_text.h"

namespace snowflake::cli {

// The latest time FormatTimeText() (snowflake/time_text.h) can write with a four-digit year:
// 9999-12-31T23:59:59.999Z.
inline constexpr int64_t kMaxIsoUnixMs = kMaxTextUnixMs;
// The latest epoch accepted: every ID of it still has a four-digit-year time.
inline constexpr int64_t kMaxEpochUnixMs = kMaxIsoUnixMs - kMaxTimeOffsetMs;

// Parses an epoch with ParseTimeText(), from 1970-01-01T00:00:00Z to kMaxEpochUnixMs.
// On error returns "bad epoch '<text>': <what is wrong>; expected <the forms>".
tl::expected<IdLayout, std::string> ParseEpoch(std::string_view text) noexcept;

struct EpochChoice {
  IdLayout layout;
  std::string source;  // "option" (--epoch), "daemon" or "default"
  // For people: "2026-01-01T00:00:00.000Z (1767225600000), the epoch of the daemon in
  // /run/snowflaked".
  std::string description;
};

// --epoch `text` if given; else, if `runtime_dir` is given and a daemon's segment there
// can be read, its epoch; else the default. Fails only on a bad `text` (ParseEpoch()).
tl::expected<EpochChoice, std::string> ChooseEpoch(
    const std::optional<std::string>& text,
    const std::optional<std::filesystem::path>& runtime_dir) noexcept;

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_EPOCH_CHOICE_H_
