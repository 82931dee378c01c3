// A fleet on loopback: three real snowflaked processes A, B, C (own runtime and state
// directories, static machine numbers 1, 2, 3), each with its HTTP front, and one Client
// on A with remotes B and C (docs/client.md, "Remotes and failover").
//
// Property: through every fault of A (a clock step back under libfaketime, SIGTERM,
// SIGKILL, SIGSTOP), then B down too, the Client keeps returning IDs, strictly increasing
// (so no duplicate); with every daemon down it fails with an error naming each endpoint;
// once A serves again it takes from A's ring again, even with A's clock a millisecond
// behind the remotes'. The time from each fault to the first remote ID, and back to A's
// ring, is printed (measured, never asserted).

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "http_probe.h"
#include "snowflake/client.h"
#include "snowflake/snowflake.h"

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

uint32_t MachineOf(uint64_t id) { return static_cast<uint32_t>((id >> 12) & 0x3ff); }

struct Member {
  std::unique_ptr<DaemonHarness> harness;
  DaemonOptions options;
  uint16_t port = 0;
  uint32_t machine = 0;
  std::optional<Daemon> daemon;

  void Start() {
    daemon.emplace(harness->Start(options));
    ASSERT_TRUE(daemon->ready()) << daemon->Describe();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    for (uint32_t i = 0; i < 3; ++i) {
      Member m;
      m.harness = std::make_unique<DaemonHarness>(std::string("fleet-") + char('a' + i));
      m.port = FreePort();
      m.machine = i + 1;
      m.options = m.harness->Options();
      // A clock step back of up to 5 s only pauses (it does not need `resume`). A 30 s
      // reservation (renewed 22.5 s ahead) keeps persistence out of these tests, which are
      // about the client: with the default 1000 ms, a SIGSTOP longer than the slack, or a
      // loaded disk whose fsyncs took longer than a reservation, left A paused
      // (persistence_failed) for as long as the load lasted. Slow persistence has its own
      // tests (tests/daemon/slow_store_test.cc).
      m.options.config_path = m.harness->WriteFile(
          "fleet.toml", "[register]\nbackend = \"static\"\nmachine = " + std::to_string(m.machine) +
                            "\n[clock]\nmax_backward_ms = 5000\n[persistence]\n"
                            "reservation_ms = 30000\n[http]\nlisten = [\"" +
                            m.address() + "\"]\n");
      if (i == 0) {
        offset_file_ = m.harness->root() / "offset";
        SetClockOffset(offset_file_, "+0");
        m.options.faketime_file = offset_file_;
      }
      members_.push_back(std::move(m));
      members_.back().Start();
    }
    ClientOptions options = DaemonHarness::ClientOptionsFor(a().harness->runtime_dir());
    // Notice a stopped (SIGSTOP) daemon within 1 s: long enough that a sanitized daemon on
    // a loaded host does not miss it while serving (200 ms did, once, and the client
    // rightly took one ID from B); generous HTTP limits for the same host.
    options.max_heartbeat_age = 1000ms;
    options.remotes = {b().address(), c().address()};
    options.remote_attempt_timeout = 2000ms;
    options.remote_deadline = 6000ms;
    options.remote_max_age = 5000ms;
    auto client = Client::Open("fleet", options);
    ASSERT_TRUE(client) << client.error().message;
    client_.emplace(std::move(*client));
  }

  Member& a() { return members_[0]; }
  Member& b() { return members_[1]; }
  Member& c() { return members_[2]; }

  // Takes one ID and checks it is above every earlier one.
  tl::expected<uint64_t, Error> Take() {
    auto id = client_->Next();
    if (id) {
      EXPECT_GT(*id, last_) << "an ID at or below an earlier one";
      last_ = std::max(last_, *id);
      ++taken_;
    }
    return id;
  }

