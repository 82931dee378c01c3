// flood_bench: what a flood of TLS handshakes at the HTTP front costs the daemon's other
// callers (docs/security.md, "The network"). One daemon serves a TLS front whose `allow`
// holds 127.0.0.1 only. Each repetition runs three phases of S seconds, their order
// rotating from one repetition to the next:
//
//   idle             no flood: the baseline of the same run
//   flood_offlist    R connections a second from --offlist-source (127.0.0.2, outside
//                    `allow`), each asking for a TLS handshake; the front closes them as
//                    they are accepted, so none may ever see a ServerHello (counted)
//   flood_allowed    R connections a second from 127.0.0.1, each a full TLS handshake (no
//                    session resumption), then closed
//
// and measures in every phase, at the same time:
//
//   local_take       a libsnowflake Client on the daemon's ring: one Next() every 5 us,
//                    each timed (ns): p50/p99. The ring is the daemon's local service;
//                    no flood at the front may slow it
//   https_id         one keep-alive TLS connection: GET /v1/id every millisecond, each
//                    timed (us): p50/p99. What a legitimate remote caller sees
//
// Prints one JSON object: each figure a list with one entry per repetition, and per
// phase the flood's achieved rate and its outcomes.
//
//   flood_bench --tls-port P --tls-ca CA --runtime-dir DIR [--offlist-source 127.0.0.2]
//               [--rate 1000] [--seconds 2] [--reps 3]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "baselines.h"
#include "http_connection.h"
#include "snowflake/client.h"

namespace {

using snowflake::bench::ClientTlsContext;
using snowflake::bench::Connection;
using snowflake::bench::Die;
using snowflake::bench::MonotonicNs;
using snowflake::bench::Of;
using snowflake::bench::Percentiles;
using snowflake::bench::Request;

// Threads sharing the flood's rate: a full handshake takes longer than the interval
// between two at 1,000 a second, so one thread alone would fall behind.
constexpr int kFloodThreads = 4;
constexpr int64_t kTakeIntervalNs = 5'000;
constexpr int64_t kHttpsIntervalNs = 1'000'000;

enum class Phase { kIdle, kOffList, kAllowed };
constexpr const char* kPhaseNames[] = {"idle", "flood_offlist", "flood_allowed"};

// What a flood's connections came to.
struct FloodOutcome {
  std::atomic<uint64_t> attempts{0};
  std::atomic<uint64_t> handshakes{0};     // completed: the front sent its certificate
  std::atomic<uint64_t> server_hellos{0};  // a failed handshake that saw the certificate anyway
  std::atomic<uint64_t> refused{0};        // closed before any TLS byte came back
};

// One connection from `source` (IPv4, network order) to the front, a TLS handshake on it,
// then closed.
void OneHandshake(int port, SSL_CTX* tls, in_addr_t source, FloodOutcome& outcome) {
  outcome.attempts.fetch_add(1, std::memory_order_relaxed);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Die("socket failed");
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = source;
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    Die("cannot bind a socket to the flood's source address");
  }
  sockaddr_in to = snowflake::bench::LoopbackAddress(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    outcome.refused.fetch_add(1, std::memory_order_relaxed);
    close(fd);
    return;
  }
  SSL* ssl = SSL_new(tls);
  SSL_set_fd(ssl, fd);
  SSL_set1_host(ssl, "127.0.0.1");
  const bool done = SSL_connect(ssl) == 1;
  const bool saw_certificate = SSL_get0_peer_certificate(ssl) != nullptr;
  if (done) {
    outcome.handshakes.fetch_add(1, std::memory_order_relaxed);
  } else if (saw_certificate) {
    outcome.server_hellos.fetch_add(1, std::memory_order_relaxed);
  } else {
    outcome.refused.fetch_add(1, std::memory_order_relaxed);
  }
  SSL_free(ssl);
  close(fd);
}

struct PhaseResult {
  Percentiles take_ns;
  Percentiles https_us;
  uint64_t take_errors = 0;
  double flood_per_s = 0;
  uint64_t attempts = 0;
  uint64_t handshakes = 0;
  uint64_t server_hellos = 0;
  uint64_t refused = 0;
};

struct Settings {
  int port = 0;
  SSL_CTX* tls = nullptr;
  in_addr_t offlist_source = 0;
  double rate = 1000;
  double seconds = 2;
};

