// The systemd notification protocol (sd_notify(3)): READY=1, STATUS=, WATCHDOG=1,
// STOPPING=1. Without NOTIFY_SOCKET every call is a cheap no-op, so the daemon runs the
// same way outside systemd.
//
// A Notifier is not safe for concurrent use: the fill loop owns it.

#ifndef SNOWFLAKE_DAEMON_CONTROL_NOTIFIER_H_
#define SNOWFLAKE_DAEMON_CONTROL_NOTIFIER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace snowflake::daemon {

class Notifier {
 public:
  // Reads WATCHDOG_USEC/WATCHDOG_PID (sd_watchdog_enabled) once.
  Notifier() noexcept;

  void Ready(std::string_view status) noexcept;
  void Status(std::string_view status) noexcept;
  // STATUS= and EXTEND_TIMEOUT_USEC= in one message: a start that is still waiting (for
  // the register) asks systemd for `extend` more before TimeoutStartSec= would end it.
  void StatusExtendingStart(std::string_view status, std::chrono::microseconds extend) noexcept;
  void Stopping(std::string_view status) noexcept;
  // Sends WATCHDOG=1 if the watchdog is enabled and half its interval has passed since
  // the last one (systemd's recommended cadence). `now` is CLOCK_MONOTONIC.
  void MaybeWatchdog(std::chrono::steady_clock::time_point now) noexcept;

  // The interval systemd expects WATCHDOG=1 within, if enabled for this process.
  std::optional<std::chrono::microseconds> watchdog_interval() const noexcept {
    return watchdog_interval_;
  }

 private:
  void Send(std::string_view message) noexcept;

  std::optional<std::chrono::microseconds> watchdog_interval_;
  std::chrono::steady_clock::time_point last_watchdog_{};
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CONTROL_NOTIFIER_H_
