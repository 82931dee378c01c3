// `snowflakectl next [-n N] [--service NAME]`: takes N IDs from the local daemon and
// prints them, one decimal per line, strictly increasing. Batches inside (NextBatch into
// a large buffer, written with fwrite), so millions of IDs per second can be printed.

#ifndef SNOWFLAKE_CLI_NEXT_COMMAND_H_
#define SNOWFLAKE_CLI_NEXT_COMMAND_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "snowflake/client.h"

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

inline constexpr uint64_t kMaxNextCount = 1'000'000'000;

// Parses -n: decimal digits only, 1 to kMaxNextCount. On error returns a sentence naming
// the text, what is wrong ("it is negative", "not a decimal number", "too large", zero)
// and what is expected.
tl::expected<uint64_t, std::string> ParseCount(std::string_view text) noexcept;

// How long `next` keeps retrying a ring that stays empty (ring_empty, whose action is
// retry_here: the daemon is alive and refilling) before it gives up: a person or script
// waits for the whole command, not for one ID.
inline constexpr std::chrono::milliseconds kRingEmptyPatience{5000};

// Takes `count` IDs through `client` and writes them to `out`. A take that finds the ring
// empty (ring_empty) is retried until it has stayed empty for `ring_empty_patience`.
// Returns kExitOk, or kExitUnavailable after writing the error to `err` (the IDs taken
// before it are printed).
int RunNext(Client& client, uint64_t count, std::FILE* out, std::FILE* err,
            std::chrono::milliseconds ring_empty_patience = kRingEmptyPatience) noexcept;

// Registers the `next` subcommand.
void AddNextCommand(CLI::App& app);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_NEXT_COMMAND_H_
