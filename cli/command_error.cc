#include "command_error.h"

#include <CLI/CLI.hpp>
#include <iostream>

namespace snowflake::cli {

nlohmann::ordered_json ErrorJson(const CommandError& error) {
  nlohmann::ordered_json out;
  out["ok"] = false;
  out["error_code"] = error.code;
  out["error"] = error.message;
  out["exit_status"] = error.exit_status;
  return out;
}

void FailCommand(const CommandError& error, bool json) {
  std::cerr << "snowflakectl: " << error.message << "\n";
  if (json) std::cout << ErrorJson(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  std::cout.flush();
  throw CLI::RuntimeError(error.exit_status);
}

}  // namespace snowflake::cli
