// The etcd register's costs against an etcd the caller runs (SNOWFLAKE_ETCD_ENDPOINTS,
// comma-separated client URLs; skipped with a message without it), next to the baseline
// the file backend pays for the same step, measured in the same run:
//   - BM_EtcdClaim: a fresh EtcdRegister's Claim (lease grant, fleet txn, two ranges, the
//     claim txn) and its release (lease revoke) -- the start-up cost;
//   - BM_EtcdRaise: one committed high-water raise (a txn comparing the lease) -- the
//     renewal latency; p50/p99 come from --benchmark_repetitions and the report;
//   - BM_LocalReservation: the baseline, one fsync'd high-water file save (what every
//     reservation costs with the file register).
// Report: time per call (real time: the calls wait on the network and the disk).

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/etcd_register.h"
#include "daemon/high_water_store.h"

namespace {

std::vector<std::string> Endpoints() {
  std::vector<std::string> out;
  const char* env = std::getenv("SNOWFLAKE_ETCD_ENDPOINTS");
  if (env == nullptr) return out;
  std::string all = env;
  size_t start = 0;
  while (start <= all.size()) {
    const size_t comma = all.find(',', start);
    const std::string one = all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!one.empty()) out.push_back(one);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

snowflake::EtcdRegisterOptions Options(const std::string& prefix) {
  snowflake::EtcdRegisterOptions o;
  o.client.endpoints = Endpoints();
  o.prefix = prefix;
  o.host = "bench";
  return o;
}

constexpr int64_t kEpoch = snowflake::kDefaultEpochUnixMs;

void BM_EtcdClaim(benchmark::State& state) {
  if (Endpoints().empty()) {
    state.SkipWithError("set SNOWFLAKE_ETCD_ENDPOINTS to an etcd's client URLs");
    return;
  }
  int i = 0;
  for (auto _ : state) {
    snowflake::EtcdRegister reg(Options("/bench/claim/"));
    auto claim = reg.Claim({"bench-" + std::to_string(i++ % 64), kEpoch});
    if (!claim) {
      state.SkipWithError(claim.error().message.c_str());
      return;
    }
  }
}
BENCHMARK(BM_EtcdClaim)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_EtcdRaise(benchmark::State& state) {
  if (Endpoints().empty()) {
    state.SkipWithError("set SNOWFLAKE_ETCD_ENDPOINTS to an etcd's client URLs");
    return;
  }
  snowflake::EtcdRegister reg(Options("/bench/raise/"));
  auto claim = reg.Claim({"bench-raise", kEpoch});
  if (!claim) {
    state.SkipWithError(claim.error().message.c_str());
    return;
  }
  int64_t mark = claim->high_water_unix_ms + 1;
  for (auto _ : state) {
    auto raised = reg.UpdateHighWater(++mark);
    if (!raised) {
      state.SkipWithError(raised.error().message.c_str());
      return;
    }
  }
}
BENCHMARK(BM_EtcdRaise)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_LocalReservation(benchmark::State& state) {
  char pattern[] = "/tmp/snowflake-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) std::abort();
  const std::filesystem::path dir = pattern;
  snowflake::HighWaterStore store(dir / "high-water.json");
  int64_t mark = kEpoch;
  for (auto _ : state) {
    auto saved = store.Save(snowflake::HighWaterState{.machine = 1,
                                                      .epoch_unix_ms = kEpoch,
                                                      .reserved_through_unix_ms = ++mark,
                                                      .last_issued_unix_ms_at_clean_stop = {},
                                                      .segment_path = {},
                                                      .segment_incarnation = 0});
    if (!saved) {
      state.SkipWithError(saved.error().message.c_str());
      break;
    }
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LocalReservation)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
