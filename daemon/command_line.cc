#include "daemon/command_line.h"

#include <CLI/CLI.hpp>
#include <iostream>

namespace snowflake::daemon {

tl::expected<CommandLine, int> ParseCommandLine(int argc, const char* const* argv) noexcept {
  try {
    CommandLine out;
    CLI::App app{
        "snowflaked: the per-host daemon that claims a machine number and keeps the "
        "shared-memory ring of 64-bit snowflake IDs filled (docs/daemon.md)",
        "snowflaked"};
    std::string config_path, runtime_dir, state_dir, log_level;
    app.add_option("--config", config_path,
                   "TOML config file (default: the built-in defaults, see "
                   "--print-default-config)");
    app.add_option("--runtime-dir", runtime_dir,
                   "directory of the segment, instance lock and control socket (overrides "
                   "daemon.runtime_dir)");
    app.add_option("--state-dir", state_dir,
                   "directory of the high-water file and default register (overrides "
                   "daemon.state_dir)");
    app.add_option("--log-level", log_level,
                   "trace, debug, info, warn, error, critical or off (overrides daemon.log_level)");
    app.add_flag("--check-config", out.check_config,
                 "validate the config, print \"ok\" and exit 0, or print the error and exit 2");
    app.add_flag("--print-default-config", out.print_default_config,
                 "print the commented default config (systemd/snowflaked.toml) and exit");
    app.add_flag("--version", out.version, "print the version and exit");
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int status = app.exit(e);
      return tl::unexpected(status == 0 ? 0 : 2);
    }
    if (!config_path.empty()) out.config_path = config_path;
    if (!runtime_dir.empty()) out.runtime_dir = runtime_dir;
    if (!state_dir.empty()) out.state_dir = state_dir;
    if (!log_level.empty()) out.log_level = log_level;
    return out;
  } catch (const std::exception& e) {
    std::cerr << "snowflaked: " << e.what() << "\n";
    return tl::unexpected(2);
  }
}

tl::expected<Config, util::ConfigError> ResolveConfig(const CommandLine& command_line) noexcept {
  try {
    Config config;
    if (command_line.config_path) {
      auto loaded = LoadConfig(*command_line.config_path);
      if (!loaded) return loaded;
      config = std::move(*loaded);
    }
    if (command_line.runtime_dir) {
      config.daemon.runtime_dir = std::filesystem::absolute(*command_line.runtime_dir);
    }
    if (command_line.state_dir) {
      config.daemon.state_dir = std::filesystem::absolute(*command_line.state_dir);
    }
    if (command_line.log_level) {
      if (!IsValidLogLevel(*command_line.log_level)) {
        return tl::unexpected(util::ConfigError{
            "--log-level: must be one of trace, debug, info, warn, error, critical, off, got \"" +
            *command_line.log_level + "\""});
      }
      config.daemon.log_level = *command_line.log_level;
    }
    return config;
  } catch (const std::exception& e) {
    return tl::unexpected(util::ConfigError{std::string("command line: ") + e.what()});
  }
}

}  // namespace snowflake::daemon
