// `snowflakectl status [--json]`: the daemon's state as its segment shows it (readable
// even when the daemon is dead) plus what its control socket reports (version, uptime,
// register, last ID, reservation, per-service counts). The JSON keys are documented in
// docs/cli.md and stable.
//
// All functions are safe to call from any thread.

#ifndef SNOWFLAKE_CLI_STATUS_COMMAND_H_
#define SNOWFLAKE_CLI_STATUS_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// Registers the `status` subcommand.
void AddStatusCommand(CLI::App& app);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_STATUS_COMMAND_H_
