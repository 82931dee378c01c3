// A fleet on one etcd register under the faults of an operator's bad day
// (docs/etcd-fencing.md): 6 real snowflaked daemons compete for 4 machine numbers on a
// 3-member etcd cluster (so two are always waiting, and take a number over whenever a
// holder's lease ends); each daemon is its own "host" with its own clock, offset by up to
// ±400 ms through libfaketime; a client process per daemon (daemon_stress_worker, under the
// same clock) takes IDs through libsnowflake and records them durably.
//
// The faults, chosen by a seeded RNG (each kind once first, in a shuffled order, then at
// random), while the takes go on:
//   leader-stop    SIGSTOP of the etcd leader for longer than the daemons' lease TTL;
//   follower-stop  the same for a follower;
//   member-kill    SIGKILL of an etcd member, restarted a moment later on its data;
//   quorum-loss    two members SIGSTOPped at once, then resumed;
//   clock-step     a daemon's clock offset set anew, within ±400 ms (its file only);
//   holder-stop    SIGSTOP of a daemon that holds a number and whose ring holds IDs, until
//                  another daemon has taken its number over (or a bound), then SIGCONT;
//   daemon-kill    SIGKILL of a daemon, restarted;
//   daemon-term    SIGTERM of a daemon (a clean stop), restarted;
//   raise-all      an operator's `register raise-all --while-running` with a fence up to
//                  1.6 s ahead of the real clock (above every host's clock), while the
//                  daemons serve: it returns once every holder obeys the fence. One
//                  daemon is SIGKILLed as it starts and one the moment it returns, each
//                  restarted at once: a crash right behind the fence must not issue below
//                  it.
// A daemon that exits by itself is restarted half a second later, as systemd's Restart=
// would: a spare finding every number held, a holder whose claim was lost (a lease that
// ended while it was stopped, or one etcd revoked under it: etcd before 3.4.31 revokes the
// leases of live holders when a stopped leader resumes, etcd-io/etcd#15247). Those cost
// availability and are counted; they must never cost a duplicate.
//
// Properties:
//   (1) no ID is handed out twice, fleet-wide;
//   (2) each client process's IDs strictly increase, and each host's takes are in real
//       time order (a per-host baton; hosts' clocks differ, so there is no fleet-wide one);
//   (3) after the faults every number is served again and every client of a serving
//       daemon gets IDs again;
//   (4) the run was big enough to mean something: at least kMinIds IDs, every kind of
//       fault at least once and one more, a holder-stop that ended in a takeover among
//       them;
//   (5) no ID taken after a raise-all returned is at or below its fence (the take each
//       client had under way when it returned aside: at most one batch);
//   (6) availability as promised (docs/operations.md, "What a pause waits for"): a host
//       whose daemon runs and holds its number (its segment names its pid and a machine)
//       gets a take within max(mark - clock, 0) + 1 s, where a pause for the clock its
//       status names gives mark - clock (the reason's detail), unless the status names a
//       reason that explains a longer wait (register_unreachable, persistence_failed,
//       fenced, out_of_service, or starting while the segment's text names the renewal
//       it waits for). Frozen hosts (SIGSTOP, and 3 s after it) are left out, as is time
//       without a number. Sampled every 100 ms by the fault loop: a stretch is timed to the
//       sample that sees the next take, and one the loop could not watch (a raise-all
//       holds it) is not judged. The worst stretch is printed with its cause.
// Two daemons may both show "serving" for one number for a moment (a lease ended under a
// live holder, which serves out its confirmed horizon while the next holder starts above
// it): such samples are counted, not failed; (1) is what matters.
//
// Bounded by count and time: the faults go on for at least kMinRun and until (4) is met,
// at most kMaxRun. SNOWFLAKE_SOAK_SECONDS runs the same for that long instead (scripts/soak),
// at a slower pace so memory stays bounded. The seed is printed and can be set with
// SNOWFLAKE_STRESS_SEED.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "etcd_cluster.h"
#include "id_checker.h"
#include "register/etcd_register.h"
#include "snowflake/client.h"
#include "snowflake/id_layout.h"
#include "stress_files.h"
#include "stress_seed.h"
#include "test_paths.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::EtcdCluster;
using testing::kDaemonStressWorkerPath;
using testing::Output;
using testing::Process;
using testing::SpawnOptions;
namespace st = snowflake::testing;

constexpr int kDaemons = 6;
constexpr int kNumbers = 4;
constexpr int kLeaseTtlS = 2;
constexpr int kMaxClockOffsetMs = 400;
// The promise's slack beyond a pause's stated cause (property 6): 1 s, as documented. A
// sanitized build runs every daemon and worker several times slower on the same cores, so
// there it is 3 s; the release build holds the documented second.
#ifdef SNOWFLAKE_SANITIZED
constexpr int64_t kPromiseSlackMs = 3000;
#else
constexpr int64_t kPromiseSlackMs = 1000;
#endif
#ifdef SNOWFLAKE_SANITIZED
constexpr auto kMinRun = 30s;
constexpr auto kMaxRun = 60s;
constexpr uint64_t kMinIds = 100'000;
#else
constexpr auto kMinRun = 100s;
constexpr auto kMaxRun = 150s;
constexpr uint64_t kMinIds = 5'000'000;
#endif
// The worker's pause after each take, in µs: the test's pace, and the soak's (slower, so
// an hour's IDs fit in memory for the final check).
constexpr int kTestPauseUs = 20;
constexpr int kSoakPauseUs = 1000;

enum class Fault {
  kLeaderStop,
  kFollowerStop,
  kMemberKill,
  kQuorumLoss,
  kClockStep,
  kHolderStop,
  kDaemonKill,
  kDaemonTerm,
  kRaiseAll,
};
constexpr int kFaultKinds = 9;
constexpr std::array<const char*, kFaultKinds> kFaultNames = {
    "leader-stop", "follower-stop", "member-kill", "quorum-loss", "clock-step",
    "holder-stop", "daemon-kill",   "daemon-term", "raise-all"};
// Weights of the random picks after each kind's first: mostly cheap daemon faults.
constexpr std::array<int, kFaultKinds> kFaultWeights = {2, 2, 2, 1, 4, 2, 4, 3, 1};
// The most IDs one take of daemon_stress_worker gets (its batch).
constexpr uint64_t kWorkerMaxBatch = 8;

