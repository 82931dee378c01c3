// `snowflakectl register list [--json]`, `register show N [--json]` and
// `register release N`: the machine numbers of the register the daemon's config names
// (file or etcd), read directly from the register, not through a daemon: holder, host,
// since when, the lease time left (etcd), and the high-water mark.
//
// release frees a number for another holder. It refuses a number a live daemon holds (exit
// 1) and never lowers or removes a high-water mark.

#ifndef SNOWFLAKE_CLI_REGISTER_COMMAND_H_
#define SNOWFLAKE_CLI_REGISTER_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// Registers the `register` subcommand and its list/show/release subcommands.
void AddRegisterCommand(CLI::App& app);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_REGISTER_COMMAND_H_
