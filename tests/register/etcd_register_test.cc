// EtcdRegister against a real 3-member etcd cluster on loopback (tests/support/
// etcd_cluster.h). The properties:
//   - two live holders never share a number; a full range refuses with the range and the
//     holder count; a holder gets its own number back;
//   - fencing: only a committed raise counts; once a number is taken over, the old
//     holder's raises fail with kClaimLost, and the new holder starts at or above every
//     mark the old holder got committed;
//   - faults (leader SIGKILL, quorum loss) never make an uncommitted raise look committed;
//   - a fleet record of another epoch, and garbage under the prefix, are refused clearly.

#include "register/etcd_register.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "etcd_cluster.h"
#include "manual_clock.h"
#include "register/etcd_client.h"
#include "register/etcd_keepalive.h"
#include "register/etcd_records.h"
#include "register/register_settings.h"
#include "register/static_register.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace snowflake::reg {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using ::testing::HasSubstr;

constexpr int64_t kEpoch = 1'767'225'600'000;

class EtcdRegisterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new EtcdCluster(3); }
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(HostsDir(), ignored);
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(cluster_->ok()) << cluster_->error(); }

  static std::filesystem::path HostsDir() {
    return std::filesystem::temp_directory_path() /
           ("etcd-register-test-" + std::to_string(::getpid()));
  }

  // Options on a prefix of this test's own.
  static EtcdRegisterOptions Options(uint32_t first, uint32_t last, int64_t ttl_s = 10,
                                     int64_t timeout_ms = 2000) {
    EtcdRegisterOptions o;
    o.client.endpoints = cluster_->ClientUrls();
    o.client.request_timeout_ms = timeout_ms;
    o.client.connect_timeout_ms = 500;
    o.prefix =
        "/t/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/";
    o.lease_ttl_s = ttl_s;
    o.first_machine = first;
    o.last_machine = last;
    o.host = "test-host";
    // Each register stands for a host of its own: the host-wide machine locks of one
    // register never fence another (ANumberAStaticDaemonOfTheHostHolds... tests one host).
    static std::atomic<int> hosts{0};
    o.host_lock_dir = HostsDir() / ("host-" + std::to_string(hosts.fetch_add(1)));
    std::filesystem::create_directories(o.host_lock_dir);
    return o;
  }
  static etcd::EtcdClient Client() {
    etcd::ClientOptions options;
    options.endpoints = cluster_->ClientUrls();
    return etcd::EtcdClient(options);
  }
  static std::optional<etcd::HighWaterRecord> MarkOf(const std::string& prefix, uint32_t n) {
    auto client = Client();
    auto range = client.Range(etcd::HighWaterKey(prefix, n));
    if (!range || range->kvs.empty()) return std::nullopt;
    auto rec = etcd::DecodeHighWater(range->kvs[0].value);
    if (!rec) return std::nullopt;
    return *rec;
  }

  static EtcdCluster* cluster_;
};

EtcdCluster* EtcdRegisterTest::cluster_ = nullptr;

// The keepalive reads the lease's age on the register's clock (the one seam): a lease
// the clock says was granted 11 s ago, past a third of its 30 s TTL, is renewed at once,
// though in real time it was granted a few seconds ago and the next renewal is 10 s off.
TEST_F(EtcdRegisterTest, TheKeepAliveCountsTheLeasesAgeOnTheRegistersClock) {
  auto client = Client();
  const auto grant = client.GrantLease(30);
  ASSERT_TRUE(grant) << grant.error().message;
  const auto ttl_left = [&] {
    const auto live = client.TimeToLive(grant->id);
    return live ? live->ttl_s : int64_t{-2};
  };
  // Aged in etcd first, so that a renewal shows as the TTL going back up.
  ASSERT_TRUE(
      testing::WaitUntil([&] { return ttl_left() <= 28; }, 10s, "the lease to age 2 s in etcd"));
  testing::ManualClock clock = testing::ManualClock::AtRealNow();
  const auto granted = clock.SteadyNow();
  clock.SleepFor(11s);  // moves the test's clock only
  etcd::ClientOptions options;
  options.endpoints = cluster_->ClientUrls();
  EtcdKeepAlive sut(options, 30, clock);

  sut.Start(grant->id, 7, granted);

  EXPECT_TRUE(
      testing::WaitUntil([&] { return ttl_left() >= 29; }, 5s,
                         "the first renewal at once (the clock says the lease is 11 s old)"))
      << "TTL left: " << ttl_left();
  sut.Stop();
  EXPECT_FALSE(sut.lost()) << sut.lost_reason();
  (void)client.Revoke(grant->id);
}

TEST_F(EtcdRegisterTest, SixteenRaceForEightNumbersExactlyEightWinDistinctNumbers) {
  // Arrange
  std::vector<std::unique_ptr<EtcdRegister>> registers;
  for (int i = 0; i < 16; ++i) registers.push_back(std::make_unique<EtcdRegister>(Options(0, 7)));
  std::vector<tl::expected<MachineClaim, RegisterError>> results(
      16, tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, "not run"}));
  std::atomic<bool> go{false};

  // Act
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      results[i] = registers[i]->Claim(ClaimRequest{"holder-" + std::to_string(i), kEpoch});
    });
  }
  go = true;
  for (auto& t : threads) t.join();

  // Assert
  std::set<uint32_t> numbers;
  int failed = 0;
  for (const auto& r : results) {
    if (r) {
      EXPECT_TRUE(numbers.insert(r->machine).second) << "machine " << r->machine << " twice";
      EXPECT_LE(r->machine, 7u);
    } else {
      ++failed;
      EXPECT_EQ(r.error().code, RegisterErrorCode::kNoFreeNumber) << r.error().message;
      EXPECT_THAT(r.error().message, HasSubstr("no free machine number in 0-7"));
      EXPECT_THAT(r.error().message, HasSubstr("8 holders in range"));
    }
  }
  EXPECT_EQ(numbers.size(), 8u);
  EXPECT_EQ(failed, 8);
}