  // Takes until an ID comes from `machine` (or not from it, when `from` is false); returns
  // the time that took, or nullopt after `limit`. Every take must succeed.
  std::optional<std::chrono::microseconds> TakeUntil(uint32_t machine, bool from,
                                                     std::chrono::milliseconds limit) {
    const auto start = Steady::now();
    while (Steady::now() - start < limit) {
      auto id = Take();
      if (!id) {
        ADD_FAILURE() << "a take failed: " << id.error().message;
        return std::nullopt;
      }
      if ((MachineOf(*id) == machine) == from) {
        return std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - start);
      }
    }
    return std::nullopt;
  }

  void Report(const char* fault, std::optional<std::chrono::microseconds> failover) {
    if (failover) {
      std::printf("failover after %s: first remote ID after %.3f ms\n", fault,
                  static_cast<double>(failover->count()) / 1000.0);
    } else {
      std::printf("failover after %s: no remote ID needed\n", fault);
    }
  }

  // n takes, every one of them from A's ring.
  void TakeFromAOnly(int n) {
    for (int i = 0; i < n; ++i) {
      auto id = Take();
      ASSERT_TRUE(id) << id.error().message;
      ASSERT_EQ(MachineOf(*id), a().machine);
    }
  }

  // What the Client sees of A, and the last ID it returned: for a failure's message.
  std::string LocalView() {
    std::string view = "A as the client sees it: ";
    if (auto status = client_->GetStatus()) {
      view += status->health + " (" + status->reason + "), heartbeat " +
              std::to_string(status->heartbeat_age_ns / 1'000'000) + " ms old, ring " +
              std::to_string(status->ring_fill) + "/" + std::to_string(status->ring_capacity);
    } else {
      view += status.error().message;
    }
    return view + "; last ID returned: machine " + std::to_string(MachineOf(last_)) + ", ms " +
           std::to_string(last_ >> 22);
  }

  // A serves again: the Client is back on A's ring.
  void ExpectBackOnA(const char* after) {
    const auto back = TakeUntil(a().machine, true, 15s);
    ASSERT_TRUE(back) << "not back on the local ring after " << after << "; " << LocalView();
    std::printf("back on the local ring %.3f ms after %s\n",
                static_cast<double>(back->count()) / 1000.0, after);
    // And stays there: the next IDs are A's.
    for (int i = 0; i < 100; ++i) {
      auto id = Take();
      ASSERT_TRUE(id) << id.error().message;
      EXPECT_EQ(MachineOf(*id), a().machine) << after << "; " << LocalView();
    }
  }

  std::vector<Member> members_;
  std::filesystem::path offset_file_;
  std::optional<Client> client_;
  uint64_t last_ = 0;
  uint64_t taken_ = 0;
};

TEST_F(Fleet, ClientKeepsIssuingIncreasingIdsThroughEveryFault) {
  // Healthy: local IDs only.
  ASSERT_NO_FATAL_FAILURE(TakeFromAOnly(1000));

  // 1. A 5 ms clock step back: A pauses about 5 ms (longer while the offset stays, its IDs
  //    are then behind B's and C's); back to normal, A serves again.
  SetClockOffset(offset_file_, "-0.005");
  Report("a 5 ms clock step (pause)", TakeUntil(a().machine, false, 2s));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(Take());
  SetClockOffset(offset_file_, "+0");
  ExpectBackOnA("the clock step");

  // 2. A longer pause (a 2 s step back): remote IDs for its whole length.
  SetClockOffset(offset_file_, "-2");
  const auto paused = TakeUntil(a().machine, false, 5s);
  ASSERT_TRUE(paused) << "no remote ID while A is paused";
  Report("a 2 s clock step (pause)", paused);
  SetClockOffset(offset_file_, "+0");
  ExpectBackOnA("the long pause");

  // 3. SIGTERM A.
  ASSERT_TRUE(a().daemon->Stop());
  const auto stopped = TakeUntil(a().machine, false, 5s);
  ASSERT_TRUE(stopped) << "no remote ID after SIGTERM";
  Report("SIGTERM", stopped);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(Take());
  a().Start();
  ExpectBackOnA("the restart after SIGTERM");

  // 4. SIGKILL A (its ring may still hold IDs: those come first).
  a().daemon->Kill();
  const auto killed = TakeUntil(a().machine, false, 10s);
  ASSERT_TRUE(killed) << "no remote ID after SIGKILL";
  Report("SIGKILL", killed);
  a().Start();
  ExpectBackOnA("the restart after SIGKILL");

  // 5. SIGSTOP A (hung): noticed through its heartbeat.
  ASSERT_EQ(kill(a().daemon->pid(), SIGSTOP), 0);
  const auto hung = TakeUntil(a().machine, false, 10s);
  kill(a().daemon->pid(), SIGCONT);
  ASSERT_TRUE(hung) << "no remote ID after SIGSTOP";
  Report("SIGSTOP", hung);
  ExpectBackOnA("SIGCONT");

  // 6. A and B down: IDs from C.
  ASSERT_TRUE(a().daemon->Stop());
  ASSERT_TRUE(b().daemon->Stop());
  const auto only_c = TakeUntil(c().machine, true, 10s);
  ASSERT_TRUE(only_c) << "no ID from C with A and B down";
  for (int i = 0; i < 200; ++i) {
    auto id = Take();
    ASSERT_TRUE(id) << id.error().message;
    EXPECT_EQ(MachineOf(*id), c().machine);
  }

  // 7. Everything down: a clear error naming every endpoint.
  ASSERT_TRUE(c().daemon->Stop());
  auto none = client_->Next();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ClientError::kDaemonStopped);
  EXPECT_NE(none.error().message.find(b().address()), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().message.find(c().address()), std::string::npos) << none.error().message;
  std::printf("all down: %s\n", none.error().message.c_str());

  // 8. A back: local again.
  a().Start();
  ExpectBackOnA("A's restart with B and C down");
  std::printf("%llu IDs, strictly increasing across every fault\n",
              static_cast<unsigned long long>(taken_));
}

