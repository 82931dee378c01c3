// What a Daemon (daemon/daemon.h) is assembled from, beyond its Config: the parts a test
// replaces. ProductionParts() are snowflaked's own: the system clock, the real file
// system, the register config.machine_register names, and the HTTP front.

#ifndef SNOWFLAKE_DAEMON_DAEMON_PARTS_H_
#define SNOWFLAKE_DAEMON_DAEMON_PARTS_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "daemon/base/file_system.h"
#include "daemon/base/latency_histogram.h"
#include "daemon/config/config.h"
#include "daemon/control/status_board.h"
#include "daemon/core/clock.h"
#include "daemon/front.h"
#include "daemon/register/machine_register.h"
#include "daemon/stage_table.h"

namespace snowflake::daemon {

struct DaemonParts {
  // Makes the register the daemon claims its number from (called once, at start). Never
  // returns null.
  using RegisterFactory = std::function<std::unique_ptr<MachineRegister>(const Config&)>;
  // Starts the front (called once, the last step of the start). `board` and `latencies`
  // outlive the front. nullptr: no front (none configured). Errors: the sentence to log;
  // the start then fails with exit status 1.
  using FrontFactory = std::function<tl::expected<std::unique_ptr<Front>, std::string>(
      const Config&, StatusBoard& board, const DaemonLatencies& latencies)>;

  // Every ID's millisecond, the reservation's horizon and the start's checks read this
  // clock. Not owned; must outlive the daemon.
  Clock& clock;
  // The state file's fsyncs go through it. Not owned; must outlive the daemon.
  FileSystem& file_system;
  RegisterFactory make_register;
  FrontFactory make_front;
  // Told of every step of the start/stop table (daemon.h), on the thread that runs it.
  // May be empty.
  StageTable::Observer observer = {};
};

// The system clock, FileSystem::Default(), MakeMachineRegister() and HttpFront (its
// "http front stopped" logged when it stops), no observer.
DaemonParts ProductionParts();

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_DAEMON_PARTS_H_
