// fleet_sim: a fleet of simulated hosts on one real etcd cluster, each claiming and raising
// through the etcd register exactly as snowflaked does (fleet_sim_worker.h), to measure what
// the register's algorithms cost etcd at fleet scale and to check, from etcd's own history,
// that they keep their promises (fleet_history.h). docs/etcd-fencing.md, "The fleet
// simulation", says what it measures and why; bench/README.md reads its figures.
//
//   fleet_sim [--hosts N] [--steady-s S] [--crashes-per-min R] [--seed X] [--plant KIND] ...
//
// It starts a 3-member etcd cluster on 127.0.0.1 (tests/support/etcd_cluster.h, Debian's
// etcd), then worker processes of this same program, each running many hosts on a small
// thread pool, and churn hosts, one per process, which it SIGKILLs at the given rate (a
// crash: no release, the lease left to expire) and starts again 1 s later as a new holder.
// Phases: every host claims at once (the storm), the hosts not claimed by its end in a ramp
// of a few claims at a time, a few seconds to settle, then the steady-state window with its
// crashes; etcd's /metrics are read around each phase. A watch from revision 1, started
// before the first key is written, feeds the register's whole history to the checker as
// etcd commits it; once every process has stopped, an end marker ends it. The checker
// holds it to: no number held by two leases at once, no mark written without its claim, no
// mark moving down.
//
// Output: the report as one JSON object on stdout (the bench keys fleet_sim_* at its top
// level), a readable summary on stderr. Exit status: 0 when the history holds, 1 when the
// checker found a violation (listed), 2 when the run could not be made (the reason).
// --plant writes one fault into etcd behind the register's back during the window (a mark
// lowered, a held number given to a second holder): the run must then exit 1 naming it.

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "etcd_cluster.h"
#include "fleet_history.h"
#include "fleet_sim_etcd.h"
#include "fleet_sim_plan.h"
#include "fleet_sim_worker.h"
#include "stress_seed.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace snowflake::testing {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct SimOptions {
  int hosts = 10'000;
  int fleet_size = 1000;
  int spare_numbers = 8;
  int processes = 0;  // 0: one per 2,500 hosts
  int threads = 0;    // 0: one per host of the process, at most 1,024
  int churn_hosts = 8;
  double crashes_per_min = 30;
  int restart_delay_ms = 1000;
  int64_t lease_ttl_s = 10;
  int64_t reservation_ms = 1000;
  int64_t mark_reservation_ms = 30'000;
  int64_t request_timeout_ms = 3000;
  int64_t connect_timeout_ms = 1000;
  double steady_s = 30;
  double settle_s = 3;
  double storm_timeout_s = 120;
  int storm_concurrency = 0;  // Claim() calls in flight per process in the storm; 0: all
  int ramp_concurrency = 4;   // ... after the storm, for the hosts not claimed yet
  double ramp_timeout_s = 600;
  std::optional<uint64_t> seed;
  std::string plant = "none";
};

double Seconds(Steady::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Thousands(double value) {
  const int64_t whole = std::llround(value);
  const std::string digits = std::to_string(whole < 0 ? -whole : whole);
  std::string out = whole < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string Fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// --- What this machine holds ----------------------------------------------------------

// The number in the first line of a /proc or /sys file; 0 if unreadable.
int64_t ReadNumber(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  in >> n;
  return n;
}

// The load average over the last minute.
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

int64_t MemAvailableKib() {
  std::ifstream in("/proc/meminfo");
  std::string name;
  int64_t value = 0;
  std::string unit;
  while (in >> name >> value >> unit) {
    if (name == "MemAvailable:") return value;
  }
  return 0;
}

// Threads of every process now running (what pid_max is shared with).
int64_t TasksRunning() {
  int64_t tasks = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Threads:", 0) == 0) {
        tasks += std::atoll(line.c_str() + 8);
        break;
      }
    }
  }
  return tasks;
}

// What a simulated host costs: a thread (its register's keepalive), three descriptors (two
// connections and its number's lock; four counted), and memory, measured at 10,000 hosts
// here: about 95 KiB in its worker process and 120 KiB in etcd's members (320 counted).
constexpr int64_t kHostMemoryKib = 320;
constexpr int64_t kDescriptorsPerHost = 4;
constexpr int64_t kSpareDescriptors = 512;

struct Bound {
  int hosts = 0;
  std::string reason;  // empty: as many as asked
};

// How many of `asked` hosts this machine holds in `processes` processes: descriptors per
// process (RLIMIT_NOFILE, raised to its hard limit first), threads (pid_max, threads-max,
// RLIMIT_NPROC, less what runs now) and memory (MemAvailable, half of it for the run).
Bound MachineBound(int asked, int processes, int threads) {
  Bound bound{asked, ""};
  const auto lower = [&](int64_t most, const std::string& why) {
    if (most < bound.hosts) {
      bound.hosts = static_cast<int>(std::max<int64_t>(most, 0));
      bound.reason = why;
    }
  };
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    const int64_t per_process =
        (static_cast<int64_t>(files.rlim_cur) - kSpareDescriptors) / kDescriptorsPerHost;
    lower(per_process * processes,
          "open files: RLIMIT_NOFILE " + std::to_string(files.rlim_cur) + " per process allows " +
              std::to_string(per_process) + " hosts in each of " + std::to_string(processes) +
              " processes (" + std::to_string(kDescriptorsPerHost) +
              " descriptors a host); raise `ulimit -n` or pass more --processes");
    // Each host keeps two connections open to etcd, spread over the three members.
    lower((static_cast<int64_t>(files.rlim_cur) - kSpareDescriptors) * 3 / 2,
          "open files: RLIMIT_NOFILE " + std::to_string(files.rlim_cur) +
              " for each etcd member, which holds two connections of a third of the hosts; "
              "raise `ulimit -n`");
  }
  const int64_t pid_max = ReadNumber("/proc/sys/kernel/pid_max");
  const int64_t threads_max = ReadNumber("/proc/sys/kernel/threads-max");
  const int64_t running = TasksRunning();
  const int64_t reserve = 1000 + int64_t(processes) * threads;  // etcd, pools, others
  if (pid_max > 0) {
    lower(pid_max - running - reserve,
          "threads: pid_max " + std::to_string(pid_max) + " with " + std::to_string(running) +
              " threads running (a host needs one thread: its register's keepalive)");
  }
  if (threads_max > 0) {
    lower(threads_max - running - reserve, "threads: threads-max " + std::to_string(threads_max) +
                                               " with " + std::to_string(running) + " running");
  }
  rlimit nproc{};
  if (getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY) {
    lower(static_cast<int64_t>(nproc.rlim_cur) - running - reserve,
          "threads: RLIMIT_NPROC " + std::to_string(nproc.rlim_cur));
  }
  const int64_t available = MemAvailableKib();
  if (available > 0) {
    lower(available / 2 / kHostMemoryKib,
          "memory: MemAvailable " + std::to_string(available / 1024) + " MiB, half of it at " +
              std::to_string(kHostMemoryKib) + " KiB a host (its process and etcd's side)");
  }
  return bound;
}

// --- Stopping early ------------------------------------------------------------------

