#include "command_error.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "exit_codes.h"

namespace snowflake::cli {

nlohmann::ordered_json ErrorJson(const CommandError& error) {
  nlohmann::ordered_json out;
  out["ok"] = false;
  out["error_code"] = error.code;
  out["error"] = error.message;
  out["exit_status"] = error.exit_status;
  return out;
}

CommandError FromControlError(const protocol::ControlError& error, std::string_view what) {
  if (error.code == vocab::ErrorCode::kUsage) {
    return {kExitUsage, CodeName(error.code), error.message + " (--runtime-dir)"};
  }
  return {kExitUnavailable, CodeName(error.code),
          error.refused ? std::string(what) + " refused: " + error.message : error.message};
}

void FailCommand(const CommandError& error, bool json) {
  std::cerr << "snowflakectl: " << error.message << "\n";
  if (json) std::cout << ErrorJson(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  std::cout.flush();
  throw CLI::RuntimeError(error.exit_status);
}

}  // namespace snowflake::cli
