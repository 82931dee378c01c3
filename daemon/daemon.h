// The daemon: its parts assembled from a Config and injected DaemonParts (clock, register,
// front, file system), started and stopped by one ordered table: kTable in
// Daemon::BuildTable() (daemon.cc) is the order, and docs/architecture.md ("Startup and
// shutdown") says what each stage starts and stops. Start() runs the stages in that order;
// Stop() runs their stops in exactly the reverse order, whether the daemon served, failed
// while serving, or failed to start (then only the stages that started are stopped).
//
// A clean Stop() logs the stop's cause and sends STOPPING=1 before the first stop; after a
// fatal error or a lost claim, STOPPING=1 (STATUS=failed: ...) follows the "serving" stop.
//
// Between Start() and Stop(), Serve() runs the fill loop until RequestStop(), a fatal
// error or a lost claim.
//
// Threads: Start(), Serve() and Stop() are called one after another (never concurrently),
// in that order, each at most once; Serve() may run on another thread than Start() and
// Stop() if the caller orders them (std::thread's start and join do). RequestStop() and
// stop_requested() are safe from any thread at any time, before Start() too. A Daemon
// does not touch signals: snowflaked's App (daemon/app.h) blocks SIGTERM and SIGINT and
// turns them into RequestStop().
//
// Two Daemons may run in one process on distinct runtime and state directories; a second
// one on the same directories is refused (exit status 2) as a second process would be.

#ifndef SNOWFLAKE_DAEMON_DAEMON_H_
#define SNOWFLAKE_DAEMON_DAEMON_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/control/control_server.h"
#include "daemon/control/status_board.h"
#include "daemon/control/status_reporter.h"
#include "daemon/core/fill_loop.h"
#include "daemon/core/generator.h"
#include "daemon/core/heartbeat.h"
#include "daemon/core/high_water_store.h"
#include "daemon/core/reservation_service.h"
#include "daemon/core/startup_reconciliation.h"
#include "daemon/daemon_parts.h"
#include "daemon/exit_status.h"
#include "daemon/metrics/metrics.h"
#include "daemon/stage_table.h"
#include "register/machine_lock.h"
#include "register/machine_register.h"
#include "snowflake/ring_producer.h"
#include "util/file_lock.h"

namespace snowflake::daemon {

class Daemon {
 public:
  // Builds the table; starts nothing.
  Daemon(Config config, DaemonParts parts);
  ~Daemon();  // stops what is started; no clean stop is recorded unless Stop() ran
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The stages' names in start order (the table above); they stop in reverse.
  std::vector<std::string> stage_names() const { return table_.names(); }

  // Runs every stage's start in order. Errors: the first failure, already logged (critical;
  // info for a stop requested while waiting for the register, exit status kExitOk); the
  // stages started before it are stopped again. REQUIRES: not called before.
  [[nodiscard]] tl::expected<void, StageFailure> Start();

  // Runs the fill loop until RequestStop(), a fatal error or a lost claim. READY=1 (with
  // STATUS=) goes to systemd at the first pass whose state is serving or out_of_service.
  // REQUIRES: Start() succeeded; not called before.
  void Serve();

  // Runs every started stage's stop in reverse order and returns the exit status:
  // kExitFatal after a fatal error or a lost claim (no clean stop is recorded, and a
  // corrupt segment is retired), else kExitOk (the reservation comes down to the last
  // issued millisecond). A no-op returning kExitOk if nothing is started.
  int Stop();

  // Start(), Serve() and Stop(), as snowflaked runs them: the exit status (kExit*). An
  // exception is logged and ends the daemon with kExitFatal. Never throws.
  int Run() noexcept;

