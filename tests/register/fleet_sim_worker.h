// One process of the fleet simulation (fleet_sim.cc): many simulated hosts, each driving
// its own EtcdRegister (register/etcd_register.h) exactly as snowflaked's reservation
// service does, on a small pool of threads.
//
// Each host has its own holder id, its own host-wide lock directory (as a host of its own
// would), its own lease (the register's keepalive thread, one per claim as in the daemon)
// and endpoints in an order of its own (the members share the connections). It:
//   - claims once the coordinator says go (SIGUSR1; every host at once: the storm), the
//     way the daemon does: an unreachable register is retried with the daemon's backoff
//     (util/backoff.h, 200 ms doubling to 5 s), kEpochMismatch, kRolledBack and kInUse end
//     the host (the daemon exits 78 or 2, which systemd does not restart), any other error
//     restarts it after restart_delay_ms (exit 1, systemd's RestartSec=1s) with a new
//     register object. A host claims on a thread of its own, which ends once it has (the
//     register's keepalive thread carries on): every host at once in the storm, or at most
//     storm_concurrency Claim() calls in flight;
//   - then follows daemon/core/reservation_service.cc's schedule on the pool: the first
//     raise at once, then a raise to (clock + reservation_ms) whenever the clock comes
//     within renew_ahead_ms (3/4 of reservation_ms, daemon/daemon.cc) of the confirmed
//     horizon, a failed raise retried after 100 ms, and Renew() every second; a lost
//     claim restarts the host after restart_delay_ms under the same holder id, with what
//     its state file would say (its number, reservation and the store it saw), as the
//     daemon does after exit 1, again on a thread of its own, never on the pool.
// It writes no state file and no clean stop (the simulation checks that no mark ever goes
// down; a clean stop is the one write allowed to lower one).
//
// The protocol with the coordinator: the worker prints "ready" once its hosts and threads
// are set up; SIGUSR1 = go (the storm's start is read from the go file, CLOCK_MONOTONIC ns,
// so every process times its claims from one instant), and a second SIGUSR1 ends the storm:
// hosts that have not claimed yet wait for one of ramp_concurrency slots before each
// Claim() call from then on; SIGUSR2 opens, and a second one
// closes, the steady-state window; SIGTERM ends it: one line "report {json}" on stdout and
// exit 0, leaving its leases to expire. Each host prints "claimed <ms> machine <n>" the
// moment its first claim returns (the coordinator counts them; a churn host, which the
// coordinator SIGKILLs to crash, leaves no other record), or "out <host>" if it ended for
// good.

#ifndef SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_WORKER_H_
#define SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_WORKER_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fleet_sim_plan.h"

namespace snowflake::testing {

struct WorkerOptions {
  FleetPlan plan;
  // A worker process runs the hosts HostsOfWorker(worker_index, processes) ...
  int worker_index = 0;
  int processes = 1;
  // ... or, when set, this one churn host alone, as holder `generation`.
  std::optional<int> churn_host;
  int generation = 0;
  // A churn host started again after a crash claims at once, timing from its start.
  bool go_at_once = false;

  std::vector<std::string> endpoints;
  int64_t lease_ttl_s = 10;       // register.etcd.lease_ttl_s
  int64_t reservation_ms = 1000;  // persistence.reservation_ms
  // register.etcd.mark_reservation_ms (the daemon's default; 0: the mark follows
  // reservation_ms). The schedule is RaiseSchedule::Of the two.
  int64_t mark_reservation_ms = 30'000;
  int64_t request_timeout_ms = 3000;
  int64_t connect_timeout_ms = 1000;
  int restart_delay_ms = 1000;  // systemd's RestartSec=1s
  int threads =
      0;  // the pool that drives the hosts after their claim; 0: one per host, at most 1,024
  // Claim() calls in flight in this process during the storm; 0: every host at once.
  int storm_concurrency = 0;
  // ... and after the coordinator ends the storm (a second SIGUSR1), for the hosts that have
  // not claimed yet: they come up in a ramp instead (0: no limit).
  int ramp_concurrency = 4;
  std::filesystem::path lock_root;  // host h locks its numbers in lock_root/h<h>
  std::filesystem::path go_file;
  uint64_t seed = 0;
};

// Runs the worker until SIGTERM; never returns normally (exits 0 after its report).
// Returns non-zero with a message on stderr if it cannot start.
int RunWorker(const WorkerOptions& options);

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_WORKER_H_
