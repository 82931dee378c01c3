// `snowflakectl bounds --from TIME [--to TIME] [--epoch TIME] [--json]`: the smallest and
// largest IDs any machine can have made in a time range, both ends included to the
// millisecond, for `WHERE id BETWEEN first AND last`. Needs no daemon; uses the local
// daemon's epoch when one ran in the runtime directory (epoch_choice.h).
//
// All functions are safe to call from any thread.

#ifndef SNOWFLAKE_CLI_BOUNDS_COMMAND_H_
#define SNOWFLAKE_CLI_BOUNDS_COMMAND_H_

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>

#include "epoch_choice.h"

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

struct BoundsRequest {
  std::string from;
  std::optional<std::string> to;                     // nullopt: the millisecond of `from`
  std::optional<std::string> epoch;                  // --epoch
  std::optional<std::filesystem::path> runtime_dir;  // where to look for the daemon's epoch
  LayoutSources layout;                              // --layout, --config
  bool json = false;
};

// Writes the bounds to `out` (several lines, or one JSON object) and returns kExitOk; or
// writes why not to `err` (and, with json, an error object to `out`) and returns
// kExitUsage: a bad time, a range that ends before it begins, or one no ID can carry.
int RunBounds(const BoundsRequest& request, std::ostream& out, std::ostream& err);

// Registers the `bounds` subcommand.
void AddBoundsCommand(CLI::App& app);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_BOUNDS_COMMAND_H_