// The processes the coordinator started and has not reaped: if the coordinator is told to
// stop (SIGINT, SIGTERM, SIGHUP), a thread of its own SIGKILLs them, so the run's calls
// fail at once and the coordinator ends through its destructors (which remove the
// temporary directories) instead of leaving etcd members and workers behind.
class Children {
 public:
  static Children& Get() {
    static Children children;
    return children;
  }
  void Add(pid_t pid) {
    std::lock_guard lock(mutex_);
    pids_.insert(pid);
  }
  void Remove(pid_t pid) {
    std::lock_guard lock(mutex_);
    pids_.erase(pid);
  }
  int stopped_by() const { return stopped_by_.load(); }
  // Blocks the stop signals in this thread (call before any other thread starts, so every
  // thread inherits the mask) and starts the thread that waits for them.
  void WatchSignals() {
    sigset_t set = Signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([this, set] {
      int sig = 0;
      while (sigwait(&set, &sig) != 0) {
      }
      stopped_by_.store(sig);
      std::cerr << "fleet_sim: signal " << sig << ": stopping every process it started\n";
      std::lock_guard lock(mutex_);
      for (const pid_t pid : pids_) kill(pid, SIGKILL);
    }).detach();
  }

 private:
  static sigset_t Signals() {
    sigset_t set;
    sigemptyset(&set);
    for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    return set;
  }
  std::mutex mutex_;
  std::set<pid_t> pids_;
  std::atomic<int> stopped_by_{0};
};

// --- The coordinator ------------------------------------------------------------------

// The checker fed by a watch on its own thread, from before the first key is written to the
// end marker.
class HistoryWatch {
 public:
  HistoryWatch(std::string url, std::string prefix, std::string end_key)
      : thread_([this, url, prefix, end_key] {
          auto result = ReadHistory(
              url, prefix, end_key, [this](const HistoryEvent& e) { history_.Add(e); },
              std::chrono::hours(24 * 7), &cancel_);
          std::lock_guard lock(mutex_);
          result_ = std::move(result);
          done_.notify_all();
        }) {}
  ~HistoryWatch() {
    cancel_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Waits until the watch has read the end marker (or failed, or `deadline` passed: then it
  // is cancelled). Its events read, or why it ended without the marker.
  tl::expected<uint64_t, std::string> Finish(Steady::time_point deadline) {
    {
      std::unique_lock lock(mutex_);
      if (!done_.wait_until(lock, deadline, [&] { return result_.has_value(); })) {
        lock.unlock();
        cancel_.store(true);
        if (thread_.joinable()) thread_.join();
        return tl::unexpected(std::string("the end marker did not arrive in time"));
      }
    }
    if (thread_.joinable()) thread_.join();
    return *result_;
  }
  // REQUIRES: Finish() returned.
  const FleetHistory& history() const { return history_; }

 private:
  FleetHistory history_;  // the watch's thread's until it ends
  std::atomic<bool> cancel_{false};
  std::mutex mutex_;
  std::condition_variable done_;
  std::optional<tl::expected<uint64_t, std::string>> result_;  // guarded by mutex_
  std::thread thread_;  // last: it starts once the members above exist
};

struct EtcdSample {
  Steady::time_point at;
  std::vector<MemberMetrics> members;
};

class Coordinator {
 public:
  explicit Coordinator(SimOptions options) : options_(std::move(options)) {}
  int Run();

 private:
  std::vector<std::string> WorkerArgs() const;
  Process SpawnWorker(const std::vector<std::string>& role, const std::string& name);
  std::optional<EtcdSample> Sample(const std::string& when);
  size_t ClaimedSoFar();
  void SignalAll(int sig);
  void Crash(std::mt19937_64& random);
  void Respawn();
  nlohmann::json Plant();
  nlohmann::json Rates(const EtcdSample& from, const EtcdSample& to) const;
  int Fail(const std::string& why);

  SimOptions options_;
  FleetPlan plan_;
  uint64_t seed_ = 0;
  std::string bounded_by_;
  std::string self_;
  std::unique_ptr<TempDir> work_;
  std::unique_ptr<EtcdCluster> cluster_;
  std::vector<std::string> endpoints_;

  std::vector<Process> workers_;
  struct Churn {
    int host = 0;
    int generation = 0;
    std::optional<Process> process;
    Steady::time_point respawn_at{};
  };
  std::vector<Churn> churn_;
  // Claim lines of churn processes that ended (a crash takes the process's output along).
  std::vector<double> churn_restart_claim_ms_;
  std::vector<double> churn_storm_claim_ms_;
  uint64_t crashes_ = 0;
  uint64_t respawns_ = 0;
};

int Coordinator::Fail(const std::string& why) {
  if (const int sig = Children::Get().stopped_by(); sig != 0) {
    std::cerr << "fleet_sim: stopped by signal " << sig << "\n";
    return 128 + sig;
  }
  std::cerr << "fleet_sim: " << why << "\n";
  // The workers' logs go with the temporary directory: their ends are shown here.
  if (work_) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(work_->path(), ec)) {
      if (entry.path().extension() != ".log" || entry.file_size(ec) == 0) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string log = text.str();
      std::cerr << "--- " << entry.path().filename().string() << " ---\n"
                << (log.size() > 4000 ? "..." + log.substr(log.size() - 4000) : log) << "\n";
    }
  }
  return 2;
}

std::vector<std::string> Coordinator::WorkerArgs() const {
  std::string endpoints;
  for (const auto& e : endpoints_) endpoints += (endpoints.empty() ? "" : ",") + e;
  return {self_,
          "--worker",
          "--hosts",
          std::to_string(plan_.hosts),
          "--fleet-size",
          std::to_string(plan_.fleet_size),
          "--spare-numbers",
          std::to_string(plan_.spare_numbers),
          "--churn-hosts",
          std::to_string(plan_.churn_hosts),
          "--worker-endpoints",
          endpoints,
          "--lease-ttl-s",
          std::to_string(options_.lease_ttl_s),
          "--reservation-ms",
          std::to_string(options_.reservation_ms),
          "--mark-reservation-ms",
          std::to_string(options_.mark_reservation_ms),
          "--request-timeout-ms",
          std::to_string(options_.request_timeout_ms),
          "--connect-timeout-ms",
          std::to_string(options_.connect_timeout_ms),
          "--restart-delay-ms",
          std::to_string(options_.restart_delay_ms),
          "--threads",
          std::to_string(options_.threads),
          "--storm-concurrency",
          std::to_string(options_.storm_concurrency),
          "--ramp-concurrency",
          std::to_string(options_.ramp_concurrency),
          "--worker-dir",
          work_->path().string(),
          "--seed",
          std::to_string(seed_)};
}

Process Coordinator::SpawnWorker(const std::vector<std::string>& role, const std::string& name) {
  std::vector<std::string> argv = WorkerArgs();
  argv.insert(argv.end(), role.begin(), role.end());
  SpawnOptions spawn;
  spawn.out = Output::Capture();
  spawn.err = Output::File(work_->path() / (name + ".log"));
  Process process = Process::Spawn(argv, spawn);
  Children::Get().Add(process.pid());
  return process;
}

