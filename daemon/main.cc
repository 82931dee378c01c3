// snowflaked: parse, load config, run (docs/daemon.md).
#include <cstdio>
#include <iostream>

#include "app.h"
#include "command_line.h"
#include "config.h"

int main(int argc, char** argv) {
  auto command_line = snowflake::ParseCommandLine(argc, argv);
  if (!command_line) return command_line.error();
  if (command_line->version) {
    std::cout << "snowflaked " << snowflake::SnowflakedVersion() << "\n";
    return snowflake::kExitOk;
  }
  if (command_line->print_default_config) {
    std::cout << snowflake::DefaultConfigText();
    return snowflake::kExitOk;
  }
  auto config = snowflake::ResolveConfig(*command_line);
  if (!config) {
    std::cerr << "snowflaked: " << config.error().message << "\n";
    return snowflake::kExitUsage;
  }
  if (command_line->check_config) {
    std::cout << "ok\n";
    return snowflake::kExitOk;
  }
  return snowflake::App(std::move(*config)).Run();
}
