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

namespace snowflake::daemon {
namespace {

int RunProcess(const Config& config) {
  // Logging and signals before any other thread exists: the watcher blocks SIGTERM and
  // SIGINT in this thread, so every thread started later inherits the mask.
  SetUpLogging(config.daemon.log_level);
  SignalWatcher signals;
  signal(SIGPIPE, SIG_IGN);
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
