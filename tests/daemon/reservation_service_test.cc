// The reservation service on its own thread, with fsync made slow or failing through the
// FileSystem seam and a register whose answers the test sets.
//
// Properties: the confirmed horizon only covers what both stores durably accepted; it
// moves ahead of the clock (renew-ahead); a failing store is named and the horizon stops;
// it moves again by itself once the store heals; a lost claim is reported; the file
// register's lock is waited for with a bound.
#include "daemon/core/reservation_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "fake_register.h"
#include "fault_file_system.h"
#include "manual_clock.h"
#include "register/file_register.h"
#include "register/machine_lock.h"
#include "register/register_settings.h"
#include "temp_dir.h"
#include "util/file_lock.h"
#include "wait_until.h"

namespace snowflake::daemon {
namespace {

using snowflake::testing::WaitUntil;

using namespace std::chrono_literals;
using snowflake::testing::FakeRegister;
using snowflake::testing::FaultFileSystem;
using snowflake::testing::ManualClock;
using snowflake::testing::TempDir;

constexpr int64_t kStart = kDefaultEpochUnixMs + 5'000'000;

ReservationOptions Options() {
  return ReservationOptions{.machine = 3,
                            .epoch_unix_ms = kDefaultEpochUnixMs,
                            .reservation_ms = 1000,
                            .renew_ahead_ms = 500,
                            .retry_interval = 5ms,
                            .register_renew_interval = 20ms,
                            .segment_path = "/run/test/snowflake.ring",
                            .segment_incarnation = 2};
}

struct Fixture {
  TempDir dir{"reservation"};
  FaultFileSystem fs;
  FakeRegister reg;
  ManualClock clock{kStart};
  HighWaterStore store{dir / "high-water.json", fs};
};

TEST(ReservationService, FirstRenewalReservesAheadInBothStores) {
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);

  sut.Start();

  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
  auto saved = f.store.Load();
  ASSERT_TRUE(saved.has_value() && saved->has_value());
  EXPECT_GE((*saved)->reserved_through_unix_ms, sut.confirmed_through());
  EXPECT_EQ((*saved)->segment_path, "/run/test/snowflake.ring");
  EXPECT_EQ((*saved)->segment_incarnation, 2u);
  EXPECT_GE(f.reg.mark(), sut.confirmed_through());
  EXPECT_FALSE(sut.problem().has_value());
}

TEST(ReservationService, RenewsAheadOfTheClockWithoutBeingAsked) {
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));

  f.clock.Tick(600);  // within renew_ahead_ms of the horizon

  EXPECT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1600; }, 10s,
                        "sut.confirmed_through() >= kStart + 1600", 1ms));
}

TEST(ReservationService, FailingFsyncNamesTheStateFileAndStopsTheHorizon) {
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
  const int64_t before = sut.confirmed_through();

  f.fs.SetFailure(EIO);
  f.clock.Tick(600);

  ASSERT_TRUE(
      WaitUntil([&] { return sut.problem().has_value(); }, 10s, "sut.problem().has_value()", 1ms));
  const auto problem = sut.problem();
  EXPECT_EQ(problem->store, ReservationStore::kStateFile);
  EXPECT_EQ(problem->sys_errno, EIO);
  EXPECT_NE(problem->message.find("fsync"), std::string::npos) << problem->message;
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(sut.confirmed_through(), before) << "never confirmed past a failed fsync";
  auto saved = f.store.Load();
  ASSERT_TRUE(saved.has_value() && saved->has_value());
  EXPECT_EQ((*saved)->reserved_through_unix_ms, before) << "the file kept its old reservation";

  f.fs.SetFailure(0);

  EXPECT_TRUE(WaitUntil([&] { return sut.confirmed_through() > before; }, 10s,
                        "sut.confirmed_through() > before", 1ms));
  EXPECT_TRUE(WaitUntil([&] { return !sut.problem().has_value(); }, 10s,
                        "!sut.problem().has_value()", 1ms));
}

TEST(ReservationService, FailingRegisterIsNamedAndHeals) {
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  f.reg.Fail(reg::RegisterErrorCode::kTimedOut);
  sut.Start();

  ASSERT_TRUE(
      WaitUntil([&] { return sut.problem().has_value(); }, 10s, "sut.problem().has_value()", 1ms));
  EXPECT_EQ(sut.problem()->store, ReservationStore::kRegister);
  EXPECT_EQ(sut.confirmed_through(), 0) << "the state file alone confirms nothing";

  f.reg.Fail(std::nullopt);

  EXPECT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
}