TEST_F(EtcdRegisterTest, RestartGetsItsOwnNumberBackAlsoWhileTheOldLeaseLives) {
  // Arrange: another holder takes 0; ours takes 1 and records a mark.
  EtcdRegister other(Options(0, 3));
  ASSERT_TRUE(other.Claim({"other", kEpoch}));
  auto first = std::make_unique<EtcdRegister>(Options(0, 3));
  auto first_claim = first->Claim({"ours", kEpoch});
  ASSERT_TRUE(first_claim) << first_claim.error().message;
  ASSERT_TRUE(first->UpdateHighWater(kEpoch + 5000));

  // Act 1: a second instance of "ours" while the first's lease is alive (a crash and a
  // fast restart look like this).
  auto second = std::make_unique<EtcdRegister>(Options(0, 3));
  auto second_claim = second->Claim({"ours", kEpoch});
  // The first instance, if it were still running, is fenced off.
  auto stale_raise = first->UpdateHighWater(kEpoch + 9000);

  // Act 2: a clean stop (lease revoked), another newcomer, then "ours" again.
  first.reset();
  ASSERT_TRUE(second->RecordCleanStop(kEpoch + 5000));
  second.reset();
  EtcdRegister newcomer(Options(0, 3));
  auto newcomer_claim = newcomer.Claim({"newcomer", kEpoch});
  EtcdRegister third(Options(0, 3));
  auto third_claim = third.Claim({"ours", kEpoch});

  // Assert
  ASSERT_TRUE(second_claim) << second_claim.error().message;
  EXPECT_EQ(second_claim->machine, first_claim->machine);
  EXPECT_EQ(second_claim->high_water_unix_ms, kEpoch + 5000);
  ASSERT_FALSE(stale_raise);
  EXPECT_EQ(stale_raise.error().code, RegisterErrorCode::kClaimLost) << stale_raise.error().message;
  ASSERT_TRUE(newcomer_claim) << newcomer_claim.error().message;
  EXPECT_NE(newcomer_claim->machine, first_claim->machine);
  ASSERT_TRUE(third_claim) << third_claim.error().message;
  EXPECT_EQ(third_claim->machine, first_claim->machine);
  EXPECT_EQ(third_claim->high_water_unix_ms, kEpoch + 5000);
}

TEST_F(EtcdRegisterTest, ANumberAStaticDaemonOfTheHostHoldsIsNeverClaimed) {
  // Arrange: one host, one lock directory; a static daemon holds machine 5.
  const auto host = Options(5, 6).host_lock_dir;
  StaticRegister fixed(5, host);
  ASSERT_TRUE(fixed.Claim({"static", kEpoch}));
  auto options = Options(5, 6);
  options.host_lock_dir = host;
  EtcdRegister sut(options);
  auto only_five = Options(5, 5);
  only_five.host_lock_dir = host;
  EtcdRegister refused(only_five);

  // Act
  auto claim = sut.Claim({"etcd-daemon", kEpoch});
  auto refused_claim = refused.Claim({"other-etcd-daemon", kEpoch});

  // Assert: etcd had 5 free, but this host's static daemon serves it.
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->machine, 6u);
  ASSERT_FALSE(refused_claim);
  EXPECT_EQ(refused_claim.error().code, RegisterErrorCode::kNoFreeNumber)
      << refused_claim.error().message;
  EXPECT_THAT(refused_claim.error().message, HasSubstr(host.string()));
}

