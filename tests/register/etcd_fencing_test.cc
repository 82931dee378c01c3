// EtcdRegister's high-water mark under reordered writes, reproduced deterministically: the
// register talks to one real etcd member through two endpoints, [fault proxy -> member,
// member], and the proxy (tests/support/fault_proxy.h) holds a raise until the client has
// given up on it (request_timeout_ms 300), lets the next calls go to the direct endpoint
// and commit, and delivers the held raise afterwards. That is what a stalled etcd member
// does when it resumes. The properties:
//   - a raise applied late (once or twice) never lowers the stored mark below a raise that
//     committed after it;
//   - nor below a clean stop recorded after it, so a successor starts above every
//     millisecond the old holder may have issued in;
//   - a successor that claims after the old holder's lease ended starts at or above the
//     old holder's committed horizon (else both issue IDs in the same milliseconds).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "daemon/core/high_water_store.h"
#include "daemon/core/reservation_service.h"
#include "daemon/core/startup_reconciliation.h"
#include "etcd_cluster.h"
#include "fault_proxy.h"
#include "manual_clock.h"
#include "register/etcd_client.h"
#include "register/etcd_json.h"
#include "register/etcd_records.h"
#include "register/etcd_register.h"
#include "snowflake/id_layout.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace snowflake::reg {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::FaultProxy;
using testing::WaitUntil;

constexpr int64_t kEpoch = 1'767'225'600'000;
constexpr uint32_t kMachine = 7;

int PortOf(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

std::string Describe(const std::vector<FaultProxy::Delivery>& deliveries) {
  std::string out;
  for (const auto& d : deliveries) {
    out += "[" + d.request_line + " -> " + std::to_string(d.status) + " " + d.body + "] ";
  }
  return out;
}

class EtcdFencing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new EtcdCluster(1); }
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(HostsDir(), ignored);
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    auto proxy = FaultProxy::Start(PortOf(cluster_->ClientUrl(0)));
    ASSERT_TRUE(proxy) << proxy.error();
    proxy_ = std::move(*proxy);
    prefix_ = "/fencing/" +
              std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/";
  }

  // Endpoints [proxy, member]: calls start at the proxy; after a timeout there the next
  // call goes to the member directly (etcd_client.h).
  EtcdRegisterOptions Options(int64_t ttl_s = 30) const {
    EtcdRegisterOptions o;
    o.client.endpoints = {proxy_->url(), cluster_->ClientUrl(0)};
    o.client.request_timeout_ms = 300;
    o.client.connect_timeout_ms = 300;
    o.prefix = prefix_;
    o.lease_ttl_s = ttl_s;
    o.first_machine = kMachine;
    o.last_machine = kMachine;
    o.host = "fencing-host";
    // Each register stands for a host of its own: its own host-wide machine locks.
    static std::atomic<int> hosts{0};
    o.host_lock_dir = HostsDir() / ("host-" + std::to_string(hosts.fetch_add(1)));
    std::filesystem::create_directories(o.host_lock_dir);
    return o;
  }
  static std::filesystem::path HostsDir() {
    return std::filesystem::temp_directory_path() /
           ("etcd-fencing-test-" + std::to_string(::getpid()));
  }
  // A holder that talks to the member directly.
  EtcdRegisterOptions DirectOptions() const {
    EtcdRegisterOptions o = Options();
    o.client.endpoints = {cluster_->ClientUrl(0)};
    o.client.request_timeout_ms = 3000;
    return o;
  }
  static etcd::EtcdClient Direct() {
    etcd::ClientOptions options;
    options.endpoints = {cluster_->ClientUrl(0)};
    return etcd::EtcdClient(options);
  }
  // high-water/N as stored now, read linearizably from the member; nullopt if absent.
  std::optional<int64_t> StoredMark() const {
    auto range = Direct().Range(etcd::HighWaterKey(prefix_, kMachine));
    if (!range || range->kvs.empty()) return std::nullopt;
    auto record = etcd::DecodeHighWater(range->kvs[0].value);
    if (!record) return std::nullopt;
    return record->unix_ms;
  }
  // Holds the next raise (a txn) at the proxy: UpdateHighWater(target) times out there.
  // Returns what the raise returned, after the proxy has the request.
  tl::expected<void, RegisterError> RaiseHeldAtTheProxy(EtcdRegister& holder, int64_t target) {
    EXPECT_TRUE(proxy_->SetMode(FaultProxy::Mode::kHold, "/v3/kv/txn"));
    auto raise = holder.UpdateHighWater(target);
    EXPECT_TRUE(proxy_->WaitForHeld(1, 5s)) << "the raise never reached the proxy";
    EXPECT_TRUE(proxy_->SetMode(FaultProxy::Mode::kPass));
    return raise;
  }

  static EtcdCluster* cluster_;
  std::unique_ptr<FaultProxy> proxy_;
  std::string prefix_;
};

