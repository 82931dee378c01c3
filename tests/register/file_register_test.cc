#include "register/file_register.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/holder_id.h"
#include "manual_clock.h"
#include "register/machine_lock.h"
#include "register/register_settings.h"
#include "register/static_register.h"
#include "temp_dir.h"
#include "util/atomic_file.h"

namespace snowflake::reg {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kEpoch = kDefaultEpochUnixMs;

FileRegisterOptions Options(const snowflake::testing::TempDir& dir, uint32_t first = 0,
                            uint32_t last = IdLayout().max_machine()) {
  return FileRegisterOptions{.path = dir / "register.json",
                             .first_machine = first,
                             .last_machine = last,
                             .host_lock_dir = dir / "host-locks"};
}

TEST(FileRegister, DifferentHoldersGetDifferentNumbers) {
  // Arrange
  snowflake::testing::TempDir dir;
  FileRegister a(Options(dir));
  FileRegister sut(Options(dir));
  ASSERT_TRUE(a.Claim({"host:a", kEpoch}));

  // Act
  auto claim = sut.Claim({"host:b", kEpoch});

  // Assert
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 1u);
}

TEST(FileRegister, FirstClaimTakesTheLowestNumberOfTheRange) {
  snowflake::testing::TempDir dir;
  FileRegister sut(Options(dir, 5, 9));

  auto claim = sut.Claim({"host:a", kEpoch});

  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 5u);
  EXPECT_EQ(claim->high_water_unix_ms, 0);
}

TEST(FileRegister, RestartingHolderGetsItsOwnNumberBackWithItsMark) {
  // Arrange
  snowflake::testing::TempDir dir;
  {
    FileRegister other(Options(dir));
    ASSERT_TRUE(other.Claim({"host:other", kEpoch}));
    FileRegister first_life(Options(dir));
    ASSERT_TRUE(first_life.Claim({"host:a", kEpoch}));
    ASSERT_TRUE(first_life.UpdateHighWater(kEpoch + 5000));
  }  // both daemons stop
  FileRegister newcomer(Options(dir));
  ASSERT_TRUE(newcomer.Claim({"host:new", kEpoch}));
  FileRegister sut(Options(dir));

  // Act
  auto claim = sut.Claim({"host:a", kEpoch});

  // Assert
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 1u);
  EXPECT_EQ(claim->high_water_unix_ms, kEpoch + 5000);
}

TEST(FileRegister, LiveDaemonWithTheSameHolderIdIsRefused) {
  // Arrange: a second daemon, misconfigured with the same holder id, while the first lives.
  snowflake::testing::TempDir dir;
  FileRegister first(Options(dir));
  ASSERT_TRUE(first.Claim({"host:a", kEpoch}));
  FileRegister sut(Options(dir));

  // Act
  auto claim = sut.Claim({"host:a", kEpoch});

  // Assert
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kInUse);
  EXPECT_THAT(claim.error().message,
              HasSubstr("machine 0 is in use by pid " + std::to_string(getpid())));
}

