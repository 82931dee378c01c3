// What a Daemon (daemon/daemon.h) is assembled from, beyond its Config: the parts a test
// replaces. ProductionParts() are snowflaked's own: the system clock, the real file
// system, the register config.machine_register names, and the fronts [http] asks for.

#ifndef SNOWFLAKE_DAEMON_DAEMON_PARTS_H_
#define SNOWFLAKE_DAEMON_DAEMON_PARTS_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/control/status_board.h"
#include "daemon/fronts/front.h"
#include "daemon/metrics/metrics.h"
#include "daemon/stage_table.h"
#include "register/machine_register.h"
#include "snowflake/clock.h"
#include "util/file_system.h"

namespace snowflake::daemon {

struct DaemonParts {
  // Makes the register the daemon claims its number from (called once, at start). Never
  // returns null.
  using RegisterFactory = std::function<std::unique_ptr<reg::MachineRegister>(const Config&)>;
  // Makes the fronts the config asks for, not started (called once, at the start's last
  // step, which then starts them in order). The context's references outlive the fronts.
  // Empty: no front. Errors: the sentence to log; the start then fails with exit status 1.
  using FrontFactory = std::function<tl::expected<std::vector<std::unique_ptr<Front>>, std::string>(
      const FrontContext& context)>;

  // Every ID's millisecond, the reservation's horizon and the start's checks read this
  // clock. Not owned; must outlive the daemon.
  Clock& clock;
  // The state file's fsyncs go through it. Not owned; must outlive the daemon.
  util::FileSystem& file_system;
  RegisterFactory make_register;
  FrontFactory make_fronts;
  // Told of every step of the start/stop table (daemon.h), on the thread that runs it.
  // May be empty.
  StageTable::Observer observer = {};
  // The host-wide machine-number lock directory whose host marks the daemon starts above
  // and writes (machine_lock.h); empty: HostLockDir(). It must be the one the register's
  // backends lock their numbers in.
  std::filesystem::path host_lock_dir = {};
};

// The system clock, FileSystem::Default(), MakeMachineRegister() and an HttpFront when
// [http] listen names an address (and an HttpAdminFront when admin_listen does too), no
// observer.
DaemonParts ProductionParts();

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_DAEMON_PARTS_H_