bool NeedsQuietRegister(Fault f) {
  // Faults that last: one at a time, and a holder-stop not during an etcd fault, so its
  // number can really be taken over. A raise-all waits for every holder to obey: none
  // may be stopped, nor etcd.
  return f == Fault::kLeaderStop || f == Fault::kFollowerStop || f == Fault::kMemberKill ||
         f == Fault::kQuorumLoss || f == Fault::kHolderStop || f == Fault::kRaiseAll;
}

uint32_t MachineOf(uint64_t id) { return IdLayout().Decode(id)->machine; }

// The fleet uses the default epoch.
int64_t UnixMsOf(uint64_t id) { return IdLayout().Decode(id)->unix_ms; }

std::string DescribeId(uint64_t id) {
  return std::to_string(id) + " (unix ms " + std::to_string(UnixMsOf(id)) + ", machine " +
         std::to_string(MachineOf(id)) + ", sequence " +
         std::to_string(IdLayout().Decode(id)->sequence) + ")";
}

// How long to run: the test's bounds, or SNOWFLAKE_SOAK_SECONDS.
struct RunSize {
  Clock::duration min_run = kMinRun;
  Clock::duration max_run = kMaxRun;
  uint64_t min_ids = kMinIds;
  int pause_us = kTestPauseUs;
  Clock::duration progress_every = 10s;
  bool soak = false;
  std::string error;  // a bad SNOWFLAKE_SOAK_SECONDS
};

RunSize RunSizeFromEnv() {
  RunSize size;
  const char* text = std::getenv("SNOWFLAKE_SOAK_SECONDS");
  if (text == nullptr || *text == '\0') return size;
  char* end = nullptr;
  const unsigned long long seconds = std::strtoull(text, &end, 10);
  if (*end != '\0' || seconds < 1 || seconds > 7 * 24 * 3600) {
    size.error = std::string("SNOWFLAKE_SOAK_SECONDS=") + text +
                 " is not a whole number of seconds from 1 to 604800";
    return size;
  }
  size.soak = true;
  size.min_run = std::chrono::seconds(seconds);
  // Time enough after the asked duration for every kind of fault to have happened once.
  size.max_run = size.min_run + 60s;
  size.min_ids = 0;
  size.pause_us = kSoakPauseUs;
  size.progress_every = 30s;
  return size;
}

struct Slot {
  std::string name;
  DaemonOptions options;
  std::optional<Daemon> daemon;
  std::optional<Process> worker;
  std::string control_path;  // this host's baton and stop flag
  st::StressControl* control = nullptr;
  std::vector<std::string> record_files;  // in the order they were written
  int clock_offset_ms = 0;
  // A daemon that exited by itself is restarted at this time (systemd's RestartSec).
  std::optional<Clock::time_point> restart_at;
  bool stopped = false;  // SIGSTOPped by a holder-stop
  Clock::time_point resumed_at{};
  // The availability promise (property 6): the stretch without a take being timed.
  struct Stretch {
    Clock::time_point since;  // the last take, or when the daemon came to hold its number
    uint64_t committed = 0;   // the client's committed takes then
    // max(mark - clock, 0) + 1 s, from the pauses for the clock its status named since.
    int64_t allowed_ms = kPromiseSlackMs;
    // The pause for the clock last seen ("reason detail"): its allowance is granted once,
    // from the sample that first sees it, never stretched by later samples.
    std::string clock_pause = {};
    std::string cause = "serving";  // what the status said last
    bool explained = false;         // the status named a reason that explains a longer wait
    Clock::time_point sampled;      // the previous sample
  };
  std::optional<Stretch> stretch;  // none while the daemon does not run or hold a number
};

// The longest stretch without a take at a host whose daemon ran and held its number.
struct Gap {
  int64_t ms = 0;
  int64_t allowed_ms = 0;
  std::string host;
  std::string cause;
  std::string when;
};

// A raise-all that returned: its fence, and where each host's records stood then.
struct FenceCheck {
  int64_t fence_unix_ms = 0;
  std::string when;                                   // for the failure message
  std::vector<std::pair<size_t, uint64_t>> position;  // per slot: record file, records in it
};

// A fault that lasts: what to undo, and when.
struct ActiveFault {
  Fault kind;
  Clock::time_point ends;
  std::vector<int> members;  // stopped or killed members
  int slot = -1;             // holder-stop: the stopped daemon
  uint32_t machine = 0;      // holder-stop: its number
  bool taken_over = false;   // holder-stop: another daemon serves its number
};

class FleetStress {
 public:
  FleetStress(uint64_t seed, RunSize size) : rng_(seed), size_(std::move(size)) {}
  ~FleetStress() {
    for (Slot& s : slots_) {
      if (s.stopped && s.daemon) s.daemon->process().Kill(SIGCONT);
      if (s.control != nullptr) munmap(s.control, sizeof(st::StressControl));
    }
  }