EtcdCluster* EtcdFencing::cluster_ = nullptr;

TEST_F(EtcdFencing, ARaiseAppliedLateNeverLowersTheMark) {
  // Arrange: a holder with a committed mark.
  EtcdRegister sut(Options());
  auto claim = sut.Claim({"holder-a", kEpoch});
  ASSERT_TRUE(claim) << claim.error().message;
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 1000));

  // Act: the raise to +2000 stalls at the proxy and times out; the raise to +3000 goes to
  // the member directly and commits; then the stalled raise is applied.
  auto stalled = RaiseHeldAtTheProxy(sut, kEpoch + 2000);
  auto newer = sut.UpdateHighWater(kEpoch + 3000);
  const auto before_late = StoredMark();
  auto late = proxy_->ReleaseHeld();
  const auto after_late = StoredMark();

  // Assert
  ASSERT_FALSE(stalled) << "a held raise was reported committed";
  EXPECT_EQ(stalled.error().code, RegisterErrorCode::kUnreachable) << stalled.error().message;
  ASSERT_TRUE(newer) << newer.error().message;
  ASSERT_TRUE(late) << late.error();
  ASSERT_EQ(late->size(), 1u);
  ASSERT_TRUE(before_late.has_value());
  EXPECT_EQ(*before_late, kEpoch + 3000);
  ASSERT_TRUE(after_late.has_value());
  EXPECT_GE(*after_late, kEpoch + 3000)
      << "the late raise lowered the mark by " << (kEpoch + 3000 - *after_late)
      << " ms below a committed raise: " << Describe(*late);
  // The holder goes on raising normally.
  auto next = sut.UpdateHighWater(kEpoch + 4000);
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(StoredMark(), kEpoch + 4000);
}

TEST_F(EtcdFencing, ARaiseAfterItsOwnLateRaiseLandedReReadsAndCommits) {
  // Arrange: a raise to +2000 stalls, times out, and is then applied: the mark's revision
  // moved under the holder, which still expects the revision of its +1000.
  EtcdRegister sut(Options());
  ASSERT_TRUE(sut.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 1000));
  auto stalled = RaiseHeldAtTheProxy(sut, kEpoch + 2000);
  auto late = proxy_->ReleaseHeld();
  const auto after_late = StoredMark();

  // Act: the next raise's first compare fails; the holder re-reads (its lease is still
  // its own) and sends it again against the new revision.
  auto next = sut.UpdateHighWater(kEpoch + 3000);

  // Assert
  ASSERT_FALSE(stalled);
  ASSERT_TRUE(late) << late.error();
  EXPECT_EQ(after_late, kEpoch + 2000) << "the late raise was not applied: " << Describe(*late);
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(StoredMark(), kEpoch + 3000);
  EXPECT_FALSE(sut.claim_lost());
}