std::optional<EtcdSample> Coordinator::Sample(const std::string& when) {
  EtcdSample sample{Steady::now(), {}};
  for (const auto& url : endpoints_) {
    auto metrics = ScrapeMetrics(url);
    if (!metrics) {
      std::cerr << "fleet_sim: etcd's metrics " << when << ": " << metrics.error() << "\n";
      return std::nullopt;
    }
    sample.members.push_back(std::move(*metrics));
  }
  return sample;
}

size_t CountLines(const std::string& text, std::string_view start) {
  size_t n = 0;
  size_t at = 0;
  while (at < text.size()) {
    if (text.compare(at, start.size(), start) == 0) ++n;
    const size_t newline = text.find('\n', at);
    if (newline == std::string::npos) break;
    at = newline + 1;
  }
  return n;
}

size_t Coordinator::ClaimedSoFar() {
  size_t n = 0;
  for (auto& w : workers_) n += CountLines(w.out(), "claimed ") + CountLines(w.out(), "out ");
  for (auto& c : churn_) {
    if (c.process && c.generation == 0) n += CountLines(c.process->out(), "claimed ");
  }
  return n;
}

void Coordinator::SignalAll(int sig) {
  for (auto& w : workers_) w.Kill(sig);
  for (auto& c : churn_) {
    if (c.process) c.process->Kill(sig);
  }
}

// The claim lines ("claimed <ms> machine <n>") a churn process printed.
std::vector<double> ClaimLines(const std::string& out) {
  std::vector<double> ms;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("claimed ", 0) == 0) ms.push_back(std::atof(line.c_str() + 8));
  }
  return ms;
}

void Coordinator::Crash(std::mt19937_64& random) {
  std::vector<Churn*> up;
  for (auto& c : churn_) {
    if (c.process && c.process->Running() && !ClaimLines(c.process->out()).empty()) {
      up.push_back(&c);
    }
  }
  if (up.empty()) return;
  Churn& victim = *up[std::uniform_int_distribution<size_t>(0, up.size() - 1)(random)];
  victim.process->Kill(SIGKILL);
  (void)victim.process->Wait(10s);
  Children::Get().Remove(victim.process->pid());
  for (const double ms : ClaimLines(victim.process->out())) {
    (victim.generation == 0 ? churn_storm_claim_ms_ : churn_restart_claim_ms_).push_back(ms);
  }
  victim.process.reset();
  ++victim.generation;
  victim.respawn_at = Steady::now() + std::chrono::milliseconds(options_.restart_delay_ms);
  ++crashes_;
}

void Coordinator::Respawn() {
  for (auto& c : churn_) {
    if (c.process || Steady::now() < c.respawn_at) continue;
    c.process.emplace(
        SpawnWorker({"--churn-host", std::to_string(c.host), "--generation",
                     std::to_string(c.generation), "--go-at-once"},
                    "churn-" + std::to_string(c.host) + "-g" + std::to_string(c.generation)));
    ++respawns_;
  }
}

// One fault behind the register's back, in fleet 0, on the first number held with a mark.
nlohmann::json Coordinator::Plant() {
  const std::string url = endpoints_[0];
  const std::string prefix = plan_.Prefix(0);
  const std::string machines = prefix + "machines/";
  auto held = GatewayPost(
      url, "/v3/kv/range",
      {{"key", Base64Encode(machines)}, {"range_end", Base64Encode(PrefixEnd(machines))}});
  if (!held) return {{"error", held.error()}};
  for (const auto& kv : held->value("kvs", nlohmann::json::array())) {
    const std::string key = Base64Decode(kv.value("key", "")).value_or("");
    const std::string n = key.substr(machines.size());
    const std::string mark_key = prefix + "high-water/" + n;
    auto mark = GatewayPost(url, "/v3/kv/range", {{"key", Base64Encode(mark_key)}});
    if (!mark || !mark->contains("kvs")) continue;
    const auto value = nlohmann::json::parse(
        Base64Decode((*mark)["kvs"][0].value("value", "")).value_or(""), nullptr, false);
    if (!value.is_object() || !value.contains("unix_ms")) continue;
    if (options_.plant == "lower-mark") {
      // A write of the holder's own record a minute lower: what a raise comparing only
      // the lease, applied late, would leave (docs/etcd-fencing.md).
      nlohmann::json lowered = value;
      lowered["unix_ms"] = value["unix_ms"].get<int64_t>() - 60'000;
      auto put =
          GatewayPost(url, "/v3/kv/put",
                      {{"key", Base64Encode(mark_key)}, {"value", Base64Encode(lowered.dump())}});
      if (!put) return {{"error", put.error()}};
      return {{"kind", "mark_down"},
              {"key", mark_key},
              {"revision",
               std::stoll(put->value("header", nlohmann::json::object()).value("revision", "0"))},
              {"from", value["unix_ms"]},
              {"to", lowered["unix_ms"]}};
    }
    // double-holder: the number's record put again for another holder under a lease of
    // its own, as a claim that did not compare the record's absence would.
    auto lease = GatewayPost(url, "/v3/lease/grant", {{"TTL", "5"}});
    if (!lease) return {{"error", lease.error()}};
    const nlohmann::json intruder = {
        {"holder", "planted-intruder"}, {"host", "fleet-sim"}, {"pid", 1}, {"since_unix_ms", 0}};
    auto put = GatewayPost(url, "/v3/kv/put",
                           {{"key", Base64Encode(key)},
                            {"value", Base64Encode(intruder.dump())},
                            {"lease", (*lease).value("ID", "0")}});
    if (!put) return {{"error", put.error()}};
    return {{"kind", "double_holder"},
            {"key", key},
            {"revision",
             std::stoll(put->value("header", nlohmann::json::object()).value("revision", "0"))},
            {"holder_before", kv.value("lease", "0")}};
  }
  return {{"error", "no number of " + prefix + " is held with a mark"}};
}

nlohmann::json Coordinator::Rates(const EtcdSample& from, const EtcdSample& to) const {
  const double s = std::max(1e-3, Seconds(to.at - from.at));
  double requests = 0;
  std::map<std::string, double> by_method;
  double cpu = 0;
  for (size_t m = 0; m < to.members.size(); ++m) {
    requests += to.members[m].Get("grpc_server_started_total") -
                from.members[m].Get("grpc_server_started_total");
    for (const auto& [method, n] : to.members[m].started_by_method) {
      const auto before = from.members[m].started_by_method.find(method);
      const double d = n - (before == from.members[m].started_by_method.end() ? 0 : before->second);
      if (d > 0) by_method[method] += d / s;
    }
    cpu += to.members[m].Get("process_cpu_seconds_total") -
           from.members[m].Get("process_cpu_seconds_total");
  }
  // Writes: raft log entries committed (every member commits each; the largest count is
  // the leader's), each fsynced by a quorum: puts, transactions (also those whose compare
  // failed), lease grants and revokes. Store changes: keys put or deleted.
  double proposals = 0;
  double puts = 0;
  double deletes = 0;
  for (size_t m = 0; m < to.members.size(); ++m) {
    proposals =
        std::max(proposals, to.members[m].Get("etcd_server_proposals_committed_total") -
                                from.members[m].Get("etcd_server_proposals_committed_total"));
    puts = std::max(puts, to.members[m].Get("etcd_mvcc_put_total") -
                              from.members[m].Get("etcd_mvcc_put_total"));
    deletes = std::max(deletes, to.members[m].Get("etcd_mvcc_delete_total") -
                                    from.members[m].Get("etcd_mvcc_delete_total"));
  }
  return {{"seconds", s},
          {"writes_per_s", proposals / s},
          {"requests_per_s", requests / s},
          {"requests_per_s_by_method", by_method},
          {"keys_put_per_s", puts / s},
          {"keys_deleted_per_s", deletes / s},
          {"etcd_cpu_cores", cpu / s}};
}

