// The daemon's life (docs/architecture.md, "Startup and shutdown"): an ordered list of
// startup steps, the fill loop until SIGTERM/SIGINT, then the shutdown steps in reverse.
// docs/daemon.md describes it for operators.
//
// An App is meant to be run once, from main(); Run() blocks SIGTERM and SIGINT in the
// calling thread (and every thread it starts) and handles them itself.

#ifndef SNOWFLAKE_DAEMON_APP_H_
#define SNOWFLAKE_DAEMON_APP_H_

#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "daemon/config/config.h"
#include "daemon/core/clock.h"

namespace snowflake::daemon {

// Exit statuses of snowflaked.
inline constexpr int kExitOk = 0;     // stopped cleanly (SIGTERM/SIGINT)
inline constexpr int kExitFatal = 1;  // a fatal error while starting or serving that a
                                      // restart may cure (I/O, a lost claim)
inline constexpr int kExitUsage = 2;  // bad command line or config file, or another
                                      // daemon already serves the runtime directory
inline constexpr int kExitConfig = 78;  // (EX_CONFIG) the host refuses this config: a
                                        // missing group, an epoch in the future or not
                                        // the state's, a segment path that is a symlink.
                                        // A restart cannot help; the unit's
                                        // RestartPreventExitStatus= stops on it.

// "0.1.0".
std::string_view SnowflakedVersion() noexcept;

// What --check-config verifies beyond the file itself, and what a start would refuse
// first: daemon.group names a group of this host; the epoch is not later than `clock`.
// Errors: one sentence naming the key and what to do.
[[nodiscard]] tl::expected<void, std::string> CheckConfigAgainstHost(const Config& config,
                                                                     Clock& clock) noexcept;

class App {
 public:
  explicit App(Config config) : config_(std::move(config)) {}

  // Runs the daemon to its end and returns the exit status (kExit*). Never throws.
  int Run() noexcept;

 private:
  Config config_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_APP_H_
