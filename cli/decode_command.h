// `snowflakectl decode ID... [--epoch MS|ISO-8601] [--json]`: splits IDs into their
// creation time, machine number and sequence. Needs no daemon.
//
// The parsing and formatting pieces are exposed so they can be tested without a process.
// All functions are pure and safe to call from any thread.

#ifndef SNOWFLAKE_CLI_DECODE_COMMAND_H_
#define SNOWFLAKE_CLI_DECODE_COMMAND_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "snowflake/id_layout.h"

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// The latest time FormatIsoTime() can write with a four-digit year:
// 9999-12-31T23:59:59.999Z.
inline constexpr int64_t kMaxIsoUnixMs = 253'402'300'799'999;
// The latest epoch decode accepts: every ID of it still has a four-digit-year time.
inline constexpr int64_t kMaxEpochUnixMs = kMaxIsoUnixMs - kMaxTimeOffsetMs;

// Parses a decimal ID: digits only, 0 to 2^63-1. On error returns a sentence naming the
// argument, what is wrong and what is expected (no trailing newline).
tl::expected<uint64_t, std::string> ParseId(std::string_view text) noexcept;

// Parses an epoch: Unix milliseconds (digits only) or a UTC ISO-8601 time
// `YYYY-MM-DDTHH:MM:SS[.mmm]Z`, from 1970-01-01T00:00:00Z to kMaxEpochUnixMs. Any time
// zone other than `Z` is refused. On error returns a sentence as ParseId() does.
tl::expected<IdLayout, std::string> ParseEpoch(std::string_view text) noexcept;

// `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC. REQUIRES: 0 <= unix_ms <= kMaxIsoUnixMs.
std::string FormatIsoTime(int64_t unix_ms);

// One line (no newline) describing an ID:
// `460179243593728  unix_ms=1767225709713 time=2026-01-01T00:01:49.713Z machine=3 sequence=0`
// REQUIRES: id < 2^63 and layout.epoch_unix_ms() <= kMaxEpochUnixMs.
std::string FormatDecodedHuman(uint64_t id, const IdLayout& layout);

// One JSON object (no newline) with keys id (a decimal string: JSON readers lose
// precision above 2^53), unix_ms, time, machine, sequence. Same REQUIRES as above.
std::string FormatDecodedJson(uint64_t id, const IdLayout& layout);

struct DecodeRequest {
  std::vector<std::string> ids;
  std::string epoch;       // "" with has_epoch false: the default epoch
  bool has_epoch = false;  // --epoch was given (even as an empty string)
  bool json = false;
};

// Validates every argument first; if any is bad, writes one line per bad argument to
// `err`, nothing to `out`, and returns kExitUsage. Otherwise writes one line per ID to
// `out` and returns kExitOk.
int RunDecode(const DecodeRequest& request, std::ostream& out, std::ostream& err);

// Registers the `decode` subcommand. Its callback throws CLI::RuntimeError(status) for a
// non-zero exit status, which main() returns.
void AddDecodeCommand(CLI::App& app);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_DECODE_COMMAND_H_
