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
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "snowflake/id_layout.h"
#include "snowflake/time_text.h"

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// The latest time FormatTimeText() (snowflake/time_text.h) can write with a four-digit year:
// 9999-12-31T23:59:59.999Z.
inline constexpr int64_t kMaxIsoUnixMs = kMaxTextUnixMs;
// The latest epoch accepted: every ID of it, in any layout (at most kMaxTimeBits of time),
// still has a four-digit-year time.
inline constexpr int64_t kMaxEpochUnixMs = kMaxIsoUnixMs - ((int64_t{1} << kMaxTimeBits) - 1);

// Parses an epoch with ParseTimeText(), from 1970-01-01T00:00:00Z to kMaxEpochUnixMs.
// On error returns "bad epoch '<text>': <what is wrong>; expected <the forms>".
tl::expected<IdLayout, std::string> ParseEpoch(std::string_view text) noexcept;

struct EpochChoice {
  IdLayout layout;
  std::string source;  // the epoch's: "option" (--epoch), "daemon" or "default"
  // The bits': "option" (--layout), "config" (id.layout of --config's file, the fleet's
  // that its register records), "daemon" (its segment's header) or "default".
  std::string layout_source = "default";
  // For people: "2026-01-01T00:00:00.000Z (1767225600000), the epoch of the daemon in
  // /run/snowflaked; layout 41/10/12, the daemon's".
  std::string description;
};

// Where a command may take the layout's bits from besides the daemon's segment.
struct LayoutSources {
  std::optional<std::string> layout;            // --layout: a preset or "T/M/S" (ParseIdBits)
  std::optional<std::filesystem::path> config;  // --config: the file's id.layout
};

// The epoch: --epoch `text` if given; else, if `runtime_dir` is given and a daemon's segment
// there can be read, its epoch; else the default. The bits: `sources.layout` if given; else
// `sources.config`'s id.layout; else the daemon's segment's (as for the epoch); else the
// default. Fails on a bad `text` (ParseEpoch()), a bad layout (ParseIdBits()), a config
// file that cannot be read, or an epoch whose range in those bits overflows.
// Adds --layout and --config (which exclude each other) to `command`, as decode and bounds
// take them. The returned function, called from the command's callback, gives what was set.
std::function<LayoutSources()> AddLayoutOptions(CLI::App& command);

tl::expected<EpochChoice, std::string> ChooseEpoch(
    const std::optional<std::string>& text, const std::optional<std::filesystem::path>& runtime_dir,
    const LayoutSources& sources = {}) noexcept;

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_EPOCH_CHOICE_H_
