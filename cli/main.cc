// snowflakectl: the operator's CLI. Each subcommand registers itself through an
// Add<Name>Command(CLI::App&) function in its own file; its callback runs the command and
// throws CLI::RuntimeError(status) to end with a non-zero exit status.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "decode_command.h"
#include "exit_codes.h"
#include "next_command.h"
#include "register_command.h"
#include "resume_command.h"
#include "status_command.h"

int main(int argc, char** argv) {
  namespace cli = snowflake::cli;
  CLI::App app{"snowflakectl: inspect and operate the snowflaked ID sequencer"};
  app.require_subcommand(1);
  app.footer("Exit status: 0 ok, 1 daemon unavailable or refused, 2 bad usage or input.");
  cli::AddDecodeCommand(app);
  cli::AddStatusCommand(app);
  cli::AddNextCommand(app);
  cli::AddResumeCommand(app);
  cli::AddRegisterCommand(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own result; it has said why on stderr
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every other parse failure is a usage error, whatever CLI11's code.
    return app.exit(e) == 0 ? cli::kExitOk : cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "snowflakectl: " << e.what() << "\n";
    return cli::kExitUnavailable;
  }
  return cli::kExitOk;
}
