#include "daemon/control/notifier.h"

#include <systemd/sd-daemon.h>

#include <string>

namespace snowflake::daemon {

Notifier::Notifier() noexcept {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0 && usec > 0) {
    watchdog_interval_ = std::chrono::microseconds(usec);
  }
}

void Notifier::Send(std::string_view message) noexcept {
  try {
    // Errors are ignored on purpose: a lost notification must not stop the service, and
    // systemd's watchdog catches a daemon that really cannot talk to it.
    sd_notify(0, std::string(message).c_str());
  } catch (...) {
  }
}

void Notifier::Ready(std::string_view status) noexcept {
  Send("READY=1\nSTATUS=" + std::string(status));
}

void Notifier::Status(std::string_view status) noexcept { Send("STATUS=" + std::string(status)); }

void Notifier::StatusExtendingStart(std::string_view status,
                                    std::chrono::microseconds extend) noexcept {
  try {
    Send("STATUS=" + std::string(status) + "\nEXTEND_TIMEOUT_USEC=" +
         std::to_string(extend.count()));
  } catch (...) {
  }
}

void Notifier::Stopping(std::string_view status) noexcept {
  Send("STOPPING=1\nSTATUS=" + std::string(status));
}

void Notifier::MaybeWatchdog(std::chrono::steady_clock::time_point now) noexcept {
  if (!watchdog_interval_) return;
  if (now - last_watchdog_ < *watchdog_interval_ / 2) return;
  last_watchdog_ = now;
  Send("WATCHDOG=1");
}

}  // namespace snowflake::daemon
