// `--runtime-dir DIR` for every command that talks to the daemon. It is accepted both
// before the subcommand (`snowflakectl --runtime-dir D status`) and after it
// (`snowflakectl status --runtime-dir D`); the one after wins. Without either:
// $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked (as for libsnowflake).

#ifndef SNOWFLAKE_CLI_RUNTIME_DIR_OPTION_H_
#define SNOWFLAKE_CLI_RUNTIME_DIR_OPTION_H_

#include <filesystem>
#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// Adds --runtime-dir to `command` and (once) to `app`, its parent. The returned function,
// called from the command's callback, gives the directory to use.
std::function<std::filesystem::path()> AddRuntimeDirOption(CLI::App& app, CLI::App& command);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_RUNTIME_DIR_OPTION_H_