  // Runs the faults; returns the first problem in words, or "".
  std::string Run() {
    cluster_.emplace(3);
    if (!cluster_->ok()) return cluster_->error();
    // A short lease, so a number that stops being renewed is free again soon; request
    // timeouts well inside it. A clock step back of up to 800 ms (between two offsets) or
    // a start 1.8 s behind a faster holder's mark only pauses.
    //
    // A freshness bound of 500 ms (ring.max_age_ms + daemon.liveness_ms) instead of 50:
    // a host's daemon and client each read the host's clock through libfaketime, which
    // can put a process's clock tens of ms off the offset file until the file next
    // changes (measured under tsan: the daemon 72 ms behind the file while its client
    // read it exactly, and 40-90 ms in other runs). On a real host both read one kernel
    // clock; here a client would refuse every ID of its healthy daemon as stale (the
    // daemon's status says serving) until the next clock-step of that host, which is an
    // outage of the test bench, not of the product.
    // The mark's own window (register.etcd.mark_reservation_ms) at 3 s, longer than the
    // reservation as in production but scaled to the test's 2 s lease: a takeover waits for
    // the old holder's mark, up to 3 s, and the faults hit the longer window's path (the
    // state file written with the register's target first).
    const std::string extra = "lease_ttl_s = " + std::to_string(kLeaseTtlS) +
                              "\nrequest_timeout_ms = 800\nmark_reservation_ms = 3000\n"
                              "\n[clock]\nmax_backward_ms = 1500\n"
                              "\n[ring]\nmax_age_ms = 450\n";
    slots_.resize(kDaemons);
    for (int i = 0; i < kDaemons; ++i) {
      Slot& s = slots_[i];
      s.name = "f" + std::to_string(i);
      // Each daemon is a host of its own: its own host-wide machine locks, as its clock.
      s.options =
          harness_.NamedOptions(s.name,
                                st::EtcdDaemonToml(s.name, cluster_->ClientUrls(), "/fleet/",
                                                   "0-" + std::to_string(kNumbers - 1), extra),
                                DaemonHarness::Host::kOwn);
      s.options.faketime_file = harness_.root() / (s.name + "-clock");
      s.control_path = (harness_.root() / (s.name + "-control")).string();
      s.control = static_cast<st::StressControl*>(
          st::MapSharedFile(s.control_path, sizeof(st::StressControl), /*create=*/true));
      if (s.control == nullptr) return "cannot map " + s.control_path;
      SetOffset(s, RandomOffsetMs());
      s.daemon.emplace(Daemon::Spawn(s.options));
    }
    for (Slot& s : slots_) StartWorker(s);
    start_ = Clock::now();
    if (std::string p = WaitUntilEveryNumberIsServed(90s); !p.empty()) return p;
    Note("all " + std::to_string(kNumbers) + " numbers served");

    std::vector<Fault> first;  // every kind once, in a seeded order
    for (int k = 0; k < kFaultKinds; ++k) first.push_back(static_cast<Fault>(k));
    std::shuffle(first.begin(), first.end(), rng_);
    auto next_fault = Clock::now() + 1s;
    auto next_progress = Clock::now() + size_.progress_every;
    const auto run_start = Clock::now();
    while (true) {
      const auto now = Clock::now();
      const auto elapsed = now - run_start;
      const bool enough =
          elapsed >= size_.min_run && Committed() >= size_.min_ids && EnoughFaults();
      if ((enough && !active_) || elapsed >= size_.max_run) break;
      std::this_thread::sleep_for(100ms);
      if (std::string p = CheckWorkers(); !p.empty()) return p;
      if (std::string p = EndFaults(/*all=*/false); !p.empty()) return p;
      if (std::string p = RestartExitedDaemons(); !p.empty()) return p;
      SampleExclusivity();
      SampleAvailability();
      if (Clock::now() >= next_fault && !enough) {
        const bool from_first = !first.empty();
        const Fault kind = from_first ? first.front() : PickFault();
        if (StartFault(kind)) {
          if (from_first) first.erase(first.begin());
          next_fault = Clock::now() + std::chrono::milliseconds(300 + rng_() % 1200);
        }
      }
      if (Clock::now() >= next_progress) {
        next_progress += size_.progress_every;
        std::cout << "progress " << Seconds() << " s: " << Committed() << " IDs, faults "
                  << FaultCounts() << ", " << spare_exits_ << " spare exits, " << lost_claims_
                  << " lost claims" << std::endl;
      }
    }
    if (std::string p = EndFaults(/*all=*/true); !p.empty()) return p;
    for (int i = 0; i < cluster_->size(); ++i) {
      if (!cluster_->WaitReady(i, 60s)) return "etcd did not recover: " + cluster_->Logs();
    }
    Note("faults over");

    // (3) Every number is served again, and every client of a serving daemon gets IDs.
    if (std::string p = WaitUntilEveryNumberIsServed(90s); !p.empty()) return p;
    std::vector<uint64_t> before;
    for (const Slot& s : slots_) before.push_back(Committed(s));
    const auto progress_deadline = Clock::now() + 60s;
    for (size_t i = 0; i < slots_.size(); ++i) {
      // Serving as this slot's running process says: a killed daemon's segment still reads
      // "serving" while its restarted successor is claiming (and may find no free number).
      auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(slots_[i].options.runtime_dir));
      if (!status || status->state != "serving" || !slots_[i].daemon->Running() ||
          status->daemon_pid != static_cast<uint64_t>(slots_[i].daemon->pid())) {
        continue;
      }
      std::string problem;  // a worker's, which ends the wait
      const auto progressed = st::WaitUntil(
          [&] {
            if (Committed(slots_[i]) > before[i]) return true;
            problem = CheckWorkers();
            return !problem.empty();
          },
          std::chrono::duration_cast<std::chrono::milliseconds>(progress_deadline - Clock::now()),
          "IDs for the client of " + slots_[i].name, 10ms);
      if (!problem.empty()) return problem;
      if (!progressed) {
        return "client of " + slots_[i].name + " got no IDs after the faults (" +
               progressed.message() + "): " + slots_[i].daemon->Describe() + "\n" +
               ClientView(slots_[i]);
      }
    }

