// snowflaked as a process: what belongs to the process rather than to the daemon (logging,
// signals, SIGPIPE) around one Daemon (daemon/daemon.h), which holds the
// startup and shutdown order (docs/architecture.md, "Startup and shutdown").
// docs/daemon.md describes it for operators.
//
// An App is meant to be run once, from main(); Run() blocks SIGTERM and SIGINT in the
// calling thread (and every thread it starts) and turns them into Daemon::RequestStop().

#ifndef SNOWFLAKE_DAEMON_APP_H_
#define SNOWFLAKE_DAEMON_APP_H_

#include <utility>

#include "daemon/config/config.h"
#include "daemon/exit_status.h"
#include "daemon/host_checks.h"
#include "daemon/version.h"

namespace snowflake::daemon {

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
