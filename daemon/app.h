// The daemon's life (DESIGN.md section 5): config -> instance lock -> register claim ->
// high-water mark -> generator -> segment -> fill -> serving -> READY=1, then the fill
// loop until SIGTERM/SIGINT. docs/daemon.md describes it for operators.
//
// An App is meant to be run once, from main(); Run() blocks SIGTERM and SIGINT in the
// calling thread (and every thread it starts) and handles them itself.

#ifndef SNOWFLAKE_DAEMON_APP_H_
#define SNOWFLAKE_DAEMON_APP_H_

#include <string_view>

#include "config.h"

namespace snowflake {

// Exit statuses of snowflaked.
inline constexpr int kExitOk = 0;     // stopped cleanly (SIGTERM/SIGINT)
inline constexpr int kExitFatal = 1;  // a fatal error at startup or while serving
inline constexpr int kExitUsage = 2;  // bad command line or config, or another daemon
                                      // already serves the runtime directory

// "0.1.0".
std::string_view SnowflakedVersion() noexcept;

class App {
 public:
  explicit App(Config config) : config_(std::move(config)) {}

  // Runs the daemon to its end and returns the exit status (kExit*). Never throws.
  int Run() noexcept;

 private:
  Config config_;
};

}  // namespace snowflake

#endif  // SNOWFLAKE_DAEMON_APP_H_
