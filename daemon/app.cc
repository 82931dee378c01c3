#include "daemon/app.h"

#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/base/backoff.h"
#include "daemon/base/time_text.h"
#include "daemon/control/control_server.h"
#include "daemon/control/status_board.h"
#include "daemon/control/status_reporter.h"
#include "daemon/core/fill_loop.h"
#include "daemon/core/generator.h"
#include "daemon/core/heartbeat.h"
#include "daemon/core/high_water_store.h"
#include "daemon/core/reservation_service.h"
#include "daemon/core/startup_reconciliation.h"
#include "daemon/core/state_words.h"
#include "daemon/holder_id.h"
#include "daemon/http/http_front.h"
#include "daemon/instance_lock.h"
#include "daemon/logging.h"
#include "daemon/notifier.h"
#include "daemon/register/machine_register.h"
#include "daemon/signal_watcher.h"
#include "snowflake/ring_producer.h"
#include "snowflake/truncation_guard.h"

#ifndef SNOWFLAKE_VERSION
#define SNOWFLAKE_VERSION "0.0.0"
#endif

namespace snowflake::daemon {

std::string_view SnowflakedVersion() noexcept { return SNOWFLAKE_VERSION; }

namespace {

using shm::DaemonState;
using shm::StateReason;

tl::expected<std::optional<gid_t>, std::string> ResolveGroup(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find_first_not_of("0123456789") == std::string::npos) {
    return static_cast<gid_t>(std::stoul(name));
  }
  std::vector<char> buf(16384);
  group entry{};
  group* found = nullptr;
  const int rc = getgrnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return tl::unexpected("daemon.group: no group named \"" + name +
                          "\" on this host; create it (systemd-sysusers) or fix daemon.group");
  }
  return found->gr_gid;
}

// Creates a missing directory (mode 0750, in `group`); leaves an existing one alone.
tl::expected<void, std::string> EnsureDirectory(const std::filesystem::path& dir,
                                                std::optional<gid_t> group) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return {};
  std::filesystem::create_directories(dir, ec);
  if (ec) return tl::unexpected("cannot create " + dir.string() + ": " + ec.message());
  if (chmod(dir.c_str(), 0750) != 0) {
    return tl::unexpected("chmod " + dir.string() + ": " + std::strerror(errno));
  }
  if (group && chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return tl::unexpected("chown " + dir.string() + ": " + std::strerror(errno));
  }
  return {};
}

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

struct Failure {
  int status;
  std::string message;
};

shm::ProducerOptions ProducerOptionsFor(const Config& config, uint32_t machine,
                                        std::optional<gid_t> group) {
  return shm::ProducerOptions{.runtime_dir = config.daemon.runtime_dir,
                              .capacity = config.ring.capacity,
                              .epoch_unix_ms = config.id.epoch_unix_ms,
                              .machine = machine,
                              .mode = 0660,
                              .group = group,
                              .max_age_ms = static_cast<uint32_t>(config.ring.max_age_ms),
                              .liveness_ms = static_cast<uint32_t>(config.daemon.liveness_ms)};
}

tl::expected<shm::RingProducer, Failure> OpenSegment(const Config& config, uint32_t machine,
                                                     std::optional<gid_t> group) {
  const std::filesystem::path path = config.daemon.runtime_dir / shm::kSegmentFileName;
  struct stat info {};
  if (lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
    return tl::unexpected(Failure{
        kExitConfig, "the segment path " + path.string() +
                         " is a symbolic link: refusing to follow it; remove it (only "
                         "snowflaked creates files in the runtime directory)"});
  }
  const shm::ProducerOptions options = ProducerOptionsFor(config, machine, group);
  auto producer = shm::RingProducer::CreateOrOpen(options);
  if (!producer && shm::IsDamagedSegmentError(producer.error().code)) {
    // A segment we cannot trust: retire it (its clients see "stopped" and its ring is
    // taken back before it is unlinked) and start afresh. The high-water file, which
    // covers everything ever published, still bounds its IDs.
    spdlog::warn("retiring the unusable segment in {}: {}", config.daemon.runtime_dir.string(),
                 producer.error().message);
    shm::RingProducer::Retire(config.daemon.runtime_dir);
    producer = shm::RingProducer::CreateOrOpen(options);
  }
  if (!producer) {
    return tl::unexpected(Failure{kExitFatal, "cannot open the segment: " + producer.error().message});
  }
  if (!producer->replaced_because().empty()) {
    spdlog::warn("retired the segment in {} and created a fresh one: {}",
                 config.daemon.runtime_dir.string(), producer->replaced_because());
  }
  return std::move(*producer);
}