// A confirmed renewal moves the horizon in one step with the failure it ends, so a status
// never shows the new horizon's state beside that failure. A reader polls both ways the
// fill loop reads the pair, Read() and the lock-free horizon-then-version path, across
// rounds of failing and healing; the register stays healthy from each heal until the
// round's new horizon is seen.
TEST(ReservationService, AConfirmedRenewalMovesTheHorizonTogetherWithTheFailureItEnds) {
  constexpr int kRounds = 20;
  constexpr int64_t kUnarmed = std::numeric_limits<int64_t>::max();
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
  // A view at or above `armed` must carry no failure.
  std::atomic<int64_t> armed{kUnarmed};
  std::atomic<bool> done{false};
  std::atomic<int64_t> reads{0};
  std::string mismatch;  // the first view that broke the rule; the poller's until joined
  std::thread poller([&] {
    std::optional<uint64_t> version;
    bool copied_problem = false;
    while (!done.load() && mismatch.empty()) {
      const Horizon::View view = sut.Read();
      const int64_t horizon = sut.confirmed_through();
      const uint64_t seen = sut.renewal_version();
      int64_t lock_free_horizon = horizon;
      if (seen != version) {
        const Horizon::View copy = sut.Read();
        copied_problem = copy.problem.has_value();
        lock_free_horizon = copy.confirmed_through;
        version = seen;
      }
      const int64_t target = armed.load();
      if (view.confirmed_through >= target && view.problem) {
        mismatch = "Read() gave horizon " + std::to_string(view.confirmed_through) +
                   " with the failure: " + view.problem->message;
      } else if (lock_free_horizon >= target && copied_problem) {
        mismatch = "the lock-free path gave horizon " + std::to_string(lock_free_horizon) +
                   " with a failure";
      }
      reads.fetch_add(1);
    }
  });

  for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
    f.reg.Fail(reg::RegisterErrorCode::kTimedOut);
    const int64_t target = f.clock.Advance(1000) + 1000;  // due now: renewals fail
    ASSERT_TRUE(WaitUntil([&] { return sut.problem().has_value(); }, 10s,
                          "sut.problem().has_value()", 1ms));
    armed.store(target);
    f.reg.Fail(std::nullopt);
    ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= target; }, 10s,
                          "sut.confirmed_through() >= target", 1ms));
    armed.store(kUnarmed);  // before the next round's failure
  }
  done.store(true);
  poller.join();

  EXPECT_EQ(mismatch, "");
  EXPECT_GT(reads.load(), kRounds) << "the poller must have read while the rounds ran";
  EXPECT_FALSE(sut.problem().has_value());
}

// What an unconfirmed renewal waits for: the wait begins with the first renewal after a
// confirmed one and keeps that start across retries; it stays the register's while each
// retry writes the state file on its way back to the register (a slow fsync makes that
// the larger part of every retry); a confirmed renewal ends it.
TEST(ReservationService, AWaitForAnUnansweredRegisterKeepsItsStartAndStoreAcrossRetries) {
  // Arrange
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
  ASSERT_TRUE(WaitUntil([&] { return !sut.waiting().has_value(); }, 10s,
                        "!sut.waiting().has_value()", 1ms));
  f.reg.Fail(reg::RegisterErrorCode::kUnreachable);
  f.fs.SetDelay(20ms);

  // Act: the next renewal falls due and its register call fails, again and again.
  f.clock.Set(kStart + 600);
  const ::testing::AssertionResult failed =
      WaitUntil([&] { return sut.problem().has_value(); }, 10s, "sut.problem().has_value()", 1ms);
  // Sample across retries, not for a fixed time: every retry writes the state file
  // (slow fsyncs) on its way back to the register, so the fsyncs count them.
  constexpr int64_t kRetryFsyncs = 6;
  const int64_t fsyncs_before = f.fs.fsyncs();
  const auto sampling_ends = std::chrono::steady_clock::now() + 10s;
  int samples = 0;
  int not_the_register = 0;
  std::optional<RenewalWait> odd;
  for (; f.fs.fsyncs() - fsyncs_before < kRetryFsyncs &&
         std::chrono::steady_clock::now() < sampling_ends;
       ++samples) {
    const auto wait = sut.waiting();
    if (!wait || wait->store != ReservationStore::kRegister || wait->since_unix_ms != kStart + 600) {
      ++not_the_register;
      odd = wait;
    }
    std::this_thread::sleep_for(1ms);
  }
  const int64_t retry_fsyncs = f.fs.fsyncs() - fsyncs_before;
  f.reg.Fail(std::nullopt);
  f.fs.SetDelay(0ms);
  const ::testing::AssertionResult healed = WaitUntil(
      [&] { return sut.confirmed_through() >= kStart + 1600 && !sut.waiting().has_value(); }, 10s,
      "sut.confirmed_through() >= kStart + 1600 && !sut.waiting().has_value()", 1ms);

  // Assert
  ASSERT_TRUE(failed);
  EXPECT_GE(retry_fsyncs, kRetryFsyncs) << "the samples spanned too few retries to show anything";
  EXPECT_EQ(not_the_register, 0)
      << "of " << samples << " samples, e.g. store "
      << (odd ? StoreName(odd->store) : "none") << " since " << (odd ? odd->since_unix_ms : 0);
  EXPECT_TRUE(healed);
}

