// The real snowflaked across restarts and beside other daemons:
//   - SIGKILL, then a restart on the same runtime dir: every later ID is larger than every
//     ID taken before, and a client opened before the kill keeps working;
//   - a restart without the segment (a reboot) continues above the persisted reservation;
//   - two daemons on one runtime dir: the second exits 2 naming the holder's pid;
//   - two daemons sharing one file register get different numbers, a restarted one gets
//     its number back, and one holder id twice at once is refused (never one number live
//     twice).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/client.h"
#include "snowflake/id_layout.h"
#include "test_paths.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;

// Takes `count` IDs in batches; appends them to `ids`. Returns the first error's message,
// or "".
std::string TakeIds(Client& client, size_t count, std::vector<uint64_t>& ids) {
  std::vector<uint64_t> batch(256);
  while (count > 0) {
    auto taken = client.NextBatch(std::span(batch.data(), std::min(count, batch.size())));
    if (!taken) return taken.error().message;
    ids.insert(ids.end(), batch.begin(), batch.begin() + static_cast<ptrdiff_t>(*taken));
    count -= *taken;
  }
  return "";
}

// Retries Next() while the daemon comes back (up to `timeout`).
tl::expected<uint64_t, Error> NextWithin(Client& client, std::chrono::milliseconds timeout) {
  return testing::AttemptUntil([&] { return client.Next(); }, testing::kSucceeded, timeout);
}

bool StrictlyIncreasing(const std::vector<uint64_t>& ids) {
  return std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<>()) == ids.end();
}

