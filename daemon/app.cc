#include "app.h"

#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "clock.h"
#include "control_server.h"
#include "demand_tracker.h"
#include "generator.h"
#include "high_water_store.h"
#include "http_front.h"
#include "instance_lock.h"
#include "logging.h"
#include "machine_register.h"
#include "notifier.h"
#include "snowflake/ring_producer.h"
#include "status_board.h"
#include "time_text.h"

#ifndef SNOWFLAKE_VERSION
#define SNOWFLAKE_VERSION "0.0.0"
#endif

namespace snowflake {

std::string_view SnowflakedVersion() noexcept { return SNOWFLAKE_VERSION; }

namespace {

using Steady = std::chrono::steady_clock;
using shm::DaemonState;
using shm::StateReason;

// SIGTERM and SIGINT are blocked in every thread and collected by one thread with
// sigtimedwait, so no async-signal-safety puzzle arises: the fill loop polls a flag once
// per pass (about every millisecond).
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      while (!quit_.load(std::memory_order_relaxed)) {
        const timespec timeout{0, 50'000'000};
        const int sig = sigtimedwait(&set_, nullptr, &timeout);
        if (sig > 0) {
          signal_.store(sig, std::memory_order_relaxed);
          stop_.store(true, std::memory_order_release);
        }
      }
    });
  }
  ~SignalWatcher() {
    quit_.store(true, std::memory_order_relaxed);
    thread_.join();
  }
  bool stop_requested() const { return stop_.load(std::memory_order_acquire); }
  int signal_number() const { return signal_.load(std::memory_order_relaxed); }

 private:
  sigset_t set_{};
  std::atomic<bool> quit_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

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
    return tl::unexpected("daemon.group: no group named \"" + name + "\" on this host");
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

bool IsRetirableSegmentError(shm::SegmentError code) {
  switch (code) {
    case shm::SegmentError::kBadMagic:
    case shm::SegmentError::kIncompatibleVersion:
    case shm::SegmentError::kTruncated:
    case shm::SegmentError::kSizeMismatch:
    case shm::SegmentError::kBadCapacity:
    case shm::SegmentError::kCorruptCounters:
      return true;
    default:
      return false;
  }
}

std::string StateName(DaemonState state) { return std::string(shm::DaemonStateName(state)); }

struct PublishedState {
  DaemonState state = DaemonState::kStarting;
  StateReason reason = StateReason::kStarting;
  friend bool operator==(const PublishedState&, const PublishedState&) = default;
};

// Everything the daemon holds while serving, and the loop of section 5 step 6.
class FillLoop {
 public:
  FillLoop(const Config& config, const SignalWatcher& signals, std::unique_ptr<MachineRegister> reg,
           std::string holder_id, MachineClaim claim, HighWaterStore store,
           shm::RingProducer producer, Generator generator, std::optional<gid_t> group,
           int64_t reserved_through)
      : config_(config),
        signals_(signals),
        register_(std::move(reg)),
        holder_id_(std::move(holder_id)),
        claim_(claim),
        store_(std::move(store)),
        producer_(std::move(producer)),
        generator_(std::move(generator)),
        group_(group),
        // At most half a millisecond's sequence space ahead: a burst that empties the
        // ring is then refilled from the same millisecond in tens of µs, not at the next.
        demand_(std::min<uint64_t>(config.ring.min_fill, kIdsPerMs / 2),
                std::min<uint64_t>(config.ring.capacity, kIdsPerMs / 2)),
        buffer_(config.ring.capacity),
        reserved_through_(reserved_through),
        control_(
            ControlServerOptions{
                .socket_path = config.daemon.runtime_dir / kControlSocketFileName,
                .group = group,
            },
            board_) {
    started_unix_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  }

