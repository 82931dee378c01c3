// http_bench: the HTTP front (docs/http.md) over loopback, measured the way a remote
// service would use it, beside Redis INCR at the same concurrency (same run, same host).
// Prints one JSON object, one entry per repetition.
//
//   http_bench --port P [--tls-port T --tls-ca CA] [--redis-port R] [--redis-tls-port RT]
//              [--floor-port F] [--calls N] [--seconds S] [--reps R]
//
//   http_id           one keep-alive connection, one GET /v1/id per ID, each timed: p50/p99
//   redis_incr        (with --redis-port) one INCR per call on one connection, each timed,
//                     alternating call by call with http_id (the order rotating): both see
//                     the same load
//   floor_id          (with --floor-port) the same GET to bench/http_floor, the floor of an
//                     event-driven server here, in the same alternation
//   http_batch1000    GET /v1/ids?count=1000 (text/plain) back to back, ns per ID: the
//                     sustained rate, which one machine number caps at 4,096 IDs per ms
//                     (244 ns per ID) whatever the front does
//   http_batch1000_paced  the same request once every 2 ms, each timed alone: what one
//                     batch costs a caller (median of the requests, ns per ID)
//   http_id_paced     its baseline, alternating with it: GET /v1/id after the same 2 ms
//                     pause (median, us); what any request costs from an idle start
//   https_id          (with --tls-port) the same GET over TLS to a TLS front (keep-alive),
//                     in the same alternation as http_id: p50/p99
//   https_handshake   (with --tls-port) a new TCP connection and a full TLS handshake (no
//                     session resumption), each timed: p50/p99
//   http_rps_C        C keep-alive connections (one thread each) doing GET /v1/id for S s
//   https_rps_C       (with --tls-port) the same over TLS, right after the plain figure
//   redis_rps_C       C hiredis connections doing INCR for S s (with --redis-port), each
//                     repetition right after the HTTP one at the same concurrency
//   redis_tls_incr    (with --redis-tls-port and --tls-ca) INCR to Redis's TLS port, in the
//                     same alternation as https_id: the same TLS library and client code
//                     (hiredis 0.14 speaks no TLS), so https_id / http_id can be read beside
//                     redis_tls_incr / redis_incr, what TLS costs a server that does it well
//   redis_tls_rps_C   the same, C connections for S s, right after https_rps_C
//   floor_rps_C       (with --floor-port) the floor responder's requests/s at C
//                     connections, right after redis_rps_C: what an event loop that does no
//                     work at all reaches here, beside Redis
//
// The machine this runs on is shared and its load swings within seconds, so each figure
// is measured next to its baseline, never minutes apart.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#ifdef SNOWFLAKE_BENCH_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include <openssl/ssl.h>

#include "baselines.h"
#include "http_connection.h"

namespace {

using snowflake::bench::ClientTlsContext;
using snowflake::bench::Connection;
using snowflake::bench::Die;
using snowflake::bench::Of;
using snowflake::bench::Percentiles;
using snowflake::bench::Request;

// Runs `connections` threads, each with its own state from `make`, calling `call` until
// `seconds` pass; returns calls per second over all.
template <typename Make, typename Call>
double Throughput(int connections, double seconds, Make make, Call call) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&] {
      auto state = make();
      ready.fetch_add(1);
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        call(*state);
        ++n;
      }
      total.fetch_add(n);
    });
  }
  while (ready.load() < connections) std::this_thread::yield();
  const int64_t start = snowflake::bench::MonotonicNs();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = static_cast<double>(snowflake::bench::MonotonicNs() - start) / 1e9;
  return static_cast<double>(total.load()) / elapsed;
}

#ifdef SNOWFLAKE_BENCH_HIREDIS
struct Redis {
  redisContext* context = nullptr;
  ~Redis() { redisFree(context); }
};

