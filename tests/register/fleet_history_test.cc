// The fleet simulation's history checker on its own (fleet_history.h), before it is
// trusted with a real cluster's history: a clean history of claims, raises, an expired
// lease and a takeover passes, and each broken property is reported at the revision that
// broke it. Also the watch stream's parsing, on lines as etcd 3.4's gateway writes them.

#include "fleet_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace snowflake::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;

const std::string kFleet = "/fleet-sim/f0/";

HistoryEvent Claim(int64_t revision, int n, const std::string& holder, int64_t lease) {
  return HistoryEvent{revision, false, kFleet + "machines/" + std::to_string(n),
                      R"({"holder":")" + holder + R"(","host":"h","pid":1,"since_unix_ms":5})",
                      lease};
}
HistoryEvent Expire(int64_t revision, int n) {
  return HistoryEvent{revision, true, kFleet + "machines/" + std::to_string(n), "", 0};
}
HistoryEvent Raise(int64_t revision, int n, int64_t unix_ms, const std::string& holder,
                   int64_t lease) {
  return HistoryEvent{revision, false, kFleet + "high-water/" + std::to_string(n),
                      R"({"unix_ms":)" + std::to_string(unix_ms) + R"(,"holder":")" + holder +
                          R"(","lease":)" + std::to_string(lease) + "}",
                      0};
}

std::vector<std::string> Kinds(const FleetHistory& sut) {
  std::vector<std::string> kinds;
  for (const auto& v : sut.violations()) kinds.push_back(v.kind);
  return kinds;
}

TEST(FleetHistory, AcceptsClaimsRaisesAnExpiryATakeoverAndARetake) {
  FleetHistory sut;
  for (const auto& e : {Claim(2, 0, "a", 100), Raise(3, 0, 1000, "a", 100), Claim(4, 1, "b", 200),
                        Raise(5, 1, 900, "b", 200), Raise(6, 0, 1250, "a", 100), Expire(7, 0),
                        // c takes 0 over, above a's mark; b takes its own 1 back
                        Claim(8, 0, "c", 300), Raise(9, 0, 1500, "c", 300), Claim(10, 1, "b", 201),
                        Raise(11, 1, 1100, "b", 201)}) {
    sut.Add(e);
  }
  EXPECT_THAT(sut.violations(), IsEmpty());
  EXPECT_EQ(sut.counts().claims, 3u);
  EXPECT_EQ(sut.counts().takeovers, 1u);
  EXPECT_EQ(sut.counts().retakes, 1u);
  EXPECT_EQ(sut.counts().mark_writes, 5u);
  EXPECT_EQ(sut.counts().max_held, 2u);
  EXPECT_EQ(sut.last_revision(), 11);
}

TEST(FleetHistory, ReportsANumberGivenToASecondHolderWhileTheFirstLeaseBindsIt) {
  FleetHistory sut;
  sut.Add(Claim(2, 4, "a", 100));
  sut.Add(Claim(3, 4, "intruder", 900));
  ASSERT_THAT(sut.violations(),
              ElementsAre(AllOf(Field(&HistoryViolation::kind, "double_holder"),
                                Field(&HistoryViolation::revision, 3),
                                Field(&HistoryViolation::key, kFleet + "machines/4"))));
  EXPECT_THAT(sut.violations()[0].detail, ::testing::HasSubstr("lease 100 of \"a\""));
}

TEST(FleetHistory, ReportsAMarkThatMovesDown) {
  FleetHistory sut;
  sut.Add(Claim(2, 0, "a", 100));
  sut.Add(Raise(3, 0, 2000, "a", 100));
  sut.Add(Raise(4, 0, 1999, "a", 100));
  EXPECT_THAT(Kinds(sut), ElementsAre("mark_down"));
  EXPECT_EQ(sut.violations()[0].revision, 4);
}

TEST(FleetHistory, ReportsAMarkWrittenUnderALeaseThatNoLongerBindsTheNumber) {
  FleetHistory sut;
  sut.Add(Claim(2, 0, "a", 100));
  sut.Add(Expire(3, 0));
  sut.Add(Raise(4, 0, 2000, "a", 100));  // a's raise after its lease ended
  sut.Add(Claim(5, 0, "b", 200));
  sut.Add(Raise(6, 0, 3000, "a", 100));  // and after b's claim
  EXPECT_THAT(Kinds(sut),
              ElementsAre("mark_written_without_the_claim", "mark_written_without_the_claim"));
}

