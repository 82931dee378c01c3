#include "status_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "command_error.h"
#include "exit_codes.h"
#include "libclient/status/status_report.h"
#include "protocol/control_client.h"
#include "runtime_dir_option.h"

namespace snowflake::cli {

using status::StatusReport;
using status::StatusToJson;
using status::StatusToText;

void AddStatusCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "status",
      "Show the daemon's version, uptime, state, machine and register, last ID, reservation, "
      "ring fill, counts and per-service totals. Reads the segment (works even if the daemon "
      "is dead) and asks the control socket. Exit 0 if the daemon is serving and answering, "
      "1 otherwise.");
  auto json = std::make_shared<bool>(false);
  command->add_flag("--json", *json, "Print one JSON object (keys: docs/cli.md)");
  auto runtime_dir = AddRuntimeDirOption(app, *command);
  command->callback([json, runtime_dir] {
    const RuntimeDir dir = runtime_dir();
    if (auto unusable = CheckRuntimeDir(dir)) FailCommand(*unusable, *json);
    ClientOptions options;
    options.runtime_dir = dir.path;
    // The daemon's answer first: the segment's counts then come from a second connection
    // (attach), which a daemon that answered status gives at once.
    auto answer = protocol::QueryStatus(options.runtime_dir);
    auto segment = Client::Inspect(options);
    if (!segment) {
      FailCommand({kExitUnavailable, std::string(ClientErrorName(segment.error().code)),
                   segment.error().message},
                  *json);
    }
    StatusReport report{.segment = std::move(*segment),
                        .daemon = {},
                        .daemon_error = {},
                        .now_unix_ms = 0,
                        .runtime_dir = dir.path.string()};
    status::SetDaemonAnswer(report, std::move(answer));
    report.now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
    if (*json) {
      std::cout << StatusToJson(report).dump(2) << "\n";
    } else {
      std::cout << StatusToText(report);
    }
    std::cout.flush();
    if (!status::ServingAndAnswered(report)) throw CLI::RuntimeError(kExitUnavailable);
  });
}

}  // namespace snowflake::cli
