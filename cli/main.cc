// snowflakectl: the operator's CLI. Each subcommand registers itself through an
// Add<Name>Command(CLI::App&) function in its own file; its callback runs the command and
// throws CLI::RuntimeError(status) to end with a non-zero exit status.

#include <CLI/CLI.hpp>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "bounds_command.h"
#include "command_error.h"
#include "decode_command.h"
#include "exit_codes.h"
#include "next_command.h"
#include "register_command.h"
#include "resume_command.h"
#include "status_command.h"

namespace {

namespace cli = snowflake::cli;

// "status, next, decode, bounds, resume"
std::string CommandList(CLI::App& app) {
  std::string names;
  for (const CLI::App* command : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + command->get_name();
  }
  return names;
}

bool WantsJson(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

// The first word that is not an option (or the value of --runtime-dir) names the
// command. CLI11 alone would report a misspelt command as a missing one.
std::optional<cli::CommandError> CheckCommandWord(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--runtime-dir") {
      ++i;
      continue;
    }
    if (arg == "--help" || arg == "-h" || arg == "--version") return std::nullopt;
    if (arg.starts_with("-")) continue;  // CLI11 reports unknown options
    for (const CLI::App* command : app.get_subcommands({})) {
      if (command->get_name() == arg) return std::nullopt;
    }
    return cli::CommandError{cli::kExitUsage, cli::CodeName(snowflake::vocab::ErrorCode::kUsage),
                             "unknown command '" + std::string(arg) + "'; the commands are: " +
                                 CommandList(app) + " (snowflakectl --help describes them)"};
  }
  return cli::CommandError{cli::kExitUsage, cli::CodeName(snowflake::vocab::ErrorCode::kUsage),
                           "a command is required: one of " + CommandList(app) +
                               " (snowflakectl --help describes them)"};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"snowflakectl: inspect and operate the snowflaked ID sequencer"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "snowflakectl " SNOWFLAKE_VERSION);
  app.footer(
      "Exit status: 0 ok, 1 daemon unavailable or refused, 2 bad usage or input.\n"
      "With --json, stdout is always JSON, errors included (docs/cli.md).");
  cli::AddStatusCommand(app);
  cli::AddNextCommand(app);
  cli::AddDecodeCommand(app);
  cli::AddBoundsCommand(app);
  cli::AddResumeCommand(app);
#ifdef SNOWFLAKE_HAVE_REGISTER_COMMAND
  cli::AddRegisterCommand(app);
#endif
  const bool json = WantsJson(argc, argv);

  try {
    if (auto bad = CheckCommandWord(app, argc, argv)) cli::FailCommand(*bad, json);
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own result; it has said why on stderr
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Every other parse failure is a usage error, whatever CLI11's code.
    app.exit(e);
    if (json) {
      std::cout << cli::ErrorJson({cli::kExitUsage,
                                   cli::CodeName(snowflake::vocab::ErrorCode::kUsage), e.what()})
                       .dump()
                << "\n";
    }
    return cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "snowflakectl: " << e.what() << "\n";
    if (json) {
      std::cout << cli::ErrorJson({cli::kExitUnavailable,
                                   cli::CodeName(snowflake::vocab::ErrorCode::kSystemError),
                                   e.what()})
                       .dump()
                << "\n";
    }
    return cli::kExitUnavailable;
  }
  return cli::kExitOk;
}