TEST_F(EtcdRegisterTest, ARestoredOrReplacedClusterIsRefusedUntilAnOperatorRaisesEveryMark) {
  // Arrange: a holder learns the cluster's identity and stops; this host's state file
  // would record it and a reservation through kEpoch + 50 s.
  RegisterIdentity seen;
  {
    EtcdRegister first(Options(2, 2));
    ASSERT_TRUE(first.Claim({"restored", kEpoch}));
    ASSERT_TRUE(first.UpdateHighWater(kEpoch + 50'000));
    seen = first.identity();
  }
  ASSERT_NE(seen.cluster_id, 0u);
  ASSERT_GT(seen.revision, 0);
  const int64_t local = kEpoch + 50'000;
  RegisterIdentity other_cluster = seen;
  other_cluster.cluster_id ^= 0x5a5a;
  RegisterIdentity later_revision = seen;
  later_revision.revision += 1'000'000;  // what a store restored from an older snapshot shows

  // Act
  EtcdRegister a(Options(2, 2));
  auto replaced = a.Claim({"restored", kEpoch, other_cluster, local});
  EtcdRegister b(Options(2, 2));
  auto rolled_back = b.Claim({"restored", kEpoch, later_revision, local});
  EtcdRegister operator_register(Options(2, 2));
  auto too_low = operator_register.RaiseAll(local - 1, /*while_running=*/false);
  EtcdRegister c(Options(2, 2));
  auto still_refused = c.Claim({"restored", kEpoch, later_revision, local});
  auto raised = operator_register.RaiseAll(local + 1000, /*while_running=*/false);
  EtcdRegister d(Options(2, 2));
  auto accepted = d.Claim({"restored", kEpoch, later_revision, local});

  // Assert
  ASSERT_FALSE(replaced);
  EXPECT_EQ(replaced.error().code, RegisterErrorCode::kRolledBack) << replaced.error().message;
  EXPECT_THAT(replaced.error().message, HasSubstr(std::to_string(seen.cluster_id)));
  EXPECT_THAT(replaced.error().message, HasSubstr("snowflakectl register raise-all --above"));
  ASSERT_FALSE(rolled_back);
  EXPECT_EQ(rolled_back.error().code, RegisterErrorCode::kRolledBack);
  EXPECT_THAT(rolled_back.error().message, HasSubstr(std::to_string(later_revision.revision)));
  ASSERT_TRUE(too_low) << too_low.error().message;
  ASSERT_FALSE(still_refused) << "a fence below this host's reservation lets it in";
  EXPECT_EQ(still_refused.error().code, RegisterErrorCode::kRolledBack);
  ASSERT_TRUE(raised) << raised.error().message;
  ASSERT_TRUE(accepted) << accepted.error().message;
  EXPECT_GE(accepted->high_water_unix_ms, local + 1000);
  EXPECT_FALSE(accepted->notices.empty());
  // Every number's mark, held or not, is at or above the fence.
  for (uint32_t n : {0u, 2u, 1023u}) {
    auto mark = MarkOf(Options(2, 2).prefix, n);
    ASSERT_TRUE(mark) << n;
    EXPECT_GE(mark->unix_ms, local + 1000) << n;
  }
}

TEST_F(EtcdRegisterTest, AFenceThisHostAlreadySawNeverAdmitsItPastALaterRestore) {
  // Arrange: an operator fenced a first restore; a holder then ran on this host against
  // the store, so its state file records that fence among what it saw.
  EtcdRegister operator_register(Options(3, 3));
  auto first_fence = operator_register.RaiseAll(kEpoch + 100'000, /*while_running=*/false);
  ASSERT_TRUE(first_fence) << first_fence.error().message;
  RegisterIdentity seen;
  {
    EtcdRegister first(Options(3, 3));
    ASSERT_TRUE(first.Claim({"twice-restored", kEpoch}));
    ASSERT_TRUE(first.UpdateHighWater(kEpoch + 50'000));
    seen = first.identity();
  }
  ASSERT_GT(seen.fence_revision, 0) << "the claim did not record the fence it saw";
  // The cluster is restored again, from a snapshot taken after the first fence: it shows
  // an older revision than this host saw, and still holds the first fence.
  RegisterIdentity later_revision = seen;
  later_revision.revision += 1'000'000;
  const int64_t local = kEpoch + 50'000;

  // Act
  EtcdRegister a(Options(3, 3));
  auto refused = a.Claim({"twice-restored", kEpoch, later_revision, local});
  auto second_fence = operator_register.RaiseAll(kEpoch + 101'000, /*while_running=*/false);
  EtcdRegister b(Options(3, 3));
  auto accepted = b.Claim({"twice-restored", kEpoch, later_revision, local});

  // Assert: the old fence answers the first restore only; the operator's new one admits.
  ASSERT_FALSE(refused) << "a fence this host saw before the second restore let it in";
  EXPECT_EQ(refused.error().code, RegisterErrorCode::kRolledBack);
  EXPECT_THAT(refused.error().message, HasSubstr("answers an earlier restore"));
  ASSERT_TRUE(second_fence) << second_fence.error().message;
  ASSERT_TRUE(accepted) << accepted.error().message;
  EXPECT_GT(b.identity().fence_revision, seen.fence_revision);
  EXPECT_GE(accepted->high_water_unix_ms, kEpoch + 101'000);
}

// A holder that runs through a restore of its etcd and obeys the operator's fence
// (`raise-all --while-running`) is admitted again when it restarts, and the fence it
// obeyed admits it past no later restore. A real backup and restore of a one-member
// cluster: the store goes back to the backup's revision, below what the holder has seen.
TEST(EtcdRegisterRestore,
     AHolderThatObeyedTheRestoreFenceStartsAgainAndTheFenceAdmitsNoLaterRestore) {
  // Arrange: a holder raises; a backup is taken; the holder raises on; the store is
  // restored from the backup while the holder runs.
  EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const testing::TempDir dir("restore");
  auto options = [&] {
    EtcdRegisterOptions o;
    o.client.endpoints = cluster.ClientUrls();
    o.client.request_timeout_ms = 2000;
    o.prefix = "/restore/";
    o.lease_ttl_s = 30;
    o.first_machine = o.last_machine = 4;
    o.host = "restore-host";
    static std::atomic<int> hosts{0};
    o.host_lock_dir = dir / ("host-" + std::to_string(hosts.fetch_add(1)));
    std::filesystem::create_directories(o.host_lock_dir);
    o.fence_ack_timeout = 20s;
    return o;
  };
  auto holder = std::make_unique<EtcdRegister>(options());
  ASSERT_TRUE(holder->Claim({"holder-r", kEpoch}));
  ASSERT_TRUE(holder->UpdateHighWater(kEpoch + 1000));
  ASSERT_TRUE(cluster.SaveSnapshot(dir / "backup.db"));
  // Many raises after the backup: the restored store answers with a revision far below
  // the one the holder has seen, even after the writes that follow the restore.
  for (int64_t ms = 1100; ms <= 20'000; ms += 50) {
    ASSERT_TRUE(holder->UpdateHighWater(kEpoch + ms));
  }
  const RegisterIdentity before_restore = holder->identity();
  auto restored = cluster.RestoreSnapshot(dir / "backup.db");
  ASSERT_TRUE(restored) << restored.error();

  // Act: the operator fences every mark above every ID issued; the holder finds the fence
  // (kFenced, then again), obeys it and acknowledges it; it then stops without a clean stop.
  EtcdRegister operator_register(options());
  auto raising = std::async(std::launch::async, [&] {
    return operator_register.RaiseAll(kEpoch + 30'000, /*while_running=*/true);
  });
  int64_t next = kEpoch + 21'000;
  // The holder raises as it would until it finds the fence; the assertion on `fence`
  // below says if it never did.
  [[maybe_unused]] const auto found = testing::WaitUntil(
      [&] {
        if (holder->fence_unix_ms() != 0) return true;
        (void)holder->UpdateHighWater(next);
        next += 10;
        return false;
      },
      20s, "the holder to find the fence", 10ms);
  const int64_t fence = holder->fence_unix_ms();
  auto again = holder->UpdateHighWater(std::max(next, fence) + 1000);
  auto acknowledged = holder->AcknowledgeFence(fence);
  auto raised = raising.get();
  for (int i = 0; i < 3; ++i) (void)holder->UpdateHighWater(fence + 2000 + i);
  const RegisterIdentity seen = holder->identity();
  holder.reset();
  // The restart, with what its state file recorded and a reservation above the fence.
  EtcdRegister restart(options());
  auto readmitted = restart.Claim({"holder-r", kEpoch, seen, fence + 2002, 4});
  // A later restore from a backup taken after the fence: the store shows an older
  // revision than this host saw and still holds the fence the host obeyed.
  RegisterIdentity after_later_restore = seen;
  after_later_restore.revision += 1'000'000;
  EtcdRegister later(options());
  auto refused = later.Claim({"holder-r", kEpoch, after_later_restore, fence - 1, 4});

  // Assert
  ASSERT_GT(fence, 0) << "the holder never found the fence";
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_TRUE(acknowledged) << acknowledged.error().message;
  ASSERT_TRUE(raised) << raised.error().message;
  EXPECT_LT(seen.revision, before_restore.revision)
      << "the holder still records the revision from before the restore";
  // F7 first, so that each half can be seen failing on its own.
  EXPECT_GT(seen.fence_revision, 0) << "the restore fence the holder obeyed is not recorded";
  EXPECT_FALSE(refused) << "the fence this host obeyed let it in past a later restore";
  if (!refused) {
    EXPECT_EQ(refused.error().code, RegisterErrorCode::kRolledBack);
    EXPECT_THAT(refused.error().message, HasSubstr("answers an earlier restore"));
  }
  ASSERT_TRUE(readmitted) << "a holder that obeyed the restore fence is refused: "
                          << readmitted.error().message;
  EXPECT_GE(readmitted->high_water_unix_ms, fence);
}

TEST_F(EtcdRegisterTest, TakeoverFencesTheOldHolderAndStartsAboveItsCommittedMarks) {
  // Arrange: A holds the only number of the range and gets marks committed.
  EtcdRegister a(Options(5, 5, /*ttl_s=*/2));
  ASSERT_TRUE(a.Claim({"a", kEpoch}));
  int64_t a_committed = 0;
  for (int64_t m = 1000; m <= 10'000; m += 1000) {
    if (a.UpdateHighWater(kEpoch + m)) a_committed = kEpoch + m;
  }
  ASSERT_EQ(a_committed, kEpoch + 10'000);
  // A "stops" (as under SIGSTOP): its lease runs out. Revoking it is what expiry does,
  // without waiting out the TTL.
  auto admin = Client();
  ASSERT_TRUE(admin.Revoke(a.lease()));

  // Act
  EtcdRegister b(Options(5, 5, /*ttl_s=*/2));
  auto b_claim = b.Claim({"b", kEpoch});
  auto a_raise = a.UpdateHighWater(kEpoch + 20'000);
  auto a_again = a.UpdateHighWater(kEpoch + 30'000);

  // Assert
  ASSERT_TRUE(b_claim) << b_claim.error().message;
  EXPECT_EQ(b_claim->machine, 5u);
  EXPECT_GE(b_claim->high_water_unix_ms, a_committed);
  ASSERT_FALSE(a_raise);
  EXPECT_EQ(a_raise.error().code, RegisterErrorCode::kClaimLost);
  // Either the raise's comparison or the keepalive thread noticed first.
  EXPECT_THAT(a_raise.error().message,
              ::testing::AnyOf(HasSubstr("held by \"b\""), HasSubstr("expired")));
  ASSERT_FALSE(a_again);
  EXPECT_EQ(a_again.error().code, RegisterErrorCode::kClaimLost);
  EXPECT_TRUE(a.claim_lost());
  // A's refused raises never reached the mark: it is still the last committed one.
  EXPECT_EQ(MarkOf(Options(5, 5).prefix, 5)->unix_ms, a_committed);
}

TEST_F(EtcdRegisterTest, AnExpiredLeaseIsSeenByTheKeepAliveThread) {
  // Arrange
  EtcdRegister sut(Options(0, 0, /*ttl_s=*/2));
  ASSERT_TRUE(sut.Claim({"x", kEpoch}));
  auto admin = Client();

  // Act
  ASSERT_TRUE(admin.Revoke(sut.lease()));
  const ::testing::AssertionResult lost = testing::WaitUntil(
      [&] { return sut.claim_lost(); }, 10s, "the keepalive thread to see the lease gone", 20ms);
  auto raise = sut.UpdateHighWater(kEpoch + 1);

  // Assert
  EXPECT_TRUE(lost);
  ASSERT_FALSE(raise);
  EXPECT_EQ(raise.error().code, RegisterErrorCode::kClaimLost);
  EXPECT_THAT(raise.error().message, HasSubstr("expired"));
}

TEST_F(EtcdRegisterTest, LeaderKillDuringClaimsAndRaisesKeepsNumbersDistinctAndMarksRising) {
  // Arrange: 4 holders raise continuously while the leader is SIGKILLed.
  std::vector<std::unique_ptr<EtcdRegister>> holders;
  for (int i = 0; i < 4; ++i) holders.push_back(std::make_unique<EtcdRegister>(Options(0, 15)));
  std::atomic<bool> stop{false};
  std::vector<std::vector<int64_t>> committed(4);
  std::vector<std::optional<MachineClaim>> claims(4);
  std::vector<std::string> errors(4);
  std::atomic<size_t> commits[4] = {0, 0, 0, 0};                 // read while the threads run
  std::atomic<bool> finished[4] = {false, false, false, false};  // a holder gave up
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      struct Finished {
        std::atomic<bool>& flag;
        ~Finished() { flag = true; }
      } on_return{finished[i]};
      for (int attempt = 0; attempt < 100 && !claims[i]; ++attempt) {
        auto c = holders[i]->Claim({"h" + std::to_string(i), kEpoch});
        if (c)
          claims[i] = *c;
        else
          errors[i] = c.error().message;
      }
      if (!claims[i]) return;
      int64_t mark = kEpoch;
      while (!stop.load()) {
        mark += 10;
        auto r = holders[i]->UpdateHighWater(mark);
        if (r) {
          committed[i].push_back(mark);
          commits[i].fetch_add(1);
        } else if (r.error().code == RegisterErrorCode::kClaimLost) {
          errors[i] = r.error().message;
          return;
        }
      }
    });
  }
  // Until every holder has claimed and committed raises (or given up: asserted below).
  const auto warmed_up = testing::WaitUntil(
      [&] {
        for (int i = 0; i < 4; ++i) {
          if (commits[i].load() < 10 && !finished[i].load()) return false;
        }
        return true;
      },
      30s, "every holder to commit 10 raises before the leader is killed");
  EXPECT_TRUE(warmed_up);
  const auto leader = cluster_->Leader();
  ASSERT_TRUE(leader.has_value());
  std::vector<size_t> before(4);
  for (int i = 0; i < 4; ++i) before[i] = commits[i].load();

  // Act
  cluster_->Kill(*leader);
  // Until the survivors have elected a new leader, then until every holder got raises
  // committed again after the election (bounded: a loaded host may take a few seconds).
  const auto elected = testing::WaitUntil(
      [&] {
        const auto now_leader = cluster_->Leader();
        return now_leader && *now_leader != *leader;
      },
      30s, "the two survivors to elect a new leader", 50ms);
  std::vector<size_t> at_election(4);
  for (int i = 0; i < 4; ++i) at_election[i] = commits[i].load();
  const auto resumed = testing::WaitUntil(
      [&] {
        for (int i = 0; i < 4; ++i) {
          if (commits[i].load() <= at_election[i] && !finished[i].load()) return false;
        }
        return true;
      },
      30s, "every holder to commit a raise after the election", 50ms);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_TRUE(elected) << cluster_->Logs();
  EXPECT_TRUE(resumed);
  cluster_->Restart(*leader);
  ASSERT_TRUE(cluster_->WaitReady(*leader, 30s)) << cluster_->Logs();

  // Assert
  std::set<uint32_t> numbers;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(claims[i]) << errors[i];
    EXPECT_TRUE(numbers.insert(claims[i]->machine).second);
    EXPECT_TRUE(std::is_sorted(committed[i].begin(), committed[i].end()));
    // Raises resumed after the election.
    EXPECT_GT(committed[i].size(), before[i]) << errors[i];
    // The stored mark is at least every committed raise of this holder.
    auto mark = MarkOf(Options(0, 15).prefix, claims[i]->machine);
    ASSERT_TRUE(mark);
    EXPECT_GE(mark->unix_ms, committed[i].back());
  }
}

TEST_F(EtcdRegisterTest, QuorumLossFailsRaisesWithinTheTimeoutNeverAsCommitted) {
  // Arrange
  EtcdRegister sut(Options(0, 0, /*ttl_s=*/30, /*timeout_ms=*/1000));
  ASSERT_TRUE(sut.Claim({"q", kEpoch}));
  ASSERT_TRUE(sut.UpdateHighWater(kEpoch + 1000));
  const auto leader = cluster_->Leader();
  ASSERT_TRUE(leader.has_value());
  const int other = (*leader + 1) % 3;

  // Act: stop the leader and one follower: the last member has no quorum.
  cluster_->Pause(*leader);
  cluster_->Pause(other);
  std::vector<tl::expected<void, RegisterError>> during;
  std::vector<std::chrono::milliseconds> took;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    during.push_back(sut.UpdateHighWater(kEpoch + 2000 + i));
    took.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start));
  }
  cluster_->Resume(*leader);
  cluster_->Resume(other);
  ASSERT_TRUE(cluster_->WaitReady(*leader, 30s)) << cluster_->Logs();
  tl::expected<void, RegisterError> after =
      tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, "not tried"});
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        after = sut.UpdateHighWater(kEpoch + 3000);
        return bool(after);
      },
      30s, "a raise to commit once quorum is back", 200ms));

  // Assert
  for (size_t i = 0; i < during.size(); ++i) {
    ASSERT_FALSE(during[i]) << "a raise without quorum was reported committed";
    // An outage, not a refusal: the reservation service retries and the pause names
    // the unreachable register.
    EXPECT_EQ(during[i].error().code, RegisterErrorCode::kUnreachable);
    EXPECT_THAT(during[i].error().message, HasSubstr("etcd unreachable at "));
    EXPECT_THAT(during[i].error().message, HasSubstr("not committed"));
    // About one request timeout (1 s), with room for a loaded host.
    EXPECT_LT(took[i], 10s) << during[i].error().message;
  }
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(MarkOf(Options(0, 0).prefix, 0)->unix_ms, kEpoch + 3000);
}

