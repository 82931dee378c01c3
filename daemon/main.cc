// snowflaked: parse, load config, run (docs/daemon.md).
#include <cstdio>
#include <iostream>

#include "daemon/app.h"
#include "daemon/command_line.h"
#include "daemon/config/config.h"

int main(int argc, char** argv) {
  auto command_line = snowflake::daemon::ParseCommandLine(argc, argv);
  if (!command_line) return command_line.error();
  if (command_line->version) {
    std::cout << "snowflaked " << snowflake::daemon::SnowflakedVersion() << "\n";
    return snowflake::daemon::kExitOk;
  }
  if (command_line->print_default_config) {
    std::cout << snowflake::daemon::DefaultConfigText();
    return snowflake::daemon::kExitOk;
  }
  auto config = snowflake::daemon::ResolveConfig(*command_line);
  if (!config) {
    std::cerr << "snowflaked: " << config.error().message << "\n";
    return snowflake::daemon::kExitUsage;
  }
  if (command_line->check_config) {
    // What the start would refuse on this host, too (a missing group, a future epoch).
    if (auto checked = snowflake::daemon::CheckConfigAgainstHost(*config, snowflake::Clock::Real());
        !checked) {
      std::cerr << "snowflaked: " << checked.error() << "\n";
      return snowflake::daemon::kExitConfig;
    }
    std::cout << "ok\n";
    return snowflake::daemon::kExitOk;
  }
  return snowflake::daemon::App(std::move(*config)).Run();
}
