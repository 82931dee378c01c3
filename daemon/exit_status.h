// The exit statuses of snowflaked (docs/daemon.md): what main() returns, and what a
// Daemon's start or stop reports (daemon/daemon.h).

#ifndef SNOWFLAKE_DAEMON_EXIT_STATUS_H_
#define SNOWFLAKE_DAEMON_EXIT_STATUS_H_

namespace snowflake::daemon {

inline constexpr int kExitOk = 0;       // stopped cleanly (SIGTERM/SIGINT)
inline constexpr int kExitFatal = 1;    // a fatal error while starting or serving that a
                                        // restart may cure (I/O, a lost claim)
inline constexpr int kExitUsage = 2;    // bad command line or config file, or another
                                        // daemon already serves the runtime directory
inline constexpr int kExitConfig = 78;  // (EX_CONFIG) the host refuses this config: a
                                        // missing group, an epoch in the future or not
                                        // the state's, a segment path that is a symlink.
                                        // A restart cannot help; the unit's
                                        // RestartPreventExitStatus= stops on it.

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_EXIT_STATUS_H_
