// failover_bench: how long a Client with remotes goes without an ID when its local
// daemon pauses (a clock step back under libfaketime), stops (SIGTERM) or dies (SIGKILL):
// the time from the fault to the first ID from the remote. Prints one JSON object:
// {"failover_pause_ms":[...], "failover_stop_ms":[...], "failover_kill_ms":[...]}, one
// value per sample (scripts/bench reports p50 and p99).
//
//   failover_bench --snowflaked PATH --work DIR --remote HOST:PORT --faketime LIB
//                  [--samples N] [--machine M]
//
// It runs the local daemon ("A", static machine M, default 1) itself in DIR, restarting
// it after each stop or kill; the remote (another snowflaked with [http]) is the caller's.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "baselines.h"
#include "snowflake/client.h"

extern char** environ;

namespace {

using snowflake::bench::MonotonicNs;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "failover_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Setup {
  std::string snowflaked;
  std::filesystem::path work;
  std::string remote;
  std::string faketime;
  int samples = 5;
  uint32_t machine = 1;
};

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  const auto tmp = path.string() + ".tmp";
  std::ofstream(tmp) << text << "\n";
  std::filesystem::rename(tmp, path);
}

pid_t SpawnDaemon(const Setup& s) {
  const std::string config = (s.work / "a.toml").string();
  std::vector<std::string> args = {s.snowflaked,
                                   "--config",
                                   config,
                                   "--runtime-dir",
                                   (s.work / "run").string(),
                                   "--state-dir",
                                   (s.work / "state").string(),
                                   "--log-level",
                                   "warn"};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("LD_PRELOAD=" + s.faketime);
  env.push_back("FAKETIME_TIMESTAMP_FILE=" + (s.work / "offset").string());
  env.push_back("FAKETIME_NO_CACHE=1");
  env.push_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // The bench ignores SIGCHLD (see main); the daemon gets the default back.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGCHLD);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) Die("cannot start " + s.snowflaked);
  return pid;
}

void WaitServing(const Setup& s) {
  snowflake::ClientOptions options;
  options.runtime_dir = s.work / "run";
  const int64_t deadline = MonotonicNs() + 30'000'000'000;
  while (MonotonicNs() < deadline) {
    auto status = snowflake::Client::Inspect(options);
    if (status && status->health == "serving") return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Die("the local daemon did not start serving");
}

// In the client's layout: the local daemon's, which the remote's shares (one fleet).
uint32_t MachineOf(const snowflake::Client& client, uint64_t id) {
  return client.layout().Decode(id).value().machine;
}

// Takes until an ID comes from (from = true) or not from `machine`; returns ms taken.
double TakeUntil(snowflake::Client& client, uint32_t machine, bool from, uint64_t& last) {
  const int64_t start = MonotonicNs();
  for (;;) {
    auto id = client.Next();
    if (!id) Die("a take failed: " + id.error().message);
    if (*id <= last) Die("an ID at or below an earlier one");
    last = *id;
    if ((MachineOf(client, *id) == machine) == from) {
      return static_cast<double>(MonotonicNs() - start) / 1e6;
    }
    if (MonotonicNs() - start > 30'000'000'000) Die("no switch within 30 s");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  CLI::App app{
      "failover_bench: how long a client's take fails over to a remote when the "
      "local daemon dies, pauses or stops"};
  app.add_option("--snowflaked", s.snowflaked, "the daemon's binary")->required();
  app.add_option("--work", s.work, "a scratch directory")->required();
  app.add_option("--remote", s.remote, "another daemon's HTTP front, HOST:PORT")->required();
  app.add_option("--faketime", s.faketime, "libfaketime's library")->required();
  app.add_option("--samples", s.samples, "samples per scenario")->check(CLI::Range(1, 100'000));
  app.add_option("--machine", s.machine, "the local daemon's machine number")
      ->check(CLI::Range(uint32_t{0}, snowflake::kMaxMachineOfAnyLayout));
  CLI11_PARSE(app, argc, argv);
  // A killed daemon is reaped at once, as systemd (its parent in production) does: a
  // zombie still answers kill(pid, 0), so the client could only tell it dead by its
  // heartbeat (liveness_ms), not by its pid (docs/client.md). With SIGCHLD ignored the
  // kernel reaps our children itself; waitpid() below then just waits for the exit.
  signal(SIGCHLD, SIG_IGN);
  std::filesystem::create_directories(s.work / "run");
  std::filesystem::create_directories(s.work / "state");
  WriteFile(s.work / "offset", "+0");
  WriteFile(s.work / "a.toml", "[register]\nbackend = \"static\"\nmachine = " +
                                   std::to_string(s.machine) +
                                   "\n[clock]\nmax_backward_ms = 5000\n");
  pid_t pid = SpawnDaemon(s);
  WaitServing(s);

  snowflake::ClientOptions options;
  options.runtime_dir = s.work / "run";
  options.remotes = {s.remote};
  auto client = snowflake::Client::Open("failover-bench", options);
  if (!client) Die(client.error().message);
  uint64_t last = 0;

  std::vector<double> pause, stop, kill_ms;
  for (int i = 0; i < s.samples; ++i) {
    for (int k = 0; k < 1000; ++k) TakeUntil(*client, s.machine, true, last);

    WriteFile(s.work / "offset", "-0.3");  // paused about 300 ms
    pause.push_back(TakeUntil(*client, s.machine, false, last));
    WriteFile(s.work / "offset", "+0");
    TakeUntil(*client, s.machine, true, last);

    kill(pid, SIGTERM);
    stop.push_back(TakeUntil(*client, s.machine, false, last));
    waitpid(pid, nullptr, 0);
    pid = SpawnDaemon(s);
    WaitServing(s);
    TakeUntil(*client, s.machine, true, last);

    kill(pid, SIGKILL);
    kill_ms.push_back(TakeUntil(*client, s.machine, false, last));
    waitpid(pid, nullptr, 0);
    pid = SpawnDaemon(s);
    WaitServing(s);
    TakeUntil(*client, s.machine, true, last);
    std::fprintf(stderr, "failover sample %d: pause %.3f ms, stop %.3f ms, kill %.3f ms\n", i,
                 pause.back(), stop.back(), kill_ms.back());
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);

  auto list = [](const std::vector<double>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ',';  // piece by piece: GCC 12's -Wrestrict misfires on operator+
      out += std::to_string(v[i]);
    }
    out += ']';
    return out;
  };
  std::printf("{\"failover_pause_ms\":%s,\"failover_stop_ms\":%s,\"failover_kill_ms\":%s}\n",
              list(pause).c_str(), list(stop).c_str(), list(kill_ms).c_str());
  return 0;
}
