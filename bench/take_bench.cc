// take_bench: one thread taking IDs from a running snowflaked, next to the in-process
// baselines (baselines.h) and the hardware floors, all measured the same way in one run.
//
//   take_bench --runtime-dir=DIR [--bursts=N] [Google Benchmark flags]
//
// Every benchmark is a series of timed bursts (one Google Benchmark iteration = one
// burst, manual time). Before each burst, outside the timed region:
// - the generators wait for a fresh millisecond and then take kBurst = 4000 IDs, below
//   the 4,096-per-ms cap, so the cap's wait never enters the figure;
// - the ring takers wait until the daemon has published up to kBurst IDs (the ring is
//   read with a second consumer mapping) and take exactly what is there, so every timed
//   take finds the ring non-empty.
// The counter ns_per_id is the timed nanoseconds over the IDs taken; ids_per_burst says
// how large the bursts really were.
//
// Floors: floor/lock_cmpxchg is one uncontended `lock cmpxchg` on a private line (the
// least a take that claims by CAS can cost); floor/cas_and_fetch_add adds the relaxed
// fetch_add on a second line that Client::Next() does for per-service counts;
// floor/cas_and_store replaces the fetch_add with the plain relaxed store to a thread's
// own counter lane that Client::Next() does now; floor/clock_realtime is one
// CLOCK_REALTIME read (what every baseline call pays); floor/clock_coarse one
// CLOCK_REALTIME_COARSE read (what the freshness check of every take pays).
// take_1t/ring is the raw TryTake (no count, no freshness check); take_1t/ring_fresh is
// TryTakeFresh, the same plus the freshness check: their difference is its cost.
//
// Cold batches: batch_4096_cold/client takes 4,096 IDs with Client::NextBatch (called with
// the span still missing after each short batch) from an idle daemon: before each burst,
// untimed, it waits until the daemon's fill target is back at its idle value and no ID was
// taken for over a second (the daemon is then dormant: it holds no IDs). The timed region
// is the whole batch, refills included. Its baseline, batch_4096_cold/unhinted, is the
// same batch through the previous release's protocol (RingConsumer takes, and refill
// requests without a size hint), measured the same way in the same run. Their counters
// calls_per_batch (NextBatch calls) and waits_per_batch (refill requests of the baseline)
// say how many answers of the daemon a batch took.

#include <benchmark/benchmark.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tl/expected.hpp>
#include <vector>

#include "baselines.h"
#include "protocol/control_client.h"
#include "snowflake/client.h"
#include "snowflake/ring_consumer.h"

namespace {

using snowflake::bench::KeepValue;
using snowflake::bench::MonotonicNs;
using snowflake::bench::RealtimeMs;
using snowflake::bench::WaitForMsAfter;

constexpr size_t kBurst = 4000;

using snowflake::shm::RingConsumer;

// The ring with its consumer region, attached as a client attaches (the control protocol's
// "attach", docs/control-protocol.md, through its one client end): retries a busy or
// starting daemon and a segment replaced in between, for up to 10 s.
tl::expected<RingConsumer, std::string> AttachRing(const std::string& runtime_dir) {
  return snowflake::protocol::AttachConsumer(runtime_dir, std::chrono::seconds(10));
}

// Waits (untimed) until the ring holds `want` IDs, or until it stopped growing for 3 ms
// (the daemon's fill target may be below `want`). Returns how many the next burst may
// take without finding the ring empty; never 0.
size_t AwaitFill(const snowflake::shm::RingConsumer& ring, snowflake::Client& client,
                 size_t want) {
  for (;;) {
    const int64_t start = MonotonicNs();
    int64_t last_change = start;
    uint64_t last = ring.size();
    while (last < want) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      const uint64_t now_size = ring.size();
      const int64_t now = MonotonicNs();
      if (now_size != last) {
        last = now_size;
        last_change = now;
      }
      if (now - last_change > 3'000'000 || now - start > 20'000'000) break;
    }
    if (last > 0) return std::min<size_t>(last, want);
    // An empty ring the daemon does not top up by itself: one untimed take asks for a
    // refill through the slow path.
    (void)client.Next();
  }
}

// Runs the timed bursts: `prepare()` (untimed) returns how many IDs the burst takes;
// `take()` takes some and returns how many; 0 ends the burst early.
template <typename Prepare, typename Take>
void RunBursts(benchmark::State& state, Prepare prepare, Take take) {
  int64_t total_ns = 0;
  int64_t total_ids = 0;
  for (auto _ : state) {
    const size_t want = prepare();
    size_t got = 0;
    const int64_t start = MonotonicNs();
    while (got < want) {
      const size_t n = take(want - got);
      if (n == 0) break;  // only the raw ring taker: the daemon drained at a ms boundary
      got += n;
    }
    const int64_t elapsed = MonotonicNs() - start;
    state.SetIterationTime(static_cast<double>(elapsed) * 1e-9);
    total_ns += elapsed;
    total_ids += static_cast<int64_t>(got);
  }
  state.counters["ns_per_id"] = static_cast<double>(total_ns) / static_cast<double>(total_ids);
  state.counters["ids_per_burst"] =
      static_cast<double>(total_ids) / static_cast<double>(state.iterations());
}