    for (Slot& s : slots_) s.control->stop.store(1, std::memory_order_release);
    std::string problem;
    for (Slot& s : slots_) {
      auto status = s.worker->Wait(30s);
      if (!status) {
        s.worker->Kill(SIGKILL);
        if (problem.empty()) problem = "a worker did not stop";
      } else if (!status->ExitedWith(st::kConsumerStopped) && problem.empty()) {
        problem = "worker at stop: " + status->ToString() + ": " + s.worker->err();
      }
    }
    for (Slot& s : slots_) {
      const bool serving = s.daemon->ready() && s.daemon->Running();
      auto stopped = s.daemon->Stop();
      KeepClaimLines(s);
      // A spare may be on its way out (no free number); a holder stops cleanly, unless
      // the register took its number away just before the stop (as during the run: a
      // lease revoked after a stalled leader resumes), and it exited for that.
      if (serving && stopped && stopped->ExitedWith(1)) {
        s.daemon->WaitForErr("claim is lost", 1s);  // its last words may be in the pipe
      }
      if (serving && stopped && stopped->ExitedWith(1) && SaysClaimLost(s.daemon->err())) {
        ++lost_claims_;
        Note(s.name + " lost its claim at the end of the run and exits");
      } else if (serving && (!stopped || !stopped->ExitedWith(0)) && problem.empty()) {
        problem = "a daemon did not stop cleanly: " + s.daemon->Describe();
      }
    }
    return problem;
  }

  // Properties (1) and (2) over every record; "" if they hold.
  std::string Check() {
    st::IdChecker checker;
    for (const Slot& s : slots_) {
      for (size_t f = 0; f < s.record_files.size(); ++f) {
        const auto records = st::ReadCommittedRecords(s.record_files[f]);
        checker.AddRecorder(s.name + " client " + std::to_string(f), records);
      }
    }
    check_ = checker.Check();
    if (check_.duplicates > 0) DescribeDuplicates();
    if (!check_.ok()) return check_.Summary();
    return CheckFences();
  }

  // (5): after each raise-all returned, every host's takes are above its fence, but for the
  // one take each client may have had under way (at most one batch).
  std::string CheckFences() {
    for (const FenceCheck& check : fence_checks_) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        const auto& [first_file, count] = check.position[i];
        for (size_t f = first_file; f < slots_[i].record_files.size(); ++f) {
          const auto records = st::ReadCommittedRecords(slots_[i].record_files[f]);
          const size_t from = f == first_file ? count + kWorkerMaxBatch : 0;
          for (size_t r = from; r < records.size(); ++r) {
            if (UnixMsOf(records[r].id) <= check.fence_unix_ms) {
              return slots_[i].name + " client " + std::to_string(f) + " record " +
                     std::to_string(r) + " took " + DescribeId(records[r].id) +
                     " after the raise-all " + check.when + " returned, at or below its fence " +
                     std::to_string(check.fence_unix_ms);
            }
          }
        }
      }
    }
    return "";
  }

  std::string Summary() const {
    return std::to_string(check_.ids) + " IDs, " + std::to_string(check_.duplicates) +
           " duplicates, " + std::to_string(check_.not_increasing) + " not increasing, " +
           std::to_string(check_.order_violations) + " order violations; faults " + FaultCounts() +
           "; " + std::to_string(takeovers_) + " holder-stop takeovers, " +
           std::to_string(spare_exits_) + " spare exits (no free number), " +
           std::to_string(lost_claims_) + " lost claims (restarted), " +
           std::to_string(other_exits_) + " other exits, " + std::to_string(overlaps_) + " of " +
           std::to_string(samples_) + " samples with two daemons serving one number; " +
           std::to_string(fence_checks_.size()) + " raise-all fences checked" +
           (raise_all_failures_ == 0
                ? std::string("; ")
                : " (" + std::to_string(raise_all_failures_) +
                      " raise-all attempts failed, the first: " + first_raise_all_failure_ + "); ") +
           std::to_string(Seconds()) + " s";
  }
  // The fault log with times, for a failure message.
  std::string Timeline() const {
    std::string text;
    for (const std::string& line : timeline_) text += "  " + line + "\n";
    return text;
  }
  const std::string& duplicate_details() const { return duplicate_details_; }
  // Every daemon's claim lines, in the order the daemons ended.
  std::string ClaimLines() const {
    std::string text;
    for (const std::string& line : claim_lines_) text += "  " + line + "\n";
    return text;
  }
  std::string other_exit_example() const { return other_exit_example_; }
  int count(Fault f) const { return counts_[static_cast<int>(f)]; }
  int total_faults() const {
    int total = 0;
    for (int c : counts_) total += c;
    return total;
  }
  int takeovers() const { return takeovers_; }
  // Property (6): "" if it held; the worst stretches with their causes.
  const std::string& broken_promise() const { return first_broken_promise_; }
  std::string AvailabilitySummary() const {
    const auto describe = [](const Gap& g) {
      return g.host.empty() ? std::string("none")
                            : std::to_string(g.ms) + " ms at " + g.host + " (allowed " +
                                  std::to_string(g.allowed_ms) + " ms, ended at " + g.when +
                                  "; status: " + g.cause + ")";
    };
    return "longest stretch without a take at a holding host: " + describe(worst_gap_) +
           "; longest the status explained: " + describe(worst_explained_);
  }
  uint64_t ids() const { return check_.ids; }

 private:
  int RandomOffsetMs() {
    return static_cast<int>(rng_() % (2 * kMaxClockOffsetMs + 1)) - kMaxClockOffsetMs;
  }
  void SetOffset(Slot& s, int ms) {
    s.clock_offset_ms = ms;
    std::ostringstream text;
    text << (ms < 0 ? "-" : "+") << std::abs(ms) / 1000 << "." << std::setfill('0') << std::setw(3)
         << std::abs(ms) % 1000;
    st::SetClockOffset(*s.options.faketime_file, text.str());
  }

  int Seconds() const {
    return static_cast<int>(
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count());
  }
  void Note(const std::string& line) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
    // The real time too, to compare with the IDs' milliseconds (each daemon's clock is off
    // by its offset).
    const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
    timeline_.push_back(std::to_string(ms) + " ms (unix ms " + std::to_string(unix_ms) +
                        "): " + line);
  }

  // (4)'s faults: every kind, and one more than the first round of one of each (whose
  // order is fixed by the seed), so some kind also came a second time.
  bool EnoughFaults() const {
    return std::all_of(counts_.begin(), counts_.end(), [](int c) { return c > 0; }) &&
           takeovers_ > 0 && total_faults() > kFaultKinds;
  }
  std::string FaultCounts() const {
    std::string text;
    for (int k = 0; k < kFaultKinds; ++k) {
      if (k > 0) text += " ";
      text += std::string(kFaultNames[k]) + "=" + std::to_string(counts_[k]);
    }
    return text;
  }

  Fault PickFault() {
    int total = 0;
    for (int w : kFaultWeights) total += w;
    int r = static_cast<int>(rng_() % total);
    for (int k = 0; k < kFaultKinds; ++k) {
      if (r < kFaultWeights[k]) return static_cast<Fault>(k);
      r -= kFaultWeights[k];
    }
    return Fault::kClockStep;
  }

  // A running daemon picked at random (not a stopped one), or -1.
  int RandomRunningSlot() {
    std::vector<int> candidates;
    for (int i = 0; i < kDaemons; ++i) {
      if (!slots_[i].stopped && slots_[i].daemon->Running()) candidates.push_back(i);
    }
    if (candidates.empty()) return -1;
    return candidates[rng_() % candidates.size()];
  }

  // Starts `kind` if it can start now; false if it must wait (another lasting fault is
  // on, no leader is known, no holder has IDs in its ring).
  bool StartFault(Fault kind) {
    if (NeedsQuietRegister(kind) && active_) return false;
    const auto now = Clock::now();
    // Longer than the lease: the daemons' leases can end meanwhile.
    const auto beyond_lease =
        std::chrono::seconds(kLeaseTtlS) + std::chrono::milliseconds(500 + rng_() % 2000);
    const std::string name = kFaultNames[static_cast<int>(kind)];
    switch (kind) {
      case Fault::kLeaderStop:
      case Fault::kFollowerStop: {
        const std::optional<int> leader = cluster_->Leader();
        if (!leader) return false;
        int member = *leader;
        if (kind == Fault::kFollowerStop) member = (*leader + 1 + rng_() % 2) % cluster_->size();
        cluster_->Pause(member);
        active_ = ActiveFault{kind, now + beyond_lease, {member}};
        Note(name + " of member " + std::to_string(member));
        break;
      }
      case Fault::kMemberKill: {
        const int member = static_cast<int>(rng_() % cluster_->size());
        cluster_->Kill(member);
        active_ = ActiveFault{kind, now + std::chrono::milliseconds(500 + rng_() % 2500), {member}};
        Note(name + " of member " + std::to_string(member));
        break;
      }
      case Fault::kQuorumLoss: {
        const int spared = static_cast<int>(rng_() % cluster_->size());
        std::vector<int> members;
        for (int m = 0; m < cluster_->size(); ++m) {
          if (m != spared) members.push_back(m);
        }
        for (int m : members) cluster_->Pause(m);
        active_ = ActiveFault{kind, now + std::chrono::milliseconds(1000 + rng_() % 3000), members};
        Note(name + ": members " + std::to_string(members[0]) + " and " +
             std::to_string(members[1]) + " stopped");
        break;
      }
      case Fault::kClockStep: {
        const int i = RandomRunningSlot();
        if (i < 0) return false;
        const int before = slots_[i].clock_offset_ms;
        SetOffset(slots_[i], RandomOffsetMs());
        Note(name + " of " + slots_[i].name + ": " + std::to_string(before) + " ms -> " +
             std::to_string(slots_[i].clock_offset_ms) + " ms");
        break;
      }
      case Fault::kHolderStop: {
        // A serving holder with IDs in its ring.
        std::vector<std::pair<int, ClientStatus>> holders;
        for (int i = 0; i < kDaemons; ++i) {
          Slot& s = slots_[i];
          if (s.stopped || !s.daemon->Running()) continue;
          auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(s.options.runtime_dir));
          if (status && status->state == "serving" && status->ring_fill > 0 &&
              status->daemon_pid == static_cast<uint64_t>(s.daemon->pid())) {
            holders.emplace_back(i, *status);
          }
        }
        if (holders.empty()) return false;
        const auto& [i, status] = holders[rng_() % holders.size()];
        Slot& s = slots_[i];
        s.daemon->process().Kill(SIGSTOP);
        s.stopped = true;
        // Until its number is taken over, bounded.
        active_ =
            ActiveFault{kind, now + std::chrono::seconds(kLeaseTtlS) + 8s, {}, i, status.machine};
        Note(name + " of " + s.name + " (machine " + std::to_string(status.machine) + ", " +
             std::to_string(status.ring_fill) + " IDs in its ring)");
        break;
      }
      case Fault::kDaemonKill: {
        const int i = RandomRunningSlot();
        if (i < 0) return false;
        KillAndRestart(i, name + " of {}");
        break;
      }
      case Fault::kRaiseAll: {
        // Only once no lasting fault has ended for a lease's time: a holder that lost its
        // lease then has noticed, so every serving daemon is a holder that must obey.
        if (now - quiet_since_ < std::chrono::seconds(kLeaseTtlS) + 1s) return false;
        const int64_t real_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
        const int64_t fence = real_ms + kMaxClockOffsetMs + 100 + static_cast<int64_t>(rng_() % 1100);
        reg::EtcdRegisterOptions options;
        options.client.endpoints = cluster_->ClientUrls();
        options.client.request_timeout_ms = 2000;
        options.prefix = "/fleet/";
        options.fence_ack_timeout = 20s;
        options.host_lock_dir = harness_.root() / "operator-locks";
        reg::EtcdRegister operator_register(options);
        Note(name + " --while-running above unix ms " + std::to_string(fence));
        // A daemon killed and restarted right before: its restart claims while raise-all
        // lists and writes, and is waited for or listed again.
        KillAndRestart(RandomRunningSlot(), name + ": SIGKILL and restart of {} as it starts");
        auto raised = operator_register.RaiseAll(fence, /*while_running=*/true);
        // The crash right behind the fence: a holder that has just acknowledged it.
        if (raised) {
          KillAndRestart(RandomRunningSlot(), name + ": SIGKILL and restart of {} as it returned");
        }
        if (!raised) {
          // Not counted: tried again later (etcd may still be electing after a fault). The
          // summary says why, so a run that never gets one through explains itself.
          Note(name + " failed: " + raised.error().message);
          if (raise_all_failures_++ == 0) first_raise_all_failure_ = raised.error().message;
          return false;
        }
        FenceCheck check{fence, "at " + std::to_string(Seconds()) + " s", {}};
        for (const Slot& s : slots_) {
          const size_t file = s.record_files.size() - 1;
          check.position.emplace_back(file, st::CommittedCount(s.record_files[file]));
        }
        fence_checks_.push_back(std::move(check));
        Note(name + " returned: " + std::to_string(raised->raised) +
             " marks raised, every holder obeys, " +
             std::to_string(raised->ended_unacknowledged.size()) +
             " lost their number before acknowledging");
        break;
      }
      case Fault::kDaemonTerm: {
        const int i = RandomRunningSlot();
        if (i < 0) return false;
        auto status = slots_[i].daemon->Stop(15s);
        Note(name + " of " + slots_[i].name + ": " +
             (status ? status->ToString() : std::string("did not stop, killed")));
        KeepClaimLines(slots_[i]);
        slots_[i].daemon.emplace(Daemon::Spawn(slots_[i].options));
        break;
      }
    }
    ++counts_[static_cast<int>(kind)];
    return true;
  }

  // Undoes the lasting fault if its time has come (or `all`).
  std::string EndFaults(bool all) {
    if (!active_) return "";
    ActiveFault& f = *active_;
    const auto now = Clock::now();
    if (f.kind == Fault::kHolderStop) {
      // Taken over: another live daemon serves the stopped one's number. Resume it a
      // moment later, when the new holder has issued (its ring is what the stopped one's
      // must never overlap).
      if (!f.taken_over && TakenOver(f.slot, f.machine)) {
        ++takeovers_;
        Note("machine " + std::to_string(f.machine) + " taken over");
        f.taken_over = true;
        f.ends = std::min(f.ends, now + 500ms);
      }
      if (!all && now < f.ends) return "";
      Slot& s = slots_[f.slot];
      s.daemon->process().Kill(SIGCONT);
      s.stopped = false;
      s.resumed_at = Clock::now();
      Note("holder-stop of " + s.name + " over");
      active_.reset();
      quiet_since_ = Clock::now();
      return "";
    }
    if (!all && now < f.ends) return "";
    for (int m : f.members) {
      if (f.kind == Fault::kMemberKill) {
        cluster_->Restart(m);
      } else {
        cluster_->Resume(m);
      }
    }
    Note(std::string(kFaultNames[static_cast<int>(f.kind)]) + " over");
    active_.reset();
    quiet_since_ = Clock::now();
    return "";
  }

  bool TakenOver(int stopped, uint32_t machine) {
    for (int i = 0; i < kDaemons; ++i) {
      Slot& s = slots_[i];
      if (i == stopped || s.stopped || !s.daemon->Running()) continue;
      auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(s.options.runtime_dir));
      if (status && status->state == "serving" && status->machine == machine &&
          status->daemon_pid == static_cast<uint64_t>(s.daemon->pid())) {
        return true;
      }
    }
    return false;
  }

  // What a stuck client saw: its worker's last words, and what a new client gets now.
  static std::string ClientView(Slot& s) {
    std::string err = s.worker->err();
    constexpr size_t kTail = 4000;
    if (err.size() > kTail) err = "..." + err.substr(err.size() - kTail);
    ClientOptions options = DaemonHarness::ClientOptionsFor(s.options.runtime_dir);
    options.wait_timeout = 1s;
    std::string probe;
    if (auto client = Client::Open("fleet-probe", options); !client) {
      probe = "cannot open: " + client.error().message;
    } else if (auto id = client->Next(); !id) {
      probe = "no ID: " + id.error().message;
    } else {
      probe = "took " + DescribeId(*id);
    }
    return "its worker (pid " + std::to_string(s.worker->pid()) + ") said:\n" + err +
           "\na new client now: " + probe;
  }

  void StartWorker(Slot& s) {
    s.record_files.push_back(
        (harness_.root() / (s.name + "-records-" + std::to_string(s.record_files.size())))
            .string());
    SpawnOptions options;
    options.out = Output::Null();
    // The client reads the host's (faked) clock too: its freshness check compares IDs with
    // it.
    options.env.set = {{"LD_PRELOAD", st::kFakeTimeLibrary},
                       {"FAKETIME_TIMESTAMP_FILE", s.options.faketime_file->string()},
                       {"FAKETIME_NO_CACHE", "1"},
                       {"FAKETIME_DONT_FAKE_MONOTONIC", "1"}};
    const char* asan = std::getenv("ASAN_OPTIONS");
    options.env.set.emplace_back("ASAN_OPTIONS",
                                 (asan != nullptr && *asan != '\0' ? std::string(asan) + ":" : "") +
                                     "verify_asan_link_order=0");
    s.worker.emplace(
        Process::Spawn({kDaemonStressWorkerPath, s.options.runtime_dir.string(), s.control_path,
                        s.record_files.back(), s.record_files.size() % 2 ? "batch" : "single",
                        std::to_string(size_.pause_us)},
                       options));
  }

  // A worker with a full file gets a new one; any other end is a problem.
  std::string CheckWorkers() {
    for (Slot& s : slots_) {
      if (auto status = s.worker->Wait(0ms)) {
        if (!status->ExitedWith(st::kConsumerFileFull)) {
          return "the client of " + s.name + " ended: " + status->ToString() + ": " +
                 s.worker->err();
        }
        StartWorker(s);
      }
    }
    return "";
  }

  // The daemon's last words when the register took its number away (a lease expired or
  // revoked while it could not renew): it stops at once and exits 1, by design.
  static bool SaysClaimLost(const std::string& err) {
    return err.find("is no longer ours") != std::string::npos ||
           err.find("claim is lost") != std::string::npos;
  }

  // What systemd's Restart= (RestartSec=500ms) does for a daemon that exits by itself.
  std::string RestartExitedDaemons() {
    const auto now = Clock::now();
    for (Slot& s : slots_) {
      if (s.stopped) continue;
      if (s.restart_at) {
        if (now < *s.restart_at) continue;
        s.restart_at.reset();
        KeepClaimLines(s);
        s.daemon.emplace(Daemon::Spawn(s.options));
        continue;
      }
      if (s.daemon->Running()) continue;
      auto status = s.daemon->Wait(0ms);
      // Its last words may still be in the pipe: wait for them (or for the pipe to close).
      s.daemon->WaitForErr("no free machine number", 1s);
      const std::string err = s.daemon->err();
      if (status && status->ExitedWith(1) &&
          err.find("no free machine number") != std::string::npos) {
        ++spare_exits_;
      } else if (status && status->ExitedWith(1) && SaysClaimLost(err)) {
        ++lost_claims_;
        Note(s.name + " lost its claim and exits");
      } else if (status && status->ExitedWith(1)) {
        ++other_exits_;
        if (other_exit_example_.empty()) other_exit_example_ = s.daemon->Describe();
        Note(s.name + " exited: " + status->ToString());
      } else {
        return s.name + " ended: " + s.daemon->Describe();
      }
      s.restart_at = now + 500ms;
    }
    return "";
  }

  // Property (6), sampled with the fault loop (every 100 ms): times each host's stretch
  // without a take while its daemon runs and holds its number.
  void SampleAvailability() {
    const auto now = Clock::now();
    for (Slot& s : slots_) {
      std::optional<ClientStatus> status;
      if (!s.stopped && now - s.resumed_at >= 3s && s.daemon->Running()) {
        if (auto inspected =
                Client::Inspect(DaemonHarness::ClientOptionsFor(s.options.runtime_dir))) {
          status = std::move(*inspected);
        }
      }
      const bool held = status && status->daemon_pid == static_cast<uint64_t>(s.daemon->pid()) &&
                        status->state != "stopped" && status->health != "dead" &&
                        status->health != "not_heartbeating";
      if (!held) {
        s.stretch.reset();
        continue;
      }
      const uint64_t committed = Committed(s);
      // A take is timed to the sample that sees it: after a sample that came late (the
      // loop was held by a raise-all, which returns only once every holder obeys it) the
      // stretch cannot be timed, and begins anew.
      if (!s.stretch || now - s.stretch->sampled > 500ms) {
        s.stretch = Slot::Stretch{.since = now, .committed = committed, .sampled = now};
        continue;
      }
      Slot::Stretch& open = *s.stretch;
      open.sampled = now;
      const int64_t gap_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - open.since).count();
      if (committed > open.committed) {
        EndStretch(s, gap_ms);
        s.stretch = Slot::Stretch{.since = now, .committed = committed, .sampled = now};
        continue;
      }
      // What the status says now: a pause for the clock bounds the wait by its lead (from
      // when it is first seen, a sample late at most); the reasons of a register, a disk or
      // an operator explain any wait.
      const std::string& reason = status->reason;
      const std::string pause = reason + " " + std::to_string(status->reason_detail);
      if ((reason == "clock_behind" || reason == "behind_high_water") &&
          pause != open.clock_pause) {
        open.clock_pause = pause;
        open.allowed_ms =
            std::max(open.allowed_ms,
                     gap_ms + std::max<int64_t>(status->reason_detail, 0) + kPromiseSlackMs);
        open.cause = status->state + " " + reason + " " + std::to_string(status->reason_detail) +
                     " ms: " + status->status_text;
      } else if (reason == "register_unreachable" || reason == "persistence_failed" ||
                 reason == "fenced" || status->state == "out_of_service" ||
                 (status->state == "starting" && !status->status_text.empty())) {
        open.explained = true;
        open.cause = status->state + " " + reason + ": " + status->status_text;
      } else if (!open.explained) {
        open.cause = status->state + " " + reason +
                     (status->status_text.empty() ? "" : ": " + status->status_text);
      }
    }
  }

  void EndStretch(const Slot& s, int64_t gap_ms) {
    const Slot::Stretch& open = *s.stretch;
    Gap gap{.ms = gap_ms,
            .allowed_ms = open.allowed_ms,
            .host = s.name,
            .cause = open.cause,
            .when = std::to_string(Seconds()) + " s"};
    Gap& worst = open.explained ? worst_explained_ : worst_gap_;
    if (gap.ms > worst.ms) worst = gap;
    if (!open.explained && gap.ms > gap.allowed_ms && first_broken_promise_.empty()) {
      first_broken_promise_ = s.name + " went " + std::to_string(gap.ms) +
                              " ms without a take while holding its number (allowed " +
                              std::to_string(gap.allowed_ms) + " ms) until " + gap.when +
                              "; its status said: " + gap.cause;
      Note(first_broken_promise_);
      // What the two sides said meanwhile: the client's reasons for failing takes (or
      // none: then it was not asking), and the daemon's last lines.
      first_broken_promise_ += "\nits client said lately:\n" + LastLines(s.worker->err(), 6) +
                               "its daemon said lately:\n" + LastLines(s.daemon->err(), 12);
    }
  }

  // The last `n` lines of `text`, each indented, for a failure message.
  static std::string LastLines(const std::string& text, size_t n) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) lines.push_back(std::move(line));
    }
    std::string out;
    for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
      out += "    " + lines[i] + "\n";
    }
    return out.empty() ? "    (nothing)\n" : out;
  }

  // The live daemons that serve, by number; two on one number is counted (see the top).
  void SampleExclusivity() {
    ++samples_;
    std::map<uint32_t, int> holder;
    const auto now = Clock::now();
    for (int i = 0; i < kDaemons; ++i) {
      Slot& s = slots_[i];
      // A daemon just resumed from SIGSTOP still shows its old state until its loop runs.
      if (s.stopped || now - s.resumed_at < 1s || !s.daemon->Running()) continue;
      auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(s.options.runtime_dir));
      if (!status || status->state != "serving" || status->health != "serving" ||
          status->daemon_pid != static_cast<uint64_t>(s.daemon->pid())) {
        continue;
      }
      auto [it, fresh] = holder.emplace(status->machine, i);
      if (!fresh) {
        ++overlaps_;
        Note("machine " + std::to_string(status->machine) + " shown serving by " +
             slots_[it->second].name + " and " + s.name);
      }
    }
  }

  std::string WaitUntilEveryNumberIsServed(std::chrono::seconds timeout) {
    std::set<uint32_t> served;
    std::string problem;  // a worker's or a restart's, which ends the wait
    const auto all_served = st::WaitUntil(
        [&] {
          served.clear();
          for (Slot& s : slots_) {
            if (!s.daemon->Running()) continue;
            auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(s.options.runtime_dir));
            if (status && status->state == "serving" &&
                status->daemon_pid == static_cast<uint64_t>(s.daemon->pid())) {
              served.insert(status->machine);
            }
          }
          if (served.size() == kNumbers) return true;
          problem = CheckWorkers();
          if (problem.empty()) problem = RestartExitedDaemons();
          return !problem.empty();
        },
        timeout, "every number to be served", 100ms);
    if (!problem.empty()) return problem;
    if (all_served) return "";
    std::string text =
        "only " + std::to_string(served.size()) + " numbers served (" + all_served.message() + "):";
    for (Slot& s : slots_) text += "\n" + s.daemon->Describe();
    return text;
  }

  // Which clients took each duplicated ID (the first 20), for the failure message.
  void DescribeDuplicates() {
    std::vector<uint64_t> all;
    for (const Slot& s : slots_) {
      for (const std::string& path : s.record_files) {
        for (const st::TakeRecord& r : st::ReadCommittedRecords(path)) all.push_back(r.id);
      }
    }
    std::sort(all.begin(), all.end());
    std::map<uint64_t, std::vector<std::string>> takers;
    for (size_t i = 1; i < all.size(); ++i) {
      if (all[i] == all[i - 1]) takers[all[i]];
    }
    all = {};
    for (const Slot& s : slots_) {
      for (size_t f = 0; f < s.record_files.size(); ++f) {
        const auto records = st::ReadCommittedRecords(s.record_files[f]);
        for (size_t i = 0; i < records.size(); ++i) {
          auto it = takers.find(records[i].id);
          if (it != takers.end()) {
            it->second.push_back(s.name + " client " + std::to_string(f) + " record " +
                                 std::to_string(i));
          }
        }
      }
    }
    std::map<uint32_t, uint64_t> per_machine;
    for (const auto& [id, who] : takers) ++per_machine[MachineOf(id)];
    duplicate_details_ = std::to_string(takers.size()) + " distinct IDs taken more than once;";
    for (const auto& [machine, n] : per_machine) {
      duplicate_details_ += " machine " + std::to_string(machine) + ": " + std::to_string(n);
    }
    if (!takers.empty()) {
      duplicate_details_ += "; unix ms " + std::to_string(UnixMsOf(takers.begin()->first)) +
                            " to " + std::to_string(UnixMsOf(takers.rbegin()->first));
    }
    int shown = 0;
    for (const auto& [id, who] : takers) {
      if (++shown > 20) break;
      duplicate_details_ += "\n  " + DescribeId(id) + " by";
      for (const std::string& w : who) duplicate_details_ += " [" + w + "]";
    }
  }

  // SIGKILLs slot i's daemon and starts it again at once (nothing for i < 0); notes `what`
  // with "{}" replaced by the slot's name.
  void KillAndRestart(int i, std::string what) {
    if (i < 0) return;
    slots_[i].daemon->Kill();
    KeepClaimLines(slots_[i]);
    slots_[i].daemon.emplace(Daemon::Spawn(slots_[i].options));
    what.replace(what.find("{}"), 2, slots_[i].name);
    Note(what);
  }

  // What a daemon said about its claims and marks, kept when it is replaced: with a
  // duplicate, who claimed the number when, above which mark, and who lost it.
  void KeepClaimLines(Slot& s) {
    std::istringstream err(s.daemon->err());
    for (std::string line; std::getline(err, line);) {
      for (const char* key : {"claimed machine", "high-water mark ", "no longer ours",
                              "claim is lost", "serving machine"}) {
        if (line.find(key) != std::string::npos) {
          claim_lines_.push_back(s.name + ": " + line);
          break;
        }
      }
    }
  }

  uint64_t Committed(const Slot& s) const {
    uint64_t total = 0;
    for (const std::string& path : s.record_files) total += st::CommittedCount(path);
    return total;
  }
  uint64_t Committed() const {
    uint64_t total = 0;
    for (const Slot& s : slots_) total += Committed(s);
    return total;
  }

  DaemonHarness harness_{"fleet"};
  std::mt19937_64 rng_;
  RunSize size_;
  std::optional<EtcdCluster> cluster_;
  std::vector<Slot> slots_;
  Clock::time_point start_ = Clock::now();
  std::optional<ActiveFault> active_;
  Clock::time_point quiet_since_ = Clock::now();  // when the last lasting fault ended
  std::vector<FenceCheck> fence_checks_;
  int raise_all_failures_ = 0;
  std::string first_raise_all_failure_;
  std::array<int, kFaultKinds> counts_{};
  int takeovers_ = 0;
  int spare_exits_ = 0;
  int lost_claims_ = 0;
  int other_exits_ = 0;
  std::string other_exit_example_;
  uint64_t samples_ = 0;
  uint64_t overlaps_ = 0;
  Gap worst_gap_;        // property (6): the longest stretch not explained by the status
  Gap worst_explained_;  // and the longest one the status explained
  std::string first_broken_promise_;
  std::vector<std::string> timeline_;
  std::vector<std::string> claim_lines_;
  st::IdCheckResult check_;
  std::string duplicate_details_;
};