// A's clock 5 ms behind B's and C's: after a failover each remote ID is of a millisecond
// A's ring reaches 5 ms later. A client that asked a remote whenever its ring's IDs were
// below the last one returned never came back: each answer put the last ID ahead again.
// It waits the 5 ms out on the ring once instead (up to 10 ms; further behind it keeps to
// the remotes, as the 2 s step of the test above shows).
TEST_F(Fleet, AClientComesBackToARingAFewMillisecondsBehindTheRemotes) {
  ASSERT_NO_FATAL_FAILURE(TakeFromAOnly(1000));
  // A pauses for the step (its last ID is 5 ms ahead of its clock) at its next fill pass,
  // which may come after hundreds of takes of IDs it had made before the step: take until
  // the pause sends the client to B or C (not asserted: a pass that finds nothing to
  // generate does not pause), then A serves again.
  SetClockOffset(offset_file_, "-0.005");
  Report("a 5 ms clock step (pause)", TakeUntil(a().machine, false, 2s));
  ExpectBackOnA("the 5 ms step, its clock still 5 ms behind");

  // A failover from a serving A: SIGSTOP, noticed through its heartbeat.
  ASSERT_EQ(kill(a().daemon->pid(), SIGSTOP), 0);
  const auto hung = TakeUntil(a().machine, false, 10s);
  kill(a().daemon->pid(), SIGCONT);
  ASSERT_TRUE(hung) << "no remote ID after SIGSTOP";
  ExpectBackOnA("SIGCONT, its clock still 5 ms behind");
}

TEST_F(Fleet, NextBatchFailsOverWithStrictlyIncreasingBatches) {
  ASSERT_TRUE(a().daemon->Stop());
  std::vector<uint64_t> batch(1000);
  uint64_t last = 0;
  size_t remote = 0;
  for (int round = 0; round < 20; ++round) {
    auto n = client_->NextBatch(batch);
    ASSERT_TRUE(n) << n.error().message;
    ASSERT_GE(*n, 1u);
    for (size_t i = 0; i < *n; ++i) {
      ASSERT_GT(batch[i], last) << "round " << round << " at " << i;
      last = batch[i];
      if (MachineOf(batch[i]) != a().machine) ++remote;
    }
  }
  EXPECT_GT(remote, 0u);
}