TEST_F(EtcdRegisterTest, EpochMismatchIsRefusedNamingBothValues) {
  // Arrange
  EtcdRegister first(Options(0, 3));
  ASSERT_TRUE(first.Claim({"a", kEpoch}));

  // Act
  EtcdRegister sut(Options(0, 3));
  auto claim = sut.Claim({"b", kEpoch + 1000});

  // Assert
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kEpochMismatch);
  EXPECT_THAT(claim.error().message, HasSubstr("epoch 1767225600000 (2026-01-01T00:00:00.000Z)"));
  EXPECT_THAT(claim.error().message, HasSubstr("epoch 1767225601000 (2026-01-01T00:00:01.000Z)"));
}

// The fleet record carries the fleet's layout, written by its first daemon; a daemon of
// another layout is refused naming both, and a wide layout's numbers are handed out.
TEST_F(EtcdRegisterTest, TheFleetRecordsItsLayoutAndRefusesAnother) {
  EtcdRegisterOptions wide =
      Options(40000, 40000);  // one number: a claim picks a fresh one at random
  wide.id_bits = {41, 16, 6};
  EtcdRegister first(wide);
  auto claimed = first.Claim({"a", kEpoch});
  ASSERT_TRUE(claimed) << claimed.error().message;
  auto record = Client().Range(Options(0, 0).prefix + "config");
  ASSERT_TRUE(record && !record->kvs.empty());

  EtcdRegister sut(Options(0, 3));  // the default layout
  auto claim = sut.Claim({"b", kEpoch});

  EXPECT_EQ(claimed->machine, 40000u);
  EXPECT_THAT(record->kvs[0].value, HasSubstr(R"("layout":"time41-machine16-sequence6")"));
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, RegisterErrorCode::kEpochMismatch);
  EXPECT_THAT(claim.error().message, HasSubstr("layout time41-machine16-sequence6, but this"));
  EXPECT_THAT(claim.error().message, HasSubstr("layout time41-machine10-sequence12"));
}