std::unique_ptr<Redis> ConnectRedis(int port) {
  // Connections made all at once can be refused on a loaded host: retry.
  for (int attempt = 0;; ++attempt) {
    auto redis = std::make_unique<Redis>();
    redis->context = redisConnect("127.0.0.1", port);
    if (redis->context != nullptr && !redis->context->err) return redis;
    if (attempt == 50) {
      Die(std::string("redis connect failed: ") +
          (redis->context ? redis->context->errstr : "no memory"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Incr(Redis& redis) {
  auto* reply = static_cast<redisReply*>(redisCommand(redis.context, "INCR bench:rps"));
  if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) Die("INCR failed");
  freeReplyObject(reply);
}
#endif

// Prints the p50 and p99 of `us` as "<what> rep R: ..." and appends them to `reps` as JSON.
void Record(std::vector<double>& us, const char* what, int rep, std::vector<std::string>& reps) {
  const Percentiles p = Of(us);
  std::fprintf(stderr, "%s rep %d: p50 %.1f us p99 %.1f us\n", what, rep, p.p50, p.p99);
  reps.push_back("{\"p50_us\":" + std::to_string(p.p50) + ",\"p99_us\":" + std::to_string(p.p99) +
                 "}");
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int redis_port = 0;
  int floor_port = 0;
  int tls_port = 0;
  int redis_tls_port = 0;
  std::string tls_ca;
  int calls = 5000;
  double seconds = 2;
  int reps = 3;
  CLI::App app{"http_bench: the HTTP front over loopback beside Redis and the floor responder"};
  app.add_option("--port", port, "the front's port on 127.0.0.1")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--redis-port", redis_port, "Redis on 127.0.0.1, for INCR beside the front")
      ->check(CLI::Range(1, 65535));
  app.add_option("--tls-port", tls_port, "a TLS front on 127.0.0.1 (https_* figures)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--redis-tls-port", redis_tls_port,
                 "Redis's TLS port on 127.0.0.1 (redis_tls_* figures), its certificate signed "
                 "by --tls-ca")
      ->check(CLI::Range(1, 65535));
  app.add_option("--tls-ca", tls_ca,
                 "the CA file that signed the TLS front's (and Redis's) certificate");
  app.add_option("--floor-port", floor_port, "bench/http_floor on 127.0.0.1")
      ->check(CLI::Range(1, 65535));
  app.add_option("--calls", calls, "timed calls per repetition")->check(CLI::Range(1, 10'000'000));
  app.add_option("--seconds", seconds, "seconds per requests/s figure")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--reps", reps, "repetitions")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if ((tls_port > 0 || redis_tls_port > 0) && tls_ca.empty()) {
    Die("--tls-port and --redis-tls-port need --tls-ca");
  }
  SSL_CTX* tls = tls_port > 0 || redis_tls_port > 0 ? ClientTlsContext(tls_ca) : nullptr;
#ifndef SNOWFLAKE_BENCH_HIREDIS
  if (redis_port > 0) Die("built without hiredis: --redis-port is not available");
#endif

  const std::string one = Request("/v1/id?service=bench");
  const std::string batch = Request("/v1/ids?service=bench&count=1000");
  std::string out = "{";
  auto series = [&](const std::string& name, const std::vector<std::string>& items) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict) on a chain of operator+ here.
    if (out.size() > 1) out += ',';
    out += '"';
    out += name;
    out += "\":[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ',';
      out += items[i];
    }
    out += ']';
  };

  std::vector<std::string> id_reps;
  std::vector<std::string> incr_reps;
  std::vector<std::string> floor_reps;
  std::vector<std::string> tls_reps;
  std::vector<std::string> redis_tls_reps;
  std::vector<std::string> handshake_reps;
  std::vector<std::string> batch_reps;
  std::vector<std::string> batch_paced_reps;
  std::vector<std::string> paced_one_reps;
  {
    Connection connection(port);
    std::unique_ptr<Connection> floor =
        floor_port > 0 ? std::make_unique<Connection>(floor_port) : nullptr;
    std::unique_ptr<Connection> secure =
        tls_port > 0 ? std::make_unique<Connection>(tls_port, tls) : nullptr;
    std::unique_ptr<Connection> redis_secure =
        redis_tls_port > 0 ? std::make_unique<Connection>(redis_tls_port, tls) : nullptr;
#ifdef SNOWFLAKE_BENCH_HIREDIS
    std::unique_ptr<Redis> redis = redis_port > 0 ? ConnectRedis(redis_port) : nullptr;
#endif
    for (int rep = 0; rep < reps; ++rep) {
      for (int i = 0; i < 200; ++i) connection.Get(one);
      if (secure != nullptr) {
        for (int i = 0; i < 200; ++i) secure->Get(one);
      }
      std::vector<double> tls_us;
      tls_us.reserve(calls);
      std::vector<double> redis_tls_us;
      redis_tls_us.reserve(calls);
      std::vector<double> us;
      std::vector<double> redis_us;
      std::vector<double> floor_us;
      us.reserve(calls);
      redis_us.reserve(calls);
      floor_us.reserve(calls);
      // The servers' calls alternate, and their order rotates call by call: the place in
      // a fixed order moved a server's p50 by up to ~10 us on the 2-core VM (bench/
      // README.md), so each server takes each place equally often.
      struct Timed {
        std::function<void()> call;
        std::vector<double>* out;
      };
      std::vector<Timed> timed{{[&] { connection.Get(one); }, &us}};
#ifdef SNOWFLAKE_BENCH_HIREDIS
      if (redis != nullptr) timed.push_back({[&] { Incr(*redis); }, &redis_us});
#endif
      if (floor != nullptr) timed.push_back({[&] { floor->Get(one); }, &floor_us});
      if (secure != nullptr) timed.push_back({[&] { secure->Get(one); }, &tls_us});
      if (redis_secure != nullptr) {
        timed.push_back({[&] { redis_secure->Incr(); }, &redis_tls_us});
      }
      for (int i = 0; i < calls; ++i) {
        for (size_t k = 0; k < timed.size(); ++k) {
          const Timed& t = timed[(static_cast<size_t>(i) + k) % timed.size()];
          const int64_t start = snowflake::bench::MonotonicNs();
          t.call();
          t.out->push_back(static_cast<double>(snowflake::bench::MonotonicNs() - start) / 1000.0);
        }
      }
      Record(us, "http /v1/id", rep, id_reps);
      if (!redis_us.empty()) Record(redis_us, "redis INCR (alternating)", rep, incr_reps);
      if (!tls_us.empty()) {
        Record(tls_us, "https /v1/id (alternating)", rep, tls_reps);
        // A new connection's cost: TCP connect and a full handshake (then it is closed).
        std::vector<double> handshake_us;
        for (int i = 0; i < std::max(50, calls / 20); ++i) {
          const int64_t begin = snowflake::bench::MonotonicNs();
          { Connection fresh(tls_port, tls); }
          handshake_us.push_back(static_cast<double>(snowflake::bench::MonotonicNs() - begin) /
                                 1000.0);
        }
        Record(handshake_us, "https handshake", rep, handshake_reps);
      }
      if (!redis_tls_us.empty()) {
        Record(redis_tls_us, "redis INCR over TLS (alternating)", rep, redis_tls_reps);
      }
      if (!floor_us.empty()) Record(floor_us, "floor responder (alternating)", rep, floor_reps);

      const int batches = std::max(50, calls / 20);
      const int64_t start = snowflake::bench::MonotonicNs();
      for (int i = 0; i < batches; ++i) {
        const std::string_view body = connection.Get(batch);
        if (std::count(body.begin(), body.end(), '\n') != 1000) Die("a short batch");
      }
      const double ns_per_id = static_cast<double>(snowflake::bench::MonotonicNs() - start) /
                               (static_cast<double>(batches) * 1000.0);
      std::fprintf(stderr, "http /v1/ids count=1000 rep %d: %.1f ns/ID\n", rep, ns_per_id);
      batch_reps.push_back(std::to_string(ns_per_id));

      // Paced: 2 ms before each request, so the millisecond's 4,096 sequences are not what
      // the figure measures; each request timed alone. Its baseline, alternating with it:
      // a one-ID request after the same 2 ms pause, which pays the same wake-ups of an
      // idle client, front and machine, so the difference is what the 1,000 IDs add.
      std::vector<double> paced_ns_per_id;
      std::vector<double> paced_one_us;
      const auto median = [](std::vector<double>& values) {
        std::nth_element(values.begin(),
                         values.begin() + static_cast<long>(values.size() / 2), values.end());
        return values[values.size() / 2];
      };
      for (int i = 0; i < 2 * batches; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const bool is_batch = (i % 2 == 0) == (rep % 2 == 0);  // the order alternates
        const int64_t begin = snowflake::bench::MonotonicNs();
        const std::string_view body = connection.Get(is_batch ? batch : one);
        const int64_t end = snowflake::bench::MonotonicNs();
        if (is_batch) {
          if (std::count(body.begin(), body.end(), '\n') != 1000) Die("a short batch");
          paced_ns_per_id.push_back(static_cast<double>(end - begin) / 1000.0);
        } else {
          paced_one_us.push_back(static_cast<double>(end - begin) / 1000.0);
        }
      }
      const double paced_median = median(paced_ns_per_id);
      const double paced_one_median = median(paced_one_us);
      std::fprintf(stderr,
                   "http /v1/ids count=1000 paced rep %d: %.1f ns/ID; /v1/id paced: %.1f us\n",
                   rep, paced_median, paced_one_median);
      paced_one_reps.push_back(std::to_string(paced_one_median));
      batch_paced_reps.push_back(std::to_string(paced_median));
    }
  }
  series("http_id", id_reps);
  if (!incr_reps.empty()) series("redis_incr", incr_reps);
  if (!floor_reps.empty()) series("floor_id", floor_reps);
  if (!tls_reps.empty()) series("https_id", tls_reps);
  if (!redis_tls_reps.empty()) series("redis_tls_incr", redis_tls_reps);
  if (!handshake_reps.empty()) series("https_handshake", handshake_reps);
  series("http_batch1000_ns_per_id", batch_reps);
  series("http_batch1000_paced_ns_per_id", batch_paced_reps);
  series("http_id_paced_us", paced_one_reps);

  for (const int connections : {1, 16, 64}) {
    std::vector<std::string> rps;
    std::vector<std::string> redis_rps;
    std::vector<std::string> tls_rps;
    std::vector<std::string> redis_tls_rps;
    std::vector<std::string> floor_rps;
    for (int rep = 0; rep < reps; ++rep) {
      const double r = Throughput(
          connections, seconds, [&] { return std::make_unique<Connection>(port); },
          [&](Connection& c) { c.Get(one); });
      std::fprintf(stderr, "http %d connections rep %d: %.0f requests/s\n", connections, rep, r);
      rps.push_back(std::to_string(r));
      if (tls_port > 0) {
        const double t = Throughput(
            connections, seconds, [&] { return std::make_unique<Connection>(tls_port, tls); },
            [&](Connection& c) { c.Get(one); });
        std::fprintf(stderr, "https %d connections rep %d: %.0f requests/s\n", connections, rep, t);
        tls_rps.push_back(std::to_string(t));
      }
      if (redis_tls_port > 0 && connections > 1) {
        const double q = Throughput(
            connections, seconds, [&] { return std::make_unique<Connection>(redis_tls_port, tls); },
            [&](Connection& c) { c.Incr(); });
        std::fprintf(stderr, "redis over TLS %d connections rep %d: %.0f INCR/s\n", connections,
                     rep, q);
        redis_tls_rps.push_back(std::to_string(q));
      }
#ifdef SNOWFLAKE_BENCH_HIREDIS
      if (redis_port > 0 && connections > 1) {
        const double q = Throughput(
            connections, seconds, [&] { return ConnectRedis(redis_port); },
            [&](Redis& redis) { Incr(redis); });
        std::fprintf(stderr, "redis %d connections rep %d: %.0f INCR/s\n", connections, rep, q);
        redis_rps.push_back(std::to_string(q));
      }
#endif
      if (floor_port > 0 && connections > 1) {
        const double q = Throughput(
            connections, seconds, [&] { return std::make_unique<Connection>(floor_port); },
            [&](Connection& c) { c.Get(one); });
        std::fprintf(stderr, "floor responder %d connections rep %d: %.0f requests/s\n",
                     connections, rep, q);
        floor_rps.push_back(std::to_string(q));
      }
    }
    series("http_rps_" + std::to_string(connections), rps);
    if (!redis_rps.empty()) series("redis_rps_" + std::to_string(connections), redis_rps);
    if (!tls_rps.empty()) series("https_rps_" + std::to_string(connections), tls_rps);
    if (!floor_rps.empty()) series("floor_rps_" + std::to_string(connections), floor_rps);
    if (!redis_tls_rps.empty()) {
      series("redis_tls_rps_" + std::to_string(connections), redis_tls_rps);
    }
  }

  if (const uint64_t n = Connection::unavailable.load(); n > 0) {
    std::fprintf(stderr, "http_bench: %llu replies were 503 (daemon paused) and retried\n",
                 static_cast<unsigned long long>(n));
  }
  out += "}";
  std::printf("%s\n", out.c_str());
  return 0;
}
