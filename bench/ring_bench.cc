// Takes from the shared-memory ring next to the baseline users write by hand: the
// in-process std::mutex snowflake generator of baselines.h (same 1/41/10/12 layout,
// CLOCK_REALTIME, waits for the next ms when 4096 are used), measured in the same run.
//
// The mutex generator runs in bursts of kBurst = 4000 IDs, below the 4096-per-ms cap:
// between bursts, outside the timed region, it waits for a fresh millisecond, so the
// cap's wait never dominates the figure. The ring is topped up outside the timed region
// (once per 2^20 IDs). The batch figure is in the consumer's `size()` check too, which a
// client would not need; it is one extra pair of loads per batch.
// BM_RingTakeFresh is the client's take (TryTakeFresh: the freshness rule on the front ID)
// in the default layout (arg 0, 41/10/12) and in one whose millisecond starts elsewhere
// (arg 1, 42/15/6: id >> 21), in the same run: the rule shifts by the header's layout,
// read once per segment, and costs the same in any layout.
// Report: items_per_second (IDs/s) and time_per_id (CPU time).

#include <stdlib.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "baselines.h"
#include "snowflake/id_layout.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"

namespace {

using snowflake::bench::MutexSnowflake;
using snowflake::bench::RealtimeMs;
using snowflake::bench::WaitForMsAfter;
using snowflake::shm::RingConsumer;
using snowflake::shm::RingProducer;

constexpr size_t kBurst = 4000;
// The largest ring: a refill (untimed) every million takes keeps the pause cost out.
constexpr uint64_t kCapacity = snowflake::shm::kMaxCapacity;

// A ring of kCapacity slots in a temporary runtime directory, with one consumer mapping,
// in the layout `bits`. Its IDs are of the current millisecond, and the freshness bound is
// a minute, so a fresh take finds them fresh between refills.
class RingFixture {
 public:
  explicit RingFixture(snowflake::IdBits bits = snowflake::kDefaultIdBits)
      : layout_(snowflake::IdLayout::Create(snowflake::kDefaultEpochUnixMs, bits).value()) {
    char pattern[] = "/tmp/snowflake-bench-XXXXXX";
    if (mkdtemp(pattern) == nullptr) std::abort();
    dir_ = pattern;
    snowflake::shm::ProducerOptions options;
    options.runtime_dir = dir_;
    options.capacity = kCapacity;
    options.epoch_unix_ms = snowflake::kDefaultEpochUnixMs;
    options.id_bits = bits;
    options.machine = 1;
    options.max_age_ms = 60'000;
    auto producer = RingProducer::CreateOrOpen(options);
    if (!producer) {
      std::fprintf(stderr, "ring_bench: %s\n", producer.error().message.c_str());
      std::abort();
    }
    producer_.emplace(std::move(*producer));
    producer_->SetState(snowflake::shm::DaemonState::kServing);
    // The consumer region as attach would hand it over (the producer is in this process).
    auto consumer = RingConsumer::Open(dir_, producer_->ConsumerDescriptor());
    if (!consumer) {
      std::fprintf(stderr, "ring_bench: %s\n", consumer.error().message.c_str());
      std::abort();
    }
    consumer_.emplace(std::move(*consumer));
    ids_.resize(kCapacity);
  }
  ~RingFixture() {
    consumer_.reset();
    producer_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Tops the ring up to full with the next IDs, from the current millisecond on.
  void Refill() {
    const uint64_t room = producer_->free_slots();
    next_ = std::max(next_,
                     layout_.EncodeUnchecked(RealtimeMs() - snowflake::kDefaultEpochUnixMs, 1, 0));
    std::iota(ids_.begin(), ids_.begin() + static_cast<long>(room), next_);
    const auto published = producer_->Publish(std::span<const uint64_t>(ids_.data(), room));
    if (!published || *published != room) std::abort();
    next_ += room;
  }

  RingConsumer& consumer() { return *consumer_; }

 private:
  snowflake::IdLayout layout_;
  std::filesystem::path dir_;
  std::optional<RingProducer> producer_;
  std::optional<RingConsumer> consumer_;
  std::vector<uint64_t> ids_;
  uint64_t next_ = 1;
};

void ReportPerId(benchmark::State& state, int64_t ids_per_iteration) {
  const int64_t ids = static_cast<int64_t>(state.iterations()) * ids_per_iteration;
  state.SetItemsProcessed(ids);
  // Seconds per ID (printed with an SI prefix: "1.2n" is 1.2 ns).
  state.counters["time_per_id"] = benchmark::Counter(
      static_cast<double>(ids), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_MutexSnowflake(benchmark::State& state) {
  MutexSnowflake generator(1);
  size_t in_burst = kBurst;
  for (auto _ : state) {
    if (in_burst == kBurst) {
      state.PauseTiming();
      // Start each burst in a fresh millisecond so it stays under the 4096 cap.
      WaitForMsAfter(RealtimeMs());
      in_burst = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(generator.Next());
    ++in_burst;
  }
  ReportPerId(state, 1);
}
BENCHMARK(BM_MutexSnowflake);

void BM_RingTakeSingle(benchmark::State& state) {
  RingFixture ring;
  RingConsumer& consumer = ring.consumer();
  ring.Refill();
  uint64_t id = 0;
  for (auto _ : state) {
    if (!consumer.TryTake(&id)) {
      // Once per kCapacity takes: top up outside the timed region, then take.
      state.PauseTiming();
      ring.Refill();
      state.ResumeTiming();
      if (!consumer.TryTake(&id)) std::abort();
    }
    benchmark::DoNotOptimize(id);
  }
  ReportPerId(state, 1);
}
BENCHMARK(BM_RingTakeSingle);

void BM_RingTakeBatch(benchmark::State& state) {
  const auto k = static_cast<size_t>(state.range(0));
  RingFixture ring;
  RingConsumer& consumer = ring.consumer();
  ring.Refill();
  std::vector<uint64_t> out(k);
  for (auto _ : state) {
    if (consumer.size() < k) {
      state.PauseTiming();
      ring.Refill();
      state.ResumeTiming();
    }
    if (consumer.TryTakeBatch(out.data(), k) != k) std::abort();
    benchmark::DoNotOptimize(out.data());
  }
  ReportPerId(state, static_cast<int64_t>(k));
}
BENCHMARK(BM_RingTakeBatch)->Arg(16)->Arg(64)->Arg(256);

void BM_RingTakeFresh(benchmark::State& state) {
  const snowflake::IdBits bits =
      state.range(0) == 0 ? snowflake::kDefaultIdBits : snowflake::IdBits{42, 15, 6};
  state.SetLabel(snowflake::FormatIdBits(bits));
  RingFixture ring(bits);
  RingConsumer& consumer = ring.consumer();
  ring.Refill();
  uint64_t id = 0;
  for (auto _ : state) {
    snowflake::shm::TakeResult taken = consumer.TryTakeFresh(&id);
    if (taken == snowflake::shm::TakeResult::kEmpty) {
      state.PauseTiming();
      ring.Refill();
      state.ResumeTiming();
      taken = consumer.TryTakeFresh(&id);
    }
    if (taken != snowflake::shm::TakeResult::kTaken) std::abort();  // stale: a wrong shift
    benchmark::DoNotOptimize(id);
  }
  ReportPerId(state, 1);
}
BENCHMARK(BM_RingTakeFresh)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
