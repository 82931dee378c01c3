// Who this daemon is to the register: its holder id. A fact of the host and the instance,
// not of any backend, so it lives with the process, and the register library (which the
// CLI links) needs no libsystemd.

#ifndef SNOWFLAKE_DAEMON_HOLDER_ID_H_
#define SNOWFLAKE_DAEMON_HOLDER_ID_H_

#include <string>

#include "daemon/config/config.h"

namespace snowflake::daemon {

// The holder id config asks for: register.holder_id if set, or else
// "<host>:<daemon.instance>", where <host> is an application-specific hash of
// /etc/machine-id (sd_id128_get_machine_app_specific(3): the machine id itself is never
// exposed), or the host name where there is no machine id (a minimal container), or
// "unknown-host". Never fails; safe to call from any thread.
std::string ResolveHolderId(const Config& config);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HOLDER_ID_H_
