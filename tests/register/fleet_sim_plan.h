// What the fleet simulation's coordinator and its worker processes agree on
// (fleet_sim.cc, fleet_sim_worker.h): which host belongs to which fleet and process, the
// fleets' prefixes and number ranges, and the latency histogram a worker reports.
//
// One etcd cluster carries several fleets: a fleet is one register prefix, and its IDs
// have 10 machine bits (shm/include/snowflake/id_layout.h), so at most 1,024 hosts share
// one prefix. Host h belongs to fleet h / fleet_size; each fleet may claim the numbers 0 to
// its hosts + spare_numbers - 1, so a host that restarts finds only a few numbers free and
// takes over one whose lease ended (the path the fencing protects).
//
// Plain values: safe to copy and read from any thread.

#ifndef SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_PLAN_H_
#define SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_PLAN_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace snowflake::testing {

// The reservation service's schedule as daemon/daemon.cc sets it (Daemon::ReservationMs
// and renew_ahead_ms): the longer of persistence.reservation_ms and the register's
// mark_reservation_ms, renewed when half of the register's window is left, or three
// quarters of the state file's.
struct RaiseSchedule {
  int64_t reservation_ms = 0;
  int64_t renew_ahead_ms = 0;
  static RaiseSchedule Of(int64_t reservation_ms, int64_t mark_reservation_ms) {
    if (mark_reservation_ms > reservation_ms) {
      return {mark_reservation_ms, std::max<int64_t>(1, mark_reservation_ms / 2)};
    }
    return {reservation_ms, std::max<int64_t>(1, reservation_ms * 3 / 4)};
  }
  // How often each serving host raises its mark.
  int64_t period_ms() const { return reservation_ms - renew_ahead_ms; }
};

struct FleetPlan {
  int hosts = 0;
  int fleet_size = 1000;  // hosts per prefix; fleet_size + spare_numbers <= 1024
  int spare_numbers = 8;
  // Hosts that run alone in a process of their own, so that a crash (SIGKILL) takes only
  // them, as a host's daemon dies: hosts 0, s, 2s, ... (s = hosts / churn_hosts).
  int churn_hosts = 0;
  std::string root = "/fleet-sim/";

  int fleets() const { return (hosts + fleet_size - 1) / fleet_size; }
  int FleetOf(int host) const { return host / fleet_size; }
  int HostsIn(int fleet) const { return std::min(fleet_size, hosts - fleet * fleet_size); }
  std::string Prefix(int fleet) const { return root + "f" + std::to_string(fleet) + "/"; }
  uint32_t LastMachine(int fleet) const {
    return static_cast<uint32_t>(HostsIn(fleet) + spare_numbers - 1);
  }
  // Written once every process has stopped: the watch that reads the history ends there.
  std::string EndKey() const { return root + "end"; }

  int ChurnStride() const { return churn_hosts > 0 ? std::max(1, hosts / churn_hosts) : 0; }
  bool IsChurn(int host) const {
    const int stride = ChurnStride();
    return stride > 0 && host % stride == 0 && host / stride < churn_hosts;
  }
  std::vector<int> ChurnHosts() const {
    std::vector<int> out;
    for (int h = 0; h < hosts; ++h) {
      if (IsChurn(h)) out.push_back(h);
    }
    return out;
  }
  // The hosts of worker process `worker` of `processes`: every other host, dealt in turn.
  std::vector<int> HostsOfWorker(int worker, int processes) const {
    std::vector<int> out;
    int stable = 0;
    for (int h = 0; h < hosts; ++h) {
      if (IsChurn(h)) continue;
      if (stable++ % processes == worker) out.push_back(h);
    }
    return out;
  }
  // The holder id of host h in its generation (a crashed host comes back as a new holder).
  static std::string Holder(int host, int generation) {
    return "sim-host-" + std::to_string(host) + "-g" + std::to_string(generation);
  }
};

// Latencies in buckets 2 % wide from 1 µs to about 1,000 s: a worker adds each call, the
// coordinator merges the workers' and reads percentiles (within 2 %).
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 1100;

  void Add(double micros) {
    const int i = micros <= 1.0 ? 0 : static_cast<int>(std::log(micros) / std::log(kGrowth)) + 1;
    ++counts_[std::min(i, kBuckets - 1)];
    ++total_;
  }
  void Merge(const LatencyHistogram& other) {
    for (int i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
    total_ += other.total_;
  }
  uint64_t total() const { return total_; }
  // The upper bound of the bucket holding the q-th quantile (0 < q <= 1); 0 when empty.
  double Quantile(double q) const {
    if (total_ == 0) return 0;
    const uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= std::max<uint64_t>(rank, 1)) return std::pow(kGrowth, i);
    }
    return std::pow(kGrowth, kBuckets - 1);
  }
  // [[bucket, count], ...] for the buckets in use.
  nlohmann::json ToJson() const {
    nlohmann::json out = nlohmann::json::array();
    for (int i = 0; i < kBuckets; ++i) {
      if (counts_[i] != 0) out.push_back({i, counts_[i]});
    }
    return out;
  }
  static LatencyHistogram FromJson(const nlohmann::json& j) {
    LatencyHistogram h;
    for (const auto& pair : j) {
      const int i = pair.at(0).get<int>();
      const uint64_t n = pair.at(1).get<uint64_t>();
      if (i >= 0 && i < kBuckets) {
        h.counts_[i] += n;
        h.total_ += n;
      }
    }
    return h;
  }

 private:
  static constexpr double kGrowth = 1.02;
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_PLAN_H_
