// The etcd register's costs against an etcd the caller runs (SNOWFLAKE_ETCD_ENDPOINTS,
// comma-separated client URLs), next to the baseline the file backend pays for the same
// step, measured in the same run. Two ways to run it:
//
//   etcd_register_bench latencies [--claims N] [--raises N]     (scripts/bench)
//     prints one JSON object of per-call samples: "claim_ms" (a fresh EtcdRegister's
//     Claim: lease grant, fleet txn, two ranges, the claim txn: a daemon's start-up
//     cost), "raise_us" (one committed high-water raise, a txn comparing the lease: the
//     etcd half of every reservation renewal) and "local_reservation_us" (the baseline:
//     one fsync'd high-water file save, what every renewal costs with the file register
//     and the other half of a renewal with etcd). scripts/bench reports p50/p99.
//
//   etcd_register_bench [Google Benchmark flags]
//     the same three as benchmarks (BM_EtcdClaim, BM_EtcdRaise, BM_LocalReservation):
//     mean time per call, real time (the calls wait on the network and the disk).

#include <benchmark/benchmark.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/core/high_water_store.h"
#include "register/etcd_register.h"

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

snowflake::reg::EtcdRegisterOptions Options(const std::string& prefix) {
  snowflake::reg::EtcdRegisterOptions o;
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
    snowflake::reg::EtcdRegister reg(Options("/bench/claim/"));
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
  snowflake::reg::EtcdRegister reg(Options("/bench/raise/"));
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
  snowflake::daemon::HighWaterStore store(dir / "high-water.json");
  int64_t mark = kEpoch;
  for (auto _ : state) {
    auto saved = store.Save(snowflake::daemon::HighWaterState{.machine = 1,
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

double ElapsedUs(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string JsonArray(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    char number[32];
    std::snprintf(number, sizeof(number), "%s%.3f", i == 0 ? "" : ",", values[i]);
    out += number;
  }
  return out + "]";
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "etcd_register_bench: %s\n", why.c_str());
  std::exit(1);
}

// Per-call samples as JSON on stdout (see the top of this file).
int Latencies(int claims, int raises) {
  if (Endpoints().empty()) Die("set SNOWFLAKE_ETCD_ENDPOINTS to an etcd's client URLs");
  std::vector<double> claim_ms;
  for (int i = 0; i < claims; ++i) {
    const auto start = std::chrono::steady_clock::now();
    snowflake::reg::EtcdRegister reg(Options("/bench/claim/"));
    auto claim = reg.Claim({"bench-claim-" + std::to_string(i % 64), kEpoch});
    claim_ms.push_back(ElapsedUs(start) / 1000.0);
    if (!claim) Die(claim.error().message);
    // The destructor revokes the lease (not timed): the number is free for the next one.
  }
  std::vector<double> raise_us;
  {
    snowflake::reg::EtcdRegister reg(Options("/bench/raise/"));
    auto claim = reg.Claim({"bench-raise", kEpoch});
    if (!claim) Die(claim.error().message);
    int64_t mark = std::max<int64_t>(claim->high_water_unix_ms, kEpoch);
    for (int i = 0; i < raises; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto raised = reg.UpdateHighWater(++mark);
      raise_us.push_back(ElapsedUs(start));
      if (!raised) Die(raised.error().message);
    }
  }
  std::vector<double> local_us;
  {
    char pattern[] = "/tmp/snowflake-bench-XXXXXX";
    if (mkdtemp(pattern) == nullptr) Die(std::string("mkdtemp: ") + std::strerror(errno));
    const std::filesystem::path dir = pattern;
    snowflake::daemon::HighWaterStore store(dir / "high-water.json");
    int64_t mark = kEpoch;
    for (int i = 0; i < raises; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto saved = store.Save(snowflake::daemon::HighWaterState{.machine = 1,
                                                        .epoch_unix_ms = kEpoch,
                                                        .reserved_through_unix_ms = ++mark,
                                                        .last_issued_unix_ms_at_clean_stop = {},
                                                        .segment_path = {},
                                                        .segment_incarnation = 0});
      local_us.push_back(ElapsedUs(start));
      if (!saved) Die(saved.error().message);
    }
    std::filesystem::remove_all(dir);
  }
  std::printf("{\"claim_ms\": %s,\n \"raise_us\": %s,\n \"local_reservation_us\": %s}\n",
              JsonArray(claim_ms).c_str(), JsonArray(raise_us).c_str(),
              JsonArray(local_us).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "latencies") == 0) {
    int claims = 50;
    int raises = 500;
    CLI::App app{
        "etcd_register_bench latencies: claim, raise and local reservation latencies "
        "against a real etcd, as JSON"};
    app.add_option("--claims", claims, "claims to time")->check(CLI::Range(1, 1'000'000));
    app.add_option("--raises", raises, "raises to time")->check(CLI::Range(1, 1'000'000));
    // argv[1] is the mode's name, not an argument of it.
    CLI11_PARSE(app, argc - 1, argv + 1);
    return Latencies(claims, raises);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