TEST_F(EtcdFencing, ARaiseNeverWritesBelowAnOperatorsHigherMark) {
  // Arrange: the holder is at +1000 when an operator writes +10000 under it (as raise-all
  // does, without a lease).
  EtcdRegister sut(Options());
  ASSERT_TRUE(sut.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 1000));
  ASSERT_TRUE(Direct().Put(etcd::HighWaterKey(prefix_, kMachine),
                           etcd::EncodeHighWater(etcd::HighWaterRecord{kEpoch + 10'000, "", 0})));

  // Act: two raises below the operator's mark, then the holder stops cleanly having
  // issued up to +3000.
  auto covered = sut.UpdateHighWater(kEpoch + 2000);
  auto again = sut.UpdateHighWater(kEpoch + 3000);
  const auto after_raises = StoredMark();
  auto stop = sut.RecordCleanStop(kEpoch + 3000);

  // Assert: both are covered by the stored mark; neither wrote below it, and the operator's
  // mark is a fence the holder must stay above. The clean stop lowers only what the holder
  // wrote itself: the fence survives it, so the next holder starts above it.
  ASSERT_TRUE(covered) << covered.error().message;
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(after_raises, kEpoch + 10'000);
  EXPECT_EQ(sut.fence_unix_ms(), kEpoch + 10'000);
  ASSERT_TRUE(stop) << stop.error().message;
  EXPECT_EQ(StoredMark(), kEpoch + 10'000)
      << "the clean stop erased the operator's fence: the next holder would start "
      << (kEpoch + 10'000 - StoredMark().value_or(0)) << " ms below it";
}

TEST_F(EtcdFencing, AHolderAcknowledgesAFenceUnderItsOwnLeaseNeverLower) {
  // Arrange: an operator's fence at +10000 found by a raise.
  EtcdRegister sut(Options());
  ASSERT_TRUE(sut.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 1000));
  ASSERT_TRUE(Direct().Put(etcd::HighWaterKey(prefix_, kMachine),
                           etcd::EncodeHighWater(etcd::HighWaterRecord{kEpoch + 10'000, "", 0})));
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 2000));
  ASSERT_EQ(sut.fence_unix_ms(), kEpoch + 10'000);

  // Act: the daemon obeys the fence and acknowledges it; a later raise follows.
  auto acknowledged = sut.AcknowledgeFence(sut.fence_unix_ms());
  auto stored = Direct().Range(etcd::HighWaterKey(prefix_, kMachine));
  auto later = sut.UpdateHighWater(kEpoch + 12'000);
  auto after_later = Direct().Range(etcd::HighWaterKey(prefix_, kMachine));

  // Assert: the mark keeps its value, now under the holder's lease with the fence it
  // obeys, and later raises keep saying so.
  ASSERT_TRUE(acknowledged) << acknowledged.error().message;
  ASSERT_TRUE(stored && !stored->kvs.empty());
  auto record = etcd::DecodeHighWater(stored->kvs[0].value);
  ASSERT_TRUE(record) << record.error();
  EXPECT_EQ(record->unix_ms, kEpoch + 10'000);
  EXPECT_EQ(record->lease, sut.lease());
  EXPECT_EQ(record->fence, kEpoch + 10'000);
  ASSERT_TRUE(later) << later.error().message;
  ASSERT_TRUE(after_later && !after_later->kvs.empty());
  auto later_record = etcd::DecodeHighWater(after_later->kvs[0].value);
  ASSERT_TRUE(later_record) << later_record.error();
  EXPECT_EQ(later_record->unix_ms, kEpoch + 12'000);
  EXPECT_EQ(later_record->fence, kEpoch + 10'000);
}

TEST_F(EtcdFencing, RaiseAllIsRefusedWhileANumberIsHeldAndNamesItsHolder) {
  // Arrange
  EtcdRegister holder(DirectOptions());
  ASSERT_TRUE(holder.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(holder.UpdateHighWater(kEpoch + 1000));
  EtcdRegister operator_register(DirectOptions());

  // Act
  auto refused = operator_register.RaiseAll(kEpoch + 50'000, /*while_running=*/false);

  // Assert: nothing was raised; the error names the number, its holder and host, and the
  // way to do it anyway.
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, RegisterErrorCode::kInUse);
  EXPECT_THAT(refused.error().message,
              ::testing::AllOf(::testing::HasSubstr("machine " + std::to_string(kMachine)),
                               ::testing::HasSubstr("\"holder-a\" on fencing-host"),
                               ::testing::HasSubstr("--while-running")));
  EXPECT_EQ(StoredMark(), kEpoch + 1000);
}

TEST_F(EtcdFencing, RaiseAllWhileRunningReturnsOnlyOnceTheHolderAcknowledgedTheFence) {
  // Arrange: a holder already above the fence: the operator's write must still reach it,
  // since its mark says nothing of the IDs it issued below the fence.
  EtcdRegister holder(DirectOptions());
  ASSERT_TRUE(holder.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(holder.UpdateHighWater(kEpoch + 60'000));
  EtcdRegisterOptions operator_options = DirectOptions();
  operator_options.fence_ack_timeout = 20s;
  EtcdRegister operator_register(operator_options);

  // Act: raise-all runs while the holder raises as it would, finds the fence, obeys it.
  auto raising = std::async(std::launch::async, [&] {
    return operator_register.RaiseAll(kEpoch + 50'000, /*while_running=*/true);
  });
  int64_t step = 0;
  std::string unexpected;  // a raise's error other than kFenced
  // The assertion on `fence` below says if the holder never found it.
  [[maybe_unused]] const auto found = testing::WaitUntil(
      [&] {
        if (holder.fence_unix_ms() != 0) return true;
        // kFenced: the raise found the fence and wrote nothing (the daemon records it first).
        auto raise = holder.UpdateHighWater(kEpoch + 60'000 + ++step);
        if (!raise && raise.error().code != RegisterErrorCode::kFenced) {
          unexpected = raise.error().message;
        }
        return !unexpected.empty();
      },
      20s, "the holder to find the fence", 20ms);
  ASSERT_EQ(unexpected, "");
  const int64_t fence = holder.fence_unix_ms();
  const bool returned_before_the_acknowledgment =
      raising.wait_for(300ms) == std::future_status::ready;
  auto acknowledged = holder.AcknowledgeFence(fence);
  auto raised = raising.get();

  // Assert: the holder's fence covers the operator's (its own mark was above it already);
  // raise-all waited for the acknowledgment.
  EXPECT_GE(fence, kEpoch + 50'000);
  EXPECT_FALSE(returned_before_the_acknowledgment);
  ASSERT_TRUE(acknowledged) << acknowledged.error().message;
  ASSERT_TRUE(raised) << raised.error().message;
  EXPECT_THAT(raised->ended_unacknowledged, ::testing::IsEmpty());
  EXPECT_GE(StoredMark().value_or(0), fence);
}

TEST_F(EtcdFencing, RaiseAllWhileRunningNamesAHolderWhoseClaimEndedBeforeItAcknowledged) {
  // Arrange: a holder that never raises again, so it never learns of the fence.
  EtcdRegister holder(DirectOptions());
  ASSERT_TRUE(holder.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(holder.UpdateHighWater(kEpoch + 1000));
  EtcdRegisterOptions operator_options = DirectOptions();
  operator_options.fence_ack_timeout = 20s;
  EtcdRegister operator_register(operator_options);

  // Act: while raise-all waits, the holder's lease ends (revoked here, as expiry would end
  // it for a holder cut off from etcd, which may still be serving what it holds).
  auto raising = std::async(std::launch::async, [&] {
    return operator_register.RaiseAll(kEpoch + 50'000, /*while_running=*/true);
  });
  const bool returned_before_the_lease_ended = raising.wait_for(500ms) == std::future_status::ready;
  auto admin = Direct();
  ASSERT_TRUE(admin.Revoke(holder.lease()));
  auto raised = raising.get();

  // Assert: raise-all stops waiting for it, and says that it never acknowledged, by name.
  EXPECT_FALSE(returned_before_the_lease_ended);
  ASSERT_TRUE(raised) << raised.error().message;
  ASSERT_EQ(raised->ended_unacknowledged.size(), 1u);
  EXPECT_THAT(raised->ended_unacknowledged[0],
              ::testing::AllOf(::testing::HasSubstr("machine " + std::to_string(kMachine)),
                               ::testing::HasSubstr("\"holder-a\" on fencing-host")));
  EXPECT_EQ(StoredMark(), kEpoch + 50'000);
}

TEST_F(EtcdFencing, RaiseAllWhileRunningNamesAHolderThatNeverAcknowledges) {
  // Arrange: the operator waits 20 s for acknowledgements on a clock its sleeps move, so
  // the wait costs its polls of etcd and no real time.
  EtcdRegister holder(DirectOptions());
  ASSERT_TRUE(holder.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(holder.UpdateHighWater(kEpoch + 1000));
  testing::ManualClock clock(kEpoch + 2000);
  EtcdRegisterOptions operator_options = DirectOptions();
  operator_options.fence_ack_timeout = 20s;
  operator_options.clock = &clock;
  EtcdRegister operator_register(operator_options);
  const Clock::SteadyTime start = clock.SteadyNow();

  // Act: the holder never raises again, so it never learns of the fence.
  auto raised = operator_register.RaiseAll(kEpoch + 50'000, /*while_running=*/true);

  // Assert: every mark is raised, but the operator is told who may still issue below it.
  ASSERT_FALSE(raised);
  EXPECT_EQ(raised.error().code, RegisterErrorCode::kInUse);
  EXPECT_THAT(raised.error().message,
              ::testing::AllOf(::testing::HasSubstr("did not acknowledge"),
                               ::testing::HasSubstr("within 20 s"),
                               ::testing::HasSubstr("\"holder-a\" on fencing-host")));
  EXPECT_EQ(StoredMark(), kEpoch + 50'000);
  EXPECT_GE(clock.SteadyNow() - start, 20s) << "the wait was not measured on the register's clock";
}

TEST_F(EtcdFencing, ALateClaimNeverBindsASecondNumberToTheLiveLease) {
  // Arrange: the holder may claim number 7 or 8 and talks to etcd only through the proxy,
  // which holds every claim transaction for number 7. Each times out; meanwhile another
  // host takes 7 (directly), so a later attempt claims 8. Number 8 carries a mark, so
  // the pick policy asks for 7 (never used) first, whatever window it reads.
  EtcdRegisterOptions options = Options();
  options.client.endpoints = {proxy_->url()};
  options.last_machine = kMachine + 1;
  ASSERT_TRUE(Direct().Put(etcd::HighWaterKey(prefix_, kMachine + 1),
                           etcd::EncodeHighWater(etcd::HighWaterRecord{kEpoch, "", 0})));
  // (The claim transaction's put names the key; an attempt's read names it as a range.)
  ASSERT_TRUE(proxy_->SetMode(
      FaultProxy::Mode::kHold, "/v3/kv/txn",
      "\"request_put\":{\"key\":\"" + etcd::Base64Encode(etcd::MachineKey(prefix_, kMachine))));
  EtcdRegister sut(options);
  auto claiming = std::async(std::launch::async, [&] { return sut.Claim({"holder-a", kEpoch}); });
  ASSERT_TRUE(proxy_->WaitForHeld(1, 10s)) << "the claim of number 7 never reached the proxy";
  auto other = std::make_unique<EtcdRegister>(DirectOptions());
  auto other_claim = other->Claim({"holder-b", kEpoch});
  auto claim = claiming.get();
  ASSERT_TRUE(other_claim) << other_claim.error().message;
  ASSERT_TRUE(claim) << claim.error().message;
  ASSERT_EQ(claim->machine, kMachine + 1);

  // Act: the other host lets 7 go; then the held claims of 7 are applied, late.
  ASSERT_TRUE(proxy_->SetMode(FaultProxy::Mode::kPass));
  other.reset();
  auto late = proxy_->ReleaseHeld();
  ASSERT_TRUE(late) << late.error();
  auto record = Direct().Range(etcd::MachineKey(prefix_, kMachine));

  // Assert: number 7 is not bound to the lease the holder keeps alive for 8.
  ASSERT_TRUE(record) << record.error().message;
  const bool bound_to_live_lease = !record->kvs.empty() && record->kvs[0].lease == sut.lease();
  EXPECT_FALSE(bound_to_live_lease)
      << "a late claim bound number 7 to the lease that holds 8: " << Describe(*late);
}

// The calls a register sent through the proxy from the `from`th on: "/v3/kv/txn", ...
std::vector<std::string> CallsSince(const FaultProxy& proxy, size_t from) {
  std::vector<std::string> calls;
  const auto lines = proxy.ForwardedRequestLines();
  for (size_t i = from; i < lines.size(); ++i) {
    const size_t path = lines[i].find(' ') + 1;
    calls.push_back(lines[i].substr(path, lines[i].find(' ', path) - path));
  }
  return calls;
}

TEST_F(EtcdFencing, AClaimSendsOneReadPerStretchTheLeaseGrantAndTheClaimTransaction) {
  // Arrange: the fleet record exists (a first host claimed and stopped); the holders talk
  // to etcd only through the proxy, which lists what they send.
  {
    EtcdRegister first(DirectOptions());
    auto claim = first.Claim({"holder-a", kEpoch});
    ASSERT_TRUE(claim) << claim.error().message;
  }
  EtcdRegisterOptions options = Options();
  options.client.endpoints = {proxy_->url()};
  auto windowed = std::make_unique<EtcdRegister>(options);
  EtcdRegister preferring(options);

  // Act: a claim that reads a window (its range is number 7 alone, so the window is the
  // stretch from 7 to the prefix's end and the wrapped one below 7), then, once it let 7
  // go, a claim of the number a state file names.
  const size_t before_window = proxy_->ForwardedRequestLines().size();
  auto claim = windowed->Claim({"holder-b", kEpoch});
  const auto window_calls = CallsSince(*proxy_, before_window);
  windowed.reset();
  const size_t before_preferred = proxy_->ForwardedRequestLines().size();
  auto preferred = preferring.Claim({"holder-c", kEpoch, {}, 0, kMachine});
  const auto preferred_calls = CallsSince(*proxy_, before_preferred);

  // Assert: the lease, the member's version, one read-only transaction per read (the fleet
  // record and the restore fence in the first), the claim transaction; nothing more.
  ASSERT_TRUE(claim) << claim.error().message;
  ASSERT_TRUE(preferred) << preferred.error().message;
  EXPECT_EQ(preferred->machine, kMachine);
  EXPECT_THAT(window_calls, ::testing::ElementsAre("/v3/lease/grant", "/v3/maintenance/status",
                                                   "/v3/kv/txn", "/v3/kv/txn", "/v3/kv/txn"));
  EXPECT_THAT(preferred_calls, ::testing::ElementsAre("/v3/lease/grant", "/v3/maintenance/status",
                                                      "/v3/kv/txn", "/v3/kv/txn"));
}

TEST_F(EtcdFencing, AClaimCalledAgainAfterAnOutageDoesNotAskForTheVersionAgain) {
  // Arrange: every transaction is held at the proxy, the holder's only endpoint, so the
  // first call's read times out after the member's status answered.
  EtcdRegisterOptions options = Options();
  options.client.endpoints = {proxy_->url()};
  EtcdRegister sut(options);
  ASSERT_TRUE(proxy_->SetMode(FaultProxy::Mode::kHold, "/v3/kv/txn"));
  auto failed = sut.Claim({"holder-a", kEpoch});
  ASSERT_FALSE(failed);
  ASSERT_EQ(failed.error().code, RegisterErrorCode::kUnreachable) << failed.error().message;
  ASSERT_TRUE(proxy_->SetMode(FaultProxy::Mode::kPass));
  proxy_->DiscardHeld();

  // Act: the daemon calls Claim() again on the same register.
  const size_t before = proxy_->ForwardedRequestLines().size();
  auto claim = sut.Claim({"holder-a", kEpoch});
  const auto calls = CallsSince(*proxy_, before);

  // Assert: the read (with the fleet record's creation: this prefix is new), the lease,
  // the claim; the version was asked once, in the first call.
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_THAT(calls, ::testing::Not(::testing::Contains("/v3/maintenance/status")));
  EXPECT_THAT(calls, ::testing::Contains("/v3/lease/grant"));
}

TEST_F(EtcdFencing, ARaiseDeliveredTwiceLateNeverLowersTheMark) {
  // Arrange
  EtcdRegister sut(Options());
  ASSERT_TRUE(sut.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 1000));

  // Act: as above, but the stalled raise arrives twice (a retransmission).
  auto stalled = RaiseHeldAtTheProxy(sut, kEpoch + 2000);
  auto newer = sut.UpdateHighWater(kEpoch + 3000);
  auto late = proxy_->ReleaseHeld(/*copies=*/2);
  const auto after_late = StoredMark();

  // Assert
  ASSERT_FALSE(stalled);
  ASSERT_TRUE(newer) << newer.error().message;
  ASSERT_TRUE(late) << late.error();
  ASSERT_EQ(late->size(), 2u);
  ASSERT_TRUE(after_late.has_value());
  EXPECT_GE(*after_late, kEpoch + 3000)
      << "the late raise lowered the mark by " << (kEpoch + 3000 - *after_late)
      << " ms below a committed raise: " << Describe(*late);
}

TEST_F(EtcdFencing, ARaiseAppliedLateAfterACleanStopNeverLowersTheMark) {
  // Arrange: raises to +1000 committed, +2000 stalled, +3000 committed; the holder issued
  // IDs up to +2500 and stops cleanly.
  auto sut = std::make_unique<EtcdRegister>(Options());
  ASSERT_TRUE(sut->Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(sut->UpdateHighWater(kEpoch + 1000));
  auto stalled = RaiseHeldAtTheProxy(*sut, kEpoch + 2000);
  ASSERT_FALSE(stalled);
  ASSERT_TRUE(sut->UpdateHighWater(kEpoch + 3000));
  constexpr int64_t kLastIssued = kEpoch + 2500;

  // Act
  auto stop = sut->RecordCleanStop(kLastIssued);
  const auto after_stop = StoredMark();
  auto late = proxy_->ReleaseHeld();
  const auto after_late = StoredMark();
  sut.reset();  // revokes the lease: the number is free
  EtcdRegister successor(DirectOptions());
  auto successor_claim = successor.Claim({"holder-b", kEpoch});

  // Assert
  ASSERT_TRUE(stop) << stop.error().message;
  EXPECT_EQ(after_stop, kLastIssued);
  ASSERT_TRUE(late) << late.error();
  ASSERT_TRUE(after_late.has_value());
  EXPECT_EQ(*after_late, kLastIssued)
      << "the late raise moved the mark from the clean stop's " << kLastIssued << " by "
      << (*after_late - kLastIssued) << " ms: " << Describe(*late);
  ASSERT_TRUE(successor_claim) << successor_claim.error().message;
  EXPECT_EQ(successor_claim->machine, kMachine);
  EXPECT_GE(successor_claim->high_water_unix_ms, kLastIssued)
      << "the successor may issue IDs in the "
      << (kLastIssued - successor_claim->high_water_unix_ms)
      << " milliseconds up to the old holder's last issued one: duplicates";
}

TEST_F(EtcdFencing, ASuccessorStartsAboveTheHorizonTheOldHolderReliedOn) {
  // Arrange: holder A (short lease) gets +1000 committed, +2000 stalls, +3000 commits:
  // A's confirmed horizon is +3000 and it issues IDs up to there.
  auto a = std::make_unique<EtcdRegister>(Options(/*ttl_s=*/2));
  auto a_claim = a->Claim({"holder-a", kEpoch});
  ASSERT_TRUE(a_claim) << a_claim.error().message;
  ASSERT_TRUE(a->UpdateHighWater(kEpoch + 1000));
  ASSERT_FALSE(RaiseHeldAtTheProxy(*a, kEpoch + 2000));
  ASSERT_TRUE(a->UpdateHighWater(kEpoch + 3000));
  constexpr int64_t kAHorizon = kEpoch + 3000;

  // Act: the stalled raise lands while A still holds the number; then A's lease ends
  // (revoked here, as expiry or etcd's revoking of leases after a stalled leader resumes
  // would) and B claims.
  auto late = proxy_->ReleaseHeld();
  ASSERT_TRUE(late) << late.error();
  auto admin = Direct();
  ASSERT_TRUE(admin.Revoke(a->lease()));
  EtcdRegister b(DirectOptions());
  auto b_claim = b.Claim({"holder-b", kEpoch});

  // Assert
  ASSERT_TRUE(b_claim) << b_claim.error().message;
  EXPECT_EQ(b_claim->machine, a_claim->machine);
  EXPECT_GE(b_claim->high_water_unix_ms, kAHorizon)
      << "B issues strictly above " << b_claim->high_water_unix_ms << ", A relied on up to "
      << kAHorizon << ": both may issue IDs in the " << (kAHorizon - b_claim->high_water_unix_ms)
      << " milliseconds between (duplicates); late delivery: " << Describe(*late);
  // A is fenced off.
  auto a_raise = a->UpdateHighWater(kEpoch + 4000);
  ASSERT_FALSE(a_raise);
  EXPECT_EQ(a_raise.error().code, RegisterErrorCode::kClaimLost) << a_raise.error().message;
}

TEST_F(EtcdFencing, RaiseAllRefusesANumberClaimedBetweenItsListingAndItsWrite) {
  // Arrange: the operator's raise-all (no daemon running when it lists) and a daemon that
  // claims the number right after the listing, reading the mark from before the fence.
  std::unique_ptr<EtcdRegister> late_holder;
  std::optional<tl::expected<MachineClaim, RegisterError>> late_claim;
  EtcdRegisterOptions operator_options = DirectOptions();
  operator_options.after_raise_all_listing = [&] {
    late_holder = std::make_unique<EtcdRegister>(DirectOptions());
    late_claim = late_holder->Claim({"holder-late", kEpoch});
  };
  EtcdRegister operator_register(operator_options);

  // Act
  auto raised = operator_register.RaiseAll(kEpoch + 50'000, /*while_running=*/false);

  // Assert: the claim went through with the old mark, so raise-all must not report success
  // as if nobody ran: it names the daemon, and the restore fence is not recorded.
  ASSERT_TRUE(late_claim.has_value() && late_claim->has_value());
  EXPECT_LT((*late_claim)->high_water_unix_ms, kEpoch + 50'000);
  ASSERT_FALSE(raised) << "raise-all reported " << raised->raised
                       << " marks raised while a daemon it never fenced was running";
  EXPECT_EQ(raised.error().code, RegisterErrorCode::kInUse);
  EXPECT_THAT(raised.error().message,
              ::testing::AllOf(::testing::HasSubstr("machine 7 changed hands"),
                               ::testing::HasSubstr("holder-late")));
  auto restore = Direct().Range(etcd::RestoreKey(prefix_));
  ASSERT_TRUE(restore);
  EXPECT_TRUE(restore->kvs.empty()) << "the restore fence was recorded";
}

TEST_F(EtcdFencing, ARaiseThatFindsAnOperatorsMarkWritesNothingUnderItsLease) {
  // Arrange: the holder at +1000; an operator's fence at +1500 (below the holder's next
  // raise, as raise-all's T below a live holder's horizon is).
  EtcdRegister sut(DirectOptions());
  ASSERT_TRUE(sut.Claim({"holder-a", kEpoch}));
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 1000));
  ASSERT_TRUE(Direct().Put(etcd::HighWaterKey(prefix_, kMachine),
                           etcd::EncodeHighWater(etcd::HighWaterRecord{kEpoch + 1500, "", 0})));

  // Act: a raise past the fence finds it; the caller records it and raises again.
  auto found = sut.UpdateHighWater(kEpoch + 2000);
  auto stored_after_found = Direct().Range(etcd::HighWaterKey(prefix_, kMachine));
  auto again = sut.UpdateHighWater(kEpoch + 2000);

  // Assert: the first call wrote nothing (the operator's record, lease 0, still stands)
  // and said why; the second, after the fence is known, commits.
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, RegisterErrorCode::kFenced) << found.error().message;
  EXPECT_THAT(found.error().message, ::testing::HasSubstr("fenced machine 7"));
  EXPECT_EQ(sut.fence_unix_ms(), kEpoch + 1500);
  ASSERT_TRUE(stored_after_found && !stored_after_found->kvs.empty());
  EXPECT_EQ(stored_after_found->kvs[0].lease, 0);
  auto record = etcd::DecodeHighWater(stored_after_found->kvs[0].value);
  ASSERT_TRUE(record) << record.error();
  EXPECT_EQ(record->lease, 0) << "the raise covered the operator's fence under its own lease";
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(StoredMark(), kEpoch + 2000);
}

// A holder that crashes right after an operator's fence reached it restarts above the
// fence. The reservation (5 s) runs far ahead of the fence (now + 2 s); the holder finds
// the fence at its next renewal, obeys and acknowledges it, and dies without a clean stop.
// Its restart trusts its surviving segment (the register's mark is its own, within its
// reservation), so only the state file can still say where the fence was.
TEST_F(EtcdFencing, AHolderKilledRightAfterAcknowledgingAFenceRestartsAboveIt) {
  // Arrange: a holder with a reservation service on a fake clock, and its state file.
  constexpr int64_t kNow = kEpoch + 5'000'000;
  constexpr int64_t kReservationMs = 5000;
  constexpr int64_t kFence = kNow + 2000;
  const testing::TempDir dir("fence-crash");
  const std::string segment = "/run/test/snowflake.ring";
  auto holder = std::make_unique<EtcdRegister>(DirectOptions());
  auto claim = holder->Claim({"holder-a", kEpoch});
  ASSERT_TRUE(claim) << claim.error().message;
  testing::ManualClock clock(kNow);
  auto store = std::make_unique<daemon::HighWaterStore>(dir / "high-water.json");
  auto service = std::make_unique<daemon::ReservationService>(
      daemon::ReservationOptions{.machine = kMachine,
                                 .epoch_unix_ms = kEpoch,
                                 .reservation_ms = kReservationMs,
                                 .renew_ahead_ms = 4500,
                                 .retry_interval = 5ms,
                                 .register_renew_interval = 50ms,
                                 .segment_path = segment,
                                 .segment_incarnation = 1,
                                 .register_claim = claim->claim_token,
                                 .start_floor_unix_ms = claim->high_water_unix_ms},
      *store, *holder, clock, 0);
  service->Start();
  ASSERT_TRUE(WaitUntil([&] { return service->confirmed_through() >= kNow + kReservationMs; }, 10s,
                        "the first reservation"));
  // The holder issued up to +900 when the operator fenced the number at +2000.
  const int64_t last_issued_ms = kNow + 900;
  EtcdRegisterOptions operator_options = DirectOptions();
  operator_options.fence_ack_timeout = 20s;
  EtcdRegister operator_register(operator_options);
  auto raising = std::async(std::launch::async, [&] {
    return operator_register.RaiseAll(kFence, /*while_running=*/true);
  });

  // Act: the clock moves 1 s, a renewal finds the fence; the fill loop applies it (as
  // FillLoop::ApplyFence does) and the service acknowledges it, so raise-all returns. Then
  // the holder dies: no clean stop, the stores as they are.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto stored = Direct().Range(etcd::HighWaterKey(prefix_, kMachine));
        if (!stored || stored->kvs.empty()) return false;
        auto record = etcd::DecodeHighWater(stored->kvs[0].value);
        return record && record->lease == 0;
      },
      10s, "the operator's mark on the held number"));
  clock.Tick(1000);
  ASSERT_TRUE(WaitUntil([&] { return service->fence_unix_ms() >= kFence; }, 10s,
                        "the holder found the fence"));
  service->NoteFenceApplied(service->fence_unix_ms());
  auto raised = raising.get();
  service->Stop();
  service.reset();
  store.reset();
  holder.reset();
  // The restart: the same holder id claims the number back, reads its state file and its
  // surviving segment (incarnation 1, continued: 2), and plans where to start.
  EtcdRegister restarted(DirectOptions());
  daemon::HighWaterStore reopened(dir / "high-water.json");
  auto state = reopened.Load();
  ASSERT_TRUE(state && state->has_value());
  auto reclaim = restarted.Claim(
      {"holder-a", kEpoch, (*state)->register_seen, (*state)->reserved_through_unix_ms, kMachine});
  ASSERT_TRUE(reclaim) << reclaim.error().message;
  auto plan = daemon::ReconcileStartup(daemon::StartupFacts{
      .now_unix_ms = clock.NowUnixMs(),
      .epoch_unix_ms = kEpoch,
      .machine = kMachine,
      .register_high_water_ms = reclaim->high_water_unix_ms,
      .register_mark_writer = reclaim->mark_writer,
      .state_file = **state,
      .segment = daemon::SegmentFacts{.path = segment,
                                      .continued = true,
                                      .last_published_id = IdLayout().EncodeUnchecked(
                                          last_issued_ms - kEpoch, kMachine, 0),
                                      .incarnation = 2},
      .reservation_ms = kReservationMs,
      .max_backward_ms = 100});

  // Assert: raise-all returned with the holder's acknowledgment, and the restart issues
  // nothing at or below the fence.
  ASSERT_TRUE(raised) << raised.error().message;
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_GE(plan->high_water_unix_ms, kFence)
      << "the restart would issue IDs in the " << (kFence - plan->high_water_unix_ms)
      << " ms up to the operator's fence (" << plan->explanation << "; state file floor "
      << (*state)->floor_unix_ms << ")";
}

}  // namespace
}  // namespace snowflake::reg