int Coordinator::Run() {
  Children::Get().WatchSignals();
  seed_ = options_.seed ? *options_.seed : StressSeedFromEnv();
  std::cerr << "fleet_sim: seed " << seed_ << " (--seed " << seed_ << " repeats its choices)\n";
  // Every host holds descriptors; etcd's members inherit the limit too.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &files);
  }
  plan_.fleet_size = options_.fleet_size;
  plan_.spare_numbers = options_.spare_numbers;
  plan_.churn_hosts = std::min(options_.churn_hosts, options_.hosts);
  const int stable_asked = options_.hosts - plan_.churn_hosts;
  int processes =
      options_.processes > 0 ? options_.processes : std::max(1, (stable_asked + 2499) / 2500);
  const Bound bound = MachineBound(options_.hosts, processes + plan_.churn_hosts,
                                   options_.threads > 0 ? options_.threads : 1024);
  plan_.hosts = bound.hosts;
  if (!bound.reason.empty()) {
    bounded_by_ = bound.reason;
    std::cerr << "fleet_sim: running " << plan_.hosts << " of the " << options_.hosts
              << " hosts asked; bounded by " << bound.reason << "\n";
  }
  if (plan_.hosts < 1) return Fail("this machine holds no host: " + bound.reason);
  plan_.churn_hosts = std::min(plan_.churn_hosts, plan_.hosts);
  processes = std::max(1, std::min(processes, plan_.hosts - plan_.churn_hosts));
  if (plan_.hosts == plan_.churn_hosts) processes = 0;

  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Fail("cannot find this program (/proc/self/exe)");
  self_.assign(self, static_cast<size_t>(n));
  work_ = std::make_unique<TempDir>("fleet-sim");
  std::filesystem::create_directories(work_->path() / "locks");
  std::filesystem::permissions(work_->path() / "locks", std::filesystem::perms(0755));

  std::cerr << "fleet_sim: " << plan_.hosts << " hosts in " << plan_.fleets()
            << " fleet(s) of up to " << plan_.fleet_size << " (+" << plan_.spare_numbers
            << " spare numbers each), " << processes << " worker process(es) with "
            << (options_.threads > 0 ? std::to_string(options_.threads)
                                     : std::string("one per host, at most 1,024,"))
            << " pool threads, " << plan_.churn_hosts << " churn hosts (a process each, "
            << options_.crashes_per_min << " crashes a minute); lease " << options_.lease_ttl_s
            << " s, reservation " << options_.reservation_ms << " ms, etcd mark window "
            << options_.mark_reservation_ms << " ms\n";
  cluster_ = std::make_unique<EtcdCluster>(3, 60s);
  if (!cluster_->ok()) return Fail(cluster_->error());
  endpoints_ = cluster_->ClientUrls();
  for (int m = 0; m < cluster_->size(); ++m) Children::Get().Add(cluster_->pid(m));
  // The history is read as it is written, from revision 1, by a watch that never falls
  // behind: etcd 3.4 sends a watch that starts late only about 1,000 revisions per 100 ms.
  HistoryWatch watch(endpoints_[0], plan_.root, plan_.EndKey());

  // Set up every process, then start the storm at one instant.
  for (int w = 0; w < processes; ++w) {
    workers_.push_back(
        SpawnWorker({"--worker-index", std::to_string(w), "--processes", std::to_string(processes)},
                    "worker-" + std::to_string(w)));
  }
  for (const int h : plan_.ChurnHosts()) {
    churn_.push_back(Churn{h, 0, std::nullopt, {}});
    churn_.back().process.emplace(
        SpawnWorker({"--churn-host", std::to_string(h), "--generation", "0"},
                    "churn-" + std::to_string(h) + "-g0"));
  }
  for (auto& w : workers_) {
    if (!w.WaitForOutput(Process::Stream::kOut, "ready", 300s)) {
      return Fail("a worker did not get ready");
    }
  }
  for (auto& c : churn_) {
    if (!c.process->WaitForOutput(Process::Stream::kOut, "ready", 300s)) {
      return Fail("a churn host did not get ready");
    }
  }
  auto before_storm = Sample("before the storm");
  if (!before_storm) return Fail("cannot read etcd's metrics");
  const auto t0 = Steady::now();
  {
    std::ofstream go(work_->path() / "go");
    go << std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  }
  SignalAll(SIGUSR1);
  std::cerr << "fleet_sim: storm: " << plan_.hosts << " hosts claim at once\n";
  const auto storm_deadline = t0 + std::chrono::duration_cast<Steady::duration>(
                                       std::chrono::duration<double>(options_.storm_timeout_s));
  size_t claimed = 0;
  auto next_progress = t0 + 10s;
  while ((claimed = ClaimedSoFar()) < static_cast<size_t>(plan_.hosts) &&
         Steady::now() < storm_deadline && Children::Get().stopped_by() == 0) {
    std::this_thread::sleep_for(100ms);
    if (Steady::now() >= next_progress) {
      std::cerr << "fleet_sim: storm: " << claimed << " of " << plan_.hosts << " claimed after "
                << Fixed(Seconds(Steady::now() - t0), 0) << " s\n";
      next_progress += 10s;
    }
  }
  const auto storm_end = Steady::now();
  auto after_storm = Sample("after the storm");
  if (!after_storm) return Fail("cannot read etcd's metrics");
  std::cerr << "fleet_sim: storm: " << claimed << " of " << plan_.hosts << " claimed in "
            << Fixed(Seconds(storm_end - t0), 1) << " s\n";
  // The hosts still claiming come up in a ramp, so that the steady state has them all.
  if (claimed < static_cast<size_t>(plan_.hosts) && Children::Get().stopped_by() == 0) {
    std::cerr << "fleet_sim: ramp: the other " << plan_.hosts - claimed << " hosts claim with "
              << (options_.ramp_concurrency > 0 ? std::to_string(options_.ramp_concurrency)
                                                : std::string("no limit on"))
              << " Claim() calls in flight per process\n";
    SignalAll(SIGUSR1);
    const auto ramp_deadline =
        storm_end + std::chrono::duration_cast<Steady::duration>(
                        std::chrono::duration<double>(options_.ramp_timeout_s));
    next_progress = Steady::now() + 10s;
    while ((claimed = ClaimedSoFar()) < static_cast<size_t>(plan_.hosts) &&
           Steady::now() < ramp_deadline && Children::Get().stopped_by() == 0) {
      std::this_thread::sleep_for(100ms);
      if (Steady::now() >= next_progress) {
        std::cerr << "fleet_sim: ramp: " << claimed << " of " << plan_.hosts << " claimed after "
                  << Fixed(Seconds(Steady::now() - t0), 0) << " s\n";
        next_progress += 10s;
      }
    }
    std::cerr << "fleet_sim: ramp: " << claimed << " of " << plan_.hosts << " claimed after "
              << Fixed(Seconds(Steady::now() - t0), 1) << " s\n";
  }
  const auto ramp_end = Steady::now();
  // Hosts that had not claimed by the ramp's end keep trying through the window: the steady
  // state then has fewer hosts serving than asked, and the report says why.
  std::string serving_bounded_by;
  if (claimed < static_cast<size_t>(plan_.hosts)) {
    serving_bounded_by = std::to_string(plan_.hosts - claimed) + " of " +
                         std::to_string(plan_.hosts) + " hosts had not claimed " +
                         Fixed(Seconds(ramp_end - t0), 0) +
                         " s after the storm began (--storm-timeout-s, --ramp-timeout-s)";
    std::cerr << "fleet_sim: " << serving_bounded_by << "\n";
  }

  std::this_thread::sleep_for(std::chrono::duration<double>(options_.settle_s));
  if (Children::Get().stopped_by() != 0) return Fail("stopped");
  SignalAll(SIGUSR2);
  auto window_start = Sample("at the window's start");
  if (!window_start) return Fail("cannot read etcd's metrics");
  std::mt19937_64 random(seed_);
  std::exponential_distribution<double> gap(std::max(options_.crashes_per_min, 1e-9) / 60.0);
  const auto window_end = window_start->at + std::chrono::duration_cast<Steady::duration>(
                                                 std::chrono::duration<double>(options_.steady_s));
  auto next_crash = window_start->at + std::chrono::duration_cast<Steady::duration>(
                                           std::chrono::duration<double>(gap(random)));
  const auto plant_at = window_start->at + (window_end - window_start->at) / 2;
  nlohmann::json planted;
  std::cerr << "fleet_sim: steady state for " << options_.steady_s << " s\n";
  while (Steady::now() < window_end && Children::Get().stopped_by() == 0) {
    const auto now = Steady::now();
    if (options_.crashes_per_min > 0 && !churn_.empty() && now >= next_crash) {
      Crash(random);
      next_crash = now + std::chrono::duration_cast<Steady::duration>(
                             std::chrono::duration<double>(gap(random)));
    }
    Respawn();
    if (options_.plant != "none" && planted.is_null() && now >= plant_at) {
      planted = Plant();
      std::cerr << "fleet_sim: planted " << planted.dump() << "\n";
    }
    std::this_thread::sleep_for(20ms);
  }
  if (Children::Get().stopped_by() != 0) return Fail("stopped");
  auto window_stop = Sample("at the window's end");
  if (!window_stop) return Fail("cannot read etcd's metrics");
  SignalAll(SIGUSR2);

  // Stop everything, then mark the end of the history and read it all back.
  SignalAll(SIGTERM);
  nlohmann::json reports = nlohmann::json::array();
  for (auto& w : workers_) {
    const auto status = w.Wait(60s);
    if (!status || !status->ExitedWith(0)) {
      return Fail("a worker ended with " + (status ? status->ToString() : std::string("no exit")));
    }
    const std::string out = w.out();
    const size_t at = out.rfind("report ");
    if (at == std::string::npos) return Fail("a worker wrote no report");
    reports.push_back(nlohmann::json::parse(out.substr(at + 7), nullptr, false));
  }
  for (auto& c : churn_) {
    if (!c.process) continue;
    (void)c.process->Wait(60s);
    for (const double ms : ClaimLines(c.process->out())) {
      (c.generation == 0 ? churn_storm_claim_ms_ : churn_restart_claim_ms_).push_back(ms);
    }
  }
  auto end = GatewayPost(endpoints_[0], "/v3/kv/put",
                         {{"key", Base64Encode(plan_.EndKey())}, {"value", Base64Encode("end")}});
  if (!end) return Fail("cannot write the end marker: " + end.error());
  std::cerr << "fleet_sim: waiting for the history's watch to reach the end marker\n";
  const auto read_start = Steady::now();
  auto read = watch.Finish(read_start + 600s);
  if (!read) return Fail("cannot read the register's history: " + read.error());
  const double read_s = Seconds(Steady::now() - read_start);
  const FleetHistory& history = watch.history();

  // The figures.
  std::vector<double> claim_ms = churn_storm_claim_ms_;
  // Claims again after a lost claim (the same holder, as the daemon restarts), from the loss.
  std::vector<double> reclaim_ms;
  std::vector<double> serve_ms;
  LatencyHistogram raise_us;
  LatencyHistogram turn_late_us;
  nlohmann::json totals = {{"raises", 0},      {"raise_errors", 0},   {"renews", 0},
                           {"claims_lost", 0}, {"horizon_misses", 0}, {"horizon_missed_ms", 0.0}};
  nlohmann::json window_counts = totals;
  uint64_t claim_attempts = 0;
  uint64_t hosts_out = 0;
  std::map<std::string, uint64_t> claim_errors;
  std::map<std::string, uint64_t> raise_errors;
  double worker_cpu_s = 0;
  int64_t worker_rss_kib = 0;
  int64_t worker_threads = 0;
  double window_s = 0;
  int64_t serving_at_open = 0;
  int64_t serving_at_close = 0;
  std::vector<std::string> fatal_messages;
  // Claims lost, and of them those whose Claim() call took longer than the lease's TTL less
  // the keepalive's period (a third of it): the lease is granted when the call starts and
  // first renewed a period after it returns, so such a claim's lease runs out at once.
  uint64_t lost_after_slow_claim = 0;
  const double slow_claim_ms = options_.lease_ttl_s * 1000.0 * 2.0 / 3.0;
  for (const auto& r : reports) {
    if (!r.is_object()) return Fail("a worker's report is not JSON");
    for (const double ms : r["claim_ms"]) claim_ms.push_back(ms);
    for (const double ms : r["restart_claim_ms"]) reclaim_ms.push_back(ms);
    for (const double ms : r["serve_ms"]) serve_ms.push_back(ms);
    claim_attempts += r["claim_attempts"].get<uint64_t>();
    hosts_out += r["hosts_out"].get<uint64_t>();
    for (const auto& [code, count] : r["claim_errors"].items())
      claim_errors[code] += count.get<uint64_t>();
    for (const auto& m : r["fatal_messages"]) fatal_messages.push_back(m);
    for (const auto& lost : r["lost_claims"]) {
      if (lost["claim_call_ms"].get<double>() > slow_claim_ms) ++lost_after_slow_claim;
    }
    for (const auto* which : {"total", "window"}) {
      auto& sum = std::string(which) == "total" ? totals : window_counts;
      for (const auto* key :
           {"raises", "raise_errors", "renews", "claims_lost", "horizon_misses"}) {
        sum[key] = sum[key].get<uint64_t>() + r[which][key].get<uint64_t>();
      }
      sum["horizon_missed_ms"] =
          sum["horizon_missed_ms"].get<double>() + r[which]["horizon_missed_ms"].get<double>();
    }
    for (const auto& [code, count] : r["window"]["raise_errors_by_code"].items()) {
      raise_errors[code] += count.get<uint64_t>();
    }
    raise_us.Merge(LatencyHistogram::FromJson(r["window"]["raise_us"]));
    turn_late_us.Merge(LatencyHistogram::FromJson(r["window"]["turn_late_us"]));
    worker_cpu_s += r["cpu_s"].get<double>();
    worker_rss_kib += r["rss_kib"].get<int64_t>();
    worker_threads = std::max<int64_t>(worker_threads, r["threads"].get<int64_t>());
    window_s = std::max(window_s, r["window_s"].get<double>());
    serving_at_open += r["serving_at_window_open"].get<int64_t>();
    serving_at_close += r["serving_at_window_close"].get<int64_t>();
  }
  // A host that did not claim in the storm counts as slower than every one that did.
  const double storm_bound_ms = Seconds(storm_end - t0) * 1000.0;
  std::vector<double> storm_ms;
  for (const double ms : claim_ms) {
    if (ms <= storm_bound_ms) storm_ms.push_back(ms);
  }
  const size_t storm_claimed = storm_ms.size();
  storm_ms.resize(static_cast<size_t>(plan_.hosts), storm_bound_ms);
  const double claim_p50 = Quantile(storm_ms, 0.50);
  const double claim_p99 = Quantile(storm_ms, 0.99);
  const bool p99_is_bound =
      storm_claimed < static_cast<size_t>(plan_.hosts) && claim_p99 >= storm_bound_ms;

  const nlohmann::json storm_rates = Rates(*before_storm, *after_storm);
  const nlohmann::json steady = Rates(*window_start, *window_stop);
  double db_bytes = 0;
  double db_in_use = 0;
  double revision = 0;
  for (const auto& m : window_stop->members) {
    db_bytes = std::max(db_bytes, m.Get("etcd_mvcc_db_total_size_in_bytes"));
    db_in_use = std::max(db_in_use, m.Get("etcd_mvcc_db_total_size_in_use_in_bytes"));
    revision = std::max(revision, m.Get("etcd_debugging_mvcc_current_revision"));
  }
  const RaiseSchedule schedule =
      RaiseSchedule::Of(options_.reservation_ms, options_.mark_reservation_ms);
  const int64_t renew_ahead = schedule.renew_ahead_ms;
  const double raises_due_per_s = plan_.hosts * 1000.0 / static_cast<double>(schedule.period_ms());
  // The worker hosts' serving time in the window (the mean of its start and end).
  const double window_host_ms = std::max(
      1.0, window_s * 1000.0 * static_cast<double>(serving_at_open + serving_at_close) / 2);
  // What the hosts serving at the window's end asked of etcd: a raise each
  // reservation_ms - renew_ahead_ms (what every host would ask is raises_due_per_s).
  const double raises_due_serving_per_s =
      static_cast<double>(serving_at_close) * 1000.0 / static_cast<double>(schedule.period_ms());

  nlohmann::json violations = nlohmann::json::array();
  std::map<std::string, uint64_t> violation_kinds;
  for (const auto& v : history.violations()) {
    ++violation_kinds[v.kind];
    if (violations.size() < 100) {
      violations.push_back(
          {{"kind", v.kind}, {"key", v.key}, {"revision", v.revision}, {"detail", v.detail}});
    }
  }
  const auto& counts = history.counts();
  nlohmann::json report = {
      {"fleet_sim_hosts", plan_.hosts},
      {"fleet_sim_claim_p50_ms", claim_p50},
      {"fleet_sim_claim_p99_ms", claim_p99},
      {"fleet_sim_etcd_writes_per_s", steady["writes_per_s"]},
      {"fleet_sim_etcd_requests_per_s", steady["requests_per_s"]},
      {"fleet_sim_etcd_db_bytes", db_bytes},
      {"seed", seed_},
      {"hosts_asked", options_.hosts},
      {"bounded_by", bounded_by_},
      {"fleets", plan_.fleets()},
      {"fleet_size", plan_.fleet_size},
      {"spare_numbers", plan_.spare_numbers},
      {"worker_processes", processes},
      {"pool_threads_per_process", options_.threads},
      {"churn_hosts", plan_.churn_hosts},
      {"lease_ttl_s", options_.lease_ttl_s},
      {"reservation_ms", options_.reservation_ms},
      {"mark_reservation_ms", options_.mark_reservation_ms},
      {"renew_ahead_ms", renew_ahead},
      {"goals", {{"claim_p99_ms", 1000}, {"etcd_writes_per_s", plan_.hosts / 10.0}}},
      {"storm",
       {{"claimed", storm_claimed},
        {"unclaimed",
         static_cast<size_t>(plan_.hosts) - std::min<size_t>(storm_claimed, plan_.hosts)},
        {"hosts_out", hosts_out},
        {"fatal_messages", fatal_messages},
        {"seconds", Seconds(storm_end - t0)},
        {"claim_p50_ms", claim_p50},
        {"claim_p99_ms", claim_p99},
        {"claim_p99_is_a_lower_bound", p99_is_bound},
        {"claim_max_ms",
         claim_ms.empty() ? 0.0 : *std::max_element(claim_ms.begin(), claim_ms.end())},
        {"claim_calls", claim_attempts},
        {"storm_concurrency", options_.storm_concurrency},
        {"ramp",
         {{"claimed", claim_ms.size() - storm_claimed},
          {"seconds", Seconds(ramp_end - storm_end)},
          {"concurrency", options_.ramp_concurrency},
          {"unclaimed",
           static_cast<size_t>(plan_.hosts) - std::min<size_t>(claim_ms.size(), plan_.hosts)}}},
        // From the storm's start to each worker host's first committed raise (a claim
        // lost before it is claimed again first): when its daemon could serve.
        {"serving_hosts", serve_ms.size()},
        {"serving_p50_ms", Quantile(serve_ms, 0.50)},
        {"serving_p99_ms", Quantile(serve_ms, 0.99)},
        {"claim_errors", claim_errors},
        {"etcd", storm_rates}}},
      {"steady",
       {{"etcd", steady},
        {"raises_due_per_s", raises_due_per_s},
        {"raises_due_serving_per_s", raises_due_serving_per_s},
        {"raises_committed_per_s",
         window_s > 0 ? window_counts["raises"].get<double>() / window_s : 0.0},
        {"raise_p50_ms", raise_us.Quantile(0.50) / 1000.0},
        {"raise_p99_ms", raise_us.Quantile(0.99) / 1000.0},
        {"raise_errors_by_code", raise_errors},
        {"turn_late_p50_ms", turn_late_us.Quantile(0.50) / 1000.0},
        {"turn_late_p99_ms", turn_late_us.Quantile(0.99) / 1000.0},
        {"horizon_misses", window_counts["horizon_misses"]},
        {"paused_fraction", window_counts["horizon_missed_ms"].get<double>() / window_host_ms},
        {"claims_lost", window_counts["claims_lost"]},
        {"claims_lost_whole_run", totals["claims_lost"]},
        {"claims_lost_after_a_claim_slower_than_ms", slow_claim_ms},
        {"claims_lost_after_a_slow_claim", lost_after_slow_claim},
        {"raises_whole_run", totals["raises"]},
        {"reclaims", reclaim_ms.size()},
        {"reclaim_p50_ms", Quantile(reclaim_ms, 0.50)},
        {"reclaim_p99_ms", Quantile(reclaim_ms, 0.99)},
        {"counted_hosts", plan_.hosts - plan_.churn_hosts},
        {"serving_hosts_at_open", serving_at_open},
        {"serving_bounded_by", serving_bounded_by},
        {"serving_hosts_at_close", serving_at_close},
        {"seconds", window_s}}},
      {"churn",
       {{"crashes", crashes_},
        {"restarts", respawns_},
        // A churn host's claim as a new holder, from its process's start.
        {"restart_claim_p50_ms", Quantile(churn_restart_claim_ms_, 0.50)},
        {"restart_claim_p99_ms", Quantile(churn_restart_claim_ms_, 0.99)},
        {"restart_claims", churn_restart_claim_ms_.size()}}},
      {"etcd", {{"db_bytes", db_bytes}, {"db_in_use_bytes", db_in_use}, {"revision", revision}}},
      {"sim",
       {{"worker_cpu_s", worker_cpu_s},
        {"worker_rss_kib", worker_rss_kib},
        {"worker_threads_max", worker_threads},
        {"load_average", LoadAverage()}}},
      {"history",
       {{"events", counts.events},
        {"read_seconds", read_s},
        {"last_revision", history.last_revision()},
        {"claims", counts.claims},
        {"takeovers", counts.takeovers},
        {"retakes", counts.retakes},
        {"holder_deletes", counts.holder_deletes},
        {"mark_writes", counts.mark_writes},
        {"numbers_seen", counts.numbers_seen},
        {"max_held", counts.max_held},
        {"violation_count", history.violations().size()},
        {"violation_kinds", violation_kinds},
        {"violations", violations}}},
      {"planted", planted}};
  std::cout << report.dump(2) << "\n";
  std::cout.flush();

  // The summary.
  std::ostringstream s;
  const auto verdict = [](bool met) { return met ? "met" : "MISSED"; };
  s << "fleet_sim summary (seed " << seed_ << ")\n"
    << "  hosts          " << plan_.hosts << " in " << plan_.fleets()
    << " fleet(s) on one 3-member etcd"
    << (bounded_by_.empty() ? "" : " (bounded by " + bounded_by_ + ")") << "\n"
    << "  storm          " << storm_claimed << " of " << plan_.hosts << " claimed in "
    << Fixed(Seconds(storm_end - t0), 1) << " s; claim p50 " << Thousands(claim_p50) << " ms, p99 "
    << (p99_is_bound ? ">= " : "") << Thousands(claim_p99)
    << " ms (goal <= 1,000 ms: " << verdict(claim_p99 <= 1000) << "); " << claim_attempts
    << " Claim() calls";
  for (const auto& [code, count] : claim_errors) s << ", " << count << " " << code;
  s << "\n";
  if (claim_ms.size() > storm_claimed || claim_ms.size() < static_cast<size_t>(plan_.hosts)) {
    s << "  ramp           " << claim_ms.size() - storm_claimed << " more claimed in "
      << Fixed(Seconds(ramp_end - storm_end), 1) << " s with " << options_.ramp_concurrency
      << " Claim() calls in flight per process; "
      << static_cast<size_t>(plan_.hosts) - std::min<size_t>(claim_ms.size(), plan_.hosts)
      << " never claimed\n";
  }
  s << "  serving        first committed raise (the daemon could serve) p50 "
    << Thousands(Quantile(serve_ms, 0.5)) << " ms, p99 " << Thousands(Quantile(serve_ms, 0.99))
    << " ms after the storm's start (" << serve_ms.size() << " worker hosts)\n"
    << "  steady state   " << Fixed(steady["seconds"].get<double>(), 1) << " s with "
    << serving_at_open << " worker hosts serving at its start, " << serving_at_close
    << " at its end" << (serving_bounded_by.empty() ? "" : " (" + serving_bounded_by + ")")
    << ": etcd writes " << Thousands(steady["writes_per_s"].get<double>())
    << "/s (goal <= " << Thousands(plan_.hosts / 10.0)
    << "/s: " << verdict(steady["writes_per_s"].get<double>() <= plan_.hosts / 10.0)
    << "), requests " << Thousands(steady["requests_per_s"].get<double>()) << "/s (";
  bool first = true;
  for (const auto& [method, rate] : steady["requests_per_s_by_method"].items()) {
    s << (first ? "" : ", ") << method << " " << Thousands(rate.get<double>());
    first = false;
  }
  s << "), etcd CPU " << Fixed(steady["etcd_cpu_cores"].get<double>(), 2) << " cores\n"
    << "  raises         due " << Thousands(raises_due_per_s) << "/s with every host serving, "
    << Thousands(raises_due_serving_per_s) << "/s from those serving; committed "
    << Thousands(report["steady"]["raises_committed_per_s"].get<double>()) << "/s; p50 "
    << Fixed(raise_us.Quantile(0.5) / 1000.0, 1) << " ms, p99 "
    << Fixed(raise_us.Quantile(0.99) / 1000.0, 1) << " ms; horizon passed "
    << window_counts["horizon_misses"] << " times, hosts paused "
    << Fixed(100.0 * report["steady"]["paused_fraction"].get<double>(), 2)
    << " % of their serving time; " << window_counts["claims_lost"] << " claims lost ("
    << totals["claims_lost"] << " in the whole run, " << lost_after_slow_claim
    << " of them right after a Claim() that took over " << Thousands(slow_claim_ms)
    << " ms: its lease ran out before the first keepalive)\n"
    << "  simulation lag turns taken up p50 " << Fixed(turn_late_us.Quantile(0.5) / 1000.0, 1)
    << " ms, p99 " << Fixed(turn_late_us.Quantile(0.99) / 1000.0, 1)
    << " ms after due (the simulation's own delay: its threads or CPU, not etcd)\n"
    << "  churn          " << crashes_ << " crashes, " << respawns_ << " restarts as new holders; "
    << "their claim as a new holder p50 " << Thousands(Quantile(churn_restart_claim_ms_, 0.5))
    << " ms from the process's start; " << reclaim_ms.size()
    << " hosts that lost a claim had it back, p50 " << Thousands(Quantile(reclaim_ms, 0.5))
    << " ms after the loss\n"
    << "  etcd           db " << Fixed(db_bytes / 1048576.0, 1) << " MiB (in use "
    << Fixed(db_in_use / 1048576.0, 1) << " MiB), revision " << Thousands(revision) << "\n"
    << "  simulation     workers' CPU " << Fixed(worker_cpu_s, 1) << " s, RSS "
    << Thousands(worker_rss_kib / 1024.0) << " MiB in all, up to " << worker_threads
    << " threads a process\n"
    << "  history        " << counts.events << " events read in " << Fixed(read_s, 1)
    << " s: " << counts.claims << " claims (" << counts.takeovers << " takeovers, "
    << counts.retakes << " retakes), " << counts.mark_writes << " mark writes, "
    << counts.holder_deletes << " leases ended: ";
  if (history.violations().empty()) {
    s << "no number held twice, no mark down\n";
  } else {
    s << history.violations().size() << " VIOLATION(S)\n";
    for (size_t i = 0; i < std::min<size_t>(10, history.violations().size()); ++i) {
      const auto& v = history.violations()[i];
      s << "    " << v.kind << " " << v.key << " at revision " << v.revision << ": " << v.detail
        << "\n";
    }
  }
  std::cerr << s.str();
  return history.violations().empty() ? 0 : 1;
}

}  // namespace
}  // namespace snowflake::testing

