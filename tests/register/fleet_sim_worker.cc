#include "fleet_sim_worker.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "register/etcd_register.h"
#include "register/machine_register.h"
#include "snowflake/id_layout.h"
#include "util/backoff.h"

namespace snowflake::testing {
namespace {

using Steady = std::chrono::steady_clock;
using reg::EtcdRegister;
using reg::RegisterErrorCode;
using reg::RegisterErrorCodeName;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double MsBetween(Steady::time_point from, Steady::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// What a worker counts, for the whole run and for the steady-state window.
struct Counts {
  uint64_t raises = 0;        // committed UpdateHighWater calls
  uint64_t raise_errors = 0;  // failed ones (retried), by code below
  std::map<std::string, uint64_t> raise_errors_by_code;
  uint64_t renews = 0;       // Renew() calls
  uint64_t claims_lost = 0;  // kClaimLost from a raise or Renew()
  // Raises that committed after the clock had passed the horizon in force: the daemon
  // would have paused (no ID) for the time in between, summed in horizon_missed_ms.
  uint64_t horizon_misses = 0;
  double horizon_missed_ms = 0;
  LatencyHistogram raise_us;
  // How late the pool took hosts up after they were due: the simulation's own delay (too
  // few threads, or no CPU), not etcd's.
  LatencyHistogram turn_late_us;

  nlohmann::json ToJson() const {
    return {{"raises", raises},
            {"raise_errors", raise_errors},
            {"raise_errors_by_code", raise_errors_by_code},
            {"renews", renews},
            {"claims_lost", claims_lost},
            {"horizon_misses", horizon_misses},
            {"horizon_missed_ms", horizon_missed_ms},
            {"raise_us", raise_us.ToJson()},
            {"turn_late_us", turn_late_us.ToJson()}};
  }
};

// One simulated host. Touched by one thread at a time: its storm thread until it has
// claimed, then whichever pool thread took it from the schedule.
struct Host {
  int index = 0;
  std::string holder;
  reg::EtcdRegisterOptions options;
  std::unique_ptr<EtcdRegister> reg;
  std::optional<util::Backoff> backoff;  // the current process's (a restart makes anew)
  // What the daemon's state file would hold, for a restart after a lost claim.
  std::optional<uint32_t> machine;
  reg::RegisterIdentity seen;
  uint64_t restarts = 0;            // process restarts after an error: each draws a new backoff
  int64_t confirmed = 0;            // the confirmed horizon, Unix ms
  bool serving = false;             // a raise has committed since the claim
  bool ever_served = false;         // a raise has committed since the storm began
  Steady::time_point claimed_at{};  // when the last Claim() returned the number
  double claim_call_ms = 0;         // how long that Claim() call took
  Steady::time_point lost_at{};
  Steady::time_point next_raise{};
  Steady::time_point next_renew{};

  Host(int i, std::string h, reg::EtcdRegisterOptions o, uint64_t seed)
      : index(i), holder(std::move(h)), options(std::move(o)) {
    backoff.emplace(util::kRegisterRetryFirst, util::kRegisterRetryCap, seed);
  }

  reg::ClaimRequest Request() const {
    return reg::ClaimRequest(holder, kDefaultEpochUnixMs, seen, confirmed, machine);
  }
};

// One Claim() attempt's outcome.
struct ClaimStep {
  enum Kind { kClaimed, kRetry, kFatal } kind;
  std::chrono::milliseconds delay{0};
};

class Worker {
 public:
  explicit Worker(const WorkerOptions& options) : options_(options) {}

  int Run();

 private:
  void MakeHosts();
  ClaimStep TryClaim(Host& host);
  // Claims for `host` as the daemon does at its start (restart: after a lost claim, once
  // systemd's restart delay has passed), then puts it on the schedule.
  void ClaimThread(Host* host, bool restart);
  // Waits for a free claim slot while claims are limited (false: stopped meanwhile).
  bool AcquireClaimSlot();
  void ReleaseClaimSlot();
  void LimitClaims(int limit);
  // Moves hosts from the schedule to the ready queue as they fall due.
  void TimerThread();
  // Takes ready hosts up, one turn each, and schedules them again.
  void PoolThread();
  // One turn of a claimed host on the schedule; the time of its next turn, or nullopt if
  // the host is out for good.
  std::optional<Steady::time_point> Turn(Host& host);
  // One raise; false if it found the claim lost (the host is then a restart thread's).
  bool Raise(Host& host);
  // Counts the loss and hands the host to a restart thread: the caller must not touch it.
  void LoseClaim(Host& host, Steady::time_point now);
  void Schedule(Host* host, Steady::time_point due);
  // Applies `update` to the whole run's counts and, while the window is open, to the
  // window's (its second argument says which).
  void Record(const std::function<void(Counts&, bool window)>& update);
  void Report();

  const WorkerOptions options_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::vector<std::thread> threads_;

  // The go signal: set once by the main thread (which handles the signals).
  std::mutex go_mutex_;
  std::condition_variable go_cv_;
  bool go_ = false;          // guarded by go_mutex_
  Steady::time_point t0_{};  // written before go_ is set, read after
  std::atomic<bool> stop_{false};
  // 0: before the window, 1: open, 2: closed (written by the main thread).
  std::atomic<int> window_{0};
  // The wall clock (Unix ms) when the window opened: written before window_ becomes 1.
  std::atomic<int64_t> window_open_wall_ms_{0};
  Steady::time_point window_open_{}, window_close_{};  // the main thread's only

  // Claim() calls in flight while limited: guarded by slots_mutex_.
  std::mutex slots_mutex_;
  std::condition_variable slots_cv_;
  int slots_limit_ = 0;  // 0: no limit
  int slots_used_ = 0;
  // Hosts whose daemon could serve now (a raise committed since their claim).
  std::atomic<int> serving_now_{0};
  int serving_at_open_ = 0, serving_at_close_ = 0;  // the main thread's only

  // The schedule of claimed hosts, by due time: guarded by schedule_mutex_. One timer
  // thread moves the hosts that fall due to ready_, where the pool takes them up.
  using Entry = std::pair<Steady::time_point, Host*>;
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const { return a.first > b.first; }
  };
  std::mutex schedule_mutex_;
  std::condition_variable schedule_cv_;  // the timer's: an earlier host was scheduled
  std::priority_queue<Entry, std::vector<Entry>, Later> schedule_;
  // Hosts due now, in the order they fell due, for the pool: guarded by ready_mutex_.
  std::mutex ready_mutex_;
  std::condition_variable ready_cv_;
  std::deque<Entry> ready_;

  // Guarded by stats_mutex_.
  std::mutex stats_mutex_;
  Counts total_, window_counts_;
  std::vector<double> claim_ms_;          // each host's first claim, from the storm's start
  std::vector<double> restart_claim_ms_;  // claims after a lost claim, from the loss
  // Each host's first committed raise, from the storm's start: from then on its daemon
  // could hand out IDs.
  std::vector<double> serve_ms_;
  uint64_t claim_attempts_ = 0;
  std::map<std::string, uint64_t> claim_errors_;
  uint64_t hosts_out_ = 0;  // ended by an error the daemon is not restarted after
  // Each lost claim: how long after its Claim() returned, how long that call took, and
  // whether a raise had committed under it.
  std::vector<nlohmann::json> lost_claims_;
  std::vector<std::string> fatal_messages_;
};

void Worker::MakeHosts() {
  const std::vector<int> indices =
      options_.churn_host ? std::vector<int>{*options_.churn_host}
                          : options_.plan.HostsOfWorker(options_.worker_index, options_.processes);
  for (const int h : indices) {
    reg::EtcdRegisterOptions o;
    // Each host lists the members starting at its own: together they spread over all.
    const size_t n = options_.endpoints.size();
    for (size_t k = 0; k < n; ++k) o.client.endpoints.push_back(options_.endpoints[(h + k) % n]);
    o.client.request_timeout_ms = options_.request_timeout_ms;
    o.client.connect_timeout_ms = options_.connect_timeout_ms;
    const int fleet = options_.plan.FleetOf(h);
    o.prefix = options_.plan.Prefix(fleet);
    o.lease_ttl_s = options_.lease_ttl_s;
    o.mark_reservation_ms = options_.mark_reservation_ms;
    o.first_machine = 0;
    o.last_machine = options_.plan.LastMachine(fleet);
    o.host = "sim-host-" + std::to_string(h);
    o.host_lock_dir = options_.lock_root / ("h" + std::to_string(h));
    hosts_.push_back(std::make_unique<Host>(h, FleetPlan::Holder(h, options_.generation),
                                            std::move(o), options_.seed ^ (uint64_t(h) << 20)));
  }
}

ClaimStep Worker::TryClaim(Host& host) {
  if (!host.reg) host.reg = std::make_unique<EtcdRegister>(host.options);
  const auto call_start = Steady::now();
  auto claim = host.reg->Claim(host.Request());
  const auto call_end = Steady::now();
  {
    std::lock_guard lock(stats_mutex_);
    ++claim_attempts_;
    if (!claim) ++claim_errors_[std::string(RegisterErrorCodeName(claim.error().code))];
  }
  if (claim) {
    host.machine = claim->machine;
    host.confirmed = std::max(host.confirmed, claim->high_water_unix_ms);
    host.seen = host.reg->identity();
    host.serving = false;
    host.claimed_at = call_end;
    host.claim_call_ms = MsBetween(call_start, call_end);
    host.next_raise = call_end;  // the reservation service's first renewal: at once
    host.next_renew = host.next_raise + std::chrono::seconds(1);
    return {ClaimStep::kClaimed};
  }
  switch (claim.error().code) {
    case RegisterErrorCode::kUnreachable:
      // The daemon waits for the register on the same object (daemon.cc, ClaimWaiting).
      return {ClaimStep::kRetry, host.backoff->Next()};
    case RegisterErrorCode::kEpochMismatch:
    case RegisterErrorCode::kRolledBack:
    case RegisterErrorCode::kInUse: {
      // Exit 78 or 2: systemd's RestartPreventExitStatus keeps the daemon down.
      std::lock_guard lock(stats_mutex_);
      ++hosts_out_;
      if (fatal_messages_.size() < 5) fatal_messages_.push_back(claim.error().message);
      host.reg.reset();
      return {ClaimStep::kFatal};
    }
    default:
      // Exit 1, restarted by systemd after RestartSec: a new process, a new register.
      host.reg.reset();
      host.backoff.emplace(util::kRegisterRetryFirst, util::kRegisterRetryCap,
                           options_.seed ^ (uint64_t(host.index) << 20) ^ ++host.restarts);
      return {ClaimStep::kRetry, std::chrono::milliseconds(options_.restart_delay_ms)};
  }
}

bool Worker::AcquireClaimSlot() {
  std::unique_lock lock(slots_mutex_);
  slots_cv_.wait(lock,
                 [&] { return stop_.load() || slots_limit_ == 0 || slots_used_ < slots_limit_; });
  if (stop_.load()) return false;
  ++slots_used_;
  return true;
}

void Worker::ReleaseClaimSlot() {
  {
    std::lock_guard lock(slots_mutex_);
    --slots_used_;
  }
  slots_cv_.notify_one();
}

void Worker::LimitClaims(int limit) {
  {
    std::lock_guard lock(slots_mutex_);
    slots_limit_ = limit;
  }
  slots_cv_.notify_all();
}

void Worker::ClaimThread(Host* host, bool restart) {
  if (!restart) {
    std::unique_lock lock(go_mutex_);
    go_cv_.wait(lock, [&] { return go_ || stop_.load(); });
  } else {
    std::unique_lock lock(go_mutex_);
    go_cv_.wait_for(lock, std::chrono::milliseconds(options_.restart_delay_ms),
                    [&] { return stop_.load(); });
  }
  while (!stop_.load()) {
    if (!AcquireClaimSlot()) return;
    const ClaimStep step = TryClaim(*host);
    ReleaseClaimSlot();
    if (step.kind == ClaimStep::kClaimed) {
      const auto now = Steady::now();
      if (restart) {
        std::lock_guard lock(stats_mutex_);
        restart_claim_ms_.push_back(MsBetween(host->lost_at, now));
      } else {
        const double ms = MsBetween(t0_, now);
        {
          std::lock_guard lock(stats_mutex_);
          claim_ms_.push_back(ms);
        }
        // The coordinator counts these to see the storm end; a churn host's are also its
        // only record if it is killed.
        std::printf("claimed %.3f machine %u\n", ms, *host->machine);
        std::fflush(stdout);
      }
      Schedule(host, host->next_raise);
      return;
    }
    if (step.kind == ClaimStep::kFatal) {
      std::printf("out %d\n", host->index);
      std::fflush(stdout);
      return;
    }
    std::unique_lock lock(go_mutex_);
    go_cv_.wait_for(lock, step.delay, [&] { return stop_.load(); });
  }
}

void Worker::Schedule(Host* host, Steady::time_point due) {
  bool earliest = false;
  {
    std::lock_guard lock(schedule_mutex_);
    earliest = schedule_.empty() || due < schedule_.top().first;
    schedule_.push({due, host});
  }
  // The timer waits for the earliest due time: only an earlier one needs to wake it.
  if (earliest) schedule_cv_.notify_one();
}

void Worker::TimerThread() {
  std::vector<Entry> due;
  std::unique_lock lock(schedule_mutex_);
  while (!stop_.load()) {
    if (schedule_.empty()) {
      schedule_cv_.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    const auto now = Steady::now();
    // A copy: the wait reads its deadline again after waking, when a push may have moved
    // the heap's elements.
    const Steady::time_point next = schedule_.top().first;
    if (next > now) {
      schedule_cv_.wait_until(lock, next);
      continue;
    }
    while (!schedule_.empty() && schedule_.top().first <= now) {
      due.push_back(schedule_.top());
      schedule_.pop();
    }
    lock.unlock();
    {
      std::lock_guard ready(ready_mutex_);
      ready_.insert(ready_.end(), due.begin(), due.end());
    }
    if (due.size() == 1) {
      ready_cv_.notify_one();
    } else {
      ready_cv_.notify_all();
    }
    due.clear();
    lock.lock();
  }
}

void Worker::PoolThread() {
  std::unique_lock lock(ready_mutex_);
  while (!stop_.load()) {
    if (ready_.empty()) {
      ready_cv_.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    const Entry next = ready_.front();
    ready_.pop_front();
    lock.unlock();
    const double late_us =
        std::chrono::duration<double, std::micro>(Steady::now() - next.first).count();
    Record([&](Counts& c, bool) { c.turn_late_us.Add(late_us); });
    if (const auto due = Turn(*next.second)) Schedule(next.second, *due);
    lock.lock();
  }
}

void Worker::Record(const std::function<void(Counts&, bool window)>& update) {
  std::lock_guard lock(stats_mutex_);
  update(total_, false);
  if (window_.load(std::memory_order_acquire) == 1) update(window_counts_, true);
}

void Worker::LoseClaim(Host& host, Steady::time_point now) {
  Record([](Counts& c, bool) { ++c.claims_lost; });
  {
    std::lock_guard lock(stats_mutex_);
    if (lost_claims_.size() < 1000) {
      lost_claims_.push_back({{"after_ms", MsBetween(host.claimed_at, now)},
                              {"claim_call_ms", host.claim_call_ms},
                              {"serving", host.serving}});
    }
  }
  // The daemon stops serving and exits 1; systemd starts it again after RestartSec, and it
  // claims with what its state file recorded (its number, the reservation, the store). The
  // claim runs on a thread of its own, as the storm's do, never on the pool: a claim can
  // take seconds, and the pool's other hosts must keep their schedule meanwhile.
  host.reg.reset();
  host.lost_at = now;
  if (host.serving) serving_now_.fetch_sub(1, std::memory_order_relaxed);
  host.serving = false;
  // From here the host is the new thread's.
  std::thread([this, h = &host] { ClaimThread(h, /*restart=*/true); }).detach();
}

bool Worker::Raise(Host& host) {
  const RaiseSchedule schedule =
      RaiseSchedule::Of(options_.reservation_ms, options_.mark_reservation_ms);
  const int64_t renew_ahead_ms = schedule.renew_ahead_ms;
  const int64_t now_ms = WallMs();
  const int64_t through = std::max(now_ms + schedule.reservation_ms, host.confirmed);
  const auto start = Steady::now();
  auto raised = host.reg->UpdateHighWater(through);
  const auto end = Steady::now();
  const int64_t end_ms = WallMs();
  if (raised) {
    // The clock passed the horizon in force before this raise committed: the daemon paused
    // from the horizon to now (in the window: from the later of the horizon and its start).
    const int64_t missed = host.serving ? std::max<int64_t>(0, end_ms - host.confirmed) : 0;
    const int64_t missed_in_window =
        host.serving
            ? std::max<int64_t>(0, end_ms - std::max(host.confirmed, window_open_wall_ms_.load()))
            : 0;
    host.confirmed = through;
    if (!host.serving) serving_now_.fetch_add(1, std::memory_order_relaxed);
    host.serving = true;
    if (!host.ever_served) {
      host.ever_served = true;
      std::lock_guard lock(stats_mutex_);
      serve_ms_.push_back(MsBetween(t0_, end));
    }
    host.seen = host.reg->identity();
    const double us = std::chrono::duration<double, std::micro>(end - start).count();
    Record([&](Counts& c, bool window) {
      ++c.raises;
      c.raise_us.Add(us);
      if (missed > 0) {
        ++c.horizon_misses;
        c.horizon_missed_ms += static_cast<double>(window ? missed_in_window : missed);
      }
    });
    host.next_raise =
        end + std::chrono::milliseconds(std::max<int64_t>(0, through - renew_ahead_ms - end_ms));
    return true;
  }
  const RegisterErrorCode code = raised.error().code;
  if (code == RegisterErrorCode::kClaimLost) {
    LoseClaim(host, end);
    return false;
  }
  Record([&](Counts& c, bool) {
    ++c.raise_errors;
    ++c.raise_errors_by_code[std::string(RegisterErrorCodeName(code))];
  });
  host.next_raise = end + std::chrono::milliseconds(100);  // ReservationOptions::retry_interval
  return true;
}

std::optional<Steady::time_point> Worker::Turn(Host& host) {
  const auto now = Steady::now();
  if (now >= host.next_renew) {
    auto renewed = host.reg->Renew();
    Record([](Counts& c, bool) { ++c.renews; });
    host.next_renew = now + std::chrono::seconds(1);
    if (!renewed && renewed.error().code == RegisterErrorCode::kClaimLost) {
      LoseClaim(host, now);
      return std::nullopt;
    }
  }
  if (now >= host.next_raise && !Raise(host)) return std::nullopt;
  return std::min(host.next_raise, host.next_renew);
}

// A process's own figures, from /proc/self/status.
int64_t StatusField(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) == 0) return std::atoll(line.c_str() + std::strlen(name));
  }
  return 0;
}

void Worker::Report() {
  nlohmann::json report;
  {
    std::lock_guard lock(stats_mutex_);
    report = {
        {"hosts", hosts_.size()},
        {"claimed", claim_ms_.size()},
        {"claim_ms", claim_ms_},
        {"restart_claim_ms", restart_claim_ms_},
        {"serve_ms", serve_ms_},
        {"claim_attempts", claim_attempts_},
        {"claim_errors", claim_errors_},
        {"hosts_out", hosts_out_},
        {"fatal_messages", fatal_messages_},
        {"lost_claims", lost_claims_},
        {"total", total_.ToJson()},
        {"window", window_counts_.ToJson()},
        {"serving_at_window_open", serving_at_open_},
        {"serving_at_window_close", serving_at_close_},
        {"serving_now", serving_now_.load()},
        {"window_s", window_.load() == 2 ? MsBetween(window_open_, window_close_) / 1000.0 : 0.0}};
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  report["cpu_s"] = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  report["rss_kib"] = StatusField("VmHWM:");
  report["threads"] = StatusField("Threads:");
  const std::string line = "report " + report.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

int Worker::Run() {
  // Every thread inherits this mask: only the main thread takes the coordinator's signals.
  sigset_t signals;
  sigemptyset(&signals);
  for (const int s : {SIGUSR1, SIGUSR2, SIGTERM, SIGINT}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Thousands of threads (a storm thread, then the register's keepalive thread, per host):
  // a small stack each keeps them to their pages in use. Sanitizers keep their default.
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) == 0) {
    (void)pthread_attr_setstacksize(&attr, 256 * 1024);
    (void)pthread_setattr_default_np(&attr);
    pthread_attr_destroy(&attr);
  }
#endif
  MakeHosts();
  // The pool: a thread holds one raise in flight, as each daemon's reservation thread
  // does: one per host, at most 1,024 a process (threads count against pid_max). etcd then
  // sets the pace. Half as many threads commit as many raises (1,796 against 1,770 a
  // second at 1,000 hosts here) but each waits less in etcd's queue, so fewer horizons run
  // out: the pause figures depend on the pool, the write rate does not.
  const int hosts = static_cast<int>(hosts_.size());
  const int pool = std::max(1, std::min(hosts, options_.threads > 0 ? options_.threads : 1024));
  threads_.emplace_back([this] { TimerThread(); });
  for (int i = 0; i < pool; ++i) threads_.emplace_back([this] { PoolThread(); });
  for (auto& host : hosts_) {
    threads_.emplace_back([this, h = host.get()] { ClaimThread(h, /*restart=*/false); });
  }
  const auto go = [this](Steady::time_point t0) {
    {
      std::lock_guard lock(go_mutex_);
      t0_ = t0;
      go_ = true;
    }
    go_cv_.notify_all();
  };
  LimitClaims(options_.storm_concurrency);
  bool gone = false;
  if (options_.go_at_once) go(Steady::now());
  std::printf("ready %zu hosts\n", hosts_.size());
  std::fflush(stdout);
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGUSR1 && !options_.go_at_once && !gone) {
      // The storm's start as the coordinator took it (CLOCK_MONOTONIC is one clock for
      // every process of the machine).
      int64_t ns = 0;
      std::ifstream(options_.go_file) >> ns;
      go(ns > 0 ? Steady::time_point(std::chrono::nanoseconds(ns)) : Steady::now());
      gone = true;
    } else if (sig == SIGUSR1) {
      LimitClaims(options_.ramp_concurrency);
    } else if (sig == SIGUSR2) {
      if (window_.load() == 0) {
        window_open_ = Steady::now();
        window_open_wall_ms_.store(WallMs());
        serving_at_open_ = serving_now_.load();
        window_.store(1, std::memory_order_release);
      } else if (window_.load() == 1) {
        window_close_ = Steady::now();
        serving_at_close_ = serving_now_.load();
        window_.store(2, std::memory_order_release);
      }
    } else if (sig == SIGTERM || sig == SIGINT) {
      stop_.store(true);
      go_cv_.notify_all();
      schedule_cv_.notify_all();
      ready_cv_.notify_all();
      Report();
      // Threads may be inside an etcd call for up to its timeout: they are not waited for,
      // and the leases are left to expire, as a host's would.
      std::_Exit(0);
    }
  }
}

}  // namespace

int RunWorker(const WorkerOptions& options) {
  // A worker ends with its coordinator, also one that was SIGKILLed (a test's timeout):
  // its hosts must not go on writing to an etcd nobody reads.
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 2;  // the coordinator was gone before the line above
  if (options.endpoints.empty()) {
    std::fprintf(stderr, "fleet_sim worker: no etcd endpoints given\n");
    return 2;
  }
  Worker worker(options);
  return worker.Run();
}

}  // namespace snowflake::testing
