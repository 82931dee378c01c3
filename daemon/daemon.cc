#include "daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "daemon/control/notifier.h"
#include "daemon/control/status_metrics.h"
#include "daemon/core/state_identity.h"
#include "daemon/core/state_words.h"
#include "daemon/holder_id.h"
#include "daemon/host_checks.h"
#include "daemon/instance_lock.h"
#include "daemon/version.h"
#include "snowflake/time_text.h"
#include "util/backoff.h"

namespace snowflake::daemon {
namespace {

using shm::DaemonState;
using shm::StateReason;

// Logs the sentence a start stops on and returns it as the stage's failure.
std::filesystem::path HostLockDirOf(const DaemonParts& parts) {
  return parts.host_lock_dir.empty() ? reg::HostLockDir() : parts.host_lock_dir;
}

tl::unexpected<StageFailure> Refuse(int exit_status, std::string message) {
  spdlog::critical("{}", message);
  return tl::unexpected(StageFailure{exit_status, std::move(message)});
}

// Claims a number, waiting for a register that does not answer (kUnreachable: the etcd
// register with no endpoint reachable or no quorum) with a jittered exponential backoff
// (util/backoff.h: 200 ms doubling to at most 5 s), for as long as it takes. Meanwhile
// STATUS= says what it waits for, each message extends systemd's start timeout past the
// next attempt, the watchdog is fed, and no READY=1 is sent. Every other error returns at
// once (it needs an operator). nullopt: `stop` was set while waiting.
std::optional<tl::expected<reg::MachineClaim, reg::RegisterError>> ClaimWaiting(
    reg::MachineRegister& reg, const reg::ClaimRequest& request, const std::atomic<bool>& stop) {
  using Steady = std::chrono::steady_clock;
  const auto stop_requested = [&stop] { return stop.load(std::memory_order_acquire); };
  Notifier notifier;
  util::Backoff backoff(util::kRegisterRetryFirst, util::kRegisterRetryCap,
                        static_cast<uint64_t>(getpid()) ^
                            static_cast<uint64_t>(Steady::now().time_since_epoch().count()));
  Steady::time_point next_log{};
  for (uint64_t attempt = 1;; ++attempt) {
    auto claim = reg.Claim(request);
    if (claim || claim.error().code != reg::RegisterErrorCode::kUnreachable) return claim;
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
      if (stop_requested()) return std::nullopt;
      notifier.MaybeWatchdog(Steady::now());
      std::this_thread::sleep_for(
          std::min<Steady::duration>(std::chrono::milliseconds(20), until - Steady::now()));
    }
    if (stop_requested()) return std::nullopt;
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
        behind, FormatTimeText(generator.last_unix_ms()), fast_restart_bound);
  } else if (generator.state() == GeneratorState::kPaused) {
    spdlog::warn(
        "the clock is {} ms behind the high-water mark {} (within the {} ms a restart may "
        "wait): paused until it passes the mark; it resumes by itself",
        behind, FormatTimeText(generator.last_unix_ms()), fast_restart_bound);
  }
}

}  // namespace

Daemon::Daemon(Config config, DaemonParts parts)
    : config_(std::move(config)), parts_(std::move(parts)) {
  BuildTable();
}

Daemon::~Daemon() { table_.Stop(); }

void Daemon::BuildTable() {
  // Each start needs the ones above it; each stop must come before those below it. The
  // front is last so that it stops first: its callers fail over while this ring still
  // stands behind every answer they already got. "serving" sits above the control socket
  // so that the ring is stopped and drained before the socket closes, and "fill loop"
  // below it so that a start failing at the socket or the front stops serving too.
  struct Row {
    const char* name;
    Result (Daemon::*start)();
    void (Daemon::*stop)();
  };
  static constexpr Row kTable[] = {
      {"directories", &Daemon::CheckHost, nullptr},
      {"instance lock", &Daemon::LockInstance, &Daemon::UnlockInstance},
      {"state file", &Daemon::LoadStateFile, &Daemon::CloseStateFile},
      {"register", &Daemon::ClaimNumber, &Daemon::ReleaseNumber},
      {"segment", &Daemon::OpenSegment, &Daemon::CloseSegment},
      {"generator", &Daemon::MakeGenerator, &Daemon::DropGenerator},
      {"reservations", &Daemon::StartReservations, &Daemon::StopReservations},
      {"heartbeat", &Daemon::StartHeartbeat, &Daemon::StopHeartbeat},
      {"fill loop", &Daemon::MakeFillLoop, &Daemon::EndFillLoop},
      {"control socket", &Daemon::StartControlSocket, &Daemon::StopControlSocket},
      {"serving", &Daemon::ArmServing, &Daemon::StopServing},
      {"front", &Daemon::StartFront, &Daemon::StopFront},
  };
  for (const Row& row : kTable) {
    StageTable::StopFn stop;
    if (row.stop != nullptr) stop = [this, fn = row.stop] { (this->*fn)(); };
    table_.Add(
        row.name, [this, fn = row.start] { return (this->*fn)(); }, std::move(stop));
  }
  table_.SetObserver(parts_.observer);
}

