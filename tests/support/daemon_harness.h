// Running the real snowflaked in tests: a temporary runtime and state directory, a
// NOTIFY_SOCKET the test owns (the sd_notify protocol, read as systemd would), optional
// clock faults through libfaketime, and helpers to watch the segment's state.
//
//   DaemonHarness harness("restart");
//   Daemon daemon = harness.Start();          // spawns, waits for READY=1
//   ASSERT_TRUE(daemon.ready()) << daemon.Describe();
//   ... Client::Open("t", harness.ClientOptions()) ...
//   daemon.Stop();                            // SIGTERM, waits, returns the status
//
// A Daemon that is destroyed while its process runs kills it with SIGKILL and reaps it,
// so a failing test leaves no stray daemon; a sanitizer report on its stderr (ASan, LSan,
// TSan, UBSan) then fails the running test.
//
// Thread-safety: a NotifySocket's accessors may be called from any thread (a background
// thread receives the datagrams). Daemon and DaemonHarness must be used from one thread.

#ifndef SNOWFLAKE_TESTS_SUPPORT_DAEMON_HARNESS_H_
#define SNOWFLAKE_TESTS_SUPPORT_DAEMON_HARNESS_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "snowflake/client.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace snowflake::testing {

// Found at configure time (tests/support/CMakeLists.txt), which fails without it.
inline const std::string kFakeTimeLibrary = SNOWFLAKE_FAKETIME_LIBRARY;

// One datagram received on the notify socket: newline-separated assignments
// ("READY=1\nSTATUS=serving: machine 3, ...").
struct NotifyMessage {
  std::chrono::steady_clock::time_point received;
  std::string text;

  // True if one of its lines is exactly `line` ("READY=1").
  bool HasLine(std::string_view line) const;
  // The value of KEY=... ("STATUS"), if present.
  std::optional<std::string> Value(std::string_view key) const;
};

// An AF_UNIX datagram socket bound at `path`, read by a background thread until
// destruction. Throws std::system_error if it cannot be bound.
class NotifySocket {
 public:
  explicit NotifySocket(std::filesystem::path path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Every datagram received so far, in order.
  std::vector<NotifyMessage> Messages() const;
  // How many datagrams so far contain the line `line`.
  size_t CountLine(std::string_view line) const;
  // Waits up to `timeout` for a datagram with index >= `from` that satisfies `match`;
  // returns its index, or nullopt.
  std::optional<size_t> WaitFor(const std::function<bool(const NotifyMessage&)>& match,
                                std::chrono::milliseconds timeout, size_t from = 0) const;
  // WaitFor a datagram containing the line `line`.
  std::optional<size_t> WaitForLine(std::string_view line, std::chrono::milliseconds timeout,
                                    size_t from = 0) const;
  // Every STATUS= value so far, in order.
  std::vector<std::string> Statuses() const;

 private:
  void Receive();

  std::filesystem::path path_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  mutable std::condition_variable arrived_;
  std::vector<NotifyMessage> messages_;  // guarded by mutex_
  std::thread thread_;
};

struct DaemonOptions {
  std::filesystem::path runtime_dir;
  std::filesystem::path state_dir;
  std::optional<std::filesystem::path> config_path;  // --config
  std::string log_level = "info";                    // --log-level
  std::vector<std::string> extra_args;
  EnvChanges env;
  // WATCHDOG_USEC for the daemon (WATCHDOG_PID is always unset).
  std::optional<std::chrono::microseconds> watchdog_usec;
  // Runs the daemon under libfaketime, its CLOCK_REALTIME offset read from this file on
  // every clock read (write it with SetClockOffset). CLOCK_MONOTONIC stays real.
  std::optional<std::filesystem::path> faketime_file;
  // Where the notify socket is bound; empty: a fresh path next to runtime_dir.
  std::filesystem::path notify_socket;
  // The host-wide machine-number lock directory the daemon uses
  // ($SNOWFLAKE_HOST_LOCK_DIR); empty: "host-locks" next to runtime_dir, so daemons of one
  // harness are checked against each other and never against other tests' or the host's.
  std::filesystem::path host_lock_dir;
};

// One snowflaked process and its notify socket.
class Daemon {
 public:
  // Spawns the daemon (does not wait). Throws std::system_error if it cannot start.
  static Daemon Spawn(DaemonOptions options);

