// `snowflakectl resume [--json]`: asks an out-of-service daemon to serve again, through
// its control socket. The daemon still never issues at or below its high-water mark; it
// refuses (exit 1) when resuming is not safe or not needed.

#ifndef SNOWFLAKE_CLI_RESUME_COMMAND_H_
#define SNOWFLAKE_CLI_RESUME_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// Registers the `resume` subcommand.
void AddResumeCommand(CLI::App& app);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_RESUME_COMMAND_H_