tl::expected<void, StageFailure> Daemon::Start() {
  spdlog::info("snowflaked {} starting: runtime dir {}, state dir {}", SnowflakedVersion(),
               config_.daemon.runtime_dir.string(), config_.daemon.state_dir.string());
  return table_.Start();
}

void Daemon::Serve() {
  loop_->Run(stop_, [this] {
    status_->notifier().Ready(status_->Line(loop_->Facts()));
    spdlog::info("{} machine {}: segment {}, control socket {}",
                 StateText(loop_->published().state), claim_->machine, producer_->path().string(),
                 (config_.daemon.runtime_dir / kControlSocketFileName).string());
  });
}

int Daemon::Stop() {
  if (table_.started() == 0) return kExitOk;
  failure_ = ServingFailure();
  retire_segment_ = loop_ != nullptr && loop_->fatal().has_value();
  clean_stop_ = !failure_;
  if (clean_stop_) {
    spdlog::info("{} received: stopping", StopCause());
    status_->notifier().Stopping("stopping: machine " + std::to_string(claim_->machine));
  }
  table_.Stop();
  return failure_ ? kExitFatal : kExitOk;
}

int Daemon::Run() noexcept {
  try {
    if (auto started = Start(); !started) return started.error().exit_status;
    Serve();
    return Stop();
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
  } catch (...) {
    spdlog::critical("fatal: unknown exception");
  }
  return kExitFatal;
}

void Daemon::RequestStop(std::string_view cause) noexcept {
  const std::lock_guard<std::mutex> lock(stop_mutex_);
  if (!stop_.load(std::memory_order_relaxed)) {
    try {
      stop_cause_ = cause;
    } catch (...) {
      // Only the log line's words are lost; StopCause() has a default.
    }
  }
  // Release: pairs with the acquire loads of stop_requested() and the fill loop's.
  stop_.store(true, std::memory_order_release);
  // A serving loop sleeps up to dormant_wait between passes: woken, it tells clients
  // "stopped" within microseconds of the request.
  if (wake_on_stop_ != nullptr) wake_on_stop_->Interrupt();
}

std::string Daemon::StopCause() const {
  const std::lock_guard<std::mutex> lock(stop_mutex_);
  return stop_cause_.empty() ? "a stop request" : stop_cause_;
}

std::optional<std::string> Daemon::ServingFailure() const {
  if (loop_ == nullptr) return std::nullopt;
  if (loop_->fatal()) return *loop_->fatal();
  if (loop_->claim_lost()) return "the register claim was lost";
  return std::nullopt;
}

Daemon::Result Daemon::CheckHost() {
  if (auto checked = CheckConfigAgainstHost(config_, parts_.clock); !checked) {
    return Refuse(kExitConfig, checked.error());
  }
  group_ = ResolveGroup(config_.daemon.group).value();
  for (const auto& dir : {config_.daemon.runtime_dir, config_.daemon.state_dir}) {
    if (auto made = EnsureDirectory(dir, group_); !made) return Refuse(kExitFatal, made.error());
  }
  // Whoever may write in the host lock directory can plant a host mark or unlink a lock
  // between two daemons' flocks: refuse one this host does not control before any claim.
  if (auto trusted = reg::EnsureHostLockDir(HostLockDirOf(parts_)); !trusted) {
    return Refuse(kExitConfig, trusted.error());
  }
  // The same for the copy of the marks that outlives a reboot.
  if (auto trusted = reg::EnsureHostMarkDiskDir(reg::HostMarkDiskDir(HostLockDirOf(parts_)));
      !trusted) {
    return Refuse(kExitConfig, trusted.error());
  }
  WarnIfNotInMemory(config_.daemon.runtime_dir);
  return {};
}