TEST(FileRegister, NumberHeldByAnotherProcessIsRefusedAndFreedWhenItDies) {
  // Arrange: a child process claims and holds number 0 until told to exit.
  snowflake::testing::TempDir dir;
  int to_child[2];
  int from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FileRegister held(Options(dir));
    const char ok = held.Claim({"host:a", kEpoch}) ? 'y' : 'n';
    [[maybe_unused]] ssize_t w = write(from_child[1], &ok, 1);
    char c;
    [[maybe_unused]] ssize_t r = read(to_child[0], &c, 1);
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(from_child[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  FileRegister sut(Options(dir));

  // Act
  auto while_alive = sut.Claim({"host:a", kEpoch});
  ASSERT_EQ(write(to_child[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  auto after_death = sut.Claim({"host:a", kEpoch});

  // Assert
  ASSERT_FALSE(while_alive);
  EXPECT_EQ(while_alive.error().code, RegisterErrorCode::kInUse);
  EXPECT_THAT(while_alive.error().message, HasSubstr("in use by pid " + std::to_string(child)));
  ASSERT_TRUE(after_death) << after_death.error().message;
  EXPECT_EQ(after_death->machine, 0u);
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
}

TEST(FileRegister, NoFreeNumberIsAnError) {
  // Arrange
  snowflake::testing::TempDir dir;
  FileRegister a(Options(dir, 0, 1));
  FileRegister b(Options(dir, 0, 1));
  ASSERT_TRUE(a.Claim({"host:a", kEpoch}));
  ASSERT_TRUE(b.Claim({"host:b", kEpoch}));
  FileRegister sut(Options(dir, 0, 1));

  // Act
  auto claim = sut.Claim({"host:c", kEpoch});

  // Assert
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kNoFreeNumber);
  EXPECT_THAT(claim.error().message, HasSubstr("no free machine number in 0-1"));
}

TEST(FileRegister, StoppedHoldersStillOwnTheirNumbers) {
  // A number belongs to its holder until released, so that holder gets it back.
  snowflake::testing::TempDir dir;
  {
    FileRegister a(Options(dir, 0, 0));
    ASSERT_TRUE(a.Claim({"host:a", kEpoch}));
  }
  FileRegister sut(Options(dir, 0, 0));

  auto claim = sut.Claim({"host:b", kEpoch});

  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kNoFreeNumber);
}

TEST(FileRegister, ReleasedNumberGoesToANewHolderAboveItsMark) {
  // Arrange
  snowflake::testing::TempDir dir;
  {
    FileRegister a(Options(dir, 0, 0));
    ASSERT_TRUE(a.Claim({"host:a", kEpoch}));
    ASSERT_TRUE(a.UpdateHighWater(kEpoch + 777));
  }
  FileRegister admin(Options(dir));
  ASSERT_TRUE(admin.Release(0));
  FileRegister sut(Options(dir, 0, 0));

  // Act
  auto claim = sut.Claim({"host:b", kEpoch});

  // Assert
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 0u);
  EXPECT_EQ(claim->high_water_unix_ms, kEpoch + 777);
}

TEST(FileRegister, ReleaseOfALiveNumberIsRefused) {
  snowflake::testing::TempDir dir;
  FileRegister live(Options(dir));
  ASSERT_TRUE(live.Claim({"host:a", kEpoch}));
  FileRegister sut(Options(dir));

  auto released = sut.Release(0);

  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().code, RegisterErrorCode::kInUse);
}

TEST(FileRegister, ListShowsHoldersMarksAndLiveness) {
  // Arrange
  snowflake::testing::TempDir dir;
  {
    FileRegister gone(Options(dir));
    ASSERT_TRUE(gone.Claim({"host:gone", kEpoch}));
  }
  FileRegister live(Options(dir));
  ASSERT_TRUE(live.Claim({"host:live", kEpoch}));
  ASSERT_TRUE(live.UpdateHighWater(kEpoch + 9));
  FileRegister sut(Options(dir));

  // Act
  auto entries = sut.List();

  // Assert
  ASSERT_TRUE(entries) << entries.error().message;
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].holder_id, "host:gone");
  EXPECT_FALSE((*entries)[0].in_use);
  EXPECT_EQ((*entries)[1].holder_id, "host:live");
  EXPECT_TRUE((*entries)[1].in_use);
  EXPECT_EQ((*entries)[1].live_pid, getpid());
  EXPECT_EQ((*entries)[1].high_water_unix_ms, kEpoch + 9);
}

TEST(FileRegister, AClaimRecordsItsTimeOnTheRegistersClock) {
  snowflake::testing::TempDir dir;
  snowflake::testing::ManualClock clock(kEpoch + 123'456);
  FileRegisterOptions options = Options(dir);
  options.clock = &clock;
  FileRegister sut(options);

  ASSERT_TRUE(sut.Claim({"host:a", kEpoch}));
  auto entries = sut.List();

  ASSERT_TRUE(entries) << entries.error().message;
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].claimed_unix_ms, kEpoch + 123'456);
}

// The register's lock is waited for within a bound measured on the caller's clock, in
// sleeps of that clock: a manual clock (whose sleeps move it) passes the 2 s bound without
// 2 s of real time.
TEST(FileLock, AcquireWithinGivesUpOnceItsClockPassesTheBound) {
  snowflake::testing::TempDir dir;
  auto held = util::FileLock::Acquire(dir / "a.lock", /*wait=*/false, /*write_pid=*/false);
  ASSERT_TRUE(held) << held.error().message;
  snowflake::testing::ManualClock clock;
  const Clock::SteadyTime start = clock.SteadyNow();

  auto sut =
      util::FileLock::AcquireWithin(dir / "a.lock", std::chrono::milliseconds(2000),
                                    /*write_pid=*/false, util::FileLock::kDefaultMode, clock);

  ASSERT_FALSE(sut);
  EXPECT_TRUE(sut.error().held_by_other) << sut.error().message;
  EXPECT_THAT(sut.error().message, HasSubstr("still after 2000 ms"));
  EXPECT_GE(clock.SteadyNow() - start, std::chrono::milliseconds(2000));
  EXPECT_GE(clock.sleeps(), 1) << "it slept on another clock";
}