TEST(ReservationService, LostClaimIsReported) {
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));

  f.reg.Fail(reg::RegisterErrorCode::kClaimLost);

  EXPECT_TRUE(WaitUntil([&] { return sut.claim_lost(); }, 10s, "sut.claim_lost()", 1ms));
}

TEST(ReservationService, SlowFsyncNeverBlocksTheReader) {
  Fixture f;
  f.fs.SetDelay(200ms);
  ReservationService sut(Options(), f.store, f.reg, f.clock, kStart + 1000);
  sut.Start();
  f.clock.Tick(600);
  std::this_thread::sleep_for(20ms);  // a renewal is under way, inside a 200 ms fsync

  const auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    EXPECT_GE(sut.confirmed_through(), kStart + 1000);
    sut.NoteNeed(kStart + 600);
  }
  (void)sut.problem();
  EXPECT_LT(std::chrono::steady_clock::now() - began, 150ms)
      << "reading the horizon waited for the fsync";
  EXPECT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1600; }, 10s,
                        "sut.confirmed_through() >= kStart + 1600", 1ms));
}

TEST(ReservationService, CleanStopLowersBothStores) {
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
  sut.Stop();

  ASSERT_TRUE(sut.RecordCleanStop(kStart + 3).has_value());

  auto saved = f.store.Load();
  ASSERT_TRUE(saved.has_value() && saved->has_value());
  EXPECT_EQ((*saved)->reserved_through_unix_ms, kStart + 3);
  EXPECT_EQ((*saved)->last_issued_unix_ms_at_clean_stop, kStart + 3);
  EXPECT_EQ(f.reg.mark(), kStart + 3);
}

TEST(ReservationService, AFenceIsPassedOnAndAcknowledgedOnlyOnceTheLoopAppliedIt) {
  Fixture f;
  ReservationService sut(Options(), f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));

  // An operator's fence, found by the register's next call (the keepalive every 20 ms).
  f.reg.Fence(kStart + 9000);
  const ::testing::AssertionResult passed_on =
      WaitUntil([&] { return sut.fence_unix_ms() == kStart + 9000; }, 10s,
                "sut.fence_unix_ms() == kStart + 9000", 1ms);
  // Not acknowledged while the fill loop has not applied it: 50 renewal periods later.
  std::this_thread::sleep_for(100ms);
  const int64_t acknowledged_before = f.reg.acknowledged();
  sut.NoteFenceApplied(kStart + 9000);
  const ::testing::AssertionResult acknowledged =
      WaitUntil([&] { return f.reg.acknowledged() == kStart + 9000; }, 10s,
                "f.reg.acknowledged() == kStart + 9000", 1ms);

  EXPECT_TRUE(passed_on);
  EXPECT_EQ(acknowledged_before, 0) << "acknowledged before the fill loop obeyed the fence";
  EXPECT_TRUE(acknowledged);
}