Daemon::Result Daemon::LockInstance() {
  auto lock = AcquireInstanceLock(config_.daemon.runtime_dir);
  if (!lock) {
    return Refuse(lock.error().already_running ? kExitUsage : kExitFatal, lock.error().message);
  }
  instance_lock_ = std::move(*lock);
  return {};
}

void Daemon::UnlockInstance() { instance_lock_.reset(); }

Daemon::Result Daemon::LoadStateFile() {
  // Load() locks the state directory before anything is claimed: one daemon per state
  // directory.
  store_.emplace(config_.HighWaterPath(), parts_.file_system);
  auto saved = store_->Load();
  if (!saved) {
    const int status = saved.error().code == HighWaterErrorCode::kInUse ? kExitUsage : kExitFatal;
    store_.reset();
    return Refuse(status, saved.error().message);
  }
  auto identity = LoadOrCreateStateIdentity(config_.daemon.state_dir);
  if (!identity) {
    store_.reset();
    return Refuse(kExitFatal, identity.error());
  }
  state_identity_ = std::move(*identity);
  saved_ = *saved;
  return {};
}

void Daemon::CloseStateFile() {
  state_identity_.clear();
  saved_.reset();
  store_.reset();
}

Daemon::Result Daemon::ClaimNumber() {
  register_ = parts_.make_register(config_);
  holder_id_ = ResolveHolderId(config_);
  // What this host saw of the register before: a register found older is refused.
  const reg::ClaimRequest request(holder_id_, config_.id.epoch_unix_ms,
                                  saved_ ? saved_->register_seen : reg::RegisterIdentity{},
                                  saved_ ? saved_->reserved_through_unix_ms : 0,
                                  saved_ ? std::optional<uint32_t>(saved_->machine) : std::nullopt);
  auto waited = ClaimWaiting(*register_, request, stop_);
  if (!waited) {
    std::string message = StopCause() + " received while waiting for the register: stopping";
    spdlog::info("{}", message);
    Notifier().Stopping("stopping: no machine number was claimed");
    register_.reset();
    return tl::unexpected(StageFailure{kExitOk, std::move(message)});
  }
  auto& claim = *waited;
  if (!claim) {
    register_.reset();
    const int status = [&] {
      switch (claim.error().code) {
        case reg::RegisterErrorCode::kEpochMismatch:
        case reg::RegisterErrorCode::kRolledBack:
          return kExitConfig;
        case reg::RegisterErrorCode::kInUse:
          return kExitUsage;
        default:
          return kExitFatal;
      }
    }();
    return Refuse(status, "cannot claim a machine number: " + claim.error().message);
  }
  spdlog::info("claimed machine {} from the {} register ({}) as holder \"{}\"", claim->machine,
               register_->backend_name(), register_->location(), holder_id_);
  // This host's records are judged against the later of the clock and the register's mark
  // (FarPast): far past both, the clock or the record is wrong; at or below the register's
  // mark, they follow an operator's fence, however far ahead `raise-all --force-far` put it.
  const int64_t reference_ms = std::max(parts_.clock.NowUnixMs(), claim->high_water_unix_ms);
  if (saved_) {
    if (auto sane = CheckStateFileAgainstClock(*saved_, reference_ms, config_.clock.max_forward_ms);
        !sane) {
      register_.reset();
      return Refuse(kExitConfig, config_.HighWaterPath().string() + " " + sane.error());
    }
  }
  // The number's lock is held now (every backend takes it): what other daemons of this
  // host reserved for it since boot cannot change under us.
  // Only marks this daemon can trust count (machine_lock.h); the others are named.
  auto host_mark = reg::ReadHostMarks(reg::HostMarkDirsFor(HostLockDirOf(parts_)), claim->machine,
                                      reference_ms, config_.clock.max_forward_ms);
  if (!host_mark) {
    register_.reset();
    // A mark that cannot be read, or one far past the clock: an operator must look.
    return Refuse(kExitConfig, "cannot start on machine " + std::to_string(claim->machine) +
                                   ": " + host_mark.error());
  }
  for (const std::string& ignored : host_mark->ignored) spdlog::warn("{}", ignored);
  host_mark_ = std::move(host_mark->highest);
  for (const std::string& notice : claim->notices) spdlog::warn("{}", notice);
  claim_ = std::move(*claim);
  return {};
}