TEST(FileRegister, HighWaterNeverGoesDown) {
  snowflake::testing::TempDir dir;
  {
    FileRegister a(Options(dir));
    ASSERT_TRUE(a.Claim({"host:a", kEpoch}));
    ASSERT_TRUE(a.UpdateHighWater(kEpoch + 100));
    ASSERT_TRUE(a.UpdateHighWater(kEpoch + 50));
  }
  FileRegister sut(Options(dir));

  auto claim = sut.Claim({"host:a", kEpoch});

  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->high_water_unix_ms, kEpoch + 100);
}

TEST(FileRegister, ACleanStopLowersTheReservationToTheLastIssuedMillisecond) {
  snowflake::testing::TempDir dir;
  {
    FileRegister a(Options(dir));
    ASSERT_TRUE(a.Claim({"host:a", kEpoch}));
    ASSERT_TRUE(a.UpdateHighWater(kEpoch + 1000));  // a reservation ahead of the clock
    ASSERT_TRUE(a.RecordCleanStop(kEpoch + 400));   // what was really issued
  }
  FileRegister sut(Options(dir));

  auto claim = sut.Claim({"host:a", kEpoch});

  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->high_water_unix_ms, kEpoch + 400);
}

TEST(FileRegister, CorruptFileIsAnError) {
  for (
      const char* text :
      {"{not json", "[]", R"({"format":"other"})",
       R"({"format":"snowflaked-register","version":1})",
       R"({"format":"snowflaked-register","version":2,"epoch_unix_ms":0,"machines":[]})",
       R"({"format":"snowflaked-register","version":1,"epoch_unix_ms":0,"machines":[{"machine":2000,"holder":"x","high_water_unix_ms":0}]})",
       R"({"format":"snowflaked-register","version":1,"epoch_unix_ms":0,"machines":[{"machine":1,"holder":"x","high_water_unix_ms":0},{"machine":1,"holder":"y","high_water_unix_ms":0}]})"}) {
    snowflake::testing::TempDir dir;
    std::ofstream(dir / "register.json") << text;
    FileRegister sut(Options(dir));

    auto claim = sut.Claim({"host:a", kEpoch});

    ASSERT_FALSE(claim) << text;
    EXPECT_EQ(claim.error().code, RegisterErrorCode::kCorrupt) << text;
    EXPECT_THAT(claim.error().message, HasSubstr("register.json is corrupt")) << text;
  }
}

TEST(FileRegister, UnreadableFileIsAnError) {
  snowflake::testing::TempDir dir;
  std::filesystem::create_directory(dir / "register.json");  // a directory cannot be read
  FileRegister sut(Options(dir));

  auto claim = sut.Claim({"host:a", kEpoch});

  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kUnreadable);
}

TEST(FileRegister, EpochMismatchNamesBothEpochs) {
  // Arrange
  snowflake::testing::TempDir dir;
  {
    FileRegister a(Options(dir));
    ASSERT_TRUE(a.Claim({"host:a", kEpoch}));
  }
  FileRegister sut(Options(dir));

  // Act
  auto claim = sut.Claim({"host:b", 1'700'000'000'000});

  // Assert
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kEpochMismatch);
  EXPECT_THAT(claim.error().message, HasSubstr("2026-01-01T00:00:00.000Z"));
  EXPECT_THAT(claim.error().message, HasSubstr("2023-11-14T22:13:20.000Z"));
}