TEST_F(EtcdRegisterTest, GarbageUnderThePrefixIsAClearErrorNotACrash) {
  auto admin = Client();
  const std::string base = Options(0, 3).prefix;
  struct Case {
    std::string key;
    std::string value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"config", "\x01garbage\xff", "config holds a value snowflaked did not write"},
      {"config", R"({"format":"snowflaked-fleet","version":7,"epoch_unix_ms":1,"layout":"x"})",
       "unknown fleet record version"},
      {"machines/2", "{}", "machines/2 holds a value snowflaked did not write"},
      {"machines/zz", "{}", "machines/zz holds a value snowflaked did not write"},
      {"high-water/1", "[1,2]", "high-water/1 holds a value snowflaked did not write"},
      {"high-water/3", R"({"unix_ms":-5,"holder":""})", "high-water/3 holds a value"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EtcdRegisterOptions options = Options(0, 3);
    options.prefix = base + std::to_string(i) + "/";
    ASSERT_TRUE(admin.Put(options.prefix + cases[i].key, cases[i].value));
    EtcdRegister sut(options);
    auto claim = sut.Claim({"g", kEpoch});
    ASSERT_FALSE(claim) << cases[i].key;
    EXPECT_EQ(claim.error().code, RegisterErrorCode::kCorrupt) << claim.error().message;
    EXPECT_THAT(claim.error().message, HasSubstr(cases[i].expected));
  }
}

