// ReconcileStartup() as a table: where a start stands, from segment, state file, register
// and clock. The surviving segment replaces the reservation only when it is provably the
// segment the reservation covered.
#include "daemon/core/startup_reconciliation.h"

#include <gtest/gtest.h>

#include <string>

#include "snowflake/id_layout.h"

namespace snowflake::daemon {
namespace {

constexpr int64_t kEpoch = kDefaultEpochUnixMs;
constexpr int64_t kNow = kEpoch + 1'000'000;
const std::string kPath = "/run/x/snowflake.ring";
// Two state directories' identities (state_identity.h).
const std::string kOurs = "0123456789abcdef0123456789abcdef";
const std::string kTheirs = "fedcba9876543210fedcba9876543210";

uint64_t IdAt(int64_t unix_ms) { return IdLayout().EncodeUnchecked(unix_ms - kEpoch, 3, 7); }

// A SIGKILLed daemon's leftovers: it reserved through kNow + 900 in both stores for the
// segment in incarnation 4, published up to kNow - 2; this start continued it (now 5).
StartupFacts AfterSigkill() {
  StartupFacts f;
  f.now_unix_ms = kNow;
  f.epoch_unix_ms = kEpoch;
  f.machine = 3;
  f.register_high_water_ms = kNow + 900;
  f.state_file = HighWaterState{.machine = 3,
                                .epoch_unix_ms = kEpoch,
                                .reserved_through_unix_ms = kNow + 900,
                                .last_issued_unix_ms_at_clean_stop = std::nullopt,
                                .segment_path = kPath,
                                .segment_incarnation = 4};
  f.segment = {
      .path = kPath, .continued = true, .last_published_id = IdAt(kNow - 2), .incarnation = 5};
  return f;
}

TEST(StartupReconciliation, SurvivingSegmentOfTheReservationIsExact) {
  auto sut = ReconcileStartup(AfterSigkill());
  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_TRUE(sut->trusted_segment);
  EXPECT_EQ(sut->high_water_unix_ms, kNow - 2);
  EXPECT_EQ(sut->start_wait_ms, 100);
  EXPECT_EQ(sut->confirmed_through_unix_ms, kNow + 900);
}

TEST(StartupReconciliation, SurvivingSegmentIsExactWhenTheMarksLastWriterIsOurClaim) {
  StartupFacts f = AfterSigkill();
  f.state_file->register_claim = 111;
  f.register_mark_writer = 111;

  auto sut = ReconcileStartup(f);

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_TRUE(sut->trusted_segment);
  EXPECT_EQ(sut->high_water_unix_ms, kNow - 2);
}

TEST(StartupReconciliation, EveryOtherCaseWaitsOutTheReservation) {
  struct Row {
    std::string what;
    StartupFacts facts;
  };
  std::vector<Row> rows;
  {
    StartupFacts f = AfterSigkill();
    f.segment.continued = false;
    f.segment.last_published_id = 0;
    f.segment.incarnation = 1;
    rows.push_back({"segment lost (a reboot)", f});
  }
  {
    StartupFacts f = AfterSigkill();
    f.segment.incarnation = 7;
    rows.push_back({"someone else opened the segment since", f});
  }
  {
    StartupFacts f = AfterSigkill();
    f.segment.path = "/run/y/snowflake.ring";
    rows.push_back({"another segment than the reservation's", f});
  }
  {
    StartupFacts f = AfterSigkill();
    f.state_file->segment_path.reset();
    rows.push_back({"a state file that names no segment", f});
  }
  {
    StartupFacts f = AfterSigkill();
    f.register_high_water_ms = kNow + 5000;
    rows.push_back({"the register knows a newer mark (another holder)", f});
  }
  {
    StartupFacts f = AfterSigkill();
    f.state_file->machine = 4;
    rows.push_back({"the file was for another number", f});
  }
  {
    StartupFacts f = AfterSigkill();
    f.segment.last_published_id = 0;
    rows.push_back({"a segment that never published", f});
  }
  {
    // The state file ran ahead of etcd during an outage; meanwhile a holder with the same
    // holder id claimed the number under a new lease and wrote a mark below our file's
    // reservation. The value alone would pass; the writer does not.
    StartupFacts f = AfterSigkill();
    f.state_file->register_claim = 111;
    f.register_mark_writer = 222;
    f.register_high_water_ms = kNow + 500;
    rows.push_back({"another claim wrote the register's mark since", f});
  }
  {
    StartupFacts f = AfterSigkill();
    f.state_file->register_claim.reset();
    f.register_mark_writer = 222;
    rows.push_back({"the register names a writer, the file no claim", f});
  }
  {
    // Another daemon of this host (another state directory) served the number since, to
    // below our reservation but above our segment's last ID.
    StartupFacts f = AfterSigkill();
    f.state_identity = kOurs;
    f.host_mark = reg::HostMark{kNow + 300, kTheirs};
    rows.push_back({"another daemon of this host served the number since", f});
  }
  for (const Row& row : rows) {
    auto sut = ReconcileStartup(row.facts);
    ASSERT_TRUE(sut.has_value()) << row.what;
    EXPECT_FALSE(sut->trusted_segment) << row.what;
    EXPECT_GE(sut->high_water_unix_ms, kNow + 900) << row.what;
    EXPECT_EQ(sut->start_wait_ms, 1000 + 100) << row.what;
  }
}

TEST(StartupReconciliation, ATrustedSegmentStillStartsAboveTheFloorTheLastStartStoodAbove) {
  // The last start stood above another holder's mark (kNow + 400), committed a raise under
  // its own claim and crashed before publishing: the segment's last ID is still the one
  // before (kNow - 2), and the other holder issued up to kNow + 400.
  StartupFacts f = AfterSigkill();
  f.state_file->floor_unix_ms = kNow + 400;

  auto sut = ReconcileStartup(f);

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_TRUE(sut->trusted_segment);
  EXPECT_EQ(sut->high_water_unix_ms, kNow + 400)
      << "the restart would repeat the other holder's milliseconds above the segment's last ID";
  EXPECT_EQ(sut->start_wait_ms, 1000 + 100);
}

TEST(StartupReconciliation, TheSegmentIsStillExactWhenTheHostMarkIsOurOwn) {
  StartupFacts f = AfterSigkill();
  f.state_identity = kOurs;
  f.host_mark = reg::HostMark{kNow + 900, kOurs};

  auto sut = ReconcileStartup(f);

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_TRUE(sut->trusted_segment);
  EXPECT_EQ(sut->high_water_unix_ms, kNow - 2);
}

TEST(StartupReconciliation, AMarkOfAnotherStateDirectoryOfTheSamePathIsAnotherDaemons) {
  // A pod's emptyDir and the host's daemon can both be /var/lib/snowflaked: the other one
  // served the number since, to above our segment's last ID.
  StartupFacts f = AfterSigkill();
  // Each marks its state directory with an identity of its own (state_identity.h).
  f.state_identity = kOurs;
  f.host_mark = reg::HostMark{kNow + 300, kTheirs};

  auto sut = ReconcileStartup(f);

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_FALSE(sut->trusted_segment) << "took another daemon's mark for its own";
  EXPECT_GE(sut->high_water_unix_ms, kNow + 900);
}

TEST(StartupReconciliation, AStartThatCannotTrustItsSegmentStillStartsAboveTheFloor) {
  // The last start obeyed an operator's fence ahead of every mark (kNow + 4000); the
  // segment is gone (a reboot) and the register's mark is below the fence.
  StartupFacts f = AfterSigkill();
  f.segment = {.path = kPath, .continued = false, .last_published_id = 0, .incarnation = 1};
  f.state_file->floor_unix_ms = kNow + 4000;

  auto sut = ReconcileStartup(f);

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_FALSE(sut->trusted_segment);
  EXPECT_EQ(sut->high_water_unix_ms, kNow + 4000) << "the restart would issue below the fence";
  EXPECT_EQ(sut->high_water_source, vocab::MarkSource::kStateFile);
}

TEST(StartupReconciliation, WithoutAnIdentityNoHostMarkIsOurs) {
  // A mark written by a daemon without an identity (an older one: its writer is "") is
  // never taken for this daemon's own when this daemon has none either.
  StartupFacts f = AfterSigkill();
  f.state_identity = "";
  f.host_mark = reg::HostMark{kNow + 300, ""};

  auto sut = ReconcileStartup(f);

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_FALSE(sut->trusted_segment) << "an empty writer matched an empty identity";
}

TEST(StartupReconciliation, TheMarkNamesWhoSetIt) {
  StartupFacts register_above = AfterSigkill();
  register_above.segment.continued = false;
  register_above.register_high_water_ms = kNow + 2000;
  StartupFacts host_above = AfterSigkill();
  host_above.segment.continued = false;
  host_above.state_identity = kOurs;
  host_above.host_mark = reg::HostMark{kNow + 3000, kTheirs};

  auto trusted = ReconcileStartup(AfterSigkill());
  auto by_register = ReconcileStartup(register_above);
  auto by_host = ReconcileStartup(host_above);

  ASSERT_TRUE(trusted && by_register && by_host);
  EXPECT_EQ(trusted->high_water_source, vocab::MarkSource::kSegment);
  EXPECT_EQ(by_register->high_water_source, vocab::MarkSource::kRegister);
  EXPECT_EQ(by_host->high_water_source, vocab::MarkSource::kHostMark);
}

TEST(StartupReconciliation, AFirstStartOnANumberAnotherDaemonOfTheHostServedStartsAboveIt) {
  // No state file, no register mark (a static number): only the host mark knows.
  StartupFacts f;
  f.now_unix_ms = kNow;
  f.epoch_unix_ms = kEpoch;
  f.state_identity = kOurs;
  f.host_mark = reg::HostMark{kNow + 5000, kTheirs};
  f.segment = {.path = kPath, .continued = false, .last_published_id = 0, .incarnation = 1};

  auto sut = ReconcileStartup(f);

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_EQ(sut->high_water_unix_ms, kNow + 5000);
  EXPECT_FALSE(sut->trusted_segment);
  EXPECT_NE(sut->explanation.find("another daemon's"), std::string::npos) << sut->explanation;
}

TEST(StartupReconciliation, AStateFileFarPastTheClockIsRefused) {
  // Ten years ahead: the clock or the file is wrong; adopting it would stop the number.
  constexpr int64_t kDay = 86'400'000;
  const auto state = [](int64_t through, int64_t floor) {
    HighWaterState s;
    s.machine = 3;
    s.epoch_unix_ms = kEpoch;
    s.reserved_through_unix_ms = through;
    s.floor_unix_ms = floor;
    return s;
  };
  const HighWaterState far = state(kNow + 3650 * kDay, 0);
  const HighWaterState far_floor = state(kNow, kNow + kDay + 1);
  const HighWaterState near = state(kNow + kDay, kNow + kDay);

  auto refused = CheckStateFileAgainstClock(far, kNow, kDay);
  auto refused_floor = CheckStateFileAgainstClock(far_floor, kNow, kDay);
  auto kept = CheckStateFileAgainstClock(near, kNow, kDay);
  // An operator's fence put far ahead on purpose (`raise-all --force-far`) and obeyed: the
  // register's mark is at it, and the start judges against the later of clock and mark.
  auto fenced_far = CheckStateFileAgainstClock(state(kNow + 3650 * kDay, kNow + 3650 * kDay),
                                               kNow + 3650 * kDay, kDay);

  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("reserved_through_unix_ms"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("clock.max_forward_ms"), std::string::npos) << refused.error();
  ASSERT_FALSE(refused_floor);
  EXPECT_NE(refused_floor.error().find("floor_unix_ms"), std::string::npos) << refused_floor.error();
  EXPECT_TRUE(kept) << kept.error();
  EXPECT_TRUE(fenced_far) << fenced_far.error();
}

TEST(StartupReconciliation, FirstStartHasNoMark) {
  StartupFacts f;
  f.now_unix_ms = kNow;
  f.epoch_unix_ms = kEpoch;
  f.segment = {.path = kPath, .continued = false, .last_published_id = 0, .incarnation = 1};
  auto sut = ReconcileStartup(f);
  ASSERT_TRUE(sut.has_value());
  EXPECT_EQ(sut->high_water_unix_ms, 0);
  EXPECT_FALSE(sut->trusted_segment);
}

TEST(StartupReconciliation, StateFileOfAnotherEpochIsRefused) {
  StartupFacts f = AfterSigkill();
  f.state_file->epoch_unix_ms = kEpoch - 1000;
  auto sut = ReconcileStartup(f);
  ASSERT_FALSE(sut.has_value());
  EXPECT_NE(sut.error().find("epoch"), std::string::npos) << sut.error();
}

}  // namespace
}  // namespace snowflake::daemon
