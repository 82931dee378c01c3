// peer_bench: the "single database counter" alternative, measured the way a service
// would use it: one connection over loopback TCP, one blocking call per ID, each call
// timed on its own. Prints one JSON object with p50/p99 per repetition.
//
//   peer_bench --redis-port P --pg-port Q [--pg-user U] [--calls N] [--reps R]
//
// Redis: INCR on one key. PostgreSQL: SELECT nextval() on one sequence, autocommit,
// server defaults (fsync on), as an application would run it.

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "baselines.h"

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "peer_bench: %s\n", what.c_str());
  std::exit(1);
}

// Times `calls` calls of `call` (after 200 untimed warm-up calls); returns p50 and p99 in µs.
std::pair<double, double> Measure(int calls, const std::function<void()>& call) {
  for (int i = 0; i < 200; ++i) call();
  std::vector<double> us;
  us.reserve(calls);
  for (int i = 0; i < calls; ++i) {
    const int64_t start = snowflake::bench::MonotonicNs();
    call();
    us.push_back(static_cast<double>(snowflake::bench::MonotonicNs() - start) / 1000.0);
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

}  // namespace

int main(int argc, char** argv) {
  int redis_port = 0;
  int pg_port = 0;
  std::string pg_user = "postgres";
  int calls = 5000;
  int reps = 3;
  CLI::App app{
      "peer_bench: Redis INCR and PostgreSQL nextval() over loopback, the peers' "
      "latency baselines"};
  app.add_option("--redis-port", redis_port, "Redis on 127.0.0.1")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--pg-port", pg_port, "PostgreSQL on 127.0.0.1")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--pg-user", pg_user, "PostgreSQL user");
  app.add_option("--calls", calls, "timed calls per repetition")->check(CLI::Range(1, 10'000'000));
  app.add_option("--reps", reps, "repetitions")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  redisContext* redis = redisConnect("127.0.0.1", redis_port);
  if (redis == nullptr || redis->err) Die("redis connect failed");
  const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(pg_port) +
                               " user=" + pg_user + " dbname=postgres";
  PGconn* pg = PQconnectdb(conninfo.c_str());
  if (PQstatus(pg) != CONNECTION_OK) Die(std::string("postgres: ") + PQerrorMessage(pg));
  PQclear(PQexec(pg, "CREATE SEQUENCE IF NOT EXISTS bench_ids"));

  std::string out = "{\"redis_incr\":[";
  for (int rep = 0; rep < reps; ++rep) {
    auto [p50, p99] = Measure(calls, [&] {
      auto* reply = static_cast<redisReply*>(redisCommand(redis, "INCR bench:ids"));
      if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) Die("INCR failed");
      freeReplyObject(reply);
    });
    std::fprintf(stderr, "redis INCR rep %d: p50 %.1f us p99 %.1f us\n", rep, p50, p99);
    out += (rep ? "," : "") + std::string("{\"p50_us\":") + std::to_string(p50) +
           ",\"p99_us\":" + std::to_string(p99) + "}";
  }
  out += "],\"pg_nextval\":[";
  for (int rep = 0; rep < reps; ++rep) {
    auto [p50, p99] = Measure(calls, [&] {
      PGresult* result = PQexec(pg, "SELECT nextval('bench_ids')");
      if (PQresultStatus(result) != PGRES_TUPLES_OK) Die(PQerrorMessage(pg));
      PQclear(result);
    });
    std::fprintf(stderr, "postgres nextval rep %d: p50 %.1f us p99 %.1f us\n", rep, p50, p99);
    out += (rep ? "," : "") + std::string("{\"p50_us\":") + std::to_string(p50) +
           ",\"p99_us\":" + std::to_string(p99) + "}";
  }
  out += "]}";
  std::printf("%s\n", out.c_str());
  redisFree(redis);
  PQfinish(pg);
  return 0;
}