TEST_F(EtcdRegisterTest, ReleaseRefusesALiveHolderAndNeverLowersTheMark) {
  // Arrange
  auto holder = std::make_unique<EtcdRegister>(Options(0, 3));
  auto claim = holder->Claim({"r", kEpoch});
  ASSERT_TRUE(claim);
  ASSERT_TRUE(holder->UpdateHighWater(kEpoch + 7000));
  EtcdRegister sut(Options(0, 3));

  // Act
  auto refused = sut.Release(claim->machine);
  auto listed = sut.List();
  holder.reset();  // a clean exit revokes the lease
  auto released = sut.Release(claim->machine);
  auto nothing = sut.Release(claim->machine + 1);

  // Assert
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, RegisterErrorCode::kInUse);
  EXPECT_THAT(refused.error().message, HasSubstr("held by a live daemon (\"r\" on test-host"));
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].holder->holder, "r");
  EXPECT_GT((*listed)[0].lease_ttl_left_s, 0);
  EXPECT_EQ((*listed)[0].high_water->unix_ms, kEpoch + 7000);
  ASSERT_TRUE(released) << released.error().message;
  const auto mark = MarkOf(Options(0, 3).prefix, claim->machine);
  ASSERT_TRUE(mark);
  EXPECT_EQ(mark->unix_ms, kEpoch + 7000);
  EXPECT_EQ(mark->holder, "");
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error().code, RegisterErrorCode::kInvalidRequest);
}