void Daemon::ReleaseNumber() {
  host_mark_.reset();
  claim_.reset();
  register_.reset();
}

shm::ProducerOptions Daemon::ProducerOptionsFor(uint32_t machine) const {
  return shm::ProducerOptions{.runtime_dir = config_.daemon.runtime_dir,
                              .capacity = config_.ring.capacity,
                              .epoch_unix_ms = config_.id.epoch_unix_ms,
                              .id_bits = config_.id.bits,
                              .machine = machine,
                              .mode = 0660,
                              .group = group_,
                              .max_age_ms = static_cast<uint32_t>(config_.ring.max_age_ms),
                              .liveness_ms = static_cast<uint32_t>(config_.daemon.liveness_ms)};
}

Daemon::Result Daemon::OpenSegment() {
  const std::filesystem::path& dir = config_.daemon.runtime_dir;
  const std::filesystem::path path = dir / shm::kSegmentFileName;
  struct stat info {};
  if (lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
    return Refuse(kExitConfig, "the segment path " + path.string() +
                                   " is a symbolic link: refusing to follow it; remove it (only "
                                   "snowflaked creates files in the runtime directory)");
  }
  const shm::ProducerOptions options = ProducerOptionsFor(claim_->machine);
  auto producer = shm::RingProducer::CreateOrOpen(options);
  if (!producer && shm::IsDamagedSegmentError(producer.error().code)) {
    // A segment we cannot trust: retire it (its clients see "stopped" and its ring is
    // taken back before it is unlinked) and start afresh. The high-water file, which
    // covers everything ever published, still bounds its IDs.
    spdlog::warn("retiring the unusable segment in {}: {}", dir.string(), producer.error().message);
    shm::RingProducer::Retire(dir);
    producer = shm::RingProducer::CreateOrOpen(options);
  }
  if (!producer) {
    return Refuse(kExitFatal, "cannot open the segment: " + producer.error().message);
  }
  if (!producer->replaced_because().empty()) {
    spdlog::warn("replaced the segment in {} with a fresh one without continuing it: {}",
                 dir.string(), producer->replaced_because());
  } else if (producer->continued()) {
    spdlog::info(
        "continued the segment in {}: a fresh one above its last ID {} "
        "(incarnation {}); its clients reattach to it",
        dir.string(), producer->last_published_id(), producer->incarnation());
  }
  producer_ = std::move(*producer);
  return {};
}

void Daemon::CloseSegment() {
  if (retire_segment_) {
    // Never reopen a segment whose counters were corrupted: a head moved backwards would
    // hand out taken IDs again. The next start creates a fresh one above the persisted
    // reservation.
    shm::RingProducer::Retire(config_.daemon.runtime_dir);
  } else if (producer_->state() != DaemonState::kStopped) {
    // A start refused before the loop existed: its clients must not wait for it.
    producer_->SetState(DaemonState::kStopped, StateReason::kShutdown);
  }
  producer_.reset();
}

int64_t Daemon::ReservationMs() const {
  // The state file is written before each register write with at least its target, so a
  // register's longer window is the state file's too: a restart on the surviving segment
  // trusts it only when the register's mark is at or below the state file's reservation
  // (startup_reconciliation.cc), and a start behind it waits for it, not more.
  return std::max(config_.persistence.reservation_ms, register_->mark_reservation_ms());
}