int main(int argc, char** argv) {
  using snowflake::testing::SimOptions;
  SimOptions o;
  snowflake::testing::WorkerOptions w;
  bool worker = false;
  int worker_index = -1;
  int churn_host = -1;
  std::string endpoints;
  std::string worker_dir;
  uint64_t seed = 0;
  CLI::App app{
      "fleet_sim: simulated hosts on a real 3-member etcd, through the etcd register; "
      "measures etcd's load and checks the register's history"};
  app.add_option("--hosts", o.hosts, "simulated hosts (default 10000)")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--fleet-size", o.fleet_size, "hosts per register prefix (default 1000)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--spare-numbers", o.spare_numbers,
                 "numbers per fleet beyond its hosts (default 8)")
      ->check(CLI::Range(0, 1023));
  app.add_option("--processes", o.processes, "worker processes (default: one per 2,500 hosts)")
      ->check(CLI::Range(0, 64));
  app.add_option("--threads", o.threads,
                 "pool threads per worker process (default 0: one per host, at most 1024)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--churn-hosts", o.churn_hosts,
                 "hosts in a process of their own, crashed at random (default 8)")
      ->check(CLI::Range(0, 256));
  app.add_option("--crashes-per-min", o.crashes_per_min,
                 "crashes (SIGKILL) of churn hosts per minute, in the window (default 30)")
      ->check(CLI::Range(0.0, 6000.0));
  app.add_option("--restart-delay-ms", o.restart_delay_ms,
                 "a crashed or failed host starts again after this (default 1000)")
      ->check(CLI::Range(0, 60'000));
  app.add_option("--lease-ttl-s", o.lease_ttl_s, "register.etcd.lease_ttl_s (default 10)")
      ->check(CLI::Range(2, 3600));
  app.add_option("--reservation-ms", o.reservation_ms, "persistence.reservation_ms (default 1000)")
      ->check(CLI::Range(4, 60'000));
  app.add_option("--mark-reservation-ms", o.mark_reservation_ms,
                 "register.etcd.mark_reservation_ms (default 30000; 0: the mark follows "
                 "--reservation-ms, the schedule before the key existed)")
      ->check(CLI::Range(int64_t{0}, int64_t{600'000}));
  app.add_option("--request-timeout-ms", o.request_timeout_ms,
                 "register.etcd.request_timeout_ms (default 3000)")
      ->check(CLI::Range(100, 60'000));
  app.add_option("--connect-timeout-ms", o.connect_timeout_ms,
                 "register.etcd.connect_timeout_ms (default 1000)")
      ->check(CLI::Range(10, 60'000));
  app.add_option("--steady-s", o.steady_s, "the steady-state window (default 30)")
      ->check(CLI::Range(1.0, 86'400.0));
  app.add_option("--settle-s", o.settle_s, "wait between the storm and the window (default 3)")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--storm-timeout-s", o.storm_timeout_s,
                 "the storm ends by then, claimed or not (default 120)")
      ->check(CLI::Range(1.0, 86'400.0));
  app.add_option("--storm-concurrency", o.storm_concurrency,
                 "Claim() calls in flight per process in the storm (default 0: every host at once)")
      ->check(CLI::Range(0, 100'000));
  app.add_option("--ramp-concurrency", o.ramp_concurrency,
                 "after the storm, hosts not claimed yet claim with at most this many calls in "
                 "flight per process (default 4; 0: no limit)")
      ->check(CLI::Range(0, 100'000));
  app.add_option("--ramp-timeout-s", o.ramp_timeout_s,
                 "the ramp ends by then, claimed or not (default 600)")
      ->check(CLI::Range(0.0, 86'400.0));
  app.add_option("--seed", seed, "the seed (default: SNOWFLAKE_STRESS_SEED, else random)");
  app.add_option("--plant", o.plant,
                 "write a fault behind the register's back: none, lower-mark, double-holder")
      ->check(CLI::IsMember({"none", "lower-mark", "double-holder"}));
  // The worker processes' own arguments (the coordinator passes them).
  const std::string internal = "";
  app.add_flag("--worker", worker)->group(internal);
  app.add_option("--worker-index", worker_index)->group(internal);
  app.add_option("--churn-host", churn_host)->group(internal);
  app.add_option("--generation", w.generation)->group(internal);
  app.add_flag("--go-at-once", w.go_at_once)->group(internal);
  app.add_option("--worker-endpoints", endpoints)->group(internal);
  app.add_option("--worker-dir", worker_dir)->group(internal);
  CLI11_PARSE(app, argc, argv);
  if (app.count("--seed") > 0) o.seed = seed;

  if (worker) {
    w.plan.hosts = o.hosts;
    w.plan.fleet_size = o.fleet_size;
    w.plan.spare_numbers = o.spare_numbers;
    w.plan.churn_hosts = o.churn_hosts;
    w.worker_index = worker_index;
    w.processes = o.processes;
    if (churn_host >= 0) w.churn_host = churn_host;
    std::stringstream list(endpoints);
    for (std::string e; std::getline(list, e, ',');) {
      if (!e.empty()) w.endpoints.push_back(e);
    }
    w.lease_ttl_s = o.lease_ttl_s;
    w.reservation_ms = o.reservation_ms;
    w.mark_reservation_ms = o.mark_reservation_ms;
    w.request_timeout_ms = o.request_timeout_ms;
    w.connect_timeout_ms = o.connect_timeout_ms;
    w.restart_delay_ms = o.restart_delay_ms;
    w.threads = o.threads;
    w.storm_concurrency = o.storm_concurrency;
    w.ramp_concurrency = o.ramp_concurrency;
    w.lock_root = std::filesystem::path(worker_dir) / "locks";
    w.go_file = std::filesystem::path(worker_dir) / "go";
    w.seed = seed;
    return snowflake::testing::RunWorker(w);
  }
  if (o.fleet_size + o.spare_numbers > 1024) {
    std::cerr << "fleet_sim: --fleet-size " << o.fleet_size << " + --spare-numbers "
              << o.spare_numbers
              << " exceed the 1,024 machine numbers of one prefix (10 machine bits): lower one\n";
    return 2;
  }
  if (o.request_timeout_ms >= o.lease_ttl_s * 1000) {
    std::cerr << "fleet_sim: --request-timeout-ms must be below --lease-ttl-s (as "
                 "register.etcd.request_timeout_ms must)\n";
    return 2;
  }
  if (o.crashes_per_min > 0 && o.churn_hosts == 0) {
    std::cerr << "fleet_sim: --crashes-per-min needs --churn-hosts of at least 1 (the hosts "
                 "that crash)\n";
    return 2;
  }
  return snowflake::testing::Coordinator(o).Run();
}