PhaseResult RunPhase(Phase phase, const Settings& settings, snowflake::Client& client,
                     Connection& https) {
  const std::string one = Request("/v1/id?service=flood-bench");
  const int64_t start = MonotonicNs();
  const int64_t end = start + static_cast<int64_t>(settings.seconds * 1e9);
  FloodOutcome outcome;
  std::vector<std::thread> flood;
  if (phase != Phase::kIdle) {
    const in_addr_t source =
        phase == Phase::kOffList ? settings.offlist_source : htonl(INADDR_LOOPBACK);
    // Each thread keeps its own schedule: attempt i at start + i * interval, at once when
    // behind, so the achieved rate shows when the front (or this host) cannot keep up.
    const auto interval = static_cast<int64_t>(1e9 * kFloodThreads / settings.rate);
    for (int t = 0; t < kFloodThreads; ++t) {
      flood.emplace_back([&settings, &outcome, start, end, interval, source, t] {
        for (int64_t next = start + t * interval / kFloodThreads; next < end; next += interval) {
          const int64_t now = MonotonicNs();
          if (now >= end) break;  // behind schedule: the phase is over all the same
          if (now < next) std::this_thread::sleep_for(std::chrono::nanoseconds(next - now));
          OneHandshake(settings.port, settings.tls, source, outcome);
        }
      });
    }
  }
  std::vector<double> https_us;
  std::thread caller([&] {
    for (int64_t next = start; next < end; next += kHttpsIntervalNs) {
      const int64_t now = MonotonicNs();
      if (now < next) std::this_thread::sleep_for(std::chrono::nanoseconds(next - now));
      const int64_t begin = MonotonicNs();
      https.Get(one);
      https_us.push_back(static_cast<double>(MonotonicNs() - begin) / 1000.0);
    }
  });
  std::vector<double> take_ns;
  take_ns.reserve(static_cast<size_t>(settings.seconds * 1e9 / kTakeIntervalNs) + 1);
  PhaseResult result;
  for (int64_t begin = MonotonicNs(); begin < end;) {
    const auto id = client.Next();
    const int64_t taken = MonotonicNs();
    if (id) {
      take_ns.push_back(static_cast<double>(taken - begin));
    } else {
      ++result.take_errors;
    }
    const int64_t next = begin + kTakeIntervalNs;
    while ((begin = MonotonicNs()) < next) {
    }
  }
  caller.join();
  for (auto& thread : flood) thread.join();
  const double elapsed = static_cast<double>(MonotonicNs() - start) / 1e9;
  result.take_ns = Of(take_ns);
  result.https_us = Of(https_us);
  result.attempts = outcome.attempts.load();
  result.handshakes = outcome.handshakes.load();
  result.server_hellos = outcome.server_hellos.load();
  result.refused = outcome.refused.load();
  result.flood_per_s = static_cast<double>(result.attempts) / elapsed;
  return result;
}

std::string Json(const PhaseResult& r) {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "{\"take_p50_ns\":%.1f,\"take_p99_ns\":%.1f,\"take_errors\":%llu,"
      "\"https_id_p50_us\":%.1f,\"https_id_p99_us\":%.1f,\"flood_per_s\":%.1f,"
      "\"attempts\":%llu,\"handshakes\":%llu,\"server_hellos\":%llu,\"refused\":%llu}",
      r.take_ns.p50, r.take_ns.p99, static_cast<unsigned long long>(r.take_errors), r.https_us.p50,
      r.https_us.p99, r.flood_per_s, static_cast<unsigned long long>(r.attempts),
      static_cast<unsigned long long>(r.handshakes),
      static_cast<unsigned long long>(r.server_hellos), static_cast<unsigned long long>(r.refused));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  std::string tls_ca;
  std::string runtime_dir;
  std::string offlist = "127.0.0.2";
  int reps = 3;
  CLI::App app{"flood_bench: local takes and HTTPS calls during a flood of TLS handshakes"};
  app.add_option("--tls-port", settings.port, "the TLS front on 127.0.0.1, allowing only it")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--tls-ca", tls_ca, "the CA file that signed the front's certificate")->required();
  app.add_option("--runtime-dir", runtime_dir, "the front's daemon's runtime directory")
      ->required();
  app.add_option("--offlist-source", offlist,
                 "a loopback address outside the front's allow, to flood from");
  app.add_option("--rate", settings.rate, "connections per second of a flood")
      ->check(CLI::Range(1.0, 100000.0));
  app.add_option("--seconds", settings.seconds, "seconds per phase")->check(CLI::Range(0.2, 600.0));
  app.add_option("--reps", reps, "repetitions of the three phases")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (inet_pton(AF_INET, offlist.c_str(), &settings.offlist_source) != 1) {
    Die("--offlist-source: not an IPv4 address: " + offlist);
  }
  settings.tls = ClientTlsContext(tls_ca);
  // A ClientHello written to a connection the front closed at accept: EPIPE, not a signal.
  signal(SIGPIPE, SIG_IGN);

  snowflake::ClientOptions options;
  options.runtime_dir = runtime_dir;
  auto client = snowflake::Client::Open("flood-bench", options);
  if (!client) Die("cannot open a client on " + runtime_dir + ": " + client.error().message);
  Connection https(settings.port, settings.tls);
  const std::string one = Request("/v1/id?service=flood-bench");
  for (int i = 0; i < 200; ++i) https.Get(one);  // warm: the connection, the service

  std::vector<std::string> series[3];
  for (int rep = 0; rep < reps; ++rep) {
    for (int k = 0; k < 3; ++k) {
      const auto phase = static_cast<Phase>((rep + k) % 3);
      const PhaseResult r = RunPhase(phase, settings, *client, https);
      std::fprintf(stderr,
                   "%s rep %d: take p50 %.0f ns p99 %.0f ns; https /v1/id p50 %.1f us p99 %.1f "
                   "us; flood %.0f/s (%llu handshakes, %llu refused, %llu server hellos)\n",
                   kPhaseNames[static_cast<int>(phase)], rep, r.take_ns.p50, r.take_ns.p99,
                   r.https_us.p50, r.https_us.p99, r.flood_per_s,
                   static_cast<unsigned long long>(r.handshakes),
                   static_cast<unsigned long long>(r.refused),
                   static_cast<unsigned long long>(r.server_hellos));
      series[static_cast<int>(phase)].push_back(Json(r));
    }
  }
  SSL_CTX_free(settings.tls);

  std::string out = "{";
  for (int k = 0; k < 3; ++k) {
    if (k > 0) out += ',';
    out += '"';
    out += kPhaseNames[k];
    out += "\":[";
    for (size_t i = 0; i < series[k].size(); ++i) {
      if (i > 0) out += ',';
      out += series[k][i];
    }
    out += ']';
  }
  out += "}";
  std::printf("%s\n", out.c_str());
  return 0;
}
