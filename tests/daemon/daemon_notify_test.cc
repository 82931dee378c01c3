// The real snowflaked speaking sd_notify to a NOTIFY_SOCKET this test owns (as systemd
// would): READY=1 only after the machine number is claimed and the ring serves,
// WATCHDOG=1 at the configured cadence, STATUS= naming machine and state, and SIGTERM ->
// STOPPING=1, segment state `stopped`, exit 0.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "daemon_harness.h"
#include "snowflake/client.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::NotifyMessage;
using testing::WaitUntil;

std::optional<nlohmann::json> ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  auto parsed = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

// The register entry recording a claim by `pid`, if any.
std::optional<nlohmann::json> RegisterEntryOf(const std::filesystem::path& register_path,
                                              pid_t pid) {
  auto doc = ReadJson(register_path);
  if (!doc || !doc->contains("machines")) return std::nullopt;
  for (const auto& entry : (*doc)["machines"]) {
    if (entry.value("pid", int64_t{-1}) == pid) return entry;
  }
  return std::nullopt;
}

TEST(DaemonNotify, ReadyArrivesOnlyAfterTheClaimWithTheSegmentServing) {
  // Arrange: hold the file register's lock, so the daemon blocks inside its claim.
  DaemonHarness harness("notify-ready");
  const auto register_path = harness.state_dir() / "register.json";
  const int lock_fd =
      open((register_path.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(lock_fd, 0);
  ASSERT_EQ(flock(lock_fd, LOCK_EX), 0);
  // The daemon polls the lock (LOCK_NB, so no waiter shows in /proc/locks), opening its
  // file at each attempt: two opens seen here mean it is inside its claim, blocked.
  const int watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(watch, 0);
  ASSERT_GE(inotify_add_watch(watch, (register_path.string() + ".lock").c_str(), IN_OPEN), 0);
  Daemon sut = Daemon::Spawn(harness.Options());

  // Act 1: while the claim cannot complete (it gives up after 2 s of attempts, so what
  // follows the second attempt is read at once, then the lock is released).
  int opens = 0;
  const bool blocked = WaitUntil(
      [&] {
        alignas(inotify_event) char events[4096];
        for (ssize_t n; (n = read(watch, events, sizeof events)) > 0;) {
          for (char* at = events; at < events + n;) {
            const auto* event = reinterpret_cast<const inotify_event*>(at);
            opens += (event->mask & IN_OPEN) != 0 ? 1 : 0;
            at += sizeof(inotify_event) + event->len;
          }
        }
        return opens >= 2;
      },
      30s, "the daemon's attempts at the register lock", 1ms);
  close(watch);
  const bool ready_while_blocked = sut.ready();
  const bool running_while_blocked = sut.Running();
  auto blocked_status = Client::Inspect(harness.Clients());
  // Act 2: let the claim through.
  close(lock_fd);
  const bool ready = sut.WaitForReady(30s);
  // Read everything at once, right after READY=1 came.
  auto status = Client::Inspect(harness.Clients());
  auto entry = RegisterEntryOf(register_path, sut.pid());

  // Assert
  EXPECT_TRUE(blocked) << "the daemon never tried the held lock: " << sut.Describe();
  EXPECT_FALSE(ready_while_blocked) << sut.Describe();
  EXPECT_TRUE(running_while_blocked) << sut.Describe();
  EXPECT_TRUE(!blocked_status || blocked_status->state != "serving")
      << "the segment served before the claim: " << blocked_status->state;
  ASSERT_TRUE(ready) << sut.Describe();
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(status->state, "serving");
  EXPECT_EQ(status->health, "serving");
  EXPECT_EQ(status->daemon_pid, static_cast<uint64_t>(sut.pid()));
  // The fill before READY=1, by a count that never falls: the ring itself may be empty
  // for a moment by now (a pass drains what aged before it refills, and a loaded host can
  // delay this read past the ring's max age).
  EXPECT_GT(status->published_total, 0u) << "READY=1 before the ring was filled";
  ASSERT_TRUE(entry) << "no register entry for pid " << sut.pid() << " in " << register_path;
  EXPECT_EQ((*entry)["machine"].get<int64_t>(), static_cast<int64_t>(status->machine));
  EXPECT_FALSE((*entry)["holder"].get<std::string>().empty());
}

TEST(DaemonNotify, WatchdogArrivesRepeatedlyAtTheConfiguredCadence) {
  DaemonHarness harness("notify-watchdog");
  DaemonOptions options = harness.Options();
  options.watchdog_usec = 200'000us;  // WATCHDOG=1 expected about every 100 ms
  Daemon sut = harness.Start(options);
  ASSERT_TRUE(sut.ready()) << sut.Describe();

  const size_t before = sut.notify().CountLine("WATCHDOG=1");
  // The subject: how many pings a fixed 2 s window holds (a cadence), not an event.
  std::this_thread::sleep_for(2s);
  const size_t during = sut.notify().CountLine("WATCHDOG=1") - before;

  // About 20 are due; far fewer would let systemd kill a healthy daemon (the interval is
  // 200 ms). No tight bound: a loaded host may delay a few.
  std::cout << "WATCHDOG=1 messages in 2 s with WATCHDOG_USEC=200000: " << during << "\n";
  ::testing::Test::RecordProperty("watchdog_messages_in_2s", static_cast<int>(during));
  EXPECT_GE(during, 5u) << sut.Describe();
  EXPECT_TRUE(sut.Running());
}

TEST(DaemonNotify, WatchdogFollowsALongIntervalAndIsSilentWhenNotEnabled) {
  DaemonHarness harness("notify-watchdog-long");
  DaemonOptions slow_options = harness.Options();
  slow_options.watchdog_usec = 20'000'000us;  // one due every 10 s
  Daemon slow = harness.Start(slow_options);
  DaemonOptions off_options = harness.Options();
  off_options.runtime_dir = harness.root() / "run-off";
  off_options.state_dir = harness.root() / "state-off";
  Daemon off = harness.Start(off_options);
  ASSERT_TRUE(slow.ready()) << slow.Describe();
  ASSERT_TRUE(off.ready()) << off.Describe();

  // The subject: silence over a 2 s window; no event marks "no ping was sent".
  std::this_thread::sleep_for(2s);
  const size_t slow_count = slow.notify().CountLine("WATCHDOG=1");
  const size_t off_count = off.notify().CountLine("WATCHDOG=1");

  // At most one at start and none due since: a daemon that ignored WATCHDOG_USEC and
  // pinged every pass would send hundreds.
  EXPECT_LE(slow_count, 2u) << slow.Describe();
  EXPECT_EQ(off_count, 0u) << off.Describe();
}

TEST(DaemonNotify, StatusNamesTheMachineAndTheState) {
  DaemonHarness harness("notify-status");
  Daemon sut = harness.Start();
  ASSERT_TRUE(sut.ready()) << sut.Describe();
  auto status = Client::Inspect(harness.Clients());
  ASSERT_TRUE(status) << status.error().message;

  const std::regex wanted("serving.*machine " + std::to_string(status->machine) + "\\b");
  auto found = sut.notify().WaitFor(
      [&](const NotifyMessage& message) {
        auto text = message.Value("STATUS");
        return text && std::regex_search(*text, wanted);
      },
      5s);

  EXPECT_TRUE(found) << "no STATUS= with state serving and machine " << status->machine << ": "
                     << sut.Describe();
}

TEST(DaemonNotify, SigtermSendsStoppingMarksTheSegmentStoppedAndExitsZero) {
  DaemonHarness harness("notify-stop");
  Daemon sut = harness.Start();
  ASSERT_TRUE(sut.ready()) << sut.Describe();
  auto client = Client::Open("notify-test", harness.Clients());
  ASSERT_TRUE(client) << client.error().message;
  ASSERT_TRUE(client->Next()) << sut.Describe();

  auto exit_status = sut.Stop(30s);
  auto status = Client::Inspect(harness.Clients());
  auto after = client->Next();

  ASSERT_TRUE(exit_status) << "did not exit within 30 s of SIGTERM: " << sut.Describe();
  EXPECT_TRUE(exit_status->ExitedWith(0)) << exit_status->ToString() << "\n" << sut.Describe();
  // The datagram is in the socket when the daemon exits; the reader may not have taken it.
  EXPECT_TRUE(sut.notify().WaitForLine("STOPPING=1", 10s)) << sut.Describe();
  EXPECT_EQ(sut.notify().CountLine("STOPPING=1"), 1u) << sut.Describe();
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(status->state, "stopped");
  ASSERT_FALSE(after) << "an ID after the daemon stopped: " << *after;
  EXPECT_EQ(after.error().code, ClientError::kDaemonStopped) << after.error().message;
}

}  // namespace
}  // namespace snowflake
