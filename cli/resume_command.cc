#include "resume_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>

#include "command_error.h"
#include "control_client.h"
#include "exit_codes.h"
#include "runtime_dir_option.h"

namespace snowflake::cli {

void AddResumeCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "resume",
      "Ask an out-of-service daemon (large clock step) to serve again, after checking the "
      "clock. Prints the daemon's reply. Exit 0 if it accepted, 1 if it refused or is not "
      "reachable.");
  auto json = std::make_shared<bool>(false);
  command->add_flag("--json", *json, "Print the daemon's reply as JSON");
  auto runtime_dir = AddRuntimeDirOption(app, *command);
  command->callback([json, runtime_dir] {
    const RuntimeDir dir = runtime_dir();
    if (auto unusable = CheckRuntimeDir(dir)) FailCommand(*unusable, *json);
    auto reply = SendControlRequest(dir.path, {{"command", "resume"}});
    if (!reply) FailCommand(reply.error(), *json);
    const bool ok = reply->value("ok", false);
    if (!ok) {
      const auto error = reply->find("error");
      const std::string why =
          error != reply->end() && error->is_string() ? error->get<std::string>() : reply->dump();
      std::cerr << "snowflakectl: resume refused: " << why << "\n";
      if (*json) {
        // The daemon's vocabulary code says why (permission_denied, timed_out, ...); a reply
        // without one (an older daemon) or with a code this CLI does not know is "refused".
        std::optional<vocab::ErrorCode> why_code;
        const auto code = reply->find("code");
        if (code != reply->end() && code->is_string()) {
          why_code = vocab::ErrorFromName(code->get<std::string>());
        }
        (*reply)["error_code"] = CodeName(why_code.value_or(vocab::ErrorCode::kRefused));
        (*reply)["exit_status"] = kExitUnavailable;
        std::cout << reply->dump() << "\n";
      }
      std::cout.flush();
      throw CLI::RuntimeError(kExitUnavailable);
    }
    if (*json) {
      std::cout << reply->dump() << "\n";
    } else {
      // "resumed": false means the daemon was not out of service: nothing to do.
      std::cout << (reply->value("resumed", true) ? "resumed"
                                                  : "not out of service; nothing to resume");
      if (reply->contains("state") && (*reply)["state"].is_string()) {
        std::cout << " (state " << (*reply)["state"].get<std::string>() << ")";
      }
      std::cout << "\n";
    }
  });
}

}  // namespace snowflake::cli