TEST(DaemonEtcdFleetStress, NoDuplicateUnderEtcdStopsQuorumLossClockOffsetsAndStalledHolders) {
  const uint64_t seed = st::StressSeedFromEnv();
  const RunSize size = RunSizeFromEnv();
  ASSERT_EQ(size.error, "");
  std::cout << "seed " << seed << " (set SNOWFLAKE_STRESS_SEED to repeat)"
            << (size.soak ? ", soak" : "") << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  FleetStress sut(seed, size);

  const std::string problem = sut.Run();
  const std::string violation = sut.Check();

  std::cout << "fleet stress: " << sut.Summary() << ", seed " << seed << std::endl;
  std::cout << "availability: " << sut.AvailabilitySummary() << ", seed " << seed << std::endl;
  if (!sut.duplicate_details().empty()) {
    std::cout << sut.duplicate_details() << "\nthe daemons' claims:\n"
              << sut.ClaimLines() << std::endl;
  }
  const std::string context = sut.Summary() + "\nseed " + std::to_string(seed) + "\n" +
                              sut.duplicate_details() + "\ntimeline:\n" + sut.Timeline();
  EXPECT_EQ(problem, "") << context;
  EXPECT_EQ(violation, "") << context;
  EXPECT_GE(sut.ids(), size.min_ids) << context;
  EXPECT_GT(sut.ids(), 0u) << context;
  for (int k = 0; k < kFaultKinds; ++k) {
    EXPECT_GE(sut.count(static_cast<Fault>(k)), 1) << kFaultNames[k] << "\n" << context;
  }
  EXPECT_GT(sut.total_faults(), kFaultKinds) << context;
  EXPECT_GE(sut.takeovers(), 1) << context;
  EXPECT_EQ(sut.broken_promise(), "") << sut.AvailabilitySummary() << "\n" << context;
  if (!sut.other_exit_example().empty()) {
    std::cout << "a daemon exited for another reason: " << sut.other_exit_example() << std::endl;
  }
}

}  // namespace
}  // namespace snowflake
