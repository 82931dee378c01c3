#include "daemon/app.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "daemon/daemon.h"
#include "daemon/daemon_parts.h"
#include "daemon/logging.h"
#include "daemon/signal_watcher.h"
#include "snowflake/truncation_guard.h"

namespace snowflake::daemon {
namespace {

// A SIGBUS the truncation guard cannot survive: a mapped file shrank that only root or the
// daemon's user can write (the ring file, a state file), or a bug. A truncated consumer
// file, which any member of the clients' group can cause, never gets here: the guard
// (snowflake/truncation_guard.h) survives it and the fill loop retires the segment. Say
// why in the log and exit 1 (systemd restarts the daemon, which retires a damaged segment)
// rather than dump core. Async-signal-safe: one write(2), then _exit(2).
void ExitOnSigbus(int) {
  static const char kMessage[] =
      "snowflaked: SIGBUS: a file the daemon maps shrank under it (the segment's ring file, "
      "writable only by root and the daemon's user); exiting so that a restart serves a "
      "fresh segment\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  _exit(kExitFatal);
}

int RunProcess(const Config& config) {
  // Logging and signals before any other thread exists: the watcher blocks SIGTERM and
  // SIGINT in this thread, so every thread started later inherits the mask.
  SetUpLogging(config.daemon.log_level);
  SignalWatcher signals;
  signal(SIGPIPE, SIG_IGN);
  // Before any segment is mapped, so every consumer region the daemon maps is guarded.
  if (!shm::InstallTruncationGuard(ExitOnSigbus)) {
    spdlog::critical("cannot install the SIGBUS handler: {}", std::strerror(errno));
    return kExitFatal;
  }
  Daemon daemon(config, ProductionParts());
  const auto request_stop = [&daemon, &signals] {
    daemon.RequestStop("signal " + std::to_string(signals.signal_number()));
  };
  signals.SetOnStop(request_stop);
  // A signal that came before the hook was set is not lost.
  if (signals.stop_requested()) request_stop();
  const int status = daemon.Run();
  signals.SetOnStop({});
  return status;
}

}  // namespace

int App::Run() noexcept {
  try {
    return RunProcess(config_);
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return kExitFatal;
  } catch (...) {
    spdlog::critical("fatal: unknown exception");
    return kExitFatal;
  }
}

}  // namespace snowflake::daemon