TEST_F(Fleet, SnowflakectlNextTakesFromRemotesByFlagOrEnvironment) {
  ASSERT_TRUE(a().daemon->Stop());
  auto check = [&](const RunResult& run, const char* how) {
    ASSERT_TRUE(run.status.ExitedWith(0)) << how << ": " << run.err;
    std::vector<uint64_t> ids;
    size_t start = 0;
    for (size_t nl; (nl = run.out.find('\n', start)) != std::string::npos; start = nl + 1) {
      ids.push_back(std::stoull(run.out.substr(start, nl - start)));
    }
    ASSERT_EQ(ids.size(), 300u) << how;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_NE(MachineOf(ids[i]), a().machine) << how;
      if (i > 0) {
        ASSERT_LT(ids[i - 1], ids[i]) << how << " at " << i;
      }
    }
  };
  const std::string runtime_dir = a().harness->runtime_dir().string();
  check(RunCommand({kSnowflakectlPath, "next", "-n", "300", "--runtime-dir", runtime_dir,
                    "--remote", b().address() + "," + c().address()}),
        "--remote");
  RunOptions env;
  env.env.set = {{"SNOWFLAKE_REMOTES", c().address() + "," + b().address()}};
  check(RunCommand({kSnowflakectlPath, "next", "-n", "300", "--runtime-dir", runtime_dir}, env),
        "SNOWFLAKE_REMOTES");
  // Without remotes the same command fails, naming the stopped daemon.
  const RunResult alone =
      RunCommand({kSnowflakectlPath, "next", "-n", "1", "--runtime-dir", runtime_dir});
  EXPECT_TRUE(alone.status.ExitedWith(1)) << alone.status.ToString();
  EXPECT_NE(alone.err.find("stopped"), std::string::npos) << alone.err;
}

// A caller on a host without snowflaked: no segment and no runtime dir at all. With
// remotes, Open succeeds and every take comes from B or C, strictly increasing; without
// them Open fails as before. The C API alike.
TEST_F(Fleet, ClientWithoutALocalDaemonTakesFromRemotes) {
  const std::filesystem::path nowhere = a().harness->root() / "no-daemon-here";
  ASSERT_FALSE(std::filesystem::exists(nowhere));
  ClientOptions options = DaemonHarness::ClientOptionsFor(nowhere);
  options.remotes = {b().address(), c().address()};
  options.remote_attempt_timeout = 2000ms;
  options.remote_deadline = 6000ms;
  options.remote_max_age = 5000ms;
  auto client = Client::Open("remote-only", options);
  ASSERT_TRUE(client) << client.error().message;
  uint64_t last = 0;
  for (int i = 0; i < 300; ++i) {
    auto id = client->Next();
    ASSERT_TRUE(id) << "take " << i << ": " << id.error().message;
    ASSERT_GT(*id, last) << "take " << i;
    const uint32_t machine = MachineOf(*id);
    EXPECT_TRUE(machine == b().machine || machine == c().machine) << "machine " << machine;
    last = *id;
  }
  std::vector<uint64_t> batch(500);
  auto n = client->NextBatch(batch);
  ASSERT_TRUE(n) << n.error().message;
  for (size_t i = 0; i < *n; ++i) {
    ASSERT_GT(batch[i], last) << "batch at " << i;
    last = batch[i];
  }
  // Its status says there is no local daemon; it still serves from the remotes.
  auto status = client->GetStatus();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ClientError::kDaemonNotRunning);

  // B stops: C alone serves; then C too: the error names both endpoints.
  ASSERT_TRUE(b().daemon->Stop());
  for (int i = 0; i < 50; ++i) {
    auto id = client->Next();
    ASSERT_TRUE(id) << id.error().message;
    ASSERT_GT(*id, last);
    EXPECT_EQ(MachineOf(*id), c().machine);
    last = *id;
  }
  ASSERT_TRUE(c().daemon->Stop());
  auto none = client->Next();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ClientError::kDaemonNotRunning);
  EXPECT_NE(none.error().message.find(b().address()), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().message.find(c().address()), std::string::npos) << none.error().message;

  // Without remotes, the same Open fails: no daemon.
  ClientOptions alone = DaemonHarness::ClientOptionsFor(nowhere);
  auto refused = Client::Open("remote-only", alone);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ClientError::kDaemonNotRunning);
}

