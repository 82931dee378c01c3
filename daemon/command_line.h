// snowflaked's command line (CLI11): which config to load and what to override.

#ifndef SNOWFLAKE_DAEMON_COMMAND_LINE_H_
#define SNOWFLAKE_DAEMON_COMMAND_LINE_H_

#include <filesystem>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "daemon/config/config.h"

namespace snowflake::daemon {

struct CommandLine {
  std::optional<std::filesystem::path> config_path;  // absent: built-in defaults
  std::optional<std::filesystem::path> runtime_dir;
  std::optional<std::filesystem::path> state_dir;
  std::optional<std::string> log_level;
  bool check_config = false;
  bool print_default_config = false;
  bool version = false;
};

// Parses argv. When parsing ends the run (--help, or a usage error), it prints what CLI11
// prints and the error holds the exit status (0 for --help, 2 for a usage error).
[[nodiscard]] tl::expected<CommandLine, int> ParseCommandLine(int argc, const char* const* argv) noexcept;

// The config the command line asks for: the file (or the built-in defaults) with the
// flags applied on top; relative directories given as flags become absolute.
// Errors: those of LoadConfig, or an invalid --log-level.
[[nodiscard]] tl::expected<Config, util::ConfigError> ResolveConfig(
    const CommandLine& command_line) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_COMMAND_LINE_H_
