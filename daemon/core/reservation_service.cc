#include "daemon/core/reservation_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/metrics/metrics.h"
#include "register/machine_lock.h"
#include "snowflake/time_text.h"
#include "util/debug_assert.h"

namespace snowflake::daemon {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Horizon::~Horizon() = default;

std::string_view StoreName(ReservationStore store) noexcept {
  switch (store) {
    case ReservationStore::kStateFile: return "state file";
    case ReservationStore::kRegister: return "register";
  }
  return "store";
}

ReservationService::ReservationService(ReservationOptions options, HighWaterStore& store,
                                       reg::MachineRegister& reg, Clock& clock,
                                       int64_t confirmed_through)
    : options_(std::move(options)),
      store_(store),
      register_(reg),
      clock_(clock),
      state_file_location_(store.path().string()),
      register_location_(reg.location()),
      confirmed_(confirmed_through) {
  SNOWFLAKE_REQUIRE(options_.renew_ahead_ms > 0 &&
                    options_.renew_ahead_ms <= options_.reservation_ms);
}

ReservationService::~ReservationService() { Stop(); }

void ReservationService::Start() {
  std::lock_guard lock(mutex_);
  SNOWFLAKE_REQUIRE(!started_);
  started_ = true;
  // The service starts with a claim (the daemon claimed before it).
  if (options_.metrics != nullptr) options_.metrics->reservation().claim_held.Set(1);
  thread_ = std::thread([this] { Run(); });
}

void ReservationService::Stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<ReservationProblem> ReservationService::problem() const {
  std::lock_guard lock(mutex_);
  return problem_;
}

std::optional<RenewalWait> ReservationService::waiting() const {
  std::lock_guard lock(mutex_);
  return WaitingLocked();
}

std::optional<RenewalWait> ReservationService::WaitingLocked() const {
  if (!wait_) return std::nullopt;
  return RenewalWait{.store = wait_->store,
                     .location = wait_->store == ReservationStore::kRegister
                                     ? register_location_
                                     : state_file_location_,
                     .since_unix_ms = wait_->since_unix_ms};
}

Horizon::View ReservationService::Read() const {
  // Under the lock Renew() moves the horizon in, together with the renewal it ends.
  std::lock_guard lock(mutex_);
  return View{confirmed_.load(std::memory_order_relaxed), problem_, WaitingLocked()};
}

void ReservationService::NoteWaiting(ReservationStore store) {
  const int64_t now_ms = clock_.NowUnixMs();  // outside the lock: readers never wait on it
  std::lock_guard lock(mutex_);
  if (!wait_) {
    wait_ = Wait{store, now_ms};
  } else if (store == ReservationStore::kRegister && wait_->store != store) {
    // A retry passes the state file again before the register: the wait is still the
    // register's unless the state file fails (FailAt says so then). Only forward.
    wait_->store = store;
  } else {
    return;
  }
  renewal_version_.fetch_add(1, std::memory_order_release);
}

void ReservationService::NoteNeed(int64_t unix_ms) noexcept {
  // Relaxed: a hint; the service also reads the clock itself.
  int64_t seen = need_.load(std::memory_order_relaxed);
  while (unix_ms > seen &&
         !need_.compare_exchange_weak(seen, unix_ms, std::memory_order_relaxed)) {
  }
  if (unix_ms + options_.renew_ahead_ms >= confirmed_.load(std::memory_order_relaxed)) {
    wake_.notify_one();
  }
}

template <typename Call>
auto ReservationService::RegisterCall(std::string_view call, Call&& run) {
  const auto start = std::chrono::steady_clock::now();
  auto result = run();
  if (options_.metrics != nullptr) {
    options_.metrics->reservation().register_call.Observe(SecondsSince(start));
    // kFenced is no failure: the call found an operator's fence and is made again at once.
    if (!result && result.error().code != reg::RegisterErrorCode::kFenced) {
      options_.metrics->RegisterError(call, reg::RegisterErrorCodeName(result.error().code))
          .Increment();
    }
  }
  return result;
}

void ReservationService::NoteFenceApplied(int64_t unix_ms) noexcept {
  int64_t seen = fence_applied_.load(std::memory_order_relaxed);
  while (unix_ms > seen &&
         !fence_applied_.compare_exchange_weak(seen, unix_ms, std::memory_order_release)) {
  }
  wake_.notify_one();
}

void ReservationService::ReadFence() noexcept {
  const int64_t fence = register_.fence_unix_ms();
  if (fence <= fence_.load(std::memory_order_relaxed)) return;
  spdlog::warn("an operator fenced machine {} in the register at {}: issuing nothing at or "
               "below it from now on{}",
               options_.machine, FormatTimeText(fence),
               fence > clock_.NowUnixMs() ? " (paused until the clock passes it)" : "");
  // Release: the fill loop that reads it reads it after the register said so.
  fence_.store(fence, std::memory_order_release);
}

void ReservationService::AcknowledgeAppliedFence() {
  const int64_t applied = fence_applied_.load(std::memory_order_acquire);
  if (applied <= fence_acknowledged_) return;
  // A failed acknowledgment is retried at the renewals' retry interval, said once.
  const auto now = std::chrono::steady_clock::now();
  if (now < next_fence_ack_try_) return;
  // The fence reaches the state file before the acknowledgment, a write under our claim,
  // covers the operator's mark: a crash right after it restarts above the fence.
  if (auto persisted = PersistFence(); !persisted) {
    if (!fence_ack_failing_) {
      spdlog::warn(
          "cannot acknowledge the fence at {} yet: it must reach the state file "
          "first (retrying): {}",
          FormatTimeText(applied), persisted.error().message);
    }
    fence_ack_failing_ = true;
    next_fence_ack_try_ = now + options_.retry_interval;
    return;
  }
  auto acknowledged =
      RegisterCall("fence_ack", [&] { return register_.AcknowledgeFence(applied); });
  ReadFence();  // a newer fence may have come meanwhile
  if (!acknowledged && acknowledged.error().code == reg::RegisterErrorCode::kFenced) {
    return;  // a newer fence: the next pass records it, then acknowledges
  }
  if (!acknowledged) {
    if (acknowledged.error().code == reg::RegisterErrorCode::kClaimLost) ReportClaimLost();
    if (!fence_ack_failing_) {
      spdlog::warn("cannot acknowledge the fence at {} in the register yet (retrying): {}",
                   FormatTimeText(applied), acknowledged.error().message);
    }
    fence_ack_failing_ = true;
    next_fence_ack_try_ = now + options_.retry_interval;
    return;
  }
  fence_ack_failing_ = false;
  // The acknowledgment may have changed what the register has seen of its store (a restore
  // the holder ran through, now fenced): the state file records it at once, or a crash
  // before the next renewal would restart against the old identity and be refused.
  if (register_.identity() != saved_identity_) {
    if (auto saved = SaveLocally(StateThrough(
            std::max(saved_through_, confirmed_.load(std::memory_order_relaxed)), std::nullopt));
        !saved) {
      spdlog::warn("cannot record the register's identity after the fence yet: {}",
                   saved.error().message);
    }
  }
  if (register_.fence_unix_ms() > applied) return;  // the newer one is acknowledged later
  fence_acknowledged_ = applied;
  spdlog::info("acknowledged the operator's fence at {} in the register: nothing at or below "
               "it is issued any more",
               FormatTimeText(applied));
}

void ReservationService::ReportClaimLost() noexcept {
  claim_lost_.store(true, std::memory_order_release);
  if (options_.metrics != nullptr) {
    options_.metrics->reservation().claim_held.Set(0);
    options_.metrics->reservation().claim_lost.Set(1);
  }
}

void ReservationService::SetProblem(ReservationProblem problem) {
  std::lock_guard lock(mutex_);
  if (problem_ == problem) return;
  problem_ = std::move(problem);
  renewal_version_.fetch_add(1, std::memory_order_release);
}

void ReservationService::FailAt(ReservationProblem problem) {
  std::lock_guard lock(mutex_);
  if (wait_) wait_->store = problem.store;
  problem_ = std::move(problem);
  renewal_version_.fetch_add(1, std::memory_order_release);
}

HighWaterState ReservationService::StateThrough(int64_t through,
                                               std::optional<int64_t> clean_stop) const {
  return HighWaterState{.machine = options_.machine,
                        .epoch_unix_ms = options_.epoch_unix_ms,
                        .reserved_through_unix_ms = through,
                        .last_issued_unix_ms_at_clean_stop = clean_stop,
                        .segment_path = options_.segment_path,
                        .segment_incarnation = options_.segment_incarnation,
                        .register_claim = options_.register_claim,
                        .register_seen = register_.identity(),
                        .floor_unix_ms = std::max(options_.start_floor_unix_ms,
                                                  fence_.load(std::memory_order_acquire))};
}

tl::expected<void, ReservationProblem> ReservationService::SaveLocally(
    const HighWaterState& state) {
  if (auto saved = store_.Save(state); !saved) {
    return tl::unexpected(ReservationProblem{ReservationStore::kStateFile, saved.error().sys_errno,
                                             saved.error().message});
  }
  saved_through_ = state.reserved_through_unix_ms;
  fence_saved_ = std::max(fence_saved_, state.floor_unix_ms);
  saved_identity_ = state.register_seen;
  if (auto marked = WriteOwnHostMark(state.reserved_through_unix_ms); !marked) {
    const int err = errno;  // WriteFileAtomically leaves it set
    return tl::unexpected(ReservationProblem{ReservationStore::kStateFile, err, marked.error()});
  }
  return {};
}

tl::expected<void, ReservationProblem> ReservationService::PersistFence() {
  ReadFence();
  if (fence_.load(std::memory_order_relaxed) <= fence_saved_) return {};
  // The reservation the file holds stays as it is: only the floor grows.
  return SaveLocally(StateThrough(
      std::max(saved_through_, confirmed_.load(std::memory_order_relaxed)), std::nullopt));
}

tl::expected<void, std::string> ReservationService::WriteOwnHostMark(int64_t through) {
  // The fence too: a daemon of another register (a static one) that takes the number next
  // on this host knows nothing of etcd's fence but this mark.
  return reg::WriteHostMarks(options_.host_marks, options_.machine,
                             reg::HostMark{std::max({through, options_.host_mark_floor,
                                                     fence_.load(std::memory_order_acquire)}),
                                           options_.host_mark_writer});
}

bool ReservationService::Renew(int64_t through) {
  tl::expected<void, reg::RegisterError> updated;
  for (int round = 0;; ++round) {
    NoteWaiting(ReservationStore::kStateFile);
    // 1. The state file: what a reboot of this host restarts above, with every fence found
    //    so far as its floor; and the host mark: what another daemon of this host that
    //    takes the number next starts above.
    if (auto saved = SaveLocally(StateThrough(through, std::nullopt)); !saved) {
      if (options_.metrics != nullptr) {
        options_.metrics->reservation().state_file_failed.Increment();
      }
      FailAt(std::move(saved.error()));
      return false;
    }
    // 2. The register: what another holder of this number continues above.
    NoteWaiting(ReservationStore::kRegister);
    updated = RegisterCall("raise", [&] { return register_.UpdateHighWater(through); });
    ReadFence();
    // An operator's fence, found and not written over: the next round's state file write
    // records it (fence_ holds it now) before the register write covers it.
    if (updated || updated.error().code != reg::RegisterErrorCode::kFenced ||
        round >= kFenceRounds) {
      break;
    }
  }
  if (!updated) {
    if (options_.metrics != nullptr) options_.metrics->reservation().register_failed.Increment();
    if (updated.error().code == reg::RegisterErrorCode::kClaimLost) ReportClaimLost();
    FailAt(ReservationProblem{ReservationStore::kRegister, 0, updated.error().message,
                              updated.error().code == reg::RegisterErrorCode::kUnreachable});
    return false;
  }
  {
    // The horizon moves in one step with the wait and the failure it ends (Read()), and
    // after the version (Horizon::renewal_version()): a status never shows the new
    // horizon's state beside the failure it ended.
    std::lock_guard lock(mutex_);
    if (wait_ || problem_) {
      wait_.reset();
      problem_.reset();
      renewal_version_.fetch_add(1, std::memory_order_release);
    }
    // Release: whoever reads the new horizon reads it after both stores accepted it.
    confirmed_.store(std::max(through, confirmed_.load(std::memory_order_relaxed)),
                     std::memory_order_release);
  }
  renewals_.fetch_add(1, std::memory_order_relaxed);
  if (options_.metrics != nullptr) options_.metrics->reservation().renewed.Increment();
  return true;
}

void ReservationService::Run() {
  using Steady = std::chrono::steady_clock;
  bool first = true;
  bool failing = false;
  Steady::time_point next_try{};
  Steady::time_point next_register_renew = Steady::now() + options_.register_renew_interval;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    // Real time for the retry schedule: the thread sleeps in real time too.
    const auto steady_now = Steady::now();
    const int64_t now_ms = clock_.NowUnixMs();
    const int64_t need = std::max(now_ms, need_.load(std::memory_order_relaxed));
    const int64_t confirmed = confirmed_.load(std::memory_order_relaxed);
    const bool due = first || failing || need + options_.renew_ahead_ms >= confirmed;
    if (due && steady_now >= next_try) {
      // Always ahead of what is already confirmed, so a renewal never lowers anything.
      const int64_t through = std::max(need + options_.reservation_ms, confirmed);
      const auto renewal_start = Steady::now();
      const bool renewed = Renew(through);
      if (options_.metrics != nullptr) {
        options_.metrics->reservation().duration.Observe(SecondsSince(renewal_start));
      }
      if (renewed) {
        if (failing) {
          spdlog::warn("the high-water reservation is persisted again, through {}",
                       FormatTimeText(through));
        }
        failing = false;
        first = false;
      } else {
        if (!failing) {
          const auto problem = this->problem();
          spdlog::error("cannot renew the high-water reservation in the {}; serving up to {} "
                        "and then pausing until it succeeds: {}",
                        problem ? StoreName(problem->store) : "store", FormatTimeText(confirmed),
                        problem ? problem->message : "");
        }
        failing = true;
        next_try = steady_now + options_.retry_interval;
      }
    }
    if (steady_now >= next_register_renew) {
      next_register_renew = steady_now + options_.register_renew_interval;
      auto renewed = RegisterCall("renew", [&] { return register_.Renew(); });
      ReadFence();
      if (!renewed) {
        if (renewed.error().code == reg::RegisterErrorCode::kClaimLost) {
          ReportClaimLost();
          spdlog::critical("the register says the claim is lost: {}", renewed.error().message);
        }
        SetProblem(
            ReservationProblem{ReservationStore::kRegister, 0, renewed.error().message,
                               renewed.error().code == reg::RegisterErrorCode::kUnreachable});
        failing = true;
      }
    }
    AcknowledgeAppliedFence();
    lock.lock();
    if (stop_) break;
    // Wake for a NoteNeed() near the horizon, or poll the clock: 10 ms is far below any
    // sensible renew_ahead_ms, and a failing store is retried at retry_interval.
    wake_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

tl::expected<void, std::string> ReservationService::RecordCleanStop(int64_t last_issued_unix_ms) {
  {
    std::lock_guard lock(mutex_);
    SNOWFLAKE_REQUIRE(stop_);
  }
  SNOWFLAKE_REQUIRE(!thread_.joinable());
  for (int round = 0;; ++round) {
    auto saved = store_.Save(StateThrough(last_issued_unix_ms, last_issued_unix_ms));
    if (!saved) return tl::unexpected("state file: " + saved.error().message);
    // The host mark comes down with the state file: it is this daemon's own, exactly as the
    // reservation was, and the lock is still held.
    if (auto marked = WriteOwnHostMark(last_issued_unix_ms); !marked) {
      return tl::unexpected("host mark: " + marked.error());
    }
    confirmed_.store(last_issued_unix_ms, std::memory_order_release);
    auto updated =
        RegisterCall("clean_stop", [&] { return register_.RecordCleanStop(last_issued_unix_ms); });
    if (updated) return {};
    // A fence found by the clean stop itself: recorded by the next round's state file
    // write before the register's clean stop covers it.
    if (updated.error().code == reg::RegisterErrorCode::kFenced && round < kFenceRounds) {
      ReadFence();
      continue;
    }
    return tl::unexpected("register: " + updated.error().message);
  }
}

}  // namespace snowflake::daemon