TEST_F(Fleet, CApiWithoutALocalDaemonTakesFromRemotes) {
  const std::string nowhere = (a().harness->root() / "no-daemon-here").string();
  const std::string remotes = b().address() + "," + c().address();
  sf_options options;
  sf_options_init(&options);
  options.runtime_dir = nowhere.c_str();
  options.remotes = remotes.c_str();
  sf_client* client = nullptr;
  ASSERT_EQ(sf_open("remote-only-c", &options, &client), SF_OK) << sf_last_error();
  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    uint64_t id = 0;
    ASSERT_EQ(sf_next(client, &id), SF_OK) << "take " << i << ": " << sf_last_error();
    ASSERT_GT(id, last);
    EXPECT_NE(MachineOf(id), a().machine);
    last = id;
  }
  sf_close(client);

  options.remotes = nullptr;  // and SNOWFLAKE_REMOTES is not set in tests
  EXPECT_EQ(sf_open("remote-only-c", &options, &client), SF_DAEMON_NOT_RUNNING);
  EXPECT_EQ(client, nullptr);
}

// One daemon with its HTTP front on a fresh harness: static machine `machine`, `extra`
// TOML appended, optionally under libfaketime (its offset in root/offset, `offset` to
// begin with), with `env` added to its environment.
Member StartMember(const std::string& name, uint32_t machine, const std::string& extra = "",
                   std::optional<std::string> offset = std::nullopt, EnvChanges env = {}) {
  Member m;
  m.harness = std::make_unique<DaemonHarness>(name);
  m.port = FreePort();
  m.machine = machine;
  m.options = m.harness->Options();
  m.options.config_path = m.harness->WriteFile(
      "member.toml", "[register]\nbackend = \"static\"\nmachine = " + std::to_string(machine) +
                         "\n[clock]\nmax_backward_ms = 5000\n[http]\nlisten = [\"" + m.address() +
                         "\"]\n" + extra);
  if (offset) {
    SetClockOffset(m.harness->root() / "offset", *offset);
    m.options.faketime_file = m.harness->root() / "offset";
  }
  m.options.env = std::move(env);
  m.Start();
  return m;
}

// Client options for a host without snowflaked (no runtime directory), with `remotes` and
// HTTP limits generous for a loaded, sanitized host.
ClientOptions RemoteOnlyOptions(const Member& anchor, std::vector<std::string> remotes) {
  ClientOptions options = DaemonHarness::ClientOptionsFor(anchor.harness->root() / "no-daemon");
  options.remotes = std::move(remotes);
  options.remote_attempt_timeout = 2000ms;
  options.remote_deadline = 6000ms;
  options.remote_max_age = 5000ms;
  return options;
}

// A remote whose clock is 30 s fast, and one of another epoch (2025-01-01: its IDs decode
// a year in the future with the client's epoch), must not push the client's last ID ahead:
// that would make it refuse every correct source until its own clock caught up. Their IDs
// are refused, naming the remote and why; a correct remote serves.
TEST(Remotes, IdsAheadOfTheClientsClockAreRefusedNamingTheRemote) {
  Member fast = StartMember("remote-fast", 4, "", "+30");
  Member other_epoch = StartMember("remote-epoch", 5, "[id]\nepoch = \"2025-01-01T00:00:00Z\"\n");
  Member good = StartMember("remote-good", 6);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  auto sut = Client::Open(
      "ahead", RemoteOnlyOptions(good, {fast.address(), other_epoch.address(), good.address()}));
  ASSERT_TRUE(sut) << sut.error().message;

  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    auto id = sut->Next();
    ASSERT_TRUE(id) << "take " << i << ": " << id.error().message;
    ASSERT_GT(*id, last) << "take " << i;
    ASSERT_EQ(MachineOf(*id), good.machine) << "take " << i << " accepted an ID from the future";
    last = *id;
  }
  ASSERT_TRUE(good.daemon->Stop());
  auto none = sut->Next();

  ASSERT_FALSE(none) << "an ID from machine " << MachineOf(*none);
  const std::string& why = none.error().message;
  // What the error says of one endpoint: from its address to the next "; " (its breaker
  // may still skip it: "skipped for N ms more after: <the reason>").
  auto said_of = [&why](const std::string& address) {
    const size_t at = why.find(address + ": ");
    if (at == std::string::npos) return std::string();
    const size_t end = why.find("; ", at);
    return why.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  EXPECT_NE(said_of(fast.address()).find("ms ahead of this host's clock"), std::string::npos)
      << why;
  EXPECT_NE(said_of(other_epoch.address()).find("ms ahead of this host's clock"), std::string::npos)
      << why;
  std::printf("refused: %s\n", why.c_str());
}