// Claims a number, waiting for a register that does not answer (kUnreachable: the etcd
// register with no endpoint reachable or no quorum) with a jittered exponential backoff
// (daemon/base/backoff.h: 200 ms doubling to at most 5 s), for as long as it takes. Meanwhile
// STATUS= says what it waits for, each message extends systemd's start timeout past the
// next attempt, the watchdog is fed, and no READY=1 is sent. Every other error returns at
// once (it needs an operator). nullopt: a stop signal arrived while waiting.
std::optional<tl::expected<MachineClaim, RegisterError>> ClaimWaitingForRegister(
    MachineRegister& reg, const ClaimRequest& request, const daemon::SignalWatcher& signals) {
  using Steady = std::chrono::steady_clock;
  Notifier notifier;
  daemon::Backoff backoff(daemon::kRegisterRetryFirst, daemon::kRegisterRetryCap,
                          static_cast<uint64_t>(getpid()) ^
                              static_cast<uint64_t>(Steady::now().time_since_epoch().count()));
  Steady::time_point next_log{};
  for (uint64_t attempt = 1;; ++attempt) {
    auto claim = reg.Claim(request);
    if (claim || claim.error().code != RegisterErrorCode::kUnreachable) return claim;
    const std::chrono::milliseconds delay = backoff.Next();
    const std::string line = "waiting for the register: " + claim.error().message +
                             "; retrying in " + std::to_string(delay.count()) + " ms";
    // The first failure, then one line every 30 s (STATUS= has every attempt).
    if (const auto now = Steady::now(); now >= next_log) {
      spdlog::warn("{} (attempt {})", line, attempt);
      next_log = now + std::chrono::seconds(30);
    }
    // Past the wait and the next attempt (bounded by the register's request timeouts).
    notifier.StatusExtendingStart(line, delay + std::chrono::seconds(60));
    const auto until = Steady::now() + delay;
    while (Steady::now() < until) {
      if (signals.stop_requested()) return std::nullopt;
      notifier.MaybeWatchdog(Steady::now());
      std::this_thread::sleep_for(std::min<Steady::duration>(std::chrono::milliseconds(20),
                                                             until - Steady::now()));
    }
    if (signals.stop_requested()) return std::nullopt;
  }
}

void ReportStartupClockState(const Generator& generator, int64_t fast_restart_bound) {
  const int64_t behind = generator.ms_behind();
  if (generator.state() == GeneratorState::kOutOfService && behind == 0) {
    // Not the clock's lag: the epoch's time range is used up.
    spdlog::critical("out of service: {}", generator.reason());
  } else if (generator.state() == GeneratorState::kOutOfService) {
    spdlog::warn(
        "the clock is {} ms behind the high-water mark {} (more than the {} ms a restart may "
        "wait): out of service until `snowflakectl resume`",
        behind, FormatIsoUtc(generator.last_unix_ms()), fast_restart_bound);
  } else if (generator.state() == GeneratorState::kPaused) {
    spdlog::warn(
        "the clock is {} ms behind the high-water mark {} (within the {} ms a restart may "
        "wait): paused until it passes the mark; it resumes by itself",
        behind, FormatIsoUtc(generator.last_unix_ms()), fast_restart_bound);
  }
}