// etcd with authentication on: the client authenticates with user and password, and
// authenticates again when its token expires; a wrong password is a clear refusal.
TEST_F(EtcdRegisterTest, AClaimTakesAFreshNumberFirstThenTheOldestMark) {
  // Arrange: three holders of 0-3 stop cleanly at three different marks; one number
  // stays fresh (never claimed, no mark).
  const std::vector<int64_t> stops = {kEpoch + 30'000, kEpoch + 10'000, kEpoch + 20'000};
  std::map<int64_t, uint32_t> number_at;  // mark -> number
  std::set<uint32_t> used;
  for (size_t i = 0; i < stops.size(); ++i) {
    EtcdRegister old(Options(0, 3));
    auto claim = old.Claim({"old-" + std::to_string(i), kEpoch});
    ASSERT_TRUE(claim) << claim.error().message;
    ASSERT_TRUE(old.UpdateHighWater(stops[i]));
    ASSERT_TRUE(old.RecordCleanStop(stops[i]));
    number_at[stops[i]] = claim->machine;
    used.insert(claim->machine);
  }
  uint32_t fresh = 0;
  while (used.contains(fresh)) ++fresh;

  // Act: newcomers, one after the other, all holding on.
  std::vector<std::unique_ptr<EtcdRegister>> newcomers;
  std::vector<uint32_t> taken;
  for (int i = 0; i < 3; ++i) {
    newcomers.push_back(std::make_unique<EtcdRegister>(Options(0, 3)));
    auto claim = newcomers.back()->Claim({"new-" + std::to_string(i), kEpoch});
    ASSERT_TRUE(claim) << claim.error().message;
    taken.push_back(claim->machine);
  }

  // Assert: the fresh number, then the marks from the oldest (lowest) up.
  EXPECT_EQ(taken[0], fresh);
  EXPECT_EQ(taken[1], number_at[kEpoch + 10'000]);
  EXPECT_EQ(taken[2], number_at[kEpoch + 20'000]);
}

TEST_F(EtcdRegisterTest, AClaimInAWideMostlyHeldRangeFindsTheFreeNumbers) {
  // Arrange: 0-299 (more than a window of 64 keys), 290 of them held by live claims.
  constexpr int kHeld = 290;
  std::vector<std::unique_ptr<EtcdRegister>> holders;
  std::set<uint32_t> numbers;
  for (int i = 0; i < kHeld; ++i) {
    holders.push_back(std::make_unique<EtcdRegister>(Options(0, 299)));
    auto claim = holders.back()->Claim({"held-" + std::to_string(i), kEpoch});
    ASSERT_TRUE(claim) << claim.error().message;
    ASSERT_TRUE(numbers.insert(claim->machine).second);
  }

  // Act: ten more claim at once; then one more finds the range full.
  std::vector<std::unique_ptr<EtcdRegister>> late;
  std::vector<tl::expected<MachineClaim, RegisterError>> results(
      10, tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, "not run"}));
  for (int i = 0; i < 10; ++i) late.push_back(std::make_unique<EtcdRegister>(Options(0, 299)));
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&, i] {
      results[i] = late[i]->Claim({"late-" + std::to_string(i), kEpoch});
    });
  }
  for (auto& t : threads) t.join();
  EtcdRegister one_too_many(Options(0, 299));
  auto refused = one_too_many.Claim({"one-too-many", kEpoch});

  // Assert: every number once, all 300 held, and "full" said of the whole range.
  for (const auto& r : results) {
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(numbers.insert(r->machine).second) << "machine " << r->machine << " twice";
  }
  EXPECT_EQ(numbers.size(), 300u);
  EXPECT_EQ(*numbers.rbegin(), 299u);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, RegisterErrorCode::kNoFreeNumber) << refused.error().message;
  EXPECT_THAT(refused.error().message, HasSubstr("300 holders in range"));
}