TEST(FileRegister, RecordsTheLayoutAndRefusesAnotherNamingBoth) {
  snowflake::testing::TempDir dir;
  FileRegisterOptions wide = Options(dir, 0, 65535);
  wide.id_bits = {41, 16, 6};
  {
    FileRegister a(wide);
    auto claim = a.Claim({"host:a", kEpoch});
    ASSERT_TRUE(claim) << claim.error().message;
  }
  std::ifstream in(dir / "register.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr(R"("layout": "time41-machine16-sequence6")"));
  FileRegister sut(Options(dir));  // the default layout

  auto claim = sut.Claim({"host:b", kEpoch});

  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kEpochMismatch);
  EXPECT_THAT(claim.error().message, HasSubstr("ID layout 41/16/6: 65,536 hosts"));
  EXPECT_THAT(claim.error().message, HasSubstr("but id.layout is 41/10/12: 1,024 hosts"));
  EXPECT_THAT(claim.error().message, HasSubstr(R"(set id.layout = "41/16/6")"));
}

TEST(FileRegister, ARegisterWithoutALayoutHoldsTheDefaults) {
  // Written before layouts could be chosen: its numbers are the default layout's.
  snowflake::testing::TempDir dir;
  {
    std::ofstream out(dir / "register.json");
    out << R"({"format":"snowflaked-register","version":1,"epoch_unix_ms":)" << kEpoch
        << R"(,"machines":[{"machine":3,"holder":"host:a","high_water_unix_ms":5}]})";
  }
  FileRegisterOptions wide = Options(dir, 0, 65535);
  wide.id_bits = {41, 16, 6};
  FileRegister refused(wide);
  FileRegister sut(Options(dir));

  auto other = refused.Claim({"host:b", kEpoch});
  auto claim = sut.Claim({"host:a", kEpoch});

  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, RegisterErrorCode::kEpochMismatch);
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 3u);
}

TEST(FileRegister, AWiderLayoutHandsOutNumbersBeyondTheDefaults) {
  snowflake::testing::TempDir dir;
  FileRegisterOptions wide = Options(dir, 40000, 40000);
  wide.id_bits = {41, 16, 6};
  FileRegister sut(wide);

  auto claim = sut.Claim({"host:a", kEpoch});

  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 40000u);
}

TEST(FileRegister, ARangeBeyondTheLayoutIsRefused) {
  snowflake::testing::TempDir dir;
  FileRegister sut(Options(dir, 0, 2000));  // the default layout numbers 0-1023

  auto claim = sut.Claim({"host:a", kEpoch});

  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kInvalidRequest);
  EXPECT_THAT(claim.error().message, HasSubstr("41/10/12 numbers machines 0-1023"));
}

TEST(StaticRegister, ANumberBeyondTheLayoutIsRefused) {
  snowflake::testing::TempDir dir;
  StaticRegister narrow(1024, dir / "host-locks");
  StaticRegister wide(1024, dir / "host-locks", {41, 16, 6});

  auto refused = narrow.Claim({"host:a", kEpoch});
  auto claimed = wide.Claim({"host:a", kEpoch});

  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, RegisterErrorCode::kInvalidRequest);
  EXPECT_THAT(refused.error().message, HasSubstr("out of range 0-1023 of id.layout 41/10/12"));
  EXPECT_TRUE(claimed) << claimed.error().message;
}

TEST(FileRegister, UpdateBeforeClaimIsAnError) {
  snowflake::testing::TempDir dir;
  FileRegister sut(Options(dir));

  auto updated = sut.UpdateHighWater(5);

  ASSERT_FALSE(updated);
  EXPECT_EQ(updated.error().code, RegisterErrorCode::kNotClaimed);
}

TEST(StaticRegister, ClaimsTheConfiguredNumberOnce) {
  snowflake::testing::TempDir dir;
  StaticRegister first(7, dir / "locks");
  StaticRegister sut(7, dir / "locks");
  auto held = first.Claim({"x", kEpoch});

  auto second = sut.Claim({"x", kEpoch});

  ASSERT_TRUE(held);
  EXPECT_EQ(held->machine, 7u);
  EXPECT_EQ(held->high_water_unix_ms, 0);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, RegisterErrorCode::kInUse);
}

// Finding 1 of issue 9: two registers of one host (separate state directories, distinct
// instances) each had their own lock directory, so both handed out number 0.
TEST(FileRegister, SeparateRegistersOfOneHostNeverHandOutOneNumberTwice) {
  // Arrange: two registers in different directories, one host-wide lock directory.
  snowflake::testing::TempDir dir;
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  FileRegister first(FileRegisterOptions{.path = dir / "a" / "register.json",
                                         .host_lock_dir = dir / "host-locks"});
  FileRegister sut(FileRegisterOptions{.path = dir / "b" / "register.json",
                                       .host_lock_dir = dir / "host-locks"});
  auto held = first.Claim({"host:a", kEpoch});

  // Act
  auto claim = sut.Claim({"host:b", kEpoch});

  // Assert
  ASSERT_TRUE(held) << held.error().message;
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(held->machine, 0u);
  EXPECT_EQ(claim->machine, 1u);
}