  Daemon(Daemon&&) noexcept = default;
  Daemon& operator=(Daemon&&) noexcept = default;
  ~Daemon();

  // Waits up to `timeout` for READY=1; false if it did not come (or the daemon ended).
  bool WaitForReady(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // READY=1 has arrived.
  bool ready() const;

  pid_t pid() const;
  bool Running();
  // SIGTERM and wait; nullopt if it did not end within `timeout` (then SIGKILLed).
  std::optional<ExitStatus> Stop(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGKILL and reap.
  ExitStatus Kill();
  // Waits for the daemon to end by itself.
  std::optional<ExitStatus> Wait(std::chrono::milliseconds timeout);

  Process& process() { return *process_; }
  NotifySocket& notify() { return *notify_; }
  const DaemonOptions& options() const { return options_; }
  // What the daemon has written to stderr so far. While it runs, a line it wrote may not
  // have been collected yet: check for a line with WaitForErr, not err().find.
  std::string err() const { return process_->err(); }
  // Waits up to `timeout` until stderr contains `needle`; false if it does not (or the
  // daemon ended without writing it).
  bool WaitForErr(std::string_view needle,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return process_->WaitForOutput(Process::Stream::kErr, needle, timeout);
  }
  // "snowflaked pid P (running|exit N), notifications [...], stderr: ..." for messages.
  std::string Describe();

 private:
  Daemon() = default;

  DaemonOptions options_;
  std::unique_ptr<NotifySocket> notify_;
  std::unique_ptr<Process> process_;
};

// A temporary root with run/ and state/ and helpers to start daemons in it. Every path
// the harness makes is short enough for an AF_UNIX socket address.
class DaemonHarness {
 public:
  explicit DaemonHarness(std::string_view name = "daemon");

  const std::filesystem::path& root() const { return dir_.path(); }
  std::filesystem::path runtime_dir() const { return dir_ / "run"; }
  std::filesystem::path state_dir() const { return dir_ / "state"; }

  // Options for a daemon on this harness's directories.
  DaemonOptions Options() const;
  // Whether a named daemon shares the harness's host-wide machine-number locks (a second
  // daemon of the same host) or has its own (a daemon of another host).
  enum class Host { kShared, kOwn };
  // Options for one of several daemons of this harness, named `name`: runtime dir
  // root/<name>-run, state dir root/<name>-state, its config `toml` written to
  // root/<name>.toml; with Host::kOwn its machine-number locks in root/<name>-host-locks.
  DaemonOptions NamedOptions(std::string_view name, std::string_view toml,
                             Host host = Host::kShared) const;
  // Writes `toml` to root/<name> and returns its path.
  std::filesystem::path WriteFile(std::string_view name, std::string_view text) const;

  // Spawns a daemon with `options` and waits for READY (ADD_FAILURE with its output if
  // it does not come within `timeout`).
  Daemon Start(DaemonOptions options,
               std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  Daemon Start() const { return Start(Options()); }

  // Client options for the daemon in runtime_dir, generous for a loaded (sanitized)
  // host: a 10 s wait, a 5 s heartbeat age.
  ClientOptions Clients() const { return ClientOptionsFor(runtime_dir()); }
  static ClientOptions ClientOptionsFor(const std::filesystem::path& runtime_dir);

 private:
  TempDir dir_;
};

// Polls the segment in `runtime_dir` (Client::Inspect) until its state is `state` or
// `timeout` passes. Returns the last status seen (nullopt if the segment never opened);
// check its state.
std::optional<ClientStatus> WaitForState(const std::filesystem::path& runtime_dir,
                                         std::string_view state, std::chrono::milliseconds timeout);

// Replaces the libfaketime offset file atomically: "+0", "-0.005", "-10", "-3600".
void SetClockOffset(const std::filesystem::path& file, std::string_view offset);

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_DAEMON_HARNESS_H_