// Two regions, each with a register cluster of its own (two real single-member etcd
// clusters, the same prefix in both) and its own half of the numbers: daemons claiming in
// both at once never hand out one number twice, and a register never hands out a number
// outside its range, not even the one its state file names.
TEST(EtcdRegions, TwoClustersWithDisjointRangesNeverHandOutOneNumber) {
  // Arrange
  EtcdCluster west(1);
  EtcdCluster east(1);
  ASSERT_TRUE(west.ok()) << west.error();
  ASSERT_TRUE(east.ok()) << east.error();
  testing::TempDir locks("etcd-regions-");
  constexpr int kPerRegion = 24;
  struct Daemon {
    std::unique_ptr<EtcdRegister> reg;
    uint32_t first = 0;
    uint32_t last = 0;
  };
  std::vector<Daemon> daemons;
  // Apart from Daemon: GCC 12 (-O2) takes a moved Daemon holding an expected in its error
  // state for a read of an uninitialized claim (-Wmaybe-uninitialized).
  std::vector<std::optional<tl::expected<MachineClaim, RegisterError>>> claims(2 * kPerRegion);
  for (int i = 0; i < 2 * kPerRegion; ++i) {
    const bool in_west = i % 2 == 0;
    EtcdRegisterOptions o;
    o.client.endpoints = (in_west ? west : east).ClientUrls();
    o.first_machine = in_west ? 0 : 500;
    o.last_machine = in_west ? 499 : 999;
    o.host = "host-" + std::to_string(i);
    o.host_lock_dir = locks.path() / ("host-" + std::to_string(i));
    std::filesystem::create_directories(o.host_lock_dir);
    daemons.push_back(Daemon{std::make_unique<EtcdRegister>(o), o.first_machine, o.last_machine});
  }

  // Act: every daemon claims at once; each names in its "state file" a number of the other
  // region, which it must not take.
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < 2 * kPerRegion; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      Daemon& d = daemons[i];
      const uint32_t other_region = d.first == 0 ? 500 + i : static_cast<uint32_t>(i);
      claims[i] =
          d.reg->Claim(ClaimRequest{"holder-" + std::to_string(i), kEpoch, {}, 0, other_region});
    });
  }
  go = true;
  for (auto& t : threads) t.join();

  // Assert
  std::map<uint32_t, int> owner;
  for (int i = 0; i < 2 * kPerRegion; ++i) {
    const Daemon& d = daemons[i];
    ASSERT_TRUE(claims[i].has_value()) << "daemon " << i << " never returned from Claim()";
    const tl::expected<MachineClaim, RegisterError>& claim = *claims[i];
    ASSERT_TRUE(claim) << claim.error().message;
    EXPECT_GE(claim->machine, d.first) << "daemon " << i;
    EXPECT_LE(claim->machine, d.last) << "daemon " << i;
    const auto [it, inserted] = owner.emplace(claim->machine, i);
    EXPECT_TRUE(inserted) << "machine " << claim->machine << " handed to daemons " << it->second
                          << " and " << i;
  }
  EXPECT_EQ(owner.size(), static_cast<size_t>(2 * kPerRegion));
}

TEST(EtcdRegions, AConfigWhoseRangeLeavesTheMachineFieldIsRefused) {
  // Arrange: a region's config naming numbers beyond the field's 0-1023.
  testing::TempDir dir("etcd-regions-config-");
  const auto path = dir.path() / "snowflaked.toml";
  std::ofstream(path) << "[register]\nbackend = \"etcd\"\nmachines = \"500-1024\"\n"
                         "[register.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n";

  // Act
  auto settings = LoadRegisterSettings(path);

  // Assert
  ASSERT_FALSE(settings);
  EXPECT_THAT(settings.error().message, HasSubstr("register.machines"));
}

TEST(EtcdClientAuth, AuthenticatesAndRenewsAnExpiredToken) {
  // Arrange: one member, tokens that last 1 s, a root user, auth on.
  EtcdCluster cluster(1, 30s, {"--auth-token-ttl", "1"});
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const std::string url = cluster.ClientUrl(0);
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"user", "add", "root:s3cret"}, {"auth", "enable"}}) {
    std::vector<std::string> argv = {"/usr/bin/etcdctl", "--endpoints", url};
    argv.insert(argv.end(), args.begin(), args.end());
    testing::RunOptions run_options;
    run_options.env.set = {{"ETCDCTL_API", "3"}};
    const auto run = testing::RunCommand(argv, run_options);
    ASSERT_TRUE(run.status.ExitedWith(0)) << run.out << run.err;
  }
  etcd::ClientOptions options;
  options.endpoints = {url};
  options.user = "root";
  options.password = "s3cret";
  etcd::EtcdClient sut(options);
  options.password = "wrong";
  etcd::EtcdClient wrong(options);
  options.user.clear();
  options.password.clear();
  etcd::EtcdClient anonymous(options);

  // Act
  auto put = sut.Put("/auth/k", "v");
  std::this_thread::sleep_for(3s);  // the token expires
  auto range = sut.Range("/auth/k");
  auto refused = wrong.Range("/auth/k");
  auto unauthenticated = anonymous.Range("/auth/k");

  // Assert
  ASSERT_TRUE(put) << put.error().message;
  ASSERT_TRUE(range) << range.error().message;
  ASSERT_EQ(range->kvs.size(), 1u);
  EXPECT_EQ(range->kvs[0].value, "v");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, etcd::ErrorKind::kRejected);
  EXPECT_THAT(refused.error().message, HasSubstr("authenticating as \"root\""));
  ASSERT_FALSE(unauthenticated);
  EXPECT_EQ(unauthenticated.error().kind, etcd::ErrorKind::kRejected);
}

// Failover: with the first endpoint dead (nothing listens), every call goes to the next.
TEST(EtcdClientFailover, ARefusedEndpointIsSkippedAtOnce) {
  EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  etcd::ClientOptions options;
  options.endpoints = {"http://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()),
                       cluster.ClientUrl(0)};
  etcd::EtcdClient sut(options);

  auto put = sut.Put("/failover/k", "v");
  auto grant = sut.GrantLease(5);

  ASSERT_TRUE(put) << put.error().message;
  ASSERT_TRUE(grant) << grant.error().message;
  EXPECT_EQ(sut.current_endpoint(), cluster.ClientUrl(0));
  auto alive = sut.KeepAlive(grant->id);
  ASSERT_TRUE(alive) << alive.error().message;
  EXPECT_TRUE(alive->alive());
  ASSERT_TRUE(sut.Revoke(grant->id));
  auto gone = sut.KeepAlive(grant->id);
  ASSERT_TRUE(gone) << gone.error().message;
  EXPECT_FALSE(gone->alive());
  auto ttl = sut.TimeToLive(grant->id);
  ASSERT_TRUE(ttl);
  EXPECT_EQ(ttl->ttl_s, -1);
}

}  // namespace
}  // namespace snowflake::reg