TEST(ReservationService, AFenceReachesTheStateFileAndTheHostMarkBeforeItIsAcknowledged) {
  // Arrange: a reservation far ahead of the clock, which stands still: no renewal is due,
  // so only the fence itself can make the service write its state file again.
  Fixture f;
  ReservationOptions options = Options();
  options.host_marks = {f.dir / "host-locks", f.dir / "host-marks-on-disk"};
  options.host_mark_writer = "0123456789abcdef0123456789abcdef";
  std::filesystem::create_directories(options.host_marks.boot);
  ReservationService sut(options, f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
  const uint64_t renewals = sut.renewals();

  // Act: an operator's fence, found by the keepalive; the fill loop applies it and the
  // service acknowledges it (a write under the claim that covers the operator's mark).
  f.reg.Fence(kStart + 9000);
  ASSERT_TRUE(WaitUntil([&] { return sut.fence_unix_ms() == kStart + 9000; }, 10s,
                        "sut.fence_unix_ms() == kStart + 9000", 1ms));
  sut.NoteFenceApplied(kStart + 9000);
  ASSERT_TRUE(WaitUntil([&] { return f.reg.acknowledged() == kStart + 9000; }, 10s,
                        "f.reg.acknowledged() == kStart + 9000", 1ms));
  sut.Stop();
  auto saved = f.store.Load();
  auto host_mark = reg::ReadHostMark(options.host_marks.boot, 3, kStart, reg::kDefaultMaxForwardMs);
  auto on_disk = reg::ReadHostMark(options.host_marks.disk, 3, kStart, reg::kDefaultMaxForwardMs);

  // Assert: a crash right after the acknowledgment restarts above the fence, from the
  // state file (its floor) or from the host mark (a static daemon's next start); the
  // reservation the file holds is kept, not lowered.
  EXPECT_EQ(sut.renewals(), renewals) << "a renewal ran: the test proves nothing";
  ASSERT_TRUE(saved.has_value() && saved->has_value());
  EXPECT_GE((*saved)->floor_unix_ms, kStart + 9000)
      << "the fence was acknowledged before the state file recorded it";
  EXPECT_GE((*saved)->reserved_through_unix_ms, kStart + 1000);
  ASSERT_TRUE(host_mark.has_value() && host_mark->highest.has_value()) << host_mark.error();
  EXPECT_GE(host_mark->highest->unix_ms, kStart + 9000) << "the host mark does not carry the fence";
  ASSERT_TRUE(on_disk.has_value() && on_disk->highest.has_value()) << on_disk.error();
  EXPECT_EQ(on_disk->highest, host_mark->highest) << "the copy on disk is not the host mark";
}

TEST(ReservationService, TheHostMarkFollowsTheReservationAndTheCleanStopNeverBelowItsFloor) {
  Fixture f;
  ReservationOptions options = Options();
  options.host_marks = {f.dir / "host-locks", f.dir / "host-marks-on-disk"};
  options.host_mark_writer = "0123456789abcdef0123456789abcdef";
  options.host_mark_floor = kStart + 100;
  std::filesystem::create_directories(options.host_marks.boot);
  ReservationService sut(options, f.store, f.reg, f.clock, 0);
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.confirmed_through() >= kStart + 1000; }, 10s,
                        "sut.confirmed_through() >= kStart + 1000", 1ms));
  auto reserved = reg::ReadHostMark(options.host_marks.boot, 3, kStart, reg::kDefaultMaxForwardMs);
  auto reserved_on_disk =
      reg::ReadHostMark(options.host_marks.disk, 3, kStart, reg::kDefaultMaxForwardMs);
  sut.Stop();

  ASSERT_TRUE(sut.RecordCleanStop(kStart + 3).has_value());
  auto stopped = reg::ReadHostMark(options.host_marks.boot, 3, kStart, reg::kDefaultMaxForwardMs);
  auto stopped_on_disk =
      reg::ReadHostMark(options.host_marks.disk, 3, kStart, reg::kDefaultMaxForwardMs);

  ASSERT_TRUE(reserved && reserved->highest.has_value())
      << (reserved ? "none" : reserved.error());
  EXPECT_GE(reserved->highest->unix_ms, kStart + 1000);
  EXPECT_EQ(reserved->highest->writer, "0123456789abcdef0123456789abcdef");
  ASSERT_TRUE(stopped && stopped->highest.has_value());
  // Issued up to +3, but the start stood above +100 (another daemon's mark): never below.
  EXPECT_EQ(stopped->highest->unix_ms, kStart + 100);
  // The copy that outlives a reboot says the same each time.
  ASSERT_TRUE(reserved_on_disk && stopped_on_disk);
  EXPECT_EQ(reserved_on_disk->highest, reserved->highest);
  EXPECT_EQ(stopped_on_disk->highest, stopped->highest);
}

// Finding 3: a process holding the register's lock (a stopped `register release`, another
// daemon, anyone who can open the lock file) must not hang the daemon.
TEST(FileRegisterLock, UpdateHighWaterGivesUpWithinItsBound) {
  TempDir dir("register-lock");
  reg::FileRegister reg(reg::FileRegisterOptions{.path = dir / "register.json",
                                                 .first_machine = 0,
                                                 .last_machine = IdLayout().max_machine(),
                                                 .host_lock_dir = dir / "host-locks"});
  ASSERT_TRUE(reg.Claim(reg::ClaimRequest{"holder", kDefaultEpochUnixMs}).has_value());
  std::filesystem::path lock_path = dir / "register.json";
  lock_path += ".lock";
  auto held = util::FileLock::Acquire(lock_path, /*wait=*/false, /*write_pid=*/false);
  ASSERT_TRUE(held.has_value());

  auto result = std::async(std::launch::async, [&] { return reg.UpdateHighWater(kStart); });
  const auto ready = result.wait_for(20s);
  if (ready != std::future_status::ready) {
    held = tl::unexpected(util::LockFailure{});  // let the blocked call finish before failing
    FAIL() << "UpdateHighWater waited 20 s for the register lock";
  }
  auto updated = result.get();
  ASSERT_FALSE(updated.has_value());
  EXPECT_EQ(updated.error().code, reg::RegisterErrorCode::kTimedOut) << updated.error().message;
}

}  // namespace
}  // namespace snowflake::daemon