constexpr size_t kColdBatch = 4096;

// Waits (untimed) until the daemon is idle again: its fill target back at `idle_target`
// and, after that, kQuiet without a take (the daemon's demand window and its dormancy
// are both one second of no takes). Returns kColdBatch, the burst's size.
size_t AwaitIdle(const snowflake::shm::RingConsumer& ring, uint64_t idle_target) {
  constexpr auto kQuiet = std::chrono::milliseconds(1100);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::this_thread::sleep_for(kQuiet);
  while (ring.header().fill_target.load(std::memory_order_relaxed) > idle_target &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return kColdBatch;
}

// A fresh millisecond per burst keeps a generator's kBurst IDs under the per-ms cap.
size_t FreshMillisecond() {
  WaitForMsAfter(RealtimeMs());
  return kBurst;
}

struct Context {
  std::optional<snowflake::Client> client;
  std::optional<snowflake::shm::RingConsumer> ring;
};

void Abort(std::string_view what) {
  std::fprintf(stderr, "take_bench: %.*s\n", static_cast<int>(what.size()), what.data());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Google Benchmark has taken its --benchmark_... flags out of argv; the rest are ours.
  std::string runtime_dir;
  int bursts = 300;
  int cold_bursts = 5;
  CLI::App app{"take_bench: takes from a running daemon's ring (Google Benchmark)"};
  app.add_option("--runtime-dir", runtime_dir, "the daemon's runtime directory")->required();
  app.add_option("--bursts", bursts, "bursts per benchmark")->check(CLI::Range(1, 1'000'000));
  app.add_option("--cold-bursts", cold_bursts,
                 "bursts per cold-batch benchmark (each waits over a second for an idle daemon)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  static Context context;
  snowflake::ClientOptions options;
  options.runtime_dir = runtime_dir;
  auto client = snowflake::Client::Open("bench-take", options);
  if (!client) Abort(client.error().message);
  context.client.emplace(std::move(*client));
  auto ring = AttachRing(runtime_dir);
  if (!ring) Abort(ring.error());
  context.ring.emplace(std::move(*ring));

  // The daemon's idle fill target, read before this run takes anything.
  const uint64_t idle_target = context.ring->header().fill_target.load(std::memory_order_relaxed);

  auto fill = [](size_t want) {
    return [want] { return AwaitFill(*context.ring, *context.client, want); };
  };
  auto next_one = [](size_t) -> size_t {
    auto id = context.client->Next();
    if (!id) Abort(id.error().message);
    KeepValue(*id);
    return 1;
  };

  std::vector<benchmark::internal::Benchmark*> registered;
  registered.push_back(benchmark::RegisterBenchmark("take_1t/client", [&](benchmark::State& s) {
    RunBursts(s, fill(kBurst), next_one);
  }));
  registered.push_back(benchmark::RegisterBenchmark("take_1t/ring", [&](benchmark::State& s) {
    RunBursts(s, fill(kBurst), [](size_t) -> size_t {
      uint64_t id = 0;
      // The daemon drains the previous millisecond's IDs at each boundary; a burst that
      // meets one ends there (the client benchmark takes the slow path instead).
      if (!context.ring->TryTake(&id)) return 0;
      KeepValue(id);
      return 1;
    });
  }));
  registered.push_back(benchmark::RegisterBenchmark("take_1t/ring_fresh", [&](benchmark::State& s) {
    RunBursts(s, fill(kBurst), [](size_t) -> size_t {
      uint64_t id = 0;
      if (context.ring->TryTakeFresh(&id) != snowflake::shm::TakeResult::kTaken) return 0;
      KeepValue(id);
      return 1;
    });
  }));
  registered.push_back(benchmark::RegisterBenchmark("take_1t/mutex", [](benchmark::State& s) {
    snowflake::bench::MutexSnowflake generator(1);
    RunBursts(s, FreshMillisecond, [&](size_t) -> size_t {
      KeepValue(generator.Next());
      return 1;
    });
  }));
  registered.push_back(benchmark::RegisterBenchmark("take_1t/cas", [](benchmark::State& s) {
    snowflake::bench::CasSnowflake generator(1);
    RunBursts(s, FreshMillisecond, [&](size_t) -> size_t {
      KeepValue(generator.Next());
      return 1;
    });
  }));
  for (size_t k : {16, 64, 256}) {
    const std::string name = "batch/" + std::to_string(k);
    registered.push_back(benchmark::RegisterBenchmark(name.c_str(), [&, k](benchmark::State& s) {
      std::vector<uint64_t> out(k);
      // A burst of whole batches, as many as the ring holds (at least one).
      RunBursts(
          s, [&] { return std::max(k, AwaitFill(*context.ring, *context.client, kBurst) / k * k); },
          [&](size_t left) -> size_t {
            auto n = context.client->NextBatch(std::span<uint64_t>(out.data(), std::min(k, left)));
            if (!n) Abort(n.error().message);
            KeepValue(out[0]);
            return *n;
          });
    }));
  }
  registered.push_back(
      benchmark::RegisterBenchmark("floor/lock_cmpxchg", [](benchmark::State& s) {
        alignas(64) std::atomic<uint64_t> word{0};
        uint64_t seen = 0;
        RunBursts(s, [] { return kBurst; }, [&](size_t) -> size_t {
          // Never fails: this thread is the only writer, and `seen` tracks the word.
          word.compare_exchange_strong(seen, seen + 1, std::memory_order_acq_rel,
                                       std::memory_order_relaxed);
          ++seen;
          return 1;
        });
      }));
  registered.push_back(
      benchmark::RegisterBenchmark("floor/cas_and_fetch_add", [](benchmark::State& s) {
        struct alignas(64) Line {
          std::atomic<uint64_t> word{0};
        };
        static Line head;
        static Line counter;
        uint64_t seen = 0;
        RunBursts(s, [] { return kBurst; }, [&](size_t) -> size_t {
          head.word.compare_exchange_strong(seen, seen + 1, std::memory_order_acq_rel,
                                            std::memory_order_relaxed);
          ++seen;
          counter.word.fetch_add(1, std::memory_order_relaxed);
          return 1;
        });
      }));
  registered.push_back(
      benchmark::RegisterBenchmark("floor/cas_and_store", [](benchmark::State& s) {
        struct alignas(64) Line {
          std::atomic<uint64_t> word{0};
        };
        static Line head;
        static Line counter;
        uint64_t seen = 0;
        uint64_t total = 0;
        RunBursts(s, [] { return kBurst; }, [&](size_t) -> size_t {
          head.word.compare_exchange_strong(seen, seen + 1, std::memory_order_acq_rel,
                                            std::memory_order_relaxed);
          ++seen;
          counter.word.store(++total, std::memory_order_relaxed);
          return 1;
        });
      }));
  registered.push_back(
      benchmark::RegisterBenchmark("floor/clock_coarse", [](benchmark::State& s) {
        RunBursts(s, [] { return kBurst; }, [](size_t) -> size_t {
          timespec now{};
          clock_gettime(CLOCK_REALTIME_COARSE, &now);
          KeepValue(static_cast<uint64_t>(now.tv_nsec));
          return 1;
        });
      }));
  registered.push_back(
      benchmark::RegisterBenchmark("floor/clock_realtime", [](benchmark::State& s) {
        RunBursts(s, [] { return kBurst; }, [](size_t) -> size_t {
          KeepValue(snowflake::bench::RealtimeNs());
          return 1;
        });
      }));
  for (auto* b : registered) {
    b->UseManualTime()->Iterations(bursts)->Unit(benchmark::kMicrosecond);
  }

  std::vector<benchmark::internal::Benchmark*> cold;
  cold.push_back(
      benchmark::RegisterBenchmark("batch_4096_cold/client", [idle_target](benchmark::State& s) {
        std::vector<uint64_t> out(kColdBatch);
        size_t got_so_far = 0;
        int64_t calls = 0;
        RunBursts(
            s,
            [&] {
              got_so_far = 0;
              return AwaitIdle(*context.ring, idle_target);
            },
            [&](size_t left) -> size_t {
              // The span still missing: an empty ring asks for all of it at once.
              ++calls;
              auto n =
                  context.client->NextBatch(std::span<uint64_t>(out.data() + got_so_far, left));
              if (!n) Abort(n.error().message);
              got_so_far += *n;
              KeepValue(out[got_so_far - 1]);
              return *n;
            });
        // 1 when the daemon's first answer held the whole batch.
        s.counters["calls_per_batch"] =
            static_cast<double>(calls) / static_cast<double>(s.iterations());
      }));
  cold.push_back(
      benchmark::RegisterBenchmark("batch_4096_cold/unhinted", [idle_target](benchmark::State& s) {
        std::vector<uint64_t> out(kColdBatch);
        size_t got_so_far = 0;
        int64_t waits = 0;
        snowflake::shm::RingConsumer& ring = *context.ring;
        RunBursts(
            s,
            [&] {
              got_so_far = 0;
              return AwaitIdle(ring, idle_target);
            },
            [&](size_t left) -> size_t {
              // Client::NextBatch's loop as it was before the size hint: take, and on an
              // empty ring a refill request that says nothing of the size.
              for (;;) {
                const uint32_t seen = ring.wake_seq();
                snowflake::shm::TakeResult result;
                const size_t n = ring.TryTakeBatchFresh(out.data() + got_so_far, left, &result);
                if (n > 0) {
                  got_so_far += n;
                  KeepValue(out[got_so_far - 1]);
                  return n;
                }
                ++waits;
                ring.AwaitPublish(seen, std::chrono::milliseconds(1),
                                  result == snowflake::shm::TakeResult::kStale, /*want=*/0);
              }
            });
        // Refill requests (and waits) per batch: the daemon's fill target, doubling.
        s.counters["waits_per_batch"] =
            static_cast<double>(waits) / static_cast<double>(s.iterations());
      }));
  for (auto* b : cold) {
    b->UseManualTime()->Iterations(cold_bursts)->Unit(benchmark::kMicrosecond);
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  context.ring.reset();
  context.client.reset();
  return 0;
}