  // Asks the daemon to stop: a start waiting for the register gives up (exit status 0), a
  // serving loop is woken and returns. `cause` names it in the log ("signal 15"); the
  // first request's cause is kept. Idempotent; thread-safe; never blocks for long (it
  // takes a mutex that the serving thread holds only to arm and disarm the wake-up).
  void RequestStop(std::string_view cause = "a stop request") noexcept;
  bool stop_requested() const noexcept { return stop_.load(std::memory_order_acquire); }

  // The daemon's metrics (docs/metrics.md), whatever fronts run: made with the Daemon,
  // filled by the reservation service and the fronts as they work and from the status
  // board at each Scrape() while the fill loop stage is up. Thread-safe.
  Metrics& metrics() noexcept { return metrics_; }

 private:
  using Result = tl::expected<void, StageFailure>;

  void BuildTable();
  // The stages' starts and stops, in table order. A start that fails leaves nothing of
  // its own behind (its stop is not run).
  Result CheckHost();
  Result LockInstance();
  void UnlockInstance();
  Result LoadStateFile();
  void CloseStateFile();
  Result ClaimNumber();
  void ReleaseNumber();
  Result OpenSegment();
  void CloseSegment();
  Result MakeGenerator();
  void DropGenerator();
  Result StartReservations();
  void StopReservations();
  Result StartHeartbeat();
  void StopHeartbeat();
  Result MakeFillLoop();
  void EndFillLoop();
  Result StartControlSocket();
  void StopControlSocket();
  Result ArmServing();
  void StopServing();
  Result StartFront();
  void StopFront();

  shm::ProducerOptions ProducerOptionsFor(uint32_t machine) const;
  // The reservation both stores get: persistence.reservation_ms, or the register's own
  // longer window (MachineRegister::mark_reservation_ms). REQUIRES: register_ made.
  int64_t ReservationMs() const;
  std::string StopCause() const;
  // Why serving ended in failure, if it did: the loop's fatal error or a lost claim.
  std::optional<std::string> ServingFailure() const;

  // Constant after construction.
  const Config config_;
  DaemonParts parts_;

  // Made with the daemon, before every part that reports into it; thread-safe.
  Metrics metrics_;

  // Any thread (RequestStop()).
  std::atomic<bool> stop_{false};
  mutable std::mutex stop_mutex_;
  std::string stop_cause_;            // guarded by stop_mutex_
  FillLoop* wake_on_stop_ = nullptr;  // guarded by stop_mutex_; set while serving

  // The thread running Start(), Serve() and Stop(): the parts, in table order. Each
  // stage's start makes its parts and its stop destroys them, so nothing outlives what
  // it refers to.
  StageTable table_;
  // Set by Stop() before the stops run: why serving failed (nullopt: it did not), whether
  // the segment must be retired (its counters are corrupt), and whether this is a clean
  // stop (Stop() on a daemon that did not fail; the destructor alone is not one).
  std::optional<std::string> failure_;
  bool retire_segment_ = false;
  bool clean_stop_ = false;
  std::optional<gid_t> group_;
  std::optional<util::FileLock> instance_lock_;
  std::optional<HighWaterStore> store_;
  std::optional<HighWaterState> saved_;
  // The state directory's identity (core/state_identity.h): names our host marks.
  std::string state_identity_;
  std::unique_ptr<reg::MachineRegister> register_;
  std::string holder_id_;
  std::optional<reg::MachineClaim> claim_;
  std::optional<reg::HostMark> host_mark_;  // the number's highest host mark at the claim
  std::optional<shm::RingProducer> producer_;
  std::optional<StartupPlan> plan_;
  std::optional<Generator> generator_;
  std::unique_ptr<ReservationService> reservations_;
  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<StatusBoard> board_;
  std::unique_ptr<StatusReporter> status_;
  std::unique_ptr<FillLoop> loop_;
  Metrics::Source status_metrics_;  // the board's figures at each scrape; before board_ goes
  std::unique_ptr<ControlServer> control_;
  std::vector<std::unique_ptr<Front>> fronts_;  // started in order, stopped in reverse
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_DAEMON_H_