  int Run() {
    RefreshBoard();
    if (auto started = control_.Start(); !started) {
      spdlog::critical("cannot serve the control socket: {}", started.error());
      producer_.SetState(DaemonState::kStopped, StateReason::kShutdown);
      return kExitFatal;
    }
    auto http = HttpFront::Start(config_, board_);  // nullptr while [http] listen is empty
    if (!http) {
      spdlog::critical("{}", http.error());
      producer_.SetState(DaemonState::kStopped, StateReason::kShutdown);
      return kExitFatal;
    }
    ReportStartupClockState();
    // The default timer slack (50 µs) would let each boundary wake-up come late by that
    // much, and every microsecond after a boundary hands out IDs of the previous ms.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    last_head_ = producer_.head();
    bool ready_sent = false;
    uint32_t refill_seen = producer_.refill_request();
    while (!signals_.stop_requested() && !fatal_) {
      const uint32_t refill_now = producer_.refill_request();
      if (refill_now != refill_seen) last_demand_ = Steady::now();
      refill_seen = refill_now;
      Pass();
      if (!ready_sent && (published_.state == DaemonState::kServing ||
                          published_.state == DaemonState::kOutOfService)) {
        // READY=1 once the number is claimed and the ring filled; a daemon that starts out
        // of service is also "up": it waits for an operator's resume on the control socket.
        notifier_.Ready(StatusText());
        ready_sent = true;
        spdlog::info("{} machine {}: segment {}, control socket {}", StateName(published_.state),
                     claim_.machine, producer_.path().string(),
                     (config_.daemon.runtime_dir / kControlSocketFileName).string());
      }
      // Sleep until a client asks for a refill, or until just past the next millisecond
      // boundary while clients take IDs or the clock is being waited for: a new ms is new
      // sequence space and makes the ring's IDs one ms older, so that is when to drain and
      // refill (a flat 1 ms sleep drifts against the boundaries and leaves whole ms
      // unused). A dormant daemon's ring is empty; it sleeps kDormantWait between beats.
      producer_.WaitForRefillRequest(refill_seen, dormant_ ? kDormantWait : UntilNextMs());
    }
    if (fatal_) {
      producer_.SetState(DaemonState::kStopped, StateReason::kShutdown);
      producer_.DrainAll();
      // Never reopen a segment whose counters were corrupted: a head moved backwards
      // would hand out taken IDs again. The next start creates a fresh one above the
      // persisted reservation.
      shm::RingProducer::Retire(config_.daemon.runtime_dir);
      notifier_.Stopping("failed: " + *fatal_);
      control_.Stop();
      return kExitFatal;
    }
    return Shutdown();
  }

