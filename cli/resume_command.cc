#include "resume_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "command_error.h"
#include "exit_codes.h"
#include "protocol/control_client.h"
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
    auto reply = protocol::Resume(dir.path);
    // A refusal carries the daemon's code (permission_denied, timed_out, ...); one without
    // a code, or with one this CLI does not know, is "refused".
    if (!reply) FailCommand(FromControlError(reply.error(), "resume"), *json);
    if (*json) {
      std::cout << protocol::Dump(protocol::ResumeReplyJson(reply->status, reply->resumed)) << "\n";
    } else {
      // "resumed": false means the daemon was not out of service: nothing to do.
      std::cout << (reply->resumed ? "resumed" : "not out of service; nothing to resume")
                << " (state " << reply->status.state << ")\n";
    }
  });
}

}  // namespace snowflake::cli
