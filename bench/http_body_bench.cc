// The HTTP front's batch serialiser alone (protocol/id_reply.h: AppendIdsBody), for
// /v1/ids bodies of 1, 64 and 4096 IDs in JSON and text/plain, beside two baselines from
// the same run:
//   - PerIdToString: the body built as the front built it before, one std::to_string
//     (one temporary string) per ID appended to a growing std::string;
//   - MemcpyFloor: a copy of a finished body of the same size, the floor of writing it.
// `per_id` is the time per ID (seconds, with an SI prefix: 3.1n = 3.1 ns), and
// items_per_second the IDs per second. The IDs are realistic (17 digits, increasing).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/id_reply.h"

namespace {

using snowflake::protocol::AppendIdsBody;
using snowflake::protocol::IdsFormat;

std::vector<uint64_t> Ids(size_t count) {
  std::vector<uint64_t> ids(count);
  for (size_t i = 0; i < count; ++i) ids[i] = 28130156314628096u + i;
  return ids;
}

void Count(benchmark::State& state, size_t count) {
  const double ids = static_cast<double>(count);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * count));
  state.counters["per_id"] = benchmark::Counter(
      ids, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

IdsFormat FormatOf(benchmark::State& state) {
  return state.range(1) == 0 ? IdsFormat::kJsonBatch : IdsFormat::kText;
}

// The serialiser, into a reply buffer reused across requests as a serving thread would.
void BM_AppendIdsBody(benchmark::State& state) {
  const auto ids = Ids(static_cast<size_t>(state.range(0)));
  const IdsFormat format = FormatOf(state);
  std::string body;
  for (auto _ : state) {
    body.clear();
    AppendIdsBody(ids, format, body);
    benchmark::DoNotOptimize(body.data());
    benchmark::ClobberMemory();
  }
  Count(state, ids.size());
}

// Baseline: the previous way, one std::to_string per ID into a fresh string.
void BM_PerIdToString(benchmark::State& state) {
  const auto ids = Ids(static_cast<size_t>(state.range(0)));
  const bool text = FormatOf(state) == IdsFormat::kText;
  for (auto _ : state) {
    std::string body;
    body.reserve(ids.size() * 22 + 16);
    if (text) {
      for (const uint64_t id : ids) {
        body += std::to_string(id);
        body += '\n';
      }
    } else {
      body = "{\"ids\":[";
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) body += ',';
        body += '"';
        body += std::to_string(ids[i]);
        body += '"';
      }
      body += "]}";
    }
    benchmark::DoNotOptimize(body.data());
    benchmark::ClobberMemory();
  }
  Count(state, ids.size());
}

// Floor: copying a finished body of the same bytes into the reused buffer.
void BM_MemcpyFloor(benchmark::State& state) {
  const auto ids = Ids(static_cast<size_t>(state.range(0)));
  std::string finished;
  AppendIdsBody(ids, FormatOf(state), finished);
  std::string body(finished.size(), '\0');
  for (auto _ : state) {
    std::memcpy(body.data(), finished.data(), finished.size());
    benchmark::DoNotOptimize(body.data());
    benchmark::ClobberMemory();
  }
  Count(state, ids.size());
}

// Args: {IDs, format (0 JSON, 1 text)}.
void Shapes(benchmark::internal::Benchmark* b) {
  for (const int64_t format : {0, 1}) {
    for (const int64_t count : {1, 64, 4096}) b->Args({count, format});
  }
  b->ArgNames({"ids", "text"});
}

BENCHMARK(BM_AppendIdsBody)->Apply(Shapes);
BENCHMARK(BM_PerIdToString)->Apply(Shapes);
BENCHMARK(BM_MemcpyFloor)->Apply(Shapes);

}  // namespace

BENCHMARK_MAIN();