TEST(FleetHistory, ReportsOneLeaseOnTwoNumbersAHolderWithoutLeaseAndADeletedMark) {
  FleetHistory sut;
  sut.Add(Claim(2, 0, "a", 100));
  sut.Add(Claim(3, 1, "a", 100));
  sut.Add(Claim(4, 2, "z", 0));
  sut.Add(Raise(5, 0, 10, "a", 100));
  sut.Add(HistoryEvent{6, true, kFleet + "high-water/0", "", 0});
  EXPECT_THAT(Kinds(sut),
              ElementsAre("lease_on_two_numbers", "holder_without_lease", "mark_deleted"));
}

TEST(FleetHistory, ReportsUnreadableValuesAndRevisionsOutOfOrder) {
  FleetHistory sut;
  sut.Add(HistoryEvent{5, false, kFleet + "machines/0", "garbage", 100});
  sut.Add(HistoryEvent{6, false, kFleet + "high-water/0", R"({"unix_ms":"soon"})", 0});
  sut.Add(Claim(4, 1, "a", 100));
  EXPECT_THAT(Kinds(sut),
              ElementsAre("unreadable_value", "unreadable_value", "revision_out_of_order"));
}

TEST(FleetHistory, IgnoresKeysOutsideTheLayoutAndNumbersOutOfRange) {
  FleetHistory sut;
  sut.Add(HistoryEvent{2, false, kFleet + "config", "{}", 0});
  sut.Add(HistoryEvent{3, false, kFleet + "machines/1024", "x", 0});
  sut.Add(HistoryEvent{4, false, kFleet + "machines/07", "x", 0});
  sut.Add(HistoryEvent{5, false, "/fleet-sim/end", "", 0});
  EXPECT_THAT(sut.violations(), IsEmpty());
  EXPECT_EQ(sut.counts().other_events, 4u);
}

TEST(FleetHistory, ParsesTheGatewaysWatchLines) {
  // As etcd 3.4.23's gateway wrote them (a put, a put bound to a lease, a delete: PUT is
  // proto3's zero value, so its "type" is absent).
  const std::string line =
      R"({"result":{"header":{"cluster_id":"1","member_id":"2","revision":"9","raft_term":"2"},)"
      R"("events":[{"kv":{"key":")" +
      Base64Encode(kFleet + "high-water/3") +
      R"(","create_revision":"4","mod_revision":"7","version":"2","value":")" +
      Base64Encode(R"({"unix_ms":5,"holder":"a","lease":9})") + R"("}},{"kv":{"key":")" +
      Base64Encode(kFleet + "machines/3") +
      R"(","create_revision":"8","mod_revision":"8","version":"1","value":"e30=","lease":"7587870000000000001"}},)"
      R"({"type":"DELETE","kv":{"key":")" +
      Base64Encode(kFleet + "machines/3") + R"(","mod_revision":"9"}}]}})";
  auto events = ParseWatchLine(line);
  ASSERT_TRUE(events) << events.error();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].key, kFleet + "high-water/3");
  EXPECT_EQ((*events)[0].value, R"({"unix_ms":5,"holder":"a","lease":9})");
  EXPECT_EQ((*events)[0].revision, 7);
  EXPECT_FALSE((*events)[0].deleted);
  EXPECT_EQ((*events)[1].lease, 7587870000000000001);
  EXPECT_EQ((*events)[1].value, "{}");
  EXPECT_TRUE((*events)[2].deleted);
  EXPECT_EQ((*events)[2].revision, 9);

  auto created = ParseWatchLine(R"({"result":{"header":{"revision":"1"},"created":true}})");
  ASSERT_TRUE(created);
  EXPECT_THAT(*created, IsEmpty());
}

TEST(FleetHistory, RefusesACancelledWatchAndAnythingElse) {
  auto cancelled = ParseWatchLine(
      R"({"result":{"canceled":true,"compact_revision":"40","cancel_reason":"compacted"}})");
  ASSERT_FALSE(cancelled);
  EXPECT_THAT(cancelled.error(), ::testing::HasSubstr("compact_revision 40"));
  EXPECT_FALSE(ParseWatchLine("not json"));
  EXPECT_FALSE(ParseWatchLine(R"({"error":{"grpc_code":14}})"));
  EXPECT_FALSE(ParseWatchLine(R"({"result":{"events":[{"kv":{"key":"***"}}]}})"));
}

TEST(FleetHistory, Base64RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 70; ++i) {
    EXPECT_EQ(Base64Decode(Base64Encode(bytes)), bytes) << "length " << i;
    bytes += static_cast<char>(i * 37 + 200);
  }
  EXPECT_EQ(Base64Encode("ab"), "YWI=");
  EXPECT_FALSE(Base64Decode("YW=I"));
  EXPECT_FALSE(Base64Decode("YWI"));
}

}  // namespace
}  // namespace snowflake::testing