TEST(DaemonRestart, SigkillThenRestartContinuesAboveEveryIdAndKeepsClientsWorking) {
  // Arrange
  DaemonHarness harness("restart-kill");
  std::optional<Daemon> first = harness.Start();
  ASSERT_TRUE(first->ready()) << first->Describe();
  auto sut = Client::Open("restart-test", harness.Clients());
  ASSERT_TRUE(sut) << sut.error().message;
  std::vector<uint64_t> before;
  ASSERT_EQ(TakeIds(*sut, 50'000, before), "");
  const uint64_t incarnation_before = Client::Inspect(harness.Clients())->incarnation;

  // Act
  first->Kill();
  Daemon second = harness.Start();
  auto id_after = NextWithin(*sut, 20s);
  std::vector<uint64_t> after;
  const std::string after_error = TakeIds(*sut, 50'000, after);
  auto fresh = Client::Open("restart-fresh", harness.Clients());
  auto fresh_id = fresh ? fresh->Next() : tl::make_unexpected(fresh.error());
  auto status = Client::Inspect(harness.Clients());

  // Assert
  ASSERT_TRUE(second.ready()) << second.Describe();
  ASSERT_TRUE(id_after) << "the client opened before the kill: " << id_after.error().message;
  EXPECT_GT(*id_after, before.back());
  EXPECT_EQ(after_error, "");
  EXPECT_TRUE(StrictlyIncreasing(before));
  EXPECT_TRUE(StrictlyIncreasing(after));
  ASSERT_FALSE(after.empty());
  EXPECT_GT(after.front(), *id_after);
  ASSERT_TRUE(fresh_id) << fresh_id.error().message;
  EXPECT_GT(*fresh_id, after.back());
  ASSERT_TRUE(status);
  EXPECT_EQ(status->daemon_pid, static_cast<uint64_t>(second.pid()));
  EXPECT_GT(status->incarnation, incarnation_before) << "the restart did not continue the segment";
}

// Finding 10: a SIGKILLed daemon restarted on its surviving segment continues from the
// segment's last published ID; only a lost segment (a reboot) makes it wait out the
// reservation. With a 10 s reservation, waiting it out would put every new ID above it.
TEST(DaemonRestart, SigkillOnTheSurvivingSegmentServesWithoutWaitingOutTheReservation) {
  // Arrange
  DaemonHarness harness("restart-fast");
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile("fast.toml", "[persistence]\nreservation_ms = 10000\n");
  std::optional<Daemon> first = harness.Start(options);
  ASSERT_TRUE(first->ready()) << first->Describe();
  auto sut = Client::Open("restart-fast", harness.Clients());
  ASSERT_TRUE(sut) << sut.error().message;
  std::vector<uint64_t> before;
  ASSERT_EQ(TakeIds(*sut, 20'000, before), "");

  // Act
  first->Kill();
  const auto high_water = nlohmann::json::parse(
      std::ifstream(harness.state_dir() / "high-water.json"));
  const int64_t reserved = high_water.at("reserved_through_unix_ms").get<int64_t>();
  const auto began = std::chrono::steady_clock::now();
  Daemon second = harness.Start(options);
  const auto restart = std::chrono::steady_clock::now() - began;
  auto id_after = NextWithin(*sut, 20s);

  // Assert
  ASSERT_TRUE(second.ready()) << second.Describe();
  std::cout << "restart to serving: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(restart).count()
            << " ms (reservation 10000 ms)\n";
  ASSERT_TRUE(id_after) << id_after.error().message;
  EXPECT_GT(*id_after, before.back());
  EXPECT_LT(kDefaultEpochUnixMs + IdLayout().OffsetMsOf(*id_after), reserved)
      << "the restart waited out the reservation";
  EXPECT_TRUE(second.WaitForErr("need not be waited out")) << second.err();
}

// A runtime directory that outlived a reboot (on a disk, not tmpfs) holds the previous
// boot's segment. Its counters may be older than the state file, so a daemon must not
// trust it as a surviving segment: it retires it (clients of it see "stopped") and
// creates a fresh one above every ID, which a client opened before moves to.
TEST(DaemonRestart, ASegmentLeftByAnotherBootIsReplacedNotContinued) {
  // Arrange
  DaemonHarness harness("restart-boot");
  std::optional<Daemon> first = harness.Start();
  ASSERT_TRUE(first->ready()) << first->Describe();
  auto sut = Client::Open("restart-boot", harness.Clients());
  ASSERT_TRUE(sut) << sut.error().message;
  std::vector<uint64_t> before;
  ASSERT_EQ(TakeIds(*sut, 20'000, before), "");
  first->Kill();
  // The boot id in the header (bytes 272-287, shm/LAYOUT.md) as another boot wrote it.
  const std::string ring = (harness.runtime_dir() / "snowflake.ring").string();
  const uint64_t other_boot[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  const int fd = open(ring.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ring;
  ASSERT_EQ(pwrite(fd, other_boot, sizeof other_boot, 272),
            static_cast<ssize_t>(sizeof other_boot));
  close(fd);

  // Act
  Daemon second = harness.Start();
  auto id_after = NextWithin(*sut, 20s);
  auto status = Client::Inspect(harness.Clients());

  // Assert
  ASSERT_TRUE(second.ready()) << second.Describe();
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(status->incarnation, 1u) << "the segment of another boot was continued";
  EXPECT_TRUE(second.WaitForErr("another boot")) << second.err();
  EXPECT_EQ(second.err().find("need not be waited out"), std::string::npos) << second.err();
  ASSERT_TRUE(id_after) << id_after.error().message;
  EXPECT_GT(*id_after, before.back());
}

bool OnTmpfs(const std::filesystem::path& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

TEST(DaemonRestart, ARuntimeDirOnDiskIsNamedAtStartAndOneOnTmpfsIsNot) {
  // Arrange: one runtime dir in the build tree (on disk), one under /dev/shm (tmpfs).
  DaemonHarness harness("runtime-fs");
  const std::filesystem::path disk =
      std::filesystem::path(::snowflake::testing::BinaryPath("tests")) /
      ("runtime-fs-" + std::to_string(::getpid()));
  const std::filesystem::path memory = "/dev/shm/snowflake-runtime-fs-" + std::to_string(::getpid());
  std::filesystem::create_directories(disk);
  std::filesystem::create_directories(memory);
  if (OnTmpfs(disk) || !OnTmpfs(memory)) {
    std::filesystem::remove_all(disk);
    std::filesystem::remove_all(memory);
    GTEST_SKIP() << "needs the build tree on disk and /dev/shm on tmpfs";
  }
  DaemonOptions on_disk = harness.Options();
  on_disk.runtime_dir = disk / "run";
  DaemonOptions in_memory = harness.Options();
  in_memory.runtime_dir = memory / "run";
  in_memory.state_dir = harness.root() / "state-2";

  // Act
  Daemon a = harness.Start(on_disk);
  Daemon b = harness.Start(in_memory);
  const bool a_warned = a.WaitForErr("is not on tmpfs");
  auto a_stopped = a.Stop();
  auto b_stopped = b.Stop();
  std::filesystem::remove_all(disk);
  std::filesystem::remove_all(memory);

  // Assert
  ASSERT_TRUE(a.ready()) << a.Describe();
  ASSERT_TRUE(b.ready()) << b.Describe();
  EXPECT_TRUE(a_warned) << a.err();
  EXPECT_NE(a.err().find(on_disk.runtime_dir.string()), std::string::npos) << a.err();
  EXPECT_EQ(b.err().find("is not on tmpfs"), std::string::npos) << b.err();
  EXPECT_TRUE(a_stopped && a_stopped->ExitedWith(0));
  EXPECT_TRUE(b_stopped && b_stopped->ExitedWith(0));
}

TEST(DaemonRestart, CleanRestartContinuesAboveEveryId) {
  DaemonHarness harness("restart-clean");
  std::optional<Daemon> first = harness.Start();
  ASSERT_TRUE(first->ready()) << first->Describe();
  auto sut = Client::Open("restart-test", harness.Clients());
  ASSERT_TRUE(sut) << sut.error().message;
  std::vector<uint64_t> before;
  ASSERT_EQ(TakeIds(*sut, 20'000, before), "");

  auto stopped = first->Stop();
  Daemon second = harness.Start();
  auto id_after = NextWithin(*sut, 20s);

  ASSERT_TRUE(stopped && stopped->ExitedWith(0)) << first->Describe();
  ASSERT_TRUE(second.ready()) << second.Describe();
  ASSERT_TRUE(id_after) << id_after.error().message;
  EXPECT_GT(*id_after, before.back());
}

TEST(DaemonRestart, RestartWithoutTheSegmentContinuesAboveTheReservation) {
  // A reboot: the runtime dir (tmpfs) is gone, the state dir survives.
  DaemonHarness harness("restart-reboot");
  std::optional<Daemon> first = harness.Start();
  ASSERT_TRUE(first->ready()) << first->Describe();
  uint64_t last_before = 0;
  {
    auto client = Client::Open("restart-test", harness.Clients());
    ASSERT_TRUE(client) << client.error().message;
    std::vector<uint64_t> before;
    ASSERT_EQ(TakeIds(*client, 20'000, before), "");
    last_before = before.back();
  }
  first->Kill();
  std::filesystem::remove_all(harness.runtime_dir());

  Daemon second = harness.Start();
  auto client = Client::Open("restart-test", harness.Clients());
  ASSERT_TRUE(client) << client.error().message;
  auto id_after = NextWithin(*client, 20s);

  ASSERT_TRUE(second.ready()) << second.Describe();
  ASSERT_TRUE(id_after) << id_after.error().message;
  EXPECT_GT(*id_after, last_before);
}

TEST(DaemonRestart, ALaterEpochUnderTheSameStateIsRefused) {
  // A later epoch shrinks every ID's time field, so new IDs could repeat the old ones.
  DaemonHarness harness("restart-epoch");
  {
    Daemon first = harness.Start();
    ASSERT_TRUE(first.ready()) << first.Describe();
    auto client = Client::Open("restart-test", harness.Clients());
    ASSERT_TRUE(client) << client.error().message;
    ASSERT_TRUE(client->Next());
    auto stopped = first.Stop();
    ASSERT_TRUE(stopped && stopped->ExitedWith(0)) << first.Describe();
  }
  DaemonOptions options = harness.Options();
  // A register of its own, so the register's fleet-epoch check does not answer first.
  options.config_path = harness.WriteFile(
      "later-epoch.toml", "[id]\nepoch = \"2026-06-01T00:00:00Z\"\n[register]\npath = \"" +
                              (harness.root() / "other-register.json").string() + "\"\n");

  Daemon second = Daemon::Spawn(options);
  auto exit_status = second.Wait(30s);

  ASSERT_TRUE(exit_status) << "the daemon kept running: " << second.Describe();
  // 78 (EX_CONFIG): the unit's RestartPreventExitStatus= stops on it; a restart cannot help.
  EXPECT_TRUE(exit_status->ExitedWith(78)) << exit_status->ToString() << "\n" << second.Describe();
  EXPECT_FALSE(second.ready());
  EXPECT_NE(second.err().find("high-water.json was written for epoch"), std::string::npos)
      << second.err();
}

// A daemon of another layout numbers by it end to end: the register hands out a number
// beyond the default's 1023, the segment header carries the bits, and a client decodes by
// them (its layout(), Decode) and takes fresh IDs (its freshness rule shifts by them).
TEST(DaemonRestart, ADaemonOfAWideLayoutServesIdsItsClientsDecodeByIt) {
  DaemonHarness harness("wide-layout");
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile(
      "wide.toml", "[id]\nlayout = \"41/16/6\"\n[register]\nmachines = \"40000-40000\"\n");
  Daemon daemon = harness.Start(options);
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  auto client = Client::Open("wide-layout-test", harness.Clients());
  ASSERT_TRUE(client) << client.error().message;

  std::vector<uint64_t> ids(200);
  auto taken = client->NextBatch(ids);
  auto one = client->Next();

  ASSERT_TRUE(taken) << taken.error().message;
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(client->layout().bits(), (IdBits{41, 16, 6}));
  const auto fields = client->Decode(*one);
  ASSERT_TRUE(fields);
  EXPECT_EQ(fields->machine, 40000u);
  EXPECT_LT(fields->sequence, 64u);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_LE(fields->unix_ms, now_ms);
  EXPECT_GT(fields->unix_ms, now_ms - 10'000) << "decoded by the default layout's shift?";
  ASSERT_TRUE(daemon.Stop());
}

// A layout is fixed for the life of the epoch: the register recorded the first daemon's,
// and a daemon with another refuses to start (78), naming both, before it numbers anything.
TEST(DaemonRestart, ALayoutOtherThanTheRegistersIsRefusedNamingBoth) {
  DaemonHarness harness("restart-layout");
  {
    Daemon first = harness.Start();
    ASSERT_TRUE(first.ready()) << first.Describe();
    auto stopped = first.Stop();
    ASSERT_TRUE(stopped && stopped->ExitedWith(0)) << first.Describe();
  }
  DaemonOptions options = harness.Options();
  options.config_path = harness.WriteFile("wide.toml", "[id]\nlayout = \"65536-hosts\"\n");

  Daemon second = Daemon::Spawn(options);
  auto exit_status = second.Wait(30s);

  ASSERT_TRUE(exit_status) << "the daemon kept running: " << second.Describe();
  EXPECT_TRUE(exit_status->ExitedWith(78)) << exit_status->ToString() << "\n" << second.Describe();
  EXPECT_FALSE(second.ready());
  EXPECT_NE(second.err().find("belongs to a fleet with ID layout 41/10/12"), std::string::npos)
      << second.err();
  EXPECT_NE(second.err().find("but id.layout is 41/16/6"), std::string::npos) << second.err();
}

TEST(DaemonRestart, SecondDaemonOnOneRuntimeDirExitsTwoNamingTheHolder) {
  DaemonHarness harness("restart-twice");
  Daemon first = harness.Start();
  ASSERT_TRUE(first.ready()) << first.Describe();
  DaemonOptions second_options = harness.Options();
  second_options.state_dir = harness.root() / "state-2";

  Daemon second = Daemon::Spawn(second_options);
  auto exit_status = second.Wait(30s);
  auto status = Client::Inspect(harness.Clients());

  ASSERT_TRUE(exit_status) << "the second daemon kept running: " << second.Describe();
  EXPECT_TRUE(exit_status->ExitedWith(2)) << exit_status->ToString() << "\n" << second.Describe();
  EXPECT_NE(second.err().find("pid " + std::to_string(first.pid())), std::string::npos)
      << second.err();
  EXPECT_FALSE(second.ready());
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "serving");
  EXPECT_EQ(status->daemon_pid, static_cast<uint64_t>(first.pid()));
}

// Two daemons with their own runtime and state dirs and one register file.
class DaemonSharedRegister : public ::testing::Test {
 protected:
  DaemonOptions OptionsFor(const std::string& name, const std::string& extra_register = "") {
    return harness_.NamedOptions(
        name, "[daemon]\ninstance = \"" + name + "\"\n[register]\npath = \"" +
                  (harness_.root() / "register.json").string() + "\"\n" + extra_register);
  }
  std::optional<uint32_t> MachineOf(const DaemonOptions& options) {
    auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(options.runtime_dir));
    if (!status || status->state != "serving") return std::nullopt;
    return status->machine;
  }

  DaemonHarness harness_{"register"};
};

TEST_F(DaemonSharedRegister, TwoDaemonsGetDifferentNumbersAndARestartGetsItsOwnBack) {
  // Arrange
  const DaemonOptions a_options = OptionsFor("a");
  const DaemonOptions b_options = OptionsFor("b");
  Daemon a = harness_.Start(a_options);
  std::optional<Daemon> b = harness_.Start(b_options);
  ASSERT_TRUE(a.ready()) << a.Describe();
  ASSERT_TRUE(b->ready()) << b->Describe();
  const auto a_machine = MachineOf(a_options);
  const auto b_machine = MachineOf(b_options);

  // Act: restart b after a SIGKILL, then after a clean stop.
  b->Kill();
  b.emplace(harness_.Start(b_options));
  const auto b_after_kill = MachineOf(b_options);
  auto stopped = b->Stop();
  b.emplace(harness_.Start(b_options));
  const auto b_after_stop = MachineOf(b_options);

  // Assert
  ASSERT_TRUE(a_machine && b_machine);
  EXPECT_NE(*a_machine, *b_machine);
  EXPECT_EQ(b_after_kill, b_machine) << b->Describe();
  ASSERT_TRUE(stopped && stopped->ExitedWith(0));
  EXPECT_EQ(b_after_stop, b_machine) << b->Describe();
  EXPECT_EQ(MachineOf(a_options), a_machine);
}

TEST_F(DaemonSharedRegister, OneHolderIdTwiceAtOnceIsRefused) {
  const DaemonOptions a_options = OptionsFor("a", "holder_id = \"same-holder\"\n");
  const DaemonOptions b_options = OptionsFor("b", "holder_id = \"same-holder\"\n");
  Daemon a = harness_.Start(a_options);
  ASSERT_TRUE(a.ready()) << a.Describe();
  const auto a_machine = MachineOf(a_options);

  Daemon b = Daemon::Spawn(b_options);
  auto b_exit = b.Wait(30s);
  auto b_status = Client::Inspect(DaemonHarness::ClientOptionsFor(b_options.runtime_dir));

  ASSERT_TRUE(a_machine);
  ASSERT_TRUE(b_exit) << "the second holder kept running: " << b.Describe();
  EXPECT_FALSE(b_exit->ExitedWith(0)) << b.Describe();
  EXPECT_FALSE(b.ready()) << b.Describe();
  EXPECT_TRUE(!b_status || b_status->state != "serving")
      << "machine " << b_status->machine << " served twice";
  EXPECT_NE(b.err().find(std::to_string(*a_machine)), std::string::npos)
      << "the refusal does not name the number: " << b.err();
  EXPECT_EQ(MachineOf(a_options), a_machine);
}

}  // namespace
}  // namespace snowflake
