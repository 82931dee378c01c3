// daemon_bench: the figures that need a running snowflaked, several processes or a
// window of wall time. Each command runs its repetitions and prints one JSON object on
// stdout (raw per-repetition values; scripts/bench and bench/report.py take medians);
// progress goes to stderr. bench/README.md explains every figure.
//
//   daemon_bench wait-ready --runtime-dir DIR [--timeout-ms N]
//   daemon_bench take2      --runtime-dir DIR [--reps N] [--bursts N]
//   daemon_bench sustained  --runtime-dir DIR [--reps N] [--seconds S]
//   daemon_bench refill     --runtime-dir DIR [--reps N] [--samples N]
//   daemon_bench paced      --runtime-dir DIR [--reps N] [--seconds S] [--rate R]
//   daemon_bench idle       --runtime-dir DIR [--reps N] [--seconds S]
//
// The daemon's pid comes from the segment header (the daemon writes it there).

#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tl/expected.hpp>
#include <vector>

#include "baselines.h"
#include "protocol/control_client.h"
#include "snowflake/client.h"
#include "snowflake/ring_consumer.h"

namespace {

using nlohmann::json;
using snowflake::Client;
using snowflake::ClientOptions;
using snowflake::IdLayout;
using snowflake::bench::KeepValue;
using snowflake::bench::MonotonicNs;
using snowflake::bench::RealtimeMs;
using snowflake::bench::RealtimeNs;
using snowflake::shm::RingConsumer;

struct Options {
  std::string runtime_dir;
  int reps = 3;
  int bursts = 200;
  double seconds = 2.0;
  int samples = 300;
  double rate = 1157.0;
  int timeout_ms = 10000;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "daemon_bench: %s\n", what.c_str());
  std::exit(1);
}

Client OpenClient(const Options& options, const char* service) {
  ClientOptions client_options;
  client_options.runtime_dir = options.runtime_dir;
  auto client = Client::Open(service, client_options);
  if (!client) Die(client.error().message);
  return std::move(*client);
}

// The ring with its consumer region, attached as a client attaches (the control protocol's
// "attach", docs/control-protocol.md, through its one client end): retries a busy or
// starting daemon and a segment replaced in between, for up to 10 s.
tl::expected<RingConsumer, std::string> AttachRing(const std::string& runtime_dir) {
  return snowflake::protocol::AttachConsumer(runtime_dir, std::chrono::seconds(10));
}

// A second consumer mapping of the daemon's ring, beside the clients a benchmark measures.
RingConsumer OpenRing(const Options& options) {
  auto ring = AttachRing(options.runtime_dir);
  if (!ring) Die(ring.error());
  return std::move(*ring);
}

// Memory shared with forked children (MAP_SHARED survives fork); never unmapped, the
// process is short-lived.
template <typename T>
T* SharedNew(size_t count = 1) {
  void* memory = mmap(nullptr, sizeof(T) * count, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) Die(std::string("mmap: ") + std::strerror(errno));
  T* first = static_cast<T*>(memory);
  for (size_t i = 0; i < count; ++i) new (first + i) T();
  return first;
}

void PinToCpu(int cpu) {
  if (std::thread::hardware_concurrency() < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % static_cast<int>(std::thread::hardware_concurrency()), &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// Runs body(i) for i = 0..n-1 in forked children and waits for all; dies if one failed.
void RunInChildren(int n, const std::function<int(int)>& body) {
  std::vector<pid_t> children;
  std::fflush(nullptr);
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) _exit(body(i));
    children.push_back(pid);
  }
  bool failed = false;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (failed) Die("a child process failed");
}

uint64_t DaemonPid(const Options& options) {
  // The ring file alone: the pid is in its header.
  auto ring = RingConsumer::Observe(options.runtime_dir);
  if (!ring) Die(ring.error().message);
  return ring->header().pid.load(std::memory_order_acquire);
}

// --- /proc readings of the daemon.