Daemon::Result Daemon::MakeGenerator() {
  // Where this start stands: a pure function of segment, state file, register, clock.
  const StartupFacts facts{.now_unix_ms = parts_.clock.NowUnixMs(),
                           .epoch_unix_ms = config_.id.epoch_unix_ms,
                           .id_bits = config_.id.bits,
                           .machine = claim_->machine,
                           .register_high_water_ms = claim_->high_water_unix_ms,
                           .register_mark_writer = claim_->mark_writer,
                           .state_file = saved_,
                           .segment = {.path = producer_->path().string(),
                                       .continued = producer_->continued(),
                                       .last_published_id = producer_->last_published_id(),
                                       .incarnation = producer_->incarnation()},
                           .reservation_ms = ReservationMs(),
                           .max_backward_ms = config_.clock.max_backward_ms,
                           .host_mark = host_mark_,
                           .state_identity = state_identity_};
  auto plan = ReconcileStartup(facts);
  if (!plan) {
    return Refuse(kExitConfig, config_.HighWaterPath().string() + " " + plan.error());
  }
  spdlog::info("high-water mark {} ({}): {}", plan->high_water_unix_ms,
               plan->high_water_unix_ms > 0 ? FormatTimeText(plan->high_water_unix_ms) : "none",
               plan->explanation);
  // The generator judges the clock against the mark.
  auto generator = Generator::Create(
      GeneratorConfig{.layout = IdLayout::Create(config_.id.epoch_unix_ms, config_.id.bits).value(),
                      .machine = claim_->machine,
                      .max_backward_ms = config_.clock.max_backward_ms,
                      .high_water_unix_ms = plan->high_water_unix_ms,
                      .start_wait_ms = plan->start_wait_ms,
                      .high_water_source = plan->high_water_source},
      parts_.clock);
  if (!generator) {
    return Refuse(
        generator.error().code == GeneratorErrorCode::kEpochInFuture ? kExitConfig : kExitFatal,
        "cannot start the generator: " + generator.error().message);
  }
  ReportStartupClockState(*generator, plan->start_wait_ms);
  plan_ = std::move(*plan);
  generator_ = std::move(*generator);
  return {};
}

void Daemon::DropGenerator() {
  generator_.reset();
  plan_.reset();
}

Daemon::Result Daemon::StartReservations() {
  // Its own thread keeps the horizon ahead of the clock, reporting each renewal and
  // register call into the metrics.
  reservations_ = std::make_unique<ReservationService>(
      ReservationOptions{
          .machine = claim_->machine,
          .epoch_unix_ms = config_.id.epoch_unix_ms,
          .reservation_ms = ReservationMs(),
          // Renewing at a quarter of the reservation leaves a renewal three quarters of it
          // (750 ms by default) to complete before the fill loop reaches the horizon: a
          // disk stalled by other load does not pause generation. A register's own longer
          // window (etcd's mark_reservation_ms) is renewed when half of it is left: one
          // write per half window, and still far more time than a raise needs.
          .renew_ahead_ms = register_->mark_reservation_ms() > config_.persistence.reservation_ms
                                ? std::max<int64_t>(1, ReservationMs() / 2)
                                : std::max<int64_t>(1, ReservationMs() * 3 / 4),
          .segment_path = producer_->path().string(),
          .segment_incarnation = producer_->incarnation(),
          .register_claim = claim_->claim_token,
          .host_marks = reg::HostMarkDirsFor(HostLockDirOf(parts_)),
          .host_mark_writer = state_identity_,
          .host_mark_floor = host_mark_ ? host_mark_->unix_ms : 0,
          .start_floor_unix_ms = plan_->high_water_unix_ms,
          .metrics = &metrics_},
      *store_, *register_, parts_.clock, plan_->confirmed_through_unix_ms);
  reservations_->Start();
  return {};
}

void Daemon::StopReservations() {
  reservations_->Stop();
  if (clean_stop_) {
    // Every ID ever published carries a millisecond at or below the generator's mark, so
    // the reservation can come down to it: a clean restart then need not wait.
    const int64_t mark = generator_->last_unix_ms();
    if (auto recorded = reservations_->RecordCleanStop(mark); !recorded) {
      // The previous reservation stays in place: still safe, a restart may just wait.
      spdlog::error("cannot record the clean stop in the {}", recorded.error());
    }
    spdlog::info("stopped cleanly; the last issued millisecond is {}", FormatTimeText(mark));
  }
  reservations_.reset();
}

Daemon::Result Daemon::StartHeartbeat() {
  // Its own thread, its own cadence (daemon.liveness_ms / 10).
  heartbeat_ = std::make_unique<Heartbeat>(
      *producer_, BeatIntervalFor(config_.daemon.liveness_ms),
      std::max(std::chrono::milliseconds(1000),
               std::chrono::milliseconds(20 * config_.daemon.liveness_ms)),
      parts_.clock);
  heartbeat_->Start();
  return {};
}

void Daemon::StopHeartbeat() {
  heartbeat_->Stop();
  heartbeat_.reset();
}