 private:
  // Time until 5 µs past the next millisecond boundary of the wall clock (the IDs'
  // clock), at most 1.005 ms: the margin lets the new millisecond have begun when we read it.
  static std::chrono::nanoseconds UntilNextMs() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    constexpr int64_t kMsNs = 1'000'000;
    constexpr int64_t kMarginNs = 5'000;
    return std::chrono::nanoseconds(kMsNs - now.tv_nsec % kMsNs + kMarginNs);
  }

  // The generator judged the clock against the high-water mark at Create(): a fast restart
  // (behind by at most reservation_ms + max_backward_ms, its start_wait_ms) only waits;
  // further behind stays out of service. Here that is logged.
  void ReportStartupClockState() {
    starting_behind_ = generator_.state() != GeneratorState::kServing;
    const int64_t behind = generator_.ms_behind();
    const int64_t fast_restart_bound =
        config_.persistence.reservation_ms + config_.clock.max_backward_ms;
    if (generator_.state() == GeneratorState::kOutOfService && behind == 0) {
      // Not the clock's lag: the epoch's time range is used up.
      spdlog::critical("out of service: {}", generator_.reason());
    } else if (generator_.state() == GeneratorState::kOutOfService) {
      spdlog::warn(
          "the clock is {} ms behind the high-water mark {} (more than the {} ms of a fast "
          "restart): out of service until `snowflakectl resume`",
          behind, FormatIsoUtc(generator_.last_unix_ms()), fast_restart_bound);
    } else if (generator_.state() == GeneratorState::kPaused) {
      spdlog::warn(
          "the clock is {} ms behind the high-water mark {} (within the {} ms of a fast "
          "restart): paused until it passes the mark",
          behind, FormatIsoUtc(generator_.last_unix_ms()), fast_restart_bound);
    }
    SyncState();
  }

  void Pass() {
    const auto now = Steady::now();
    const int64_t now_ms = clock_.NowUnixMs();

    HandleResume();

    const uint64_t head = producer_.head();
    const uint64_t taken = head - last_head_;
    demand_.Record(now, taken);
    // A refill request (seen by Run) or a take wakes a dormant daemon in this very pass,
    // so the client that asked is served now, not at the next millisecond boundary.
    if (taken > 0) last_demand_ = now;
    if (dormant_ && now - last_demand_ < kDormantAfter) dormant_ = false;

    if (generator_.state() == GeneratorState::kServing && now_ms < generator_.last_unix_ms()) {
      // The clock stepped back: the ring's IDs are now in the clock's future. Take them
      // back before anyone receives one, then let the generator judge the step.
      producer_.DrainAll();
      Fill(1);
    } else if (dormant_) {
      // Nobody has taken an ID for a while: hold none, so none can turn stale. The next
      // client finds the ring empty and its refill request wakes us at once.
      producer_.DrainAll();
    } else {
      // Passes run just after each ms boundary: an ID older than max_age_ms now is drained
      // before anyone can receive it.
      const int64_t min_offset = now_ms - config_.ring.max_age_ms - config_.id.epoch_unix_ms;
      if (min_offset > 0) producer_.DrainOlderThan(min_offset);
    }

    const uint64_t target = demand_.target();
    if (target != fill_target_) {
      fill_target_ = target;
      producer_.SetFillTarget(target);
    }
    const uint64_t size = producer_.size();
    const bool may_generate = generator_.state() != GeneratorState::kOutOfService &&
                              (!persistence_failed_ || now >= next_persist_try_) &&
                              (!dormant_ || !filled_once_);
    if (may_generate && size < target) Fill(target - size);
    SyncState();
    // Dormant: serving (or out of service) and no take or refill request for kDormantAfter.
    // A paused daemon stays awake to notice the clock passing the mark.
    dormant_ = filled_once_ && now - last_demand_ >= kDormantAfter &&
               (published_.state == DaemonState::kServing ||
                published_.state == DaemonState::kOutOfService);

    producer_.Heartbeat();
    notifier_.MaybeWatchdog(now);
    if (now >= next_service_scan_) {
      ScanServices();
      next_service_scan_ = now + std::chrono::seconds(1);
    }
    if (status_dirty_ || now >= next_board_refresh_) {
      RefreshBoard();
      next_board_refresh_ = now + std::chrono::milliseconds(50);
    }
    if (status_dirty_ || now >= next_status_) {
      notifier_.Status(StatusText());
      next_status_ = now + std::chrono::milliseconds(config_.systemd.status_interval_ms);
    }
    status_dirty_ = false;
    last_head_ = producer_.head();
  }

  void HandleResume() {
    const uint64_t requested = board_.resume_requested();
    if (requested <= resume_handled_) return;
    const bool was_out = generator_.state() == GeneratorState::kOutOfService;
    if (was_out) {
      generator_.Resume();
      spdlog::warn("resume requested on the control socket: the generator is now {}{}",
                   GeneratorStateText(),
                   generator_.reason().empty() ? "" : " (" + generator_.reason() + ")");
      SyncState();
    } else {
      spdlog::info("resume requested on the control socket while {}: nothing to do",
                   StateName(published_.state));
    }
    RefreshBoard();
    board_.ResumeHandled(requested, was_out);
    resume_handled_ = requested;
  }

  // Generates up to `want` IDs, reserves their milliseconds durably, publishes them.
  void Fill(uint64_t want) {
    want = std::min<uint64_t>(want, buffer_.size());
    auto generated = generator_.Generate(std::span<uint64_t>(buffer_.data(), want));
    if (!generated || *generated == 0) return;  // SyncState() reports pauses
    const size_t n = *generated;
    const int64_t newest_ms = config_.id.epoch_unix_ms + IdLayout::OffsetMsOf(buffer_[n - 1]);
    // The rule that makes a reboot safe: nothing beyond the fsync'd reservation is ever
    // published. Unpublished IDs are simply dropped (gaps, never duplicates).
    if (newest_ms > reserved_through_ && !Reserve(newest_ms + config_.persistence.reservation_ms)) {
      return;
    }
    auto published = producer_.Publish(std::span<const uint64_t>(buffer_.data(), n));
    if (!published) {
      // Always-on check: publishing out of order or a corrupted head would risk a
      // duplicate. Stop serving.
      spdlog::critical("stopping: {}", published.error().message);
      fatal_ = published.error().message;
      return;
    }
    if (!filled_once_) filled_once_ = true;
  }

  bool Reserve(int64_t through) {
    const HighWaterState state{.machine = claim_.machine,
                               .epoch_unix_ms = config_.id.epoch_unix_ms,
                               .reserved_through_unix_ms = through,
                               .last_issued_unix_ms_at_clean_stop = std::nullopt};
    auto saved = store_.Save(state);
    if (!saved) {
      if (!persistence_failed_) {
        spdlog::error("cannot persist the high-water reservation, not issuing IDs beyond {}: {}",
                      FormatIsoUtc(reserved_through_), saved.error().message);
      }
      persistence_failed_ = true;
      persistence_errno_ = saved.error().sys_errno;
      next_persist_try_ = Steady::now() + std::chrono::milliseconds(100);
      return false;
    }
    if (persistence_failed_) spdlog::warn("the high-water reservation is persisted again");
    persistence_failed_ = false;
    reserved_through_ = through;
    // The register's mark lets another holder of this number continue above us; the
    // local file already protects this host, so a failure here is only a warning.
    if (auto updated = register_->UpdateHighWater(through); !updated) {
      const auto now = Steady::now();
      if (now >= next_register_warning_) {
        spdlog::warn("cannot record the high-water mark in the register: {}",
                     updated.error().message);
        next_register_warning_ = now + std::chrono::seconds(60);
      }
    }
    return true;
  }

  PublishedState Desired() const {
    if (persistence_failed_) return {DaemonState::kPaused, StateReason::kPersistenceFailed};
    switch (generator_.state()) {
      case GeneratorState::kServing:
        return filled_once_ ? PublishedState{DaemonState::kServing, StateReason::kNone}
                            : PublishedState{DaemonState::kStarting, StateReason::kStarting};
      case GeneratorState::kPaused:
        return {DaemonState::kPaused,
                starting_behind_ ? StateReason::kBehindHighWater : StateReason::kClockBehind};
      case GeneratorState::kOutOfService:
        if (generator_.ms_behind() == 0) {
          return {DaemonState::kOutOfService, StateReason::kTimeRangeExhausted};
        }
        return {DaemonState::kOutOfService,
                starting_behind_ ? StateReason::kBehindHighWater : StateReason::kClockStepTooLarge};
    }
    return {};
  }

  // Publishes the state the generator and persistence call for, if it changed, and logs
  // the change as a warning with the size of the clock step.
  void SyncState() {
    const PublishedState desired = Desired();
    if (desired == published_) return;
    const PublishedState before = published_;
    const bool trouble =
        desired.state == DaemonState::kPaused || desired.state == DaemonState::kOutOfService;
    const int64_t detail = desired.reason == StateReason::kPersistenceFailed
                               ? persistence_errno_
                               : generator_.ms_behind();
    if (trouble) {
      // Clients must not receive IDs while the clock is in doubt.
      producer_.DrainAll();
      if (desired.reason != StateReason::kPersistenceFailed &&
          before.state != DaemonState::kPaused && before.state != DaemonState::kOutOfService) {
        producer_.CountClockPause();
      }
      step_ms_ = detail;
    }
    producer_.SetState(desired.state, desired.reason, detail);
    published_ = desired;
    status_dirty_ = true;
    if (desired.state == DaemonState::kServing) starting_behind_ = false;
    const std::string why =
        desired.reason == StateReason::kPersistenceFailed
            ? "cannot persist the high-water reservation"
            : (generator_.reason().empty() ? std::string(shm::StateReasonName(desired.reason))
                                           : generator_.reason());
    if (desired.state == DaemonState::kServing && before.state == DaemonState::kStarting) {
      spdlog::info("state starting -> serving");
    } else if (desired.state == DaemonState::kServing || desired.state == DaemonState::kStarting) {
      spdlog::warn(
          "state {} -> {}: the clock passed the high-water mark again (the step was {} ms)",
          StateName(before.state), StateName(desired.state), step_ms_);
    } else {
      spdlog::warn("state {} -> {}: {} (clock step {} ms)", StateName(before.state),
                   StateName(desired.state), why, detail);
    }
  }

  std::string GeneratorStateText() const {
    switch (generator_.state()) {
      case GeneratorState::kServing:
        return "serving";
      case GeneratorState::kPaused:
        return "paused";
      case GeneratorState::kOutOfService:
        return "out of service";
    }
    return "?";
  }

  void ScanServices() {
    std::map<std::string, uint64_t> live;
    std::vector<shm::ServiceCount> finished;
    producer_.ForEachService([&](const shm::ServiceCount& c) {
      const bool dead = !c.retired && kill(static_cast<pid_t>(c.pid), 0) != 0 && errno == ESRCH;
      if (c.retired || dead) {
        finished.push_back(c);
      } else {
        live[c.name] += c.taken;
      }
    });
    for (const auto& c : finished) {
      // Fold a finished client's final count into its service's total, then free the slot.
      if (producer_.FreeServiceSlot(c.slot, c.pid)) folded_[c.name] += c.taken;
    }
    services_ = folded_;
    for (const auto& [name, taken] : live) services_[name] += taken;
  }

  std::string StatusText() const {
    const std::string machine = "machine " + std::to_string(claim_.machine);
    switch (published_.state) {
      case DaemonState::kServing:
        return "serving: " + machine + ", ring " + std::to_string(producer_.size()) + "/" +
               std::to_string(producer_.capacity()) + " (target " + std::to_string(fill_target_) +
               ")";
      case DaemonState::kPaused:
        return "paused: " + machine + ", " +
               (published_.reason == StateReason::kPersistenceFailed
                    ? std::string("cannot persist the high-water reservation")
                    : generator_.reason());
      case DaemonState::kOutOfService:
        return "out of service: " + machine + ", " + generator_.reason() +
               "; run `snowflakectl resume` after checking the clock";
      case DaemonState::kStopped:
        return "stopped: " + machine;
      case DaemonState::kStarting:
        return "starting: " + machine;
    }
    return machine;
  }

  void RefreshBoard() {
    const shm::SegmentHeader& h = producer_.header();
    DaemonStatus s;
    s.state = StateName(published_.state);
    s.reason_code = std::string(shm::StateReasonName(published_.reason));
    s.reason = published_.state == DaemonState::kServing ? "" : StatusText();
    s.reason_detail = h.reason_detail.load(std::memory_order_relaxed);
    s.pid = getpid();
    s.version = std::string(SnowflakedVersion());
    s.instance = config_.daemon.instance;
    s.runtime_dir = config_.daemon.runtime_dir.string();
    s.state_dir = config_.daemon.state_dir.string();
    s.register_backend = std::string(register_->backend_name());
    s.register_location = register_->location();
    s.holder_id = holder_id_;
    s.machine = claim_.machine;
    s.epoch_unix_ms = config_.id.epoch_unix_ms;
    s.ring_capacity = producer_.capacity();
    s.ring_fill = producer_.size();
    s.fill_target = fill_target_;
    s.published_total = h.published_total.load(std::memory_order_relaxed);
    s.drained_total = h.drained_total.load(std::memory_order_relaxed);
    s.incarnation = producer_.incarnation();
    s.segment_reopened = producer_.reopened();
    s.last_issued_id = generator_.last_issued_id();
    s.last_issued_unix_ms = generator_.last_unix_ms();
    s.reserved_through_unix_ms = reserved_through_;
    s.clock_pauses = generator_.pauses_total();
    s.clock_behind_ms = generator_.ms_behind();
    s.started_unix_ms = started_unix_ms_;
    s.services = services_;
    board_.Update(s);
  }

  int Shutdown() {
    spdlog::info("signal {} received: stopping", signals_.signal_number());
    notifier_.Stopping("stopping: machine " + std::to_string(claim_.machine));
    // Stopped first, so clients that find the ring empty fail over at once; then take
    // back what is left.
    producer_.SetState(DaemonState::kStopped, StateReason::kShutdown);
    published_ = {DaemonState::kStopped, StateReason::kShutdown};
    producer_.DrainAll();
    // Every ID ever published carries a millisecond at or below the generator's mark, so
    // the reservation can come down to it: a clean restart then need not wait.
    const int64_t mark = generator_.last_unix_ms();
    int status = kExitOk;
    auto saved = store_.Save(HighWaterState{.machine = claim_.machine,
                                            .epoch_unix_ms = config_.id.epoch_unix_ms,
                                            .reserved_through_unix_ms = mark,
                                            .last_issued_unix_ms_at_clean_stop = mark});
    if (!saved) {
      // The previous reservation stays in place: still safe, a restart may just wait.
      spdlog::error("cannot record the clean stop: {}", saved.error().message);
    } else {
      reserved_through_ = mark;
    }
    if (auto updated = register_->RecordCleanStop(mark); !updated) {
      spdlog::warn("cannot record the high-water mark in the register: {}",
                   updated.error().message);
    }
    control_.Stop();
    RefreshBoard();
    spdlog::info("stopped cleanly; the last issued millisecond is {}", FormatIsoUtc(mark));
    return status;
  }

  const Config& config_;
  const SignalWatcher& signals_;
  std::unique_ptr<MachineRegister> register_;
  std::string holder_id_;
  MachineClaim claim_;
  HighWaterStore store_;
  shm::RingProducer producer_;
  RealClock clock_;
  Generator generator_;
  std::optional<gid_t> group_;
  Notifier notifier_;
  StatusBoard board_;
  DemandTracker demand_;
  std::vector<uint64_t> buffer_;
  int64_t reserved_through_;
  ControlServer control_;

  PublishedState published_;
  // A daemon nobody took from for kDormantAfter empties its ring and beats every
  // kDormantWait: far younger than the clients' 50 ms heartbeat limit, and about 200
  // wake-ups a second instead of 1,000.
  static constexpr std::chrono::seconds kDormantAfter{1};
  static constexpr std::chrono::milliseconds kDormantWait{5};
  bool dormant_ = false;
  Steady::time_point last_demand_ = Steady::now();
  bool filled_once_ = false;
  bool starting_behind_ = false;
  int64_t step_ms_ = 0;
  bool status_dirty_ = true;
  bool persistence_failed_ = false;
  int persistence_errno_ = 0;
  std::optional<std::string> fatal_;
  uint64_t last_head_ = 0;
  uint64_t fill_target_ = 0;
  uint64_t resume_handled_ = 0;
  int64_t started_unix_ms_ = 0;
  std::map<std::string, uint64_t> folded_;
  std::map<std::string, uint64_t> services_;
  Steady::time_point next_persist_try_{};
  Steady::time_point next_register_warning_{};
  Steady::time_point next_service_scan_{};
  Steady::time_point next_board_refresh_{};
  Steady::time_point next_status_{};
};