// utime + stime in clock ticks (/proc/<pid>/stat fields 14 and 15).
double ProcCpuSeconds(uint64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) Die("cannot read /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  uint64_t utime = 0;
  uint64_t stime = 0;
  // After "pid (comm) ", field 3 (state) is index 0; utime is field 14, stime 15.
  for (int index = 3; index <= 15 && (fields >> field); ++index) {
    if (index == 14) utime = std::stoull(field);
    if (index == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Summed over the daemon's threads (/proc/<pid>/task/*/schedstat): field 1 is the run
// time in ns (the same quantity as utime+stime, without the 10 ms tick granularity),
// field 2 the time spent runnable but waiting for a CPU.
struct SchedTimes {
  double run_s = 0;
  double wait_s = 0;
};

SchedTimes ReadSchedTimes(uint64_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return {};
  uint64_t run_ns = 0;
  uint64_t wait_ns = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(tasks + "/" + entry->d_name + "/schedstat");
    uint64_t run = 0;
    uint64_t wait = 0;
    if (in >> run >> wait) {
      run_ns += run;
      wait_ns += wait;
    }
  }
  closedir(dir);
  return {static_cast<double>(run_ns) * 1e-9, static_cast<double>(wait_ns) * 1e-9};
}

double SchedCpuSeconds(uint64_t pid) { return ReadSchedTimes(pid).run_s; }

uint64_t VmRssKib(uint64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

struct CpuWindow {
  uint64_t pid;
  double wall_start = MonotonicNs() * 1e-9;
  double stat_start = ProcCpuSeconds(pid);
  double sched_start = SchedCpuSeconds(pid);
  double wait_start = ReadSchedTimes(pid).wait_s;

  json Finish() const {
    const double wall = MonotonicNs() * 1e-9 - wall_start;
    return json{{"stat_cpu_pct", (ProcCpuSeconds(pid) - stat_start) / wall * 100.0},
                {"sched_cpu_pct", (SchedCpuSeconds(pid) - sched_start) / wall * 100.0},
                {"runqueue_wait_pct", (ReadSchedTimes(pid).wait_s - wait_start) / wall * 100.0},
                {"rss_kib", VmRssKib(pid)},
                {"window_s", wall}};
  }
};

// --- wait-ready: polls the segment until the daemon serves (scripts/bench starts it).

int WaitReady(const Options& options) {
  const int64_t deadline = MonotonicNs() + int64_t{options.timeout_ms} * 1'000'000;
  ClientOptions client_options;
  client_options.runtime_dir = options.runtime_dir;
  std::string last = "no segment yet";
  while (MonotonicNs() < deadline) {
    auto status = Client::Inspect(client_options);
    if (status && status->health == "serving") {
      std::printf("%s\n", json{{"pid", status->daemon_pid},
                               {"machine", status->machine},
                               {"ring_capacity", status->ring_capacity},
                               {"fill_target", status->fill_target}}
                              .dump()
                              .c_str());
      return 0;
    }
    last = status ? status->health : status.error().message;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Die("the daemon did not serve within " + std::to_string(options.timeout_ms) + " ms: " + last);
}

// --- take2: two takers at once, in lockstep bursts.
//
// Taker 0 leads: it prepares each burst (a fresh ms for the generators, a ring holding
// both takers' share for the client), then both take `per_taker` IDs, each timing its own
// burst. The figure is ns per take as each taker sees it. Waiting takers yield so the
// daemon can run on 2 cores.
struct alignas(64) Lockstep {
  std::atomic<uint64_t> go{0};
  alignas(64) std::atomic<uint64_t> done{0};
  alignas(64) std::atomic<int64_t> ns[2]{};
  std::atomic<int64_t> ids[2]{};
  std::atomic<int64_t> errors{0};
};

template <typename Prepare, typename Take>
void TakerLoop(Lockstep& sync, int index, int bursts, int per_taker, Prepare prepare,
               Take take) {
  for (uint64_t burst = 1; burst <= static_cast<uint64_t>(bursts); ++burst) {
    if (index == 0) {
      while (sync.done.load(std::memory_order_acquire) < 2 * (burst - 1)) sched_yield();
      prepare();
      sync.go.store(burst, std::memory_order_release);
    } else {
      while (sync.go.load(std::memory_order_acquire) < burst) sched_yield();
    }
    const int64_t start = MonotonicNs();
    for (int i = 0; i < per_taker; ++i) take();
    sync.ns[index].fetch_add(MonotonicNs() - start, std::memory_order_relaxed);
    sync.ids[index].fetch_add(per_taker, std::memory_order_relaxed);
    sync.done.fetch_add(1, std::memory_order_acq_rel);
  }
}

double NsPerTake(const Lockstep& sync) {
  const double ns = static_cast<double>(sync.ns[0] + sync.ns[1]);
  return ns / static_cast<double>(sync.ids[0] + sync.ids[1]);
}

template <typename Generator>
double TwoThreadGenerator(const Options& options, int per_taker) {
  Generator generator(1);
  Lockstep sync;
  auto fresh_ms = [] { snowflake::bench::WaitForMsAfter(RealtimeMs()); };
  auto take = [&] { KeepValue(generator.Next()); };
  std::thread second([&] {
    PinToCpu(1);
    TakerLoop(sync, 1, options.bursts, per_taker, fresh_ms, take);
  });
  PinToCpu(0);
  TakerLoop(sync, 0, options.bursts, per_taker, fresh_ms, take);
  second.join();
  return NsPerTake(sync);
}

// Waits until the ring holds `want` IDs or stopped growing for 3 ms.
void AwaitFill(const RingConsumer& ring, uint64_t want) {
  const int64_t start = MonotonicNs();
  int64_t last_change = start;
  uint64_t last = ring.size();
  while (last < want) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    const uint64_t size = ring.size();
    const int64_t now = MonotonicNs();
    if (size != last) {
      last = size;
      last_change = now;
    }
    if (now - last_change > 3'000'000 || now - start > 20'000'000) return;
  }
}

double TwoProcessClient(const Options& options, int per_taker) {
  Lockstep& sync = *SharedNew<Lockstep>();
  RunInChildren(2, [&](int index) {
    PinToCpu(index);
    Client client = OpenClient(options, "bench-take2p");
    const RingConsumer ring = OpenRing(options);
    auto prepare = [&] { AwaitFill(ring, 2 * static_cast<uint64_t>(per_taker)); };
    auto take = [&] {
      auto id = client.Next();
      if (!id) {
        sync.errors.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      KeepValue(*id);
    };
    TakerLoop(sync, index, options.bursts, per_taker, prepare, take);
    return 0;
  });
  if (sync.errors > 0) std::fprintf(stderr, "take2: %ld client errors\n", long(sync.errors.load()));
  return NsPerTake(sync);
}

int Take2(const Options& options) {
  // 2 x 2000 per fresh ms stays under the 4,096 cap for the generators; the client takes
  // the same shares from a ring the daemon filled beforehand.
  constexpr int kPerTaker = 2000;
  json out{{"client_2p_ns", json::array()},
           {"mutex_2t_ns", json::array()},
           {"cas_2t_ns", json::array()}};
  for (int rep = 0; rep < options.reps; ++rep) {
    out["mutex_2t_ns"].push_back(
        TwoThreadGenerator<snowflake::bench::MutexSnowflake>(options, kPerTaker));
    out["cas_2t_ns"].push_back(
        TwoThreadGenerator<snowflake::bench::CasSnowflake>(options, kPerTaker));
    out["client_2p_ns"].push_back(TwoProcessClient(options, kPerTaker));
    std::fprintf(stderr, "take2 rep %d: client %.1f  mutex %.1f  cas %.1f ns/take\n", rep,
                 out["client_2p_ns"].back().get<double>(), out["mutex_2t_ns"].back().get<double>(),
                 out["cas_2t_ns"].back().get<double>());
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

// --- sustained: two consumers take as fast as they can for a window; every ID's
// millisecond and sequence is tallied, so each ms of the window shows how much of its
// 4,096 was generated (the largest sequence) and how much was received (the count).
constexpr int kMaxWindowMs = 20'000;
constexpr int kMaxAgeSamples = 1 << 20;

struct ConsumerTally {
  uint32_t count[kMaxWindowMs];
  int32_t max_sequence[kMaxWindowMs];
  int32_t age_us[kMaxAgeSamples];
  std::atomic<int64_t> age_samples{0};
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> taken{0};
};

struct alignas(64) SustainedControl {
  std::atomic<int> stop{0};
  std::atomic<int64_t> base_ms{0};  // offset ms (since the epoch) of count[0]
};

std::vector<double> Percentiles(std::vector<double> values, std::initializer_list<double> ps) {
  std::vector<double> result;
  if (values.empty()) {
    for (size_t i = 0; i < ps.size(); ++i) result.push_back(0);
    return result;
  }
  std::sort(values.begin(), values.end());
  for (double p : ps) {
    const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
    result.push_back(values[index]);
  }
  return result;
}

json SustainedOnce(const Options& options) {
  const int64_t warmup_ms = 300;
  const int64_t window_ms = static_cast<int64_t>(options.seconds * 1000);
  // After the window, run past max_age (50 ms by default) so every ID of the window was
  // either received or drained by the time the consumers stop.
  const int64_t tail_ms = 200;
  if (warmup_ms + window_ms + tail_ms + 100 > kMaxWindowMs) Die("--seconds too large");

  SustainedControl& control = *SharedNew<SustainedControl>();
  ConsumerTally* tallies = SharedNew<ConsumerTally>(2);
  for (int c = 0; c < 2; ++c) std::fill_n(tallies[c].max_sequence, kMaxWindowMs, -1);
  const uint64_t pid = DaemonPid(options);
  const RingConsumer ring = OpenRing(options);
  const IdLayout layout = ring.layout();
  const int64_t epoch_ms = layout.epoch_unix_ms();
  control.base_ms = RealtimeMs() - epoch_ms;

  std::vector<pid_t> children;
  std::fflush(nullptr);
  for (int c = 0; c < 2; ++c) {
    const pid_t child = fork();
    if (child == 0) {
      PinToCpu(c);
      ConsumerTally& tally = tallies[c];
      {
        Client client = OpenClient(options, "bench-sustained");
        const int64_t base = control.base_ms;
        uint64_t n = 0;
        while (control.stop.load(std::memory_order_relaxed) == 0) {
          auto id = client.Next();
          if (!id) {
            tally.errors.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          const int64_t ms = layout.OffsetMsOf(*id);
          const int32_t sequence = static_cast<int32_t>(layout.Decode(*id)->sequence);
          const int64_t index = ms - base;
          if (index >= 0 && index < kMaxWindowMs) {
            ++tally.count[index];
            tally.max_sequence[index] = std::max(tally.max_sequence[index], sequence);
          }
          // One age sample per 16 IDs: a clock read per ID would slow the consumer.
          if ((++n & 15) == 0) {
            const int64_t s = tally.age_samples.load(std::memory_order_relaxed);
            if (s < kMaxAgeSamples) {
              tally.age_us[s] = static_cast<int32_t>(
                  (RealtimeNs() - (ms + epoch_ms) * 1'000'000) / 1000);
              tally.age_samples.store(s + 1, std::memory_order_relaxed);
            }
          }
        }
        tally.taken = static_cast<int64_t>(n);
      }
      _exit(0);
    }
    children.push_back(child);
  }

  std::this_thread::sleep_for(std::chrono::milliseconds(warmup_ms));
  // The window: whole milliseconds, starting at the next one.
  const int64_t window_first = RealtimeMs() - epoch_ms + 1;
  const int64_t window_end = window_first + window_ms;
  CpuWindow cpu{pid};
  int64_t fill_samples = 0;
  int64_t fill_empty = 0;
  int64_t fill_full = 0;
  const uint64_t capacity = ring.capacity();
  while (RealtimeMs() - epoch_ms < window_end) {
    const uint64_t size = ring.size();
    ++fill_samples;
    fill_empty += size == 0;
    fill_full += size >= capacity;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  json daemon_cpu = cpu.Finish();
  std::this_thread::sleep_for(std::chrono::milliseconds(tail_ms));
  control.stop = 1;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("a consumer failed");
  }

  // Per ms of the window: generated >= max sequence + 1 (sequences start at 0 each ms
  // and the daemon issues them in order); received = the consumers' count.
  int64_t received = 0;
  int64_t not_generated = 0;    // 4096 - generated: the daemon did not use the whole ms
  int64_t generated_not_received = 0;  // drained (stale) or left in the ring
  int64_t short_ms = 0;
  int64_t empty_ms = 0;
  // The spacing of the ms that got no ID at all: regular spacing points at a sleep
  // cadence drifting against the ms boundaries; irregular at scheduling.
  std::vector<double> empty_gaps;
  int64_t last_empty = -1;
  for (int64_t ms = window_first; ms < window_end; ++ms) {
    const int64_t index = ms - control.base_ms;
    const int64_t count = tallies[0].count[index] + tallies[1].count[index];
    const int32_t max_sequence =
        std::max(tallies[0].max_sequence[index], tallies[1].max_sequence[index]);
    const int64_t generated = max_sequence + 1;
    received += count;
    not_generated += layout.ids_per_ms() - generated;
    generated_not_received += generated - count;
    short_ms += count < layout.ids_per_ms();
    empty_ms += count == 0;
    if (count == 0) {
      if (last_empty >= 0) empty_gaps.push_back(static_cast<double>(ms - last_empty));
      last_empty = ms;
    }
  }
  const auto gaps = Percentiles(empty_gaps, {0.1, 0.5, 0.9});
  std::vector<double> ages;
  for (int c = 0; c < 2; ++c) {
    for (int64_t s = 0; s < tallies[c].age_samples; ++s) ages.push_back(tallies[c].age_us[s] / 1000.0);
  }
  const auto age = Percentiles(ages, {0.5, 0.99, 0.999999});
  const double ids_per_s = static_cast<double>(received) / (static_cast<double>(window_ms) / 1000.0);
  json result{
      {"ids_per_s", ids_per_s},
      {"fraction", ids_per_s / 4'096'000.0},
      {"window_ms", window_ms},
      {"short_ms", short_ms},
      {"empty_ms", empty_ms},
      {"empty_ms_gap_p10_p50_p90", gaps},
      {"lost_not_generated", not_generated},
      {"lost_generated_not_received", generated_not_received},
      {"ring_empty_pct", 100.0 * fill_empty / std::max<int64_t>(1, fill_samples)},
      {"ring_full_pct", 100.0 * fill_full / std::max<int64_t>(1, fill_samples)},
      {"client_errors", tallies[0].errors + tallies[1].errors},
      {"age_p50_ms", age[0]},
      {"age_p99_ms", age[1]},
      {"age_max_ms", age[2]},
      {"daemon", daemon_cpu},
  };
  munmap(tallies, sizeof(ConsumerTally) * 2);
  return result;
}

int Sustained(const Options& options) {
  json reps = json::array();
  for (int rep = 0; rep < options.reps; ++rep) {
    reps.push_back(SustainedOnce(options));
    const json& r = reps.back();
    std::fprintf(stderr,
                 "sustained rep %d: %.0f IDs/s (%.4f), %ld short ms, lost %ld not generated + "
                 "%ld not received, ring empty %.0f%% full %.0f%%, age p99 %.3f ms; "
                 "empty ms every %s ms (p10 p50 p90); daemon cpu %.1f%%, runnable-waiting "
                 "%.1f%%\n",
                 rep, r["ids_per_s"].get<double>(), r["fraction"].get<double>(),
                 long(r["short_ms"].get<int64_t>()), long(r["lost_not_generated"].get<int64_t>()),
                 long(r["lost_generated_not_received"].get<int64_t>()),
                 r["ring_empty_pct"].get<double>(), r["ring_full_pct"].get<double>(),
                 r["age_p99_ms"].get<double>(), r["empty_ms_gap_p10_p50_p90"].dump().c_str(),
                 r["daemon"]["sched_cpu_pct"].get<double>(),
                 r["daemon"]["runqueue_wait_pct"].get<double>());
  }
  std::printf("%s\n", json{{"reps", reps}}.dump().c_str());
  return 0;
}

// --- refill: the latency of a Next() that finds the ring empty. Before each sample a
// second consumer mapping drains every published ID; the sample counts only if the ring
// was still empty just before the call.
int Refill(const Options& options) {
  Client client = OpenClient(options, "bench-refill");
  RingConsumer ring = OpenRing(options);
  std::vector<uint64_t> drain(ring.capacity());
  json out{{"reps", json::array()}};
  for (int rep = 0; rep < options.reps; ++rep) {
    std::vector<double> us;
    int64_t refilled_before_call = 0;
    while (static_cast<int>(us.size()) < options.samples) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      while (ring.TryTakeBatch(drain.data(), drain.size()) > 0) {
      }
      if (ring.size() != 0) {
        ++refilled_before_call;
        continue;
      }
      const int64_t start = MonotonicNs();
      auto id = client.Next();
      const int64_t elapsed = MonotonicNs() - start;
      if (!id) Die(id.error().message);
      us.push_back(static_cast<double>(elapsed) / 1000.0);
    }
    const auto p = Percentiles(us, {0.5, 0.99, 0.999999});
    out["reps"].push_back(json{{"p50_us", p[0]}, {"p99_us", p[1]}, {"max_us", p[2]},
                               {"samples", us.size()}, {"skipped", refilled_before_call}});
    std::fprintf(stderr, "refill rep %d: p50 %.1f us  p99 %.1f us  max %.1f us\n", rep, p[0],
                 p[1], p[2]);
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

// --- open: what a client's start costs. Per sample, in this order: the ring file opened,
// checked and mapped alone (RingConsumer::Observe: the file part, the whole of what a
// format-3 open did twice, the baseline), the attach (protocol::AttachConsumer: observe,
// the control socket's attach with its descriptor, the seal checks, the region's map),
// and a whole Client::Open (attach, service slot) with its close.
int Open(const Options& options) {
  json out{{"reps", json::array()}};
  ClientOptions client_options;
  client_options.runtime_dir = options.runtime_dir;
  client_options.remotes_from_environment = false;
  for (int rep = 0; rep < options.reps; ++rep) {
    std::vector<double> ring_us, attach_us, client_us;
    for (int i = 0; i < options.samples; ++i) {
      int64_t start = MonotonicNs();
      auto observed = RingConsumer::Observe(options.runtime_dir);
      ring_us.push_back(static_cast<double>(MonotonicNs() - start) / 1000.0);
      if (!observed) Die(observed.error().message);
      start = MonotonicNs();
      auto attached = snowflake::protocol::AttachConsumer(options.runtime_dir);
      attach_us.push_back(static_cast<double>(MonotonicNs() - start) / 1000.0);
      if (!attached) Die(attached.error());
      start = MonotonicNs();
      {
        auto client = Client::Open("bench-open", client_options);
        if (!client) Die(client.error().message);
      }
      client_us.push_back(static_cast<double>(MonotonicNs() - start) / 1000.0);
    }
    const auto ring = Percentiles(ring_us, {0.5, 0.99});
    const auto attach = Percentiles(attach_us, {0.5, 0.99});
    const auto client = Percentiles(client_us, {0.5, 0.99});
    out["reps"].push_back(json{{"ring_open_p50_us", ring[0]},
                               {"ring_open_p99_us", ring[1]},
                               {"attach_p50_us", attach[0]},
                               {"attach_p99_us", attach[1]},
                               {"client_open_p50_us", client[0]},
                               {"client_open_p99_us", client[1]},
                               {"samples", options.samples}});
    std::fprintf(stderr,
                 "open rep %d: ring file p50 %.1f p99 %.1f us; attach p50 %.1f p99 %.1f us; "
                 "Client::Open+close p50 %.1f p99 %.1f us\n",
                 rep, ring[0], ring[1], attach[0], attach[1], client[0], client[1]);
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

// --- paced: one client takes `rate` IDs/s on an absolute schedule; reports the age of
// each ID when received and the daemon's CPU and RSS over the same window.
int Paced(const Options& options) {
  const uint64_t pid = DaemonPid(options);
  Client client = OpenClient(options, "bench-paced");
  const int64_t epoch_ms = client.layout().epoch_unix_ms();
  const int64_t period_ns = static_cast<int64_t>(1e9 / options.rate);
  const int64_t count = static_cast<int64_t>(options.rate * options.seconds);
  json out{{"reps", json::array()}};
  for (int rep = 0; rep < options.reps; ++rep) {
    // Settle: the daemon's fill target follows recent demand (the previous command's).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<double> ages;
    ages.reserve(count);
    CpuWindow cpu{pid};
    timespec next{};
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int64_t i = 0; i < count; ++i) {
      next.tv_nsec += period_ns;
      while (next.tv_nsec >= 1'000'000'000) {
        next.tv_nsec -= 1'000'000'000;
        ++next.tv_sec;
      }
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
      auto id = client.Next();
      const int64_t received = RealtimeNs();
      if (!id) Die(id.error().message);
      const int64_t ms = client.layout().OffsetMsOf(*id) + epoch_ms;
      ages.push_back(static_cast<double>(received - ms * 1'000'000) / 1e6);
    }
    json daemon = cpu.Finish();
    const auto p = Percentiles(ages, {0.5, 0.99, 0.999999});
    out["reps"].push_back(json{{"age_p50_ms", p[0]}, {"age_p99_ms", p[1]}, {"age_max_ms", p[2]},
                               {"ids", count}, {"daemon", daemon}});
    std::fprintf(stderr,
                 "paced rep %d: age p50 %.3f p99 %.3f max %.3f ms; daemon cpu %.2f%% "
                 "(stat %.2f%%), rss %lu KiB\n",
                 rep, p[0], p[1], p[2], daemon["sched_cpu_pct"].get<double>(),
                 daemon["stat_cpu_pct"].get<double>(),
                 static_cast<unsigned long>(daemon["rss_kib"].get<uint64_t>()));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

// --- idle: no client at all; the daemon's CPU and RSS over the window.
int Idle(const Options& options) {
  const uint64_t pid = DaemonPid(options);
  json out{{"reps", json::array()}};
  for (int rep = 0; rep < options.reps; ++rep) {
    CpuWindow cpu{pid};
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(options.seconds * 1000)));
    json daemon = cpu.Finish();
    out["reps"].push_back(daemon);
    std::fprintf(stderr, "idle rep %d: daemon cpu %.3f%% (stat %.2f%%), rss %lu KiB\n", rep,
                 daemon["sched_cpu_pct"].get<double>(), daemon["stat_cpu_pct"].get<double>(),
                 static_cast<unsigned long>(daemon["rss_kib"].get<uint64_t>()));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"daemon_bench: snowflaked figures that need a running daemon"};
  app.require_subcommand(1);
  Options options;
  auto add = [&](const char* name, const char* help) {
    CLI::App* sub = app.add_subcommand(name, help);
    sub->add_option("--runtime-dir", options.runtime_dir, "the daemon's runtime directory")
        ->required();
    sub->add_option("--reps", options.reps, "repetitions")->check(CLI::Range(1, 100));
    return sub;
  };
  CLI::App* wait_ready = add("wait-ready", "wait until the daemon serves; print its pid");
  wait_ready->add_option("--timeout-ms", options.timeout_ms);
  CLI::App* take2 = add("take2", "2 processes (client) and 2 threads (baselines) taking at once");
  take2->add_option("--bursts", options.bursts)->check(CLI::Range(1, 100000));
  CLI::App* sustained = add("sustained", "2 consumer processes saturating the daemon");
  sustained->add_option("--seconds", options.seconds)->check(CLI::Range(0.1, 15.0));
  CLI::App* refill = add("refill", "latency of a take that finds the ring empty");
  refill->add_option("--samples", options.samples)->check(CLI::Range(1, 1000000));
  CLI::App* open = add("open", "what a client's start costs: ring file, attach, Client::Open");
  open->add_option("--samples", options.samples)->check(CLI::Range(1, 1000000));
  CLI::App* paced = add("paced", "age and daemon cost at a paced rate");
  paced->add_option("--seconds", options.seconds)->check(CLI::Range(0.1, 600.0));
  paced->add_option("--rate", options.rate)->check(CLI::Range(1.0, 1e6));
  CLI::App* idle = add("idle", "daemon cost with no client");
  idle->add_option("--seconds", options.seconds)->check(CLI::Range(0.1, 600.0));
  CLI11_PARSE(app, argc, argv);

  if (*wait_ready) return WaitReady(options);
  if (*take2) return Take2(options);
  if (*sustained) return Sustained(options);
  if (*refill) return Refill(options);
  if (*open) return Open(options);
  if (*paced) return Paced(options);
  if (*idle) return Idle(options);
  return 2;
}
