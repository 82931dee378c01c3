// `--runtime-dir DIR` for every command that talks to the daemon. It is accepted both
// before the subcommand (`snowflakectl --runtime-dir D status`) and after it
// (`snowflakectl status --runtime-dir D`); the one after wins. Without either:
// $SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked (as for libsnowflake).

#ifndef SNOWFLAKE_CLI_RUNTIME_DIR_OPTION_H_
#define SNOWFLAKE_CLI_RUNTIME_DIR_OPTION_H_

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "command_error.h"

namespace CLI {
class App;
}  // namespace CLI

namespace snowflake::cli {

// The directory a command uses and where that choice came from, for messages.
struct RuntimeDir {
  std::filesystem::path path;
  // "--runtime-dir", "$SNOWFLAKE_RUNTIME_DIR" or "the default".
  std::string origin;

  // "/run/x (from --runtime-dir)" or "/run/snowflaked (the default)".
  std::string Describe() const;
};

// Adds --runtime-dir to `command` and (once) to `app`, its parent. The returned function,
// called from the command's callback, gives the directory to use.
std::function<RuntimeDir()> AddRuntimeDirOption(CLI::App& app, CLI::App& command);

// Why no daemon can be found in `dir` before even looking for its files: the directory
// does not exist, is not a directory, or this user may not enter it (naming the user and
// the directory's group). nullopt when it is an accessible directory.
std::optional<CommandError> CheckRuntimeDir(const RuntimeDir& dir);

}  // namespace snowflake::cli

#endif  // SNOWFLAKE_CLI_RUNTIME_DIR_OPTION_H_
