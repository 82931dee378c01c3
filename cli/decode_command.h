// `snowflakectl decode ID... [--epoch TIME] [--layout BITS | --config FILE] [--json]`:
// splits IDs into their creation time, machine number and sequence. Needs no daemon; uses
// the local daemon's epoch and layout when one ran in the runtime directory
// (epoch_choice.h).
//
// The parsing and formatting pieces are exposed so they can be tested without a process.
// All functions are pure and safe to call from any thread.

#ifndef SNOWFLAKE_CLI_DECODE_COMMAND_H_
#define SNOWFLAKE_CLI_DECODE_COMMAND_H_

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "epoch_choice.h"
#include "snowflake/id_layout.h"

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// Parses a decimal ID: digits only, 0 to 2^63-1. On error returns a sentence naming the
// argument, what is wrong and what is expected (no trailing newline).
tl::expected<uint64_t, std::string> ParseId(std::string_view text) noexcept;

// One line (no newline) describing an ID:
// `460179243593728  unix_ms=1767225709713 time=2026-01-01T00:01:49.713Z machine=3 sequence=0`
// REQUIRES: id < 2^63 and layout.epoch_unix_ms() <= kMaxEpochUnixMs.
std::string FormatDecodedHuman(uint64_t id, const IdLayout& layout);

// One JSON object (no newline) with keys id (a decimal string: JSON readers lose
// precision above 2^53), unix_ms, time, machine, sequence, epoch_unix_ms, epoch_source
// (EpochChoice::source), layout ("41/10/12") and layout_source (EpochChoice::layout_source).
// Same REQUIRES as above.
std::string FormatDecodedJson(uint64_t id, const IdLayout& layout,
                              std::string_view epoch_source = "default",
                              std::string_view layout_source = "default");

struct DecodeRequest {
  std::vector<std::string> ids;
  std::string epoch;       // "" with has_epoch false: the default epoch
  bool has_epoch = false;  // --epoch was given (even as an empty string)
  bool json = false;
  // Without --epoch or without --layout/--config: where to look for the local daemon's
  // epoch and layout; nullopt: the defaults.
  std::optional<std::filesystem::path> runtime_dir;
  LayoutSources layout;  // --layout, --config
};

// Validates every argument first; if any is bad, writes one line per bad argument to
// `err`, nothing to `out` (with json: one error object, command_error.h), and returns
// kExitUsage. Otherwise writes one line per ID to `out`, says on `err` which epoch it
// used (unless json: then each object has it), and returns kExitOk.
int RunDecode(const DecodeRequest& request, std::ostream& out, std::ostream& err);

// Registers the `decode` subcommand. Its callback throws CLI::RuntimeError(status) for a
// non-zero exit status, which main() returns.
void AddDecodeCommand(CLI::App& app);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_DECODE_COMMAND_H_