// `snowflakectl next --remote` on a host without snowflaked (no runtime directory at all):
// the remotes serve, by flag or by $SNOWFLAKE_REMOTES; without them it still says no
// daemon runs there.
TEST(Remotes, SnowflakectlNextWithoutARuntimeDirTakesFromTheRemote) {
  Member remote = StartMember("remote-cli", 7);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const std::string nowhere = (remote.harness->root() / "no-daemon").string();
  auto check = [&](const RunResult& run, const char* how) {
    ASSERT_TRUE(run.status.ExitedWith(0))
        << how << ": " << run.status.ToString() << ": " << run.err;
    std::vector<uint64_t> ids;
    size_t start = 0;
    for (size_t nl; (nl = run.out.find('\n', start)) != std::string::npos; start = nl + 1) {
      ids.push_back(std::stoull(run.out.substr(start, nl - start)));
    }
    ASSERT_EQ(ids.size(), 100u) << how;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(MachineOf(ids[i]), remote.machine) << how;
      if (i > 0) {
        ASSERT_LT(ids[i - 1], ids[i]) << how << " at " << i;
      }
    }
  };

  check(RunCommand({kSnowflakectlPath, "next", "-n", "100", "--runtime-dir", nowhere, "--remote",
                    remote.address()}),
        "--remote");
  RunOptions env;
  env.env.set = {{"SNOWFLAKE_REMOTES", remote.address()}};
  check(RunCommand({kSnowflakectlPath, "next", "-n", "100", "--runtime-dir", nowhere}, env),
        "SNOWFLAKE_REMOTES");
  const RunResult alone =
      RunCommand({kSnowflakectlPath, "next", "-n", "1", "--runtime-dir", nowhere});
  EXPECT_TRUE(alone.status.ExitedWith(1)) << alone.status.ToString();
  EXPECT_NE(alone.err.find("does not exist"), std::string::npos) << alone.err;
}

// A daemon started with SNOWFLAKE_REMOTES in its environment (meant for its clients) must
// not hand its front's callers another daemon's IDs: fronts forwarding to each other would
// loop, and a caller of this front asked for this host's IDs. With its ring paused (a clock
// step back), its front answers 503 paused, never with the other daemon's IDs.
TEST(Remotes, TheHttpFrontNeverForwardsToSnowflakeRemotes) {
  Member other = StartMember("front-other", 8);
  EnvChanges env;
  env.set = {{"SNOWFLAKE_REMOTES", other.address()}};
  Member sut = StartMember("front-sut", 9, "", "+0", env);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const HttpReply serving = FetchOnce(sut.port, "/v1/ids?service=front&count=5");
  ASSERT_EQ(serving.status, 200) << serving.body;
  for (uint64_t id : IdsOf(serving.body)) EXPECT_EQ(MachineOf(id), sut.machine);

  SetClockOffset(sut.harness->root() / "offset", "-2");
  const auto paused = WaitForState(sut.harness->runtime_dir(), "paused", 10s);
  ASSERT_TRUE(paused && paused->state == "paused") << "the daemon did not pause";
  HttpReply reply;
  for (int i = 0; i < 20; ++i) {
    reply = FetchOnce(sut.port, "/v1/ids?service=front&count=5");
    for (uint64_t id : IdsOf(reply.body)) {
      ASSERT_NE(MachineOf(id), other.machine) << "the front forwarded to " << other.address();
    }
    if (reply.status != 200) break;
  }
  SetClockOffset(sut.harness->root() / "offset", "+0");

  EXPECT_EQ(reply.status, 503) << reply.body;
  EXPECT_NE(reply.body.find("paused"), std::string::npos) << reply.body;
}

}  // namespace
}  // namespace snowflake::testing