Daemon::Result Daemon::MakeFillLoop() {
  DaemonStatus identity;
  identity.pid = getpid();
  identity.version = std::string(SnowflakedVersion());
  identity.instance = config_.daemon.instance;
  identity.runtime_dir = config_.daemon.runtime_dir.string();
  identity.state_dir = config_.daemon.state_dir.string();
  identity.register_backend = std::string(register_->backend_name());
  identity.register_location = register_->location();
  identity.holder_id = holder_id_;
  identity.machine = claim_->machine;
  identity.epoch_unix_ms = config_.id.epoch_unix_ms;
  identity.segment_reopened = producer_->continued();
  identity.started_unix_ms = parts_.clock.NowUnixMs();
  board_ = std::make_unique<StatusBoard>(parts_.clock);
  status_ = std::make_unique<StatusReporter>(
      identity, *board_, std::chrono::milliseconds(config_.systemd.status_interval_ms));
  loop_ = std::make_unique<FillLoop>(
      FillLoopOptions{
          .epoch_unix_ms = config_.id.epoch_unix_ms,
          .machine = claim_->machine,
          .max_age_ms = config_.ring.max_age_ms,
          .capacity = config_.ring.capacity,
          .min_fill = config_.ring.min_fill,
          // A segment a client tampered with is replaced, never served.
          .replace_segment =
              [options = ProducerOptionsFor(claim_->machine)](const shm::FreshSegment& fresh) {
                return shm::RingProducer::CreateReplacement(options, fresh);
              }},
      parts_.clock, *generator_, *producer_, *reservations_, *status_, heartbeat_.get());
  // The control socket serves the board from its first request, and attaches to the
  // segment the loop serves now.
  status_->RefreshBoard(loop_->Facts());
  board_->SetAttachSource([loop = loop_.get()] {
    auto [region, segment_id] = loop->AttachPoint();
    return StatusBoard::AttachPoint{std::move(region), segment_id};
  });
  // The fill loop's figures reach the metrics at scrape time, from the board and the
  // segment's header: the loop itself reports nothing.
  status_metrics_ = metrics_.AddSource([this](Metrics& metrics) {
    metrics.Export(FiguresOf(board_->Snapshot(), config_.daemon.runtime_dir, heartbeat_->beats(),
                             board_->PausedSeconds()));
  });
  return {};
}

void Daemon::EndFillLoop() {
  // A start that failed at the control socket or the front: the ring must not stay in
  // "starting" with IDs in it (a clean stop has stopped serving already).
  if (loop_->published().state != DaemonState::kStopped) loop_->StopServing();
  status_metrics_ = {};  // waits for a scrape reading the board
  board_->SetAttachSource({});  // waits for an attach reading the loop
  loop_.reset();
  status_.reset();
  board_.reset();
}

Daemon::Result Daemon::StartControlSocket() {
  control_ = std::make_unique<ControlServer>(
      ControlServerOptions{.socket_path = config_.daemon.runtime_dir / kControlSocketFileName,
                           .group = group_},
      *board_);
  if (auto started = control_->Start(); !started) {
    control_.reset();
    return Refuse(kExitFatal, "cannot serve the control socket: " + started.error());
  }
  return {};
}

void Daemon::StopControlSocket() {
  control_->Stop();
  control_.reset();
}

Daemon::Result Daemon::ArmServing() {
  const std::lock_guard<std::mutex> lock(stop_mutex_);
  wake_on_stop_ = loop_.get();
  return {};
}

void Daemon::StopServing() {
  {
    const std::lock_guard<std::mutex> lock(stop_mutex_);
    wake_on_stop_ = nullptr;
  }
  loop_->StopServing();
  // A failure is announced once no client can take from the ring any more.
  if (failure_) status_->notifier().Stopping("failed: " + *failure_);
}

Daemon::Result Daemon::StartFront() {
  auto fronts = parts_.make_fronts(FrontContext{config_, *board_, metrics_, parts_.clock});
  if (!fronts) return Refuse(kExitFatal, fronts.error());
  fronts_ = std::move(*fronts);
  for (auto& front : fronts_) {
    if (auto started = front->Start(); !started) {
      StopFront();
      return Refuse(kExitFatal, started.error());
    }
  }
  // The status (control socket, /v1/status) now carries each front's part.
  board_->SetFrontSource([this] {
    std::vector<FrontStatus> out;
    for (const auto& front : fronts_) out.push_back(front->Status());
    return out;
  });
  return {};
}

void Daemon::StopFront() {
  // Out of the status first: this waits for a status request that is reading the fronts.
  board_->SetFrontSource({});
  for (auto it = fronts_.rbegin(); it != fronts_.rend(); ++it) (*it)->Stop();
  fronts_.clear();
}

}  // namespace snowflake::daemon