tl::expected<shm::RingProducer, std::string> OpenSegment(const Config& config, uint32_t machine,
                                                         std::optional<gid_t> group) {
  const shm::ProducerOptions options{.runtime_dir = config.daemon.runtime_dir,
                                     .capacity = config.ring.capacity,
                                     .epoch_unix_ms = config.id.epoch_unix_ms,
                                     .machine = machine,
                                     .mode = 0660,
                                     .group = group};
  auto producer = shm::RingProducer::CreateOrOpen(options);
  if (!producer && IsRetirableSegmentError(producer.error().code)) {
    // A segment we cannot trust: retire it (its clients see "stopped") and start afresh.
    // The high-water file, fsync'd before every publish, still bounds its IDs.
    spdlog::warn("retiring the unusable segment in {}: {}", config.daemon.runtime_dir.string(),
                 producer.error().message);
    shm::RingProducer::Retire(config.daemon.runtime_dir);
    producer = shm::RingProducer::CreateOrOpen(options);
  }
  if (!producer) return tl::unexpected(producer.error().message);
  return std::move(*producer);
}

int RunDaemon(const Config& config) {
  SetUpLogging(config.daemon.log_level);
  SignalWatcher signals;
  signal(SIGPIPE, SIG_IGN);
  spdlog::info("snowflaked {} starting: runtime dir {}, state dir {}", SnowflakedVersion(),
               config.daemon.runtime_dir.string(), config.daemon.state_dir.string());

  auto group = ResolveGroup(config.daemon.group);
  if (!group) {
    spdlog::critical("{}", group.error());
    return kExitUsage;
  }
  for (const auto& dir : {config.daemon.runtime_dir, config.daemon.state_dir}) {
    if (auto made = EnsureDirectory(dir, *group); !made) {
      spdlog::critical("{}", made.error());
      return kExitFatal;
    }
  }

  // 1. One daemon per runtime directory.
  auto instance_lock = AcquireInstanceLock(config.daemon.runtime_dir);
  if (!instance_lock) {
    spdlog::critical("{}", instance_lock.error().message);
    return instance_lock.error().already_running ? kExitUsage : kExitFatal;
  }

  // 2. The machine number, once.
  auto reg = MakeMachineRegister(config);
  const std::string holder_id = ResolveHolderId(config);
  auto claim = reg->Claim(ClaimRequest{holder_id, config.id.epoch_unix_ms});
  if (!claim) {
    spdlog::critical("cannot claim a machine number: {}", claim.error().message);
    return kExitFatal;
  }
  spdlog::info("claimed machine {} from the {} register ({}) as holder \"{}\"", claim->machine,
               reg->backend_name(), reg->location(), holder_id);

  // 3. The high-water mark: the largest millisecond that may already carry an ID.
  HighWaterStore store(config.HighWaterPath());
  auto saved = store.Load();
  if (!saved) {
    spdlog::critical("{}", saved.error().message);
    return kExitFatal;
  }
  if (*saved && (*saved)->epoch_unix_ms != config.id.epoch_unix_ms) {
    // A later epoch shrinks every ID's time field: new IDs would repeat old ones of the
    // same machine number. Refuse rather than guess which the operator meant.
    spdlog::critical(
        "{} was written for epoch {} ({}) but id.epoch is {} ({}): changing the epoch under "
        "the same state could repeat IDs. Restore the old epoch, or start this daemon with a "
        "new state directory and a machine number that never issued IDs under that epoch",
        config.HighWaterPath().string(), (*saved)->epoch_unix_ms,
        FormatIsoUtc((*saved)->epoch_unix_ms), config.id.epoch_unix_ms,
        FormatIsoUtc(config.id.epoch_unix_ms));
    return kExitFatal;
  }
  auto producer = OpenSegment(config, claim->machine, *group);
  if (!producer) {
    spdlog::critical("cannot open the segment: {}", producer.error());
    return kExitFatal;
  }
  const IdLayout layout = IdLayout::Create(config.id.epoch_unix_ms).value();
  int64_t high_water = claim->high_water_unix_ms;
  int64_t reserved_through = 0;
  if (*saved) {
    // Used whatever number the file was written for: also keeps host-wide time order
    // across a change of number.
    high_water = std::max(high_water, (*saved)->reserved_through_unix_ms);
    reserved_through = (*saved)->reserved_through_unix_ms;
  }
  const uint64_t last_published = producer->last_published_id();
  int64_t segment_ms = 0;
  if (last_published != 0) {
    segment_ms = config.id.epoch_unix_ms + IdLayout::OffsetMsOf(last_published);
    high_water = std::max(high_water, segment_ms);
  }
  spdlog::info("high-water mark {} ({}): state file {}, register {}, {} segment's last ID {}",
               high_water, high_water > 0 ? FormatIsoUtc(high_water) : "none",
               *saved ? std::to_string((*saved)->reserved_through_unix_ms) : "absent",
               claim->high_water_unix_ms, producer->reopened() ? "reopened" : "new", segment_ms);

  // 4. The generator judges the clock against the mark.
  RealClock clock;
  auto generator =
      Generator::Create(GeneratorConfig{.layout = layout,
                                        .machine = claim->machine,
                                        .max_backward_ms = config.clock.max_backward_ms,
                                        .high_water_unix_ms = high_water,
                                        // A fast restart only waits for its own
                                        // reservation; further behind is out of service.
                                        .start_wait_ms = config.persistence.reservation_ms +
                                                         config.clock.max_backward_ms},
                        clock);
  if (!generator) {
    spdlog::critical("cannot start the generator: {}", generator.error().message);
    producer->SetState(DaemonState::kStopped, StateReason::kShutdown);
    return kExitFatal;
  }
  // `clock` outlives the loop: the generator keeps a reference to it.
  FillLoop loop(config, signals, std::move(reg), holder_id, *claim, std::move(store),
                std::move(*producer), std::move(*generator), *group, reserved_through);
  return loop.Run();
}

}  // namespace

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

}  // namespace snowflake