TEST(FileRegister, SkipsANumberAStaticDaemonOfTheHostHolds) {
  // Arrange
  snowflake::testing::TempDir dir;
  StaticRegister fixed(0, dir / "host-locks");
  ASSERT_TRUE(fixed.Claim({"x", kEpoch}));
  FileRegister sut(Options(dir));

  // Act
  auto claim = sut.Claim({"host:a", kEpoch});

  // Assert
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 1u);
}

TEST(StaticRegister, IsRefusedANumberAFileDaemonOfTheHostHolds) {
  // Arrange
  snowflake::testing::TempDir dir;
  FileRegister file(Options(dir));
  ASSERT_TRUE(file.Claim({"host:a", kEpoch}));
  StaticRegister sut(0, dir / "host-locks");

  // Act
  auto claim = sut.Claim({"x", kEpoch});

  // Assert
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kInUse);
  EXPECT_THAT(claim.error().message, HasSubstr("in use by pid " + std::to_string(getpid())));
}

TEST(MachineLock, AMissingHostLockDirectoryIsCreatedAsThisUsersOwn) {
  // Arrange
  snowflake::testing::TempDir dir;
  const std::filesystem::path locks = dir / "host-locks";

  // Act
  auto lock = AcquireMachineLock(locks, 5);

  // Assert: writable by this user only; sharing it with daemons of other users is the
  // administrator's decision (tmpfiles.d: root's, group snowflaked-lock, mode 1770).
  ASSERT_TRUE(lock) << lock.error().message;
  struct stat info {};
  ASSERT_EQ(stat(locks.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0755u);
  EXPECT_EQ(info.st_uid, geteuid());
  EXPECT_TRUE(IsMachineLocked(locks, 5, nullptr));
  EXPECT_FALSE(IsMachineLocked(locks, 6, nullptr));
}

TEST(MachineLock, AnUnusableHostLockDirectoryIsAClearError) {
  // Arrange: a regular file where the directory should be.
  snowflake::testing::TempDir dir;
  const std::filesystem::path locks = dir / "host-locks";
  { std::ofstream(locks) << "not a directory\n"; }

  // Act
  auto lock = AcquireMachineLock(locks, 0);

  // Assert
  ASSERT_FALSE(lock);
  EXPECT_FALSE(lock.error().held_by_other);
  EXPECT_THAT(lock.error().message, HasSubstr("host-wide machine-number lock directory"));
  EXPECT_THAT(lock.error().message, HasSubstr("systemd-tmpfiles --create snowflaked.conf"));
}

// A mark planted in the host lock directory. Property: a mark counts only if it is a
// regular file named for its owner, and that owner is root or the daemon's own user; a
// trusted mark far past the clock is an error, never adopted.
constexpr uid_t kNobody = 65534;
constexpr int64_t kTenYearsMs = int64_t{10} * 365 * 24 * 3600 * 1000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ReadHostMark with this host's clock and the default bound (24 h); the warnings of the
// files it ignored in *ignored.
tl::expected<std::optional<HostMark>, std::string> Read(
    const std::filesystem::path& dir, uint32_t machine,
    std::vector<std::string>* ignored = nullptr) {
  auto read = ReadHostMark(dir, machine, NowMs(), kDefaultMaxForwardMs);
  if (!read) return tl::unexpected(read.error());
  if (ignored != nullptr) *ignored = read->ignored;
  return read->highest;
}

void Plant(const std::filesystem::path& path, int64_t unix_ms, uid_t owner) {
  { std::ofstream(path) << "{\"unix_ms\":" << unix_ms << ",\"writer\":\"planted\"}\n"; }
  ASSERT_EQ(chown(path.c_str(), owner, owner), 0) << std::strerror(errno);
}

std::filesystem::path LockDir(const snowflake::testing::TempDir& dir) {
  const std::filesystem::path locks = dir / "host-locks";
  std::filesystem::create_directory(locks);
  return locks;
}

TEST(HostMark, AMarkOfAnotherOwnerIsIgnoredWithAWarningNamingItAndItsOwner) {
  // Arrange: our own mark, and one of nobody's ten years ahead (tests run as root).
  ASSERT_EQ(geteuid(), 0u) << "planting a file of another owner needs root";
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  const int64_t now = NowMs();
  ASSERT_TRUE(WriteHostMark(locks, 3, HostMark{now, "ours"}));
  Plant(locks / ("machine-3." + std::to_string(kNobody) + ".high-water"), now + kTenYearsMs,
        kNobody);

  // Act
  std::vector<std::string> ignored;
  auto sut = Read(locks, 3, &ignored);

  // Assert
  ASSERT_TRUE(sut) << sut.error();
  ASSERT_TRUE(sut->has_value());
  EXPECT_EQ((*sut)->unix_ms, now) << "a mark nobody planted was adopted";
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_THAT(ignored[0], HasSubstr("machine-3.65534.high-water"));
  EXPECT_THAT(ignored[0], HasSubstr("uid 65534"));
}

TEST(HostMark, AMarkNamedForOneUserButOwnedByAnotherIsIgnored) {
  // Arrange: a file named for root (uid 0) but nobody's.
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  Plant(locks / "machine-3.0.high-water", NowMs() + kTenYearsMs, kNobody);

  // Act
  std::vector<std::string> ignored;
  auto sut = Read(locks, 3, &ignored);

  // Assert
  ASSERT_TRUE(sut) << sut.error();
  EXPECT_FALSE(sut->has_value());
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_THAT(ignored[0], HasSubstr("uid 65534"));
}

TEST(HostMark, ARootFileNamedForAnotherUserIsIgnored) {
  // Arrange: a trusted owner (root), but the name says nobody wrote it: a copy or a rename.
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  Plant(locks / "machine-3.65534.high-water", NowMs() + kTenYearsMs, 0);

  // Act
  std::vector<std::string> ignored;
  auto sut = Read(locks, 3, &ignored);

  // Assert
  ASSERT_TRUE(sut) << sut.error();
  EXPECT_FALSE(sut->has_value()) << "a file named for another user was adopted";
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_THAT(ignored[0], HasSubstr("named for uid 65534"));
}

TEST(HostMark, AMarkEveryUserMayWriteIsIgnored) {
  // Arrange: root's file, but any user could have written its value.
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  Plant(locks / "machine-3.0.high-water", NowMs() + kTenYearsMs, 0);
  ASSERT_EQ(chmod((locks / "machine-3.0.high-water").c_str(), 0666), 0);

  // Act
  std::vector<std::string> ignored;
  auto sut = Read(locks, 3, &ignored);

  // Assert
  ASSERT_TRUE(sut) << sut.error();
  EXPECT_FALSE(sut->has_value());
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_THAT(ignored[0], HasSubstr("writable by every user"));
}

TEST(HostMark, ASymlinkIsNeverFollowed) {
  // Arrange: the mark's name links to a file of ours far ahead (any file a daemon can read).
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  {
    std::ofstream(dir / "elsewhere")
        << "{\"unix_ms\":" << NowMs() + kTenYearsMs << ",\"writer\":\"x\"}\n";
  }
  std::filesystem::create_symlink(dir / "elsewhere", locks / "machine-3.0.high-water");

  // Act
  std::vector<std::string> ignored;
  auto sut = Read(locks, 3, &ignored);

  // Assert
  ASSERT_TRUE(sut) << sut.error();
  EXPECT_FALSE(sut->has_value()) << "the link was followed";
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_THAT(ignored[0], HasSubstr("machine-3.0.high-water"));
}

TEST(HostMark, ADirectoryIsIgnored) {
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  std::filesystem::create_directory(locks / "machine-3.0.high-water");

  std::vector<std::string> ignored;
  auto sut = Read(locks, 3, &ignored);

  ASSERT_TRUE(sut) << sut.error();
  EXPECT_FALSE(sut->has_value());
  EXPECT_EQ(ignored.size(), 1u);
}

TEST(HostMark, AFifoIsIgnoredWithoutBlocking) {
  // Arrange: opening a FIFO for reading would wait for a writer forever.
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  ASSERT_EQ(mkfifo((locks / "machine-3.0.high-water").c_str(), 0644), 0);

  // Act
  std::vector<std::string> ignored;
  auto sut = Read(locks, 3, &ignored);

  // Assert
  ASSERT_TRUE(sut) << sut.error();
  EXPECT_FALSE(sut->has_value());
  EXPECT_EQ(ignored.size(), 1u);
}

TEST(HostMark, AMarkOfOurOwnFarPastTheClockIsRefused) {
  // Arrange: a trusted mark ten years ahead: a clock that wrong or a mark that wrong needs
  // an operator, and adopting it would take the number out of service for ten years.
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  ASSERT_TRUE(WriteHostMark(locks, 3, HostMark{NowMs() + kTenYearsMs, "ours"}));

  // Act
  auto sut = Read(locks, 3);

  // Assert
  ASSERT_FALSE(sut) << "adopted a mark ten years ahead";
  EXPECT_THAT(sut.error(), HasSubstr("machine-3.0.high-water"));
  EXPECT_THAT(sut.error(), HasSubstr("clock.max_forward_ms"));
}

// The lock directory is a tmpfs: a reboot empties it. The copy on disk is what a daemon
// with another state directory starts above after a reboot with its clock behind.
TEST(HostMark, TheCopyOnDiskOutlivesTheLockDirectory) {
  // Arrange: a mark written to both directories; then the boot's directory is emptied.
  snowflake::testing::TempDir dir;
  const HostMarkDirs dirs{LockDir(dir), dir / "host-marks-on-disk"};
  const int64_t now = NowMs();
  ASSERT_TRUE(WriteHostMarks(dirs, 3, HostMark{now + 5000, "ours"}));
  std::filesystem::remove_all(dirs.boot);

  // Act
  auto sut = ReadHostMarks(dirs, 3, now, kDefaultMaxForwardMs);

  // Assert
  ASSERT_TRUE(sut) << sut.error();
  EXPECT_EQ(sut->highest, (HostMark{now + 5000, "ours"}));
}

TEST(HostMark, BothDirectoriesAreReadAndTheHigherMarkWins) {
  // Arrange: a later mark beside the locks (this boot), an older one on disk, and the
  // other way round for another number.
  snowflake::testing::TempDir dir;
  const HostMarkDirs dirs{LockDir(dir), dir / "host-marks-on-disk"};
  std::filesystem::create_directory(dirs.disk);
  const int64_t now = NowMs();
  ASSERT_TRUE(WriteHostMark(dirs.boot, 3, HostMark{now + 2000, "boot"}));
  ASSERT_TRUE(WriteHostMark(dirs.disk, 3, HostMark{now + 1000, "disk"}));
  ASSERT_TRUE(WriteHostMark(dirs.boot, 4, HostMark{now + 1000, "boot"}));
  ASSERT_TRUE(WriteHostMark(dirs.disk, 4, HostMark{now + 2000, "disk"}));

  // Act
  auto three = ReadHostMarks(dirs, 3, now, kDefaultMaxForwardMs);
  auto four = ReadHostMarks(dirs, 4, now, kDefaultMaxForwardMs);

  // Assert
  ASSERT_TRUE(three && four);
  EXPECT_EQ(three->highest, (HostMark{now + 2000, "boot"}));
  EXPECT_EQ(four->highest, (HostMark{now + 2000, "disk"}));
}

TEST(HostMark, AWorldWritableDirectoryOnDiskIsRefusedInItsOwnWords) {
  // Arrange: anyone could plant a mark in it, or remove one.
  snowflake::testing::TempDir dir;
  const HostMarkDirs dirs{LockDir(dir), dir / "host-marks-on-disk"};
  std::filesystem::create_directory(dirs.disk);
  ASSERT_EQ(chmod(dirs.disk.c_str(), 01777), 0);

  // Act
  auto ensured = EnsureHostMarkDiskDir(dirs.disk);
  auto written = WriteHostMarks(dirs, 3, HostMark{NowMs(), "ours"});
  auto read = ReadHostMarks(dirs, 3, NowMs(), kDefaultMaxForwardMs);

  // Assert
  ASSERT_FALSE(ensured);
  EXPECT_THAT(ensured.error(), HasSubstr("host marks on disk " + dirs.disk.string()));
  EXPECT_THAT(ensured.error(), HasSubstr("writable by every user"));
  EXPECT_FALSE(written) << "wrote a mark into a world-writable directory";
  EXPECT_FALSE(read) << "read marks from a world-writable directory";
}

TEST(HostMark, TheCopyOnDiskLivesBesideATestsLockDirectoryAndInVarLibForTheHosts) {
  ASSERT_EQ(unsetenv(kHostMarkDiskDirEnv), 0);
  EXPECT_EQ(HostMarkDiskDir(kDefaultHostLockDir), kDefaultHostMarkDiskDir);
  EXPECT_EQ(HostMarkDiskDir("/tmp/t/host-locks"), "/tmp/t/host-locks.disk");
  ASSERT_EQ(setenv(kHostMarkDiskDirEnv, "/tmp/t/marks", 1), 0);
  EXPECT_EQ(HostMarkDiskDir(kDefaultHostLockDir), "/tmp/t/marks");
  ASSERT_EQ(unsetenv(kHostMarkDiskDirEnv), 0);
}

TEST(MachineLock, AGroupWritableHostLockDirectoryOfRootIsAccepted) {
  // Arrange: the shape tmpfiles.d gives it (root's, the daemons' group, sticky).
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  ASSERT_EQ(chmod(locks.c_str(), 01770), 0);

  // Act
  auto lock = AcquireMachineLock(locks, 3);
  auto marks = Read(locks, 3);

  // Assert
  EXPECT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(marks) << marks.error();
}

TEST(MachineLock, AWorldWritableHostLockDirectoryIsRefused) {
  // Arrange: anyone could plant a mark or unlink a lock file in it.
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  ASSERT_EQ(chmod(locks.c_str(), 01777), 0);

  // Act
  auto lock = AcquireMachineLock(locks, 3);

  // Assert
  ASSERT_FALSE(lock) << "locked a number in a world-writable directory";
  EXPECT_THAT(lock.error().message, HasSubstr("writable by every user"));
  EXPECT_THAT(lock.error().message, HasSubstr("systemd-tmpfiles --create snowflaked.conf"));
  EXPECT_FALSE(Read(locks, 3)) << "read marks from a world-writable directory";
  EXPECT_FALSE(EnsureHostLockDir(locks));
}

TEST(MachineLock, AHostLockDirectoryOfAnotherUserIsRefused) {
  // Arrange: a user who made the directory first can unlink our lock file between two
  // daemons' flocks.
  snowflake::testing::TempDir dir;
  const auto locks = LockDir(dir);
  ASSERT_EQ(chown(locks.c_str(), kNobody, kNobody), 0);

  // Act
  auto lock = AcquireMachineLock(locks, 3);

  // Assert
  ASSERT_FALSE(lock) << "locked a number in nobody's directory";
  EXPECT_THAT(lock.error().message, HasSubstr("owned by uid 65534"));
}

TEST(MachineRegister, FactoryFollowsTheConfig) {
  daemon::Config config;
  config.machine_register.options = StaticRegisterConfig{.machine = 3};

  auto sut = MakeMachineRegister(config.machine_register, config.daemon.state_dir);

  EXPECT_EQ(sut->backend_name(), "static");
  EXPECT_EQ(sut->location(), "register.machine = 3");
  EXPECT_EQ(MakeMachineRegister(RegisterConfig{}, "/srv")->backend_name(), "file");
  EXPECT_EQ(MakeMachineRegister(RegisterConfig{}, "/srv")->location(), "/srv/register.json");
}

TEST(MachineRegister, HolderIdIsConfiguredOrMachineIdAndInstance) {
  daemon::Config config;
  config.daemon.instance = "blue";

  const std::string derived = daemon::ResolveHolderId(config);
  config.machine_register.holder_id = "fixed";

  EXPECT_THAT(derived, ::testing::EndsWith(":blue"));
  EXPECT_GT(derived.size(), std::string(":blue").size());
  EXPECT_EQ(daemon::ResolveHolderId(config), "fixed");
}

TEST(MachineRegister, DerivedHolderIdNeverContainsTheRawMachineId) {
  std::ifstream in("/etc/machine-id");
  std::string machine_id;
  std::getline(in, machine_id);
  if (machine_id.empty()) GTEST_SKIP() << "no /etc/machine-id here";
  daemon::Config config;
  config.daemon.instance = "blue";

  const std::string sut = daemon::ResolveHolderId(config);

  EXPECT_EQ(sut.find(machine_id), std::string::npos) << sut;
  EXPECT_EQ(sut.size(), 32 + std::string(":blue").size()) << sut;  // a 128-bit id in hex
  EXPECT_EQ(daemon::ResolveHolderId(config), sut);                 // stable
}

}  // namespace
}  // namespace snowflake::reg
