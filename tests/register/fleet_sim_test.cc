// The fleet simulation (fleet_sim.cc) as tests: 1,000 simulated hosts claim at once through
// the etcd register on a real 3-member cluster, raise their marks on the daemon's schedule
// while churn hosts crash and come back as new holders, and the register's history, read
// back from revision 1, must show
//   (1) no machine number held by two holders at once (nor one lease on two numbers, nor a
//       mark written under a lease that no longer binds its number), and
//   (2) no mark moving down.
// The checker is proven able to fail by two runs that plant a fault behind the register's
// back (a mark lowered; a held number given to a second holder): each must end with exit
// status 1 naming exactly the planted write. The checker on its own is fleet_history_test.
//
// Bounded by count and time: the run's size is asserted (hosts, claims, crashes, a
// takeover), not its speed; fleet_sim prints the seed (SNOWFLAKE_STRESS_SEED repeats it)
// and its summary, which this test passes through.

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.h"
#include "test_paths.h"

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;

#ifdef SNOWFLAKE_SANITIZED
constexpr int kHosts = 200;
#else
constexpr int kHosts = 1000;
#endif

// "--a 1 --b 2" as its words.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

struct SimRun {
  ExitStatus status;
  nlohmann::json report;
  std::string summary;
};

SimRun RunSim(std::vector<std::string> args, std::chrono::milliseconds timeout) {
  args.insert(args.begin(), BinaryPath("tests/register/fleet_sim"));
  RunOptions options;
  options.timeout = timeout;
  const RunResult run = RunCommand(args, options);
  std::cerr << run.err;  // the seed, the progress and the summary
  SimRun out{run.status, nlohmann::json::parse(run.out, nullptr, false), run.err};
  EXPECT_FALSE(run.timed_out) << "fleet_sim did not end within " << timeout.count() << " ms";
  return out;
}

TEST(FleetSim, NoNumberHeldTwiceAndNoMarkDownWhileAThousandHostsClaimRaiseAndCrash) {
  // Sized to end within about two minutes on 2 cores; the bench (scripts/bench) runs
  // 10,000 hosts and bench/README.md, "The fleet simulation", reads what they cost:
  //   - one fleet of 1,000 on one prefix, every host claiming at once (the storm): a claim
  //     reads a window of the prefix, never all of it, so a full fleet comes up in seconds;
  //   - the daemon's defaults: persistence.reservation_ms 1000 and the etcd mark's window
  //     of 30 s, raised every 15 s per host;
  //   - the ramp after the storm waits up to 240 s for the last hosts: a loaded machine
  //     makes the run slower, not smaller;
  //   - no spare number: every host that comes back after a crash waits for a lease to end
  //     and takes its number over, the path the fencing exists for.
  const SimRun run =
      RunSim(Words("--hosts " + std::to_string(kHosts) + " --fleet-size " + std::to_string(kHosts) +
                   " --spare-numbers 0 --churn-hosts 8"
                   " --crashes-per-min 60 --storm-timeout-s 120"
                   " --ramp-timeout-s 240 --settle-s 1 --steady-s 20"),
             560s);
  ASSERT_TRUE(run.report.is_object()) << "no report; " << run.status.ToString();
  const auto& history = run.report["history"];
  EXPECT_TRUE(run.status.ExitedWith(0)) << run.status.ToString() << "\n"
                                        << history["violations"].dump(2);
  EXPECT_EQ(history["violation_count"], 0) << history["violations"].dump(2);
  // The run was the size it says.
  EXPECT_EQ(run.report["fleet_sim_hosts"], kHosts) << run.report["bounded_by"];
  EXPECT_EQ(run.report["storm"]["ramp"]["unclaimed"], 0);
  EXPECT_GE(history["claims"].get<int>(), kHosts);
  // A raise at each claim, and one more per host 15 s later.
  EXPECT_GE(history["mark_writes"].get<int>(), 2 * kHosts);
  EXPECT_GE(run.report["churn"]["crashes"].get<int>(), 5);
  // A crashed holder's number taken over by another holder above its mark: the path the
  // fencing exists for.
  EXPECT_GE(history["takeovers"].get<int>(), 1);
}

// A planted run: fleet_sim must exit 1 and name the planted write, and nothing else.
void ExpectCaught(const std::string& plant, const std::string& kind) {
  const SimRun run = RunSim(
      Words("--hosts 40 --churn-hosts 2 --crashes-per-min 0 --steady-s 6 --storm-timeout-s 60"
            " --ramp-timeout-s 60 --plant " +
            plant),
      240s);
  ASSERT_TRUE(run.report.is_object()) << "no report; " << run.status.ToString();
  const auto& planted = run.report["planted"];
  ASSERT_EQ(planted.value("kind", ""), kind) << planted.dump();
  EXPECT_TRUE(run.status.ExitedWith(1)) << run.status.ToString();
  const auto& violations = run.report["history"]["violations"];
  ASSERT_FALSE(violations.empty()) << "the checker missed the planted " << plant;
  for (const auto& v : violations) {
    EXPECT_EQ(v["kind"], kind) << v.dump();
    EXPECT_EQ(v["key"], planted["key"]) << v.dump();
    EXPECT_EQ(v["revision"], planted["revision"]) << v.dump();
  }
}

TEST(FleetSim, CatchesAMarkLoweredBehindTheRegistersBack) {
  ExpectCaught("lower-mark", "mark_down");
}

TEST(FleetSim, CatchesAHeldNumberGivenToASecondHolder) {
  ExpectCaught("double-holder", "double_holder");
}

}  // namespace
}  // namespace snowflake::testing