// Startup in order (each step needs the ones before it), the fill loop, then shutdown in
// reverse: the fill loop stops serving and drains, the control socket closes, the beat
// stops, the reservation thread ends and the clean stop is recorded, then the segment, the
// register claim and the instance lock go with their objects.
int RunDaemon(const Config& config) {
  // 1. Logging and signals, before any other thread exists.
  SetUpLogging(config.daemon.log_level);
  daemon::SignalWatcher signals;
  signal(SIGPIPE, SIG_IGN);
  // Before any segment is mapped, so every consumer region the daemon maps is guarded.
  if (!shm::InstallTruncationGuard(ExitOnSigbus)) {
    spdlog::critical("cannot install the SIGBUS handler: {}", std::strerror(errno));
    return kExitFatal;
  }
  spdlog::info("snowflaked {} starting: runtime dir {}, state dir {}", SnowflakedVersion(),
               config.daemon.runtime_dir.string(), config.daemon.state_dir.string());
  RealClock clock;

  // 2. What the host must offer the config.
  if (auto checked = CheckConfigAgainstHost(config, clock); !checked) {
    spdlog::critical("{}", checked.error());
    return kExitConfig;
  }
  const std::optional<gid_t> group = ResolveGroup(config.daemon.group).value();
  for (const auto& dir : {config.daemon.runtime_dir, config.daemon.state_dir}) {
    if (auto made = EnsureDirectory(dir, group); !made) {
      spdlog::critical("{}", made.error());
      return kExitFatal;
    }
  }

  // A ring on disk outlives a power loss. The segment's boot id keeps a ring of an earlier
  // boot from being trusted, but the ring belongs in memory: say so where an operator looks.
  if (struct statfs fs{}; ::statfs(config.daemon.runtime_dir.c_str(), &fs) == 0 &&
                          fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC) {
    spdlog::warn("runtime dir {} is not on tmpfs (filesystem type {:#x}): the ring and its "
                 "heartbeat are written to disk; use a directory under /run (the unit's "
                 "RuntimeDirectory=) or /dev/shm",
                 config.daemon.runtime_dir.string(), static_cast<uint64_t>(fs.f_type));
  }

  // 3. One daemon per runtime directory.
  auto instance_lock = AcquireInstanceLock(config.daemon.runtime_dir);
  if (!instance_lock) {
    spdlog::critical("{}", instance_lock.error().message);
    return instance_lock.error().already_running ? kExitUsage : kExitFatal;
  }

  // 4. One daemon per state directory: Load() locks it before anything is claimed.
  HighWaterStore store(config.HighWaterPath());
  auto saved = store.Load();
  if (!saved) {
    spdlog::critical("{}", saved.error().message);
    return saved.error().code == HighWaterErrorCode::kInUse ? kExitUsage : kExitFatal;
  }

  // 5. The machine number, once (waiting, with STATUS= and no READY, while the register
  //    does not answer).
  auto reg = MakeMachineRegister(config);
  const std::string holder_id = ResolveHolderId(config);
  // What this host saw of the register before: a register found older is refused.
  const ClaimRequest request(holder_id, config.id.epoch_unix_ms,
                             *saved ? (*saved)->register_seen : RegisterIdentity{},
                             *saved ? (*saved)->reserved_through_unix_ms : 0);
  auto waited = ClaimWaitingForRegister(*reg, request, signals);
  if (!waited) {
    spdlog::info("signal {} received while waiting for the register: stopping",
                 signals.signal_number());
    Notifier().Stopping("stopping: no machine number was claimed");
    return kExitOk;
  }
  auto& claim = *waited;
  if (!claim) {
    spdlog::critical("cannot claim a machine number: {}", claim.error().message);
    switch (claim.error().code) {
      case RegisterErrorCode::kEpochMismatch:
      case RegisterErrorCode::kRolledBack:
        return kExitConfig;
      case RegisterErrorCode::kInUse:
        return kExitUsage;
      default:
        return kExitFatal;
    }
  }
  spdlog::info("claimed machine {} from the {} register ({}) as holder \"{}\"", claim->machine,
               reg->backend_name(), reg->location(), holder_id);
  for (const std::string& notice : claim->notices) spdlog::warn("{}", notice);

  // 6. The segment.
  auto producer = OpenSegment(config, claim->machine, group);
  if (!producer) {
    spdlog::critical("{}", producer.error().message);
    return producer.error().status;
  }

  // 7. Where this start stands: a pure function of segment, state file, register, clock.
  auto plan = daemon::ReconcileStartup(daemon::StartupFacts{
      .now_unix_ms = clock.NowUnixMs(),
      .epoch_unix_ms = config.id.epoch_unix_ms,
      .machine = claim->machine,
      .register_high_water_ms = claim->high_water_unix_ms,
      .register_mark_writer = claim->mark_writer,
      .state_file = *saved,
      .segment = {.path = producer->path().string(),
                  .reopened = producer->reopened(),
                  .last_published_id = producer->last_published_id(),
                  .incarnation = producer->incarnation()},
      .reservation_ms = config.persistence.reservation_ms,
      .max_backward_ms = config.clock.max_backward_ms});
  if (!plan) {
    spdlog::critical("{} {}", config.HighWaterPath().string(), plan.error());
    producer->SetState(DaemonState::kStopped, StateReason::kShutdown);
    return kExitConfig;
  }
  spdlog::info("high-water mark {} ({}): {}", plan->high_water_unix_ms,
               plan->high_water_unix_ms > 0 ? FormatIsoUtc(plan->high_water_unix_ms) : "none",
               plan->explanation);

  // 8. The generator judges the clock against the mark.
  auto generator = Generator::Create(
      GeneratorConfig{.layout = IdLayout::Create(config.id.epoch_unix_ms).value(),
                      .machine = claim->machine,
                      .max_backward_ms = config.clock.max_backward_ms,
                      .high_water_unix_ms = plan->high_water_unix_ms,
                      .start_wait_ms = plan->start_wait_ms},
      clock);
  if (!generator) {
    spdlog::critical("cannot start the generator: {}", generator.error().message);
    producer->SetState(DaemonState::kStopped, StateReason::kShutdown);
    return generator.error().code == GeneratorErrorCode::kEpochInFuture ? kExitConfig
                                                                        : kExitFatal;
  }
  ReportStartupClockState(*generator, plan->start_wait_ms);

  // 9. The reservation service: its own thread keeps the horizon ahead of the clock. It
  // records each renewal's and register call's duration for /metrics.
  daemon::DaemonLatencies latencies;
  daemon::ReservationService reservations(
      daemon::ReservationOptions{
          .machine = claim->machine,
          .epoch_unix_ms = config.id.epoch_unix_ms,
          .reservation_ms = config.persistence.reservation_ms,
          // Renewing at a quarter of the reservation leaves a renewal three quarters of
          // it (750 ms by default) to complete before the fill loop reaches the
          // horizon: a disk stalled by other load does not pause generation.
          .renew_ahead_ms = std::max<int64_t>(1, config.persistence.reservation_ms * 3 / 4),
          .segment_path = producer->path().string(),
          .segment_incarnation = producer->incarnation(),
          .register_claim = claim->claim_token,
          .latencies = &latencies},
      store, *reg, clock, plan->confirmed_through_unix_ms);
  reservations.Start();

  // 10. The heartbeat: its own thread, its own cadence (daemon.liveness_ms / 10).
  daemon::Heartbeat heartbeat(
      *producer, daemon::BeatIntervalFor(config.daemon.liveness_ms),
      std::max(std::chrono::milliseconds(1000),
               std::chrono::milliseconds(20 * config.daemon.liveness_ms)));
  heartbeat.Start();

  // 11. Status and the control socket.
  DaemonStatus identity;
  identity.pid = getpid();
  identity.version = std::string(SnowflakedVersion());
  identity.instance = config.daemon.instance;
  identity.runtime_dir = config.daemon.runtime_dir.string();
  identity.state_dir = config.daemon.state_dir.string();
  identity.register_backend = std::string(reg->backend_name());
  identity.register_location = reg->location();
  identity.holder_id = holder_id;
  identity.machine = claim->machine;
  identity.epoch_unix_ms = config.id.epoch_unix_ms;
  identity.segment_reopened = producer->reopened();
  identity.started_unix_ms = clock.NowUnixMs();
  StatusBoard board;
  daemon::StatusReporter status(identity, board,
                                std::chrono::milliseconds(config.systemd.status_interval_ms));
  daemon::FillLoop loop(
      daemon::FillLoopOptions{.epoch_unix_ms = config.id.epoch_unix_ms,
                              .machine = claim->machine,
                              .max_age_ms = config.ring.max_age_ms,
                              .capacity = config.ring.capacity,
                              .min_fill = config.ring.min_fill,
                              .started_behind = generator->state() != GeneratorState::kServing,
                              // A segment a client tampered with is replaced, never served.
                              .replace_segment =
                                  [options = ProducerOptionsFor(config, claim->machine, group)](
                                      const shm::FreshSegment& fresh) {
                                    return shm::RingProducer::CreateReplacement(options, fresh);
                                  }},
      clock, *generator, *producer, reservations, status, &heartbeat);
  status.RefreshBoard(loop.Facts());
  ControlServer control(
      ControlServerOptions{.socket_path = config.daemon.runtime_dir / kControlSocketFileName,
                           .group = group},
      board);
  if (auto started = control.Start(); !started) {
    spdlog::critical("cannot serve the control socket: {}", started.error());
    loop.StopServing();
    return kExitFatal;
  }
  // The HTTP front (off unless [http] listen names addresses): a client of this ring on its
  // own threads, stopped before everything above it.
  auto http = HttpFront::Start(config, board, &latencies);
  if (!http) {
    spdlog::critical("{}", http.error());
    loop.StopServing();
    return kExitFatal;
  }

  // 12. Serve. A stop signal wakes the loop, so clients hear "stopped" at once.
  signals.SetOnStop([&loop] { loop.Interrupt(); });
  loop.Run(signals.stop_flag(), [&] {
    status.notifier().Ready(status.Line(loop.Facts()));
    spdlog::info("{} machine {}: segment {}, control socket {}",
                 daemon::StateText(loop.published().state), claim->machine,
                 producer->path().string(),
                 (config.daemon.runtime_dir / kControlSocketFileName).string());
  });
  signals.SetOnStop({});

  // Shutdown, in reverse: the HTTP front first, so its callers fail over while this ring
  // still stands behind every answer they already got.
  const auto stop_front = [&http] {
    if (!*http) return;
    (*http)->Stop();
    spdlog::info("http front stopped");
  };
  int exit_status = kExitOk;
  if (loop.fatal() || loop.claim_lost()) {
    const std::string why = loop.fatal() ? *loop.fatal() : "the register claim was lost";
    stop_front();
    loop.StopServing();
    status.notifier().Stopping("failed: " + why);
    control.Stop();
    heartbeat.Stop();
    reservations.Stop();
    if (loop.fatal()) {
      // Never reopen a segment whose counters were corrupted: a head moved backwards would
      // hand out taken IDs again. The next start creates a fresh one above the persisted
      // reservation.
      shm::RingProducer::Retire(config.daemon.runtime_dir);
    }
    return kExitFatal;
  }
  spdlog::info("signal {} received: stopping", signals.signal_number());
  status.notifier().Stopping("stopping: machine " + std::to_string(claim->machine));
  stop_front();
  loop.StopServing();
  control.Stop();
  heartbeat.Stop();
  reservations.Stop();
  // Every ID ever published carries a millisecond at or below the generator's mark, so the
  // reservation can come down to it: a clean restart then need not wait.
  const int64_t mark = generator->last_unix_ms();
  if (auto recorded = reservations.RecordCleanStop(mark); !recorded) {
    // The previous reservation stays in place: still safe, a restart may just wait.
    spdlog::error("cannot record the clean stop in the {}", recorded.error());
  }
  status.RefreshBoard(loop.Facts());
  spdlog::info("stopped cleanly; the last issued millisecond is {}", FormatIsoUtc(mark));
  return exit_status;
}

}  // namespace

tl::expected<void, std::string> CheckConfigAgainstHost(const Config& config,
                                                       Clock& clock) noexcept {
  try {
    if (auto group = ResolveGroup(config.daemon.group); !group) {
      return tl::unexpected(group.error());
    }
    const int64_t now_ms = clock.NowUnixMs();
    if (config.id.epoch_unix_ms > now_ms) {
      return tl::unexpected("id.epoch " + FormatIsoUtc(config.id.epoch_unix_ms) +
                            " is later than this host's clock (" + FormatIsoUtc(now_ms) +
                            "): no ID can be numbered before its epoch; check the clock and "
                            "id.epoch");
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("checking the config: ") + e.what());
  }
}

int App::Run() noexcept {
  try {
    return RunDaemon(config_);
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return kExitFatal;
  } catch (...) {
    spdlog::critical("fatal: unknown exception");
    return kExitFatal;
  }
}

}  // namespace snowflake::daemon
