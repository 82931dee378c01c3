// The fleet simulation's own view of etcd (fleet_sim.cc), beside the register it measures
// and independent of it: each member's /metrics, the register's whole history through a
// watch from revision 1, and plain gateway calls for the planted faults and the end marker.
// Over etcd 3.4's JSON gateway on loopback, with libcurl.
//
// Plain functions; each call uses its own connection: safe from any thread.

#ifndef SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_ETCD_H_
#define SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_ETCD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>

#include "fleet_history.h"

namespace snowflake::testing {

// One member's metrics: every sample summed over its labels by name, and the gRPC calls
// started, by method (what the gateway's requests became inside the member).
struct MemberMetrics {
  std::map<std::string, double> by_name;
  std::map<std::string, double> started_by_method;

  double Get(const std::string& name) const {
    const auto it = by_name.find(name);
    return it == by_name.end() ? 0.0 : it->second;
  }
};

// GETs <client_url>/metrics. Errors: no answer, or not Prometheus text.
tl::expected<MemberMetrics, std::string> ScrapeMetrics(const std::string& client_url);

// POSTs `body` to <client_url><path> ("/v3/kv/put") and returns the answer. Errors: no
// answer, an HTTP status other than 200, or not JSON (each with what etcd said).
tl::expected<nlohmann::json, std::string> GatewayPost(const std::string& client_url,
                                                      const std::string& path,
                                                      const nlohmann::json& body);

// Streams every event under `prefix` from revision 1 into `sink`, in etcd's order, until
// the event that puts `end_key` (also passed to `sink`). Returns the events read. Started
// before the keys are written, the watch stays in step with etcd and gets each event as it
// commits; started late, etcd 3.4 sends an old history only about 1,000 revisions per
// 100 ms, re-reading the rest each time. Errors: the watch could not start, etcd cancelled
// it (a compacted history), a line that is not a watch answer, `*cancel` was set, or
// `timeout` passed first.
tl::expected<uint64_t, std::string> ReadHistory(
    const std::string& client_url, const std::string& prefix, const std::string& end_key,
    const std::function<void(const HistoryEvent&)>& sink, std::chrono::seconds timeout,
    const std::atomic<bool>* cancel);

// The end of etcd's range for every key starting with `prefix`.
std::string PrefixEnd(std::string prefix);

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FLEET_SIM_ETCD_H_
