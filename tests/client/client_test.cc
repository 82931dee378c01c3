// libsnowflake against a RingProducer in this process, whose consumer region the test's
// control socket hands out (AttachService: the daemon's own ControlServer): every error a
// Client can return (except the ones that need a second process or user, see
// client_process_test.cc), the take semantics, counting, decoding and a segment replaced
// under a live Client.

#include "snowflake/client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "attach_service.h"
#include "id_checker.h"
#include "manual_clock.h"
#include "serve_loop.h"
#include "snowflake/ring_producer.h"
#include "snowflake/segment_layout.h"
#include "temp_dir.h"
#include "test_producer.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using shm::DaemonState;
using shm::RingProducer;
using shm::StateReason;
using testing::TempDir;

constexpr uint32_t kMachine = 9;
constexpr int64_t kEpoch = kDefaultEpochUnixMs;

// `count` consecutive IDs in millisecond `offset_ms` from sequence `first_seq`.
std::vector<uint64_t> IdsAt(int64_t offset_ms, uint32_t first_seq, size_t count) {
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < count; ++i) {
    ids.push_back(
        IdLayout().EncodeUnchecked(offset_ms, kMachine, first_seq + static_cast<uint32_t>(i)));
  }
  return ids;
}

class ClientTest : public ::testing::Test {
 protected:
  RingProducer MakeProducer(uint64_t capacity = 64, int64_t epoch = kEpoch) {
    shm::ProducerOptions options;
    options.runtime_dir = dir_.path();
    options.capacity = capacity;
    options.epoch_unix_ms = epoch;
    options.machine = kMachine;
    // These tests publish made-up milliseconds (IdsAt); the freshness bound has its own.
    options.bound_freshness = bound_freshness_;
    if (manual_time_) options.clock = &clock_;
    RingProducer producer = testing::MakeProducer(options);
    Serve(producer);
    return producer;
  }

  // From now on the test's control socket hands out `producer`'s consumer region, as a
  // daemon does for the segment it serves (kept open here, so a producer the test
  // destroyed still has one, as its clients do).
  void Serve(const RingProducer& producer) {
    {
      std::lock_guard lock(served_mutex_);
      served_region_ = producer.ConsumerDescriptor();
      served_segment_id_ = producer.segment_id();
    }
    if (!attach_service_) {
      attach_service_.emplace(dir_.path(), [this] {
        std::lock_guard lock(served_mutex_);
        return std::pair{UniqueFd(fcntl(served_region_.get(), F_DUPFD_CLOEXEC, 0)),
                         served_segment_id_};
      });
    }
  }

  // Short waits, and a heartbeat limit so long that only tests about it hit it.
  ClientOptions Options() const {
    ClientOptions options;
    options.runtime_dir = dir_.path();
    options.wait_timeout = std::chrono::milliseconds(20);
    options.max_heartbeat_age = std::chrono::minutes(1);
    if (manual_time_) options.clock = &clock_;
    return options;
  }

  bool bound_freshness_ = false;
  // Set before MakeProducer(): the producer beats on clock_ and the clients of Options()
  // read it, so a test ages a heartbeat or an ID by moving clock_ (it starts at the real
  // clock's readings and stands still until moved). A wait of such a client lasts until
  // the test moves clock_ past its wait_timeout: tests that expect a timeout set it to 0.
  bool manual_time_ = false;
  mutable testing::ManualClock clock_ = testing::ManualClock::AtRealNow();

  Client OpenClient(std::string_view service = "orders") const {
    return OpenClient(service, Options());
  }
  Client OpenClient(std::string_view service, const ClientOptions& options) const {
    auto client = Client::Open(service, options);
    if (!client) throw std::runtime_error(client.error().message);
    return std::move(*client);
  }

  // Overwrites `size` bytes of the segment file at `offset`.
  void PatchSegment(off_t offset, const void* bytes, size_t size) const {
    const std::string path = (dir_ / shm::kSegmentFileName).string();
    const int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(pwrite(fd, bytes, size, offset), static_cast<ssize_t>(size));
    close(fd);
  }

  TempDir dir_{"client-test"};
  std::mutex served_mutex_;
  UniqueFd served_region_;          // guarded by served_mutex_
  uint64_t served_segment_id_ = 0;  // guarded by served_mutex_
  std::optional<testing::AttachService> attach_service_;
};

TEST(ServiceName, AcceptsLowercaseDigitsAndPunctuationUpTo63Chars) {
  EXPECT_TRUE(ValidateServiceName("orders"));
  EXPECT_TRUE(ValidateServiceName("a.b_c-9"));
  EXPECT_TRUE(ValidateServiceName(std::string(63, 'x')));
}

TEST(ServiceName, RejectsEmptyLongUppercaseAndOtherCharactersNamingTheRule) {
  for (const std::string& name : {std::string(), std::string(64, 'x'), std::string("Orders"),
                                  std::string("a b"), std::string("a/b"), std::string("ü")}) {
    auto result = ValidateServiceName(name);

    ASSERT_FALSE(result) << name;
    EXPECT_EQ(result.error().code, ClientError::kInvalidServiceName);
    EXPECT_NE(result.error().message.find("1 to 63 characters of a-z, 0-9"), std::string::npos)
        << result.error().message;
  }
}

TEST_F(ClientTest, OpenRejectsAnInvalidServiceNameBeforeLookingForTheDaemon) {
  auto sut = Client::Open("Bad Name", Options());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, ClientError::kInvalidServiceName);
}

TEST_F(ClientTest, OpenFailsWithDaemonNotRunningNamingThePath) {
  auto sut = Client::Open("orders", Options());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, ClientError::kDaemonNotRunning);
  EXPECT_NE(sut.error().message.find(dir_.path().string()), std::string::npos)
      << sut.error().message;
}

TEST_F(ClientTest, OpenFailsWithDaemonNotRunningWhenTheRuntimeDirIsMissing) {
  ClientOptions options = Options();
  options.runtime_dir = dir_ / "nope";

  auto sut = Client::Open("orders", options);

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, ClientError::kDaemonNotRunning);
  EXPECT_NE(sut.error().message.find("nope"), std::string::npos) << sut.error().message;
}

// After a reboot, a runtime directory on a disk (not tmpfs) still holds the segment of the
// previous boot: it says "serving", and its heartbeat, a CLOCK_MONOTONIC reading of that
// boot, may look fresh. The boot id in the header (bytes 272-287) tells.
TEST_F(ClientTest, OpenFailsWithDaemonNotRunningOnASegmentLeftByAnEarlierBoot) {
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  const uint64_t earlier_boot[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  PatchSegment(272, earlier_boot, sizeof earlier_boot);

  auto sut = Client::Open("orders", Options());

  ASSERT_FALSE(sut) << "a segment of an earlier boot was used";
  EXPECT_EQ(sut.error().code, ClientError::kDaemonNotRunning);
  EXPECT_NE(sut.error().message.find("earlier boot"), std::string::npos) << sut.error().message;
  EXPECT_NE(sut.error().message.find("snowflaked is not running"), std::string::npos)
      << sut.error().message;
}

TEST_F(ClientTest, NextReportsAHeartbeatFromTheFutureAsNotHeartbeating) {
  // The producer beats on clock_, a day ahead of the real clock the client reads.
  manual_time_ = true;
  clock_.Tick(std::chrono::hours(24));
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.clock = &Clock::Real();
  Client sut = OpenClient("orders", options);

  auto taken = sut.Next();

  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kDaemonNotHeartbeating) << taken.error().message;
  EXPECT_NE(taken.error().message.find("in the future"), std::string::npos)
      << taken.error().message;
}

TEST_F(ClientTest, OpenFailsCleanlyOnASegmentOfAnotherFormatVersion) {
  { RingProducer producer = MakeProducer(); }
  const uint32_t other_version = shm::kVersion + 1;
  PatchSegment(offsetof(shm::SegmentHeader, version), &other_version, sizeof(other_version));

  auto sut = Client::Open("orders", Options());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, ClientError::kIncompatibleVersion);
  EXPECT_NE(sut.error().message.find("version " + std::to_string(other_version)), std::string::npos)
      << sut.error().message;
}

TEST_F(ClientTest, OpenFailsWithCorruptSegmentOnBadMagic) {
  { RingProducer producer = MakeProducer(); }
  const uint64_t bad_magic = 0x1234;
  PatchSegment(offsetof(shm::SegmentHeader, magic), &bad_magic, sizeof(bad_magic));

  auto sut = Client::Open("orders", Options());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, ClientError::kCorruptSegment);
}

TEST_F(ClientTest, OpenRefusesASegmentOtherUsersCanWrite) {
  { RingProducer producer = MakeProducer(); }
  ASSERT_EQ(chmod((dir_ / shm::kSegmentFileName).c_str(), 0666), 0);

  auto sut = Client::Open("orders", Options());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, ClientError::kUntrustedSegment);
  EXPECT_NE(sut.error().message.find("0666"), std::string::npos) << sut.error().message;
}

TEST_F(ClientTest, NextTakesPublishedIdsInOrder) {
  RingProducer producer = MakeProducer();
  const std::vector<uint64_t> ids = IdsAt(100, 0, 3);
  ASSERT_EQ(producer.Publish(ids).value(), 3u);
  producer.SetState(DaemonState::kServing);
  Client sut = OpenClient();

  std::vector<uint64_t> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(sut.Next().value());

  EXPECT_EQ(taken, ids);
}

TEST_F(ClientTest, NextBatchReturnsAShortBatchWhenTheRingHoldsFewer) {
  RingProducer producer = MakeProducer();
  const std::vector<uint64_t> ids = IdsAt(100, 0, 5);
  ASSERT_EQ(producer.Publish(ids).value(), 5u);
  producer.SetState(DaemonState::kServing);
  Client sut = OpenClient();
  std::vector<uint64_t> out(10);

  auto taken = sut.NextBatch(out);

  ASSERT_TRUE(taken) << taken.error().message;
  ASSERT_EQ(*taken, 5u);
  EXPECT_EQ(std::vector<uint64_t>(out.begin(), out.begin() + 5), ids);
}

TEST_F(ClientTest, NextBatchRejectsAnEmptySpan) {
  RingProducer producer = MakeProducer();
  Client sut = OpenClient();

  auto taken = sut.NextBatch({});

  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kInvalidArgument);
}

TEST_F(ClientTest, NextFailsWithDaemonStartingOnAFreshSegment) {
  RingProducer producer = MakeProducer();
  Client sut = OpenClient();

  auto taken = sut.Next();

  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kDaemonStarting);
}

struct StateCase {
  DaemonState state;
  StateReason reason;
  int64_t detail;
  ClientError expected;
  const char* message_part;
};

class ClientStateTest : public ClientTest, public ::testing::WithParamInterface<StateCase> {};

TEST_P(ClientStateTest, NextAndNextBatchReportTheDaemonsStateOnAnEmptyRing) {
  RingProducer producer = MakeProducer();
  producer.SetState(GetParam().state, GetParam().reason, GetParam().detail);
  Client sut = OpenClient();
  uint64_t out[4];

  auto one = sut.Next();
  auto batch = sut.NextBatch(out);

  ASSERT_FALSE(one);
  EXPECT_EQ(one.error().code, GetParam().expected) << one.error().message;
  EXPECT_NE(one.error().message.find(GetParam().message_part), std::string::npos)
      << one.error().message;
  ASSERT_FALSE(batch);
  EXPECT_EQ(batch.error().code, GetParam().expected) << batch.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    States, ClientStateTest,
    ::testing::Values(StateCase{DaemonState::kPaused, StateReason::kClockBehind, 5,
                                ClientError::kDaemonPaused, "clock moved back 5 ms"},
                      StateCase{DaemonState::kOutOfService, StateReason::kClockStepTooLarge, 7000,
                                ClientError::kDaemonOutOfService, "snowflakectl resume"},
                      StateCase{DaemonState::kStopped, StateReason::kShutdown, 0,
                                ClientError::kDaemonStopped, "stopped"},
                      StateCase{DaemonState::kStarting, StateReason::kStarting, 0,
                                ClientError::kDaemonStarting, "starting"}));

// A restarted daemon waiting out its own reservation is paused: the message says it
// resumes by itself and nothing about `snowflakectl resume` (it used to say both).
TEST_F(ClientTest, PausedBehindTheHighWaterMarkTellsOneStory) {
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kPaused, StateReason::kBehindHighWater, 700);
  Client sut = OpenClient();

  auto one = sut.Next();

  ASSERT_FALSE(one);
  EXPECT_EQ(one.error().code, ClientError::kDaemonPaused);
  EXPECT_NE(one.error().message.find("resumes by itself"), std::string::npos)
      << one.error().message;
  EXPECT_EQ(one.error().message.find("snowflakectl resume"), std::string::npos)
      << one.error().message;
}

TEST_F(ClientTest, NextFailsWithNotHeartbeatingWhenTheHeartbeatIsTooOld) {
  manual_time_ = true;
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);  // beats once, then never again
  ClientOptions options = Options();
  options.max_heartbeat_age = std::chrono::milliseconds(5);
  options.wait_timeout = std::chrono::milliseconds(0);  // the age is the segment's, not the wait's
  Client sut = OpenClient("orders", options);
  auto at_the_limit = sut.Next();
  clock_.Tick(6);  // the beat is 6 ms old now

  auto taken = sut.Next();

  ASSERT_FALSE(at_the_limit);
  EXPECT_EQ(at_the_limit.error().code, ClientError::kRingEmpty) << at_the_limit.error().message;
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kDaemonNotHeartbeating) << taken.error().message;
  EXPECT_NE(taken.error().message.find("for 6 ms (limit 5 ms)"), std::string::npos)
      << taken.error().message;
}

// The deadline of a wait on an empty ring is measured on the Client's clock: a Next()
// waiting with 30 s left by its clock returns kRingEmpty once the clock is moved past them,
// although far less real time has passed. (The futex sleep in progress ends within its
// real slice of 1 ms, and the next judgement reads the moved clock.)
TEST_F(ClientTest, AWaitEndsWhenTheClientsClockPassesItsTimeout) {
  manual_time_ = true;
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.wait_timeout = std::chrono::seconds(30);
  Client sut = OpenClient("orders", options);
  const uint32_t requests_before = producer.refill_request();
  std::atomic<bool> returned{false};
  std::optional<tl::expected<uint64_t, Error>> taken;

  std::thread waiter([&] {
    taken = sut.Next();
    returned = true;
  });
  // It waits: it asked for a refill at least twice (two slices), and has not returned.
  const ::testing::AssertionResult waiting =
      testing::WaitUntil([&] { return producer.refill_request() - requests_before >= 2; },
                         std::chrono::seconds(10), "the waiter's second refill request");
  const bool returned_early = returned.load();
  clock_.Tick(30'001);
  const ::testing::AssertionResult ended =
      testing::WaitUntil([&] { return returned.load(); }, std::chrono::seconds(10),
                         "the wait to end after the Client's clock passed its wait_timeout");
  waiter.join();

  EXPECT_TRUE(waiting);
  EXPECT_FALSE(returned_early) << "it did not wait for its clock";
  EXPECT_TRUE(ended);
  ASSERT_TRUE(taken.has_value());
  ASSERT_FALSE(taken->has_value());
  EXPECT_EQ(taken->error().code, ClientError::kRingEmpty) << taken->error().message;
}

// A take judges the front's age on the Client's clock: an ID of its current millisecond
// is taken; once the clock has moved past the header's bound (50 ms: max_age_ms 0 +
// liveness_ms 50; a manual clock has no coarse lag), the next is refused and stays.
TEST_F(ClientTest, IdsAgeOnTheClientsClock) {
  manual_time_ = true;
  bound_freshness_ = true;
  RingProducer producer = MakeProducer();
  const int64_t now_offset_ms = clock_.NowUnixMs() - kEpoch;
  ASSERT_EQ(producer.Publish(IdsAt(now_offset_ms, 0, 3)).value(), 3u);
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.wait_timeout = std::chrono::milliseconds(0);
  Client sut = OpenClient("orders", options);

  auto fresh = sut.Next();
  clock_.Tick(50);
  auto at_the_bound = sut.Next();
  clock_.Tick(1);
  auto too_old = sut.Next();

  ASSERT_TRUE(fresh) << fresh.error().message;
  ASSERT_TRUE(at_the_bound) << at_the_bound.error().message;
  ASSERT_FALSE(too_old) << "received an ID 51 ms old by the Client's clock";
  EXPECT_EQ(too_old.error().code, ClientError::kTimedOut) << too_old.error().message;
  EXPECT_NE(too_old.error().message.find("freshness bound (50 ms)"), std::string::npos)
      << too_old.error().message;
  EXPECT_EQ(producer.size(), 1u);
}

// The times in a Client's messages are its clock's: a pause on an unreachable register
// says since when, and how long ago by that clock.
TEST_F(ClientTest, AMessageSaysHowLongAgoByTheClientsClock) {
  manual_time_ = true;
  clock_.Set(kEpoch + 86'400'000);  // a day after the epoch, whatever the real time
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kPaused, StateReason::kRegisterUnreachable,
                    clock_.NowUnixMs() - 4'210);
  Client sut = OpenClient();

  auto taken = sut.Next();
  clock_.Tick(1'000);
  auto status = sut.GetStatus();

  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kDaemonPaused);
  EXPECT_NE(taken.error().message.find("(4210 ms ago)"), std::string::npos)
      << taken.error().message;
  ASSERT_TRUE(status);
  EXPECT_NE(status->reason_text.find("(5210 ms ago)"), std::string::npos) << status->reason_text;
}

// A daemon that heartbeats but leaves the ring empty for the whole wait is alive and
// refilling (a hung one is kDaemonNotHeartbeating first): kRingEmpty, retry here, not the
// failover kTimedOut that a briefly empty ring once was.
TEST_F(ClientTest, NextSaysRingEmptyWhenAHealthyDaemonLeavesTheRingEmpty) {
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  Client sut = OpenClient();
  uint64_t batch[4];

  auto taken = sut.Next();
  auto batch_taken = sut.NextBatch(batch);

  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kRingEmpty) << taken.error().message;
  EXPECT_FALSE(AnotherDaemonMayServe(taken.error().code));
  EXPECT_NE(taken.error().message.find("stayed empty although snowflaked looks healthy"),
            std::string::npos)
      << taken.error().message;
  EXPECT_TRUE(taken.error().message.ends_with("; retry here")) << taken.error().message;
  ASSERT_FALSE(batch_taken);
  EXPECT_EQ(batch_taken.error().code, ClientError::kRingEmpty) << batch_taken.error().message;
}

TEST_F(ClientTest, AWaitingNextGetsTheIdPublishedWhileItWaits) {
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.wait_timeout = std::chrono::seconds(30);
  Client sut = OpenClient("orders", options);
  const uint32_t requests_before = producer.refill_request();
  std::optional<tl::expected<uint64_t, Error>> taken;

  std::thread waiter([&] { taken = sut.Next(); });
  // It found the ring empty and asked for a refill, which it does just before it waits: the
  // ID published now reaches it through the wait (a publish before its futex sleep moves
  // wake_seq, so the sleep returns at once), never through its first look at the ring.
  const ::testing::AssertionResult asked =
      testing::WaitUntil([&] { return producer.refill_request() != requests_before; },
                         std::chrono::seconds(30), "the waiting Next() to ask for a refill");
  const std::vector<uint64_t> ids = IdsAt(200, 0, 1);
  ASSERT_EQ(producer.Publish(ids).value(), 1u);
  waiter.join();

  EXPECT_TRUE(asked);
  ASSERT_TRUE(taken.has_value() && taken->has_value())
      << (taken && !*taken ? taken->error().message : "");
  EXPECT_EQ(**taken, ids[0]);
}

// NextBatch on an empty ring asks for the whole batch with its refill request (the
// segment's refill hint), so a daemon can publish it in one pass. While it waits it
// repeats the request every slice but not the hint: a daemon that is slow to answer is
// asked for the batch once, and asked again only after it took the word.
TEST_F(ClientTest, NextBatchAsksForItsWholeSizeWhenItFindsTheRingEmpty) {
  RingProducer producer = MakeProducer(4096);
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.wait_timeout = std::chrono::seconds(30);
  Client sut = OpenClient("orders", options);
  std::vector<uint64_t> out(1000);
  std::optional<tl::expected<size_t, Error>> taken;
  const uint32_t refill_before = producer.refill_request();
  // Act as a daemon that is slow to answer: let the taker's request come several times.
  const auto wait_for_requests = [&producer](uint32_t from, uint32_t count) {
    while (producer.refill_request() - from < count) {
      producer.WaitForRefillRequest(producer.refill_request(), std::chrono::milliseconds(100));
    }
  };

  std::thread waiter([&] { taken = sut.NextBatch(out); });
  wait_for_requests(refill_before, 4);
  const uint32_t first_hint = producer.TakeRefillHint();
  wait_for_requests(producer.refill_request(), 2);
  const uint32_t second_hint = producer.TakeRefillHint();
  ASSERT_EQ(producer.Publish(IdsAt(300, 0, 1000)).value(), 1000u);
  waiter.join();

  EXPECT_EQ(first_hint, 1000u) << "the batch's full size once, not once per request";
  EXPECT_EQ(second_hint, 1000u) << "asked again after the daemon took the word";
  ASSERT_TRUE(taken.has_value() && taken->has_value())
      << (taken && !*taken ? taken->error().message : "");
  EXPECT_EQ(**taken, 1000u) << "one refill, one batch";
}

TEST_F(ClientTest, NextSendsNoHint) {
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  Client sut = OpenClient();  // 20 ms wait

  EXPECT_EQ(sut.Next().error().code, ClientError::kRingEmpty);
  EXPECT_EQ(producer.TakeRefillHint(), 0u);
}

// Mixed versions: a daemon of the previous release never reads the hint and tops the ring
// up by its own fill target. A new Client's batches still complete, in several refills,
// with unique increasing IDs.
TEST_F(ClientTest, NextBatchWorksAgainstADaemonThatIgnoresTheHint) {
  RingProducer producer = MakeProducer(4096);
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.wait_timeout = std::chrono::seconds(30);
  Client sut = OpenClient("orders", options);
  std::atomic<bool> stop{false};
  std::thread old_daemon([&] {
    // Publishes 64 IDs per request, never touching the hint word.
    uint64_t ms = 400;
    while (!stop.load()) {
      const uint32_t seen = producer.refill_request();
      if (producer.size() == 0) (void)producer.Publish(IdsAt(static_cast<int64_t>(ms++), 0, 64));
      producer.WaitForRefillRequest(seen, std::chrono::milliseconds(1));
    }
  });
  std::vector<uint64_t> all;
  std::vector<uint64_t> out(4096);
  while (all.size() < 4096) {
    auto n = sut.NextBatch(std::span<uint64_t>(out.data(), 4096 - all.size()));
    ASSERT_TRUE(n.has_value()) << n.error().message;
    all.insert(all.end(), out.begin(), out.begin() + static_cast<ptrdiff_t>(*n));
  }
  stop = true;
  old_daemon.join();

  for (size_t i = 1; i < all.size(); ++i) ASSERT_LT(all[i - 1], all[i]) << "at " << i;
  EXPECT_GT(producer.TakeRefillHint(), 0u) << "the client asked; the old daemon left it unread";
}

// Property: a caller blocked on an empty ring learns of a pause or stop at once (in
// about one wait slice), not after its wait_timeout. Asserted: the error is the state's,
// not kRingEmpty after a 30 s wait. Recorded: the latency.
class ClientPromptnessTest : public ClientTest, public ::testing::WithParamInterface<StateCase> {};

TEST_P(ClientPromptnessTest, AWaitingCallerIsToldOfTheStateChangeWithoutTimingOut) {
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.wait_timeout = std::chrono::seconds(30);
  Client sut = OpenClient("orders", options);
  const uint32_t requests_before = producer.refill_request();
  std::optional<tl::expected<uint64_t, Error>> taken;
  std::chrono::steady_clock::time_point returned;

  std::thread waiter([&] {
    taken = sut.Next();
    returned = std::chrono::steady_clock::now();
  });
  // The change comes once the caller waits (its refill request comes just before its
  // wait), so it is the waiting caller that must learn of it, not its first look.
  const ::testing::AssertionResult asked =
      testing::WaitUntil([&] { return producer.refill_request() != requests_before; },
                         std::chrono::seconds(30), "the waiting Next() to ask for a refill");
  const auto changed = std::chrono::steady_clock::now();
  producer.SetState(GetParam().state, GetParam().reason, GetParam().detail);
  waiter.join();

  EXPECT_TRUE(asked);
  ASSERT_TRUE(taken.has_value());
  ASSERT_FALSE(taken->has_value());
  EXPECT_EQ(taken->error().code, GetParam().expected) << taken->error().message;
  const auto latency_us =
      std::chrono::duration_cast<std::chrono::microseconds>(returned - changed).count();
  RecordProperty("latency_us", std::to_string(latency_us));
  std::printf("%s reported %lld us after the state change\n",
              std::string(ClientErrorName(GetParam().expected)).c_str(),
              static_cast<long long>(latency_us));
}

INSTANTIATE_TEST_SUITE_P(
    States, ClientPromptnessTest,
    ::testing::Values(StateCase{DaemonState::kPaused, StateReason::kClockBehind, 5,
                                ClientError::kDaemonPaused, "clock moved back 5 ms"},
                      StateCase{DaemonState::kStopped, StateReason::kShutdown, 0,
                                ClientError::kDaemonStopped, "stopped"}));

TEST_F(ClientTest, EachClientCountsItsTakesInItsOwnSlotAndRetiresItOnClose) {
  RingProducer producer = MakeProducer();
  ASSERT_EQ(producer.Publish(IdsAt(100, 0, 20)).value(), 20u);
  producer.SetState(DaemonState::kServing);
  std::vector<shm::ServiceCount> open_counts;
  std::vector<shm::ServiceCount> closed_counts;
  uint64_t status_count = 0;

  {
    Client sut = OpenClient("billing");
    Client other = OpenClient("orders");
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(sut.Next());
    uint64_t out[5];
    ASSERT_EQ(sut.NextBatch(out).value(), 5u);
    ASSERT_TRUE(other.Next());
    status_count = sut.GetStatus().value().client_taken;
    producer.ForEachService([&](const shm::ServiceCount& c) { open_counts.push_back(c); });
  }
  producer.ForEachService([&](const shm::ServiceCount& c) { closed_counts.push_back(c); });

  EXPECT_EQ(status_count, 15u);
  ASSERT_EQ(open_counts.size(), 2u);
  for (const auto& count : open_counts) {
    EXPECT_FALSE(count.retired) << count.name;
    EXPECT_EQ(count.pid, static_cast<uint64_t>(getpid()));
    EXPECT_EQ(count.taken, count.name == "billing" ? 15u : 1u) << count.name;
  }
  ASSERT_EQ(closed_counts.size(), 2u);
  for (const auto& count : closed_counts) {
    EXPECT_TRUE(count.retired) << count.name;
    EXPECT_EQ(count.taken, count.name == "billing" ? 15u : 1u) << count.name;
  }
}

TEST_F(ClientTest, DecodeUsesTheSegmentsEpoch) {
  const int64_t epoch = kEpoch - 86'400'000;
  RingProducer producer = MakeProducer(64, epoch);
  Client sut = OpenClient();
  const uint64_t id = IdLayout().EncodeUnchecked(1234, kMachine, 56);

  auto decoded = sut.Decode(id);

  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, (DecodedId{epoch + 1234, kMachine, 56}));
  EXPECT_EQ(sut.layout().epoch_unix_ms(), epoch);
}

TEST_F(ClientTest, DecodeRejectsAValueWithTheSignBitSet) {
  RingProducer producer = MakeProducer();
  Client sut = OpenClient();

  auto decoded = sut.Decode(uint64_t{1} << 63);

  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error().code, ClientError::kInvalidArgument);
}

TEST_F(ClientTest, GetStatusAndInspectReportTheSegment) {
  RingProducer producer = MakeProducer(128);
  ASSERT_EQ(producer.Publish(IdsAt(100, 0, 7)).value(), 7u);
  producer.SetState(DaemonState::kPaused, StateReason::kClockBehind, 3);
  producer.CountClockPause();
  Client sut = OpenClient();

  auto status = sut.GetStatus();
  auto inspected = Client::Inspect(Options());

  ASSERT_TRUE(status);
  ASSERT_TRUE(inspected);
  for (const ClientStatus& s : {*status, *inspected}) {
    EXPECT_EQ(s.state, "paused");
    EXPECT_EQ(s.health, "paused");
    EXPECT_EQ(s.reason, "clock_behind");
    EXPECT_EQ(s.reason_text, "clock moved back 3 ms");
    EXPECT_EQ(s.machine, kMachine);
    EXPECT_EQ(s.epoch_unix_ms, kEpoch);
    EXPECT_EQ(s.daemon_pid, static_cast<uint64_t>(getpid()));
    EXPECT_EQ(s.ring_fill, 7u);
    EXPECT_EQ(s.ring_capacity, 128u);
    EXPECT_EQ(s.published_total, 7u);
    EXPECT_EQ(s.clock_pauses, 1u);
    EXPECT_EQ(s.incarnation, 1u);
  }
}

TEST_F(ClientTest, InspectRegistersNoService) {
  RingProducer producer = MakeProducer();
  size_t services = 0;

  ASSERT_TRUE(Client::Inspect(Options()));
  producer.ForEachService([&](const shm::ServiceCount&) { ++services; });

  EXPECT_EQ(services, 0u);
}

TEST_F(ClientTest, AClientMovesToTheFreshSegmentOfARestartedDaemon) {
  std::optional<RingProducer> producer = MakeProducer();
  ASSERT_EQ(producer->Publish(IdsAt(100, 0, 1)).value(), 1u);
  producer->SetState(DaemonState::kServing);
  Client sut = OpenClient();
  const uint64_t before = sut.Next().value();
  producer->SetState(DaemonState::kStopped, StateReason::kShutdown);
  producer.reset();
  const auto stopped = sut.Next();

  producer = MakeProducer();  // a restart: a fresh segment continuing above the old one
  ASSERT_TRUE(producer->continued());
  ASSERT_EQ(producer->Publish(IdsAt(101, 0, 1)).value(), 1u);
  producer->SetState(DaemonState::kServing);
  auto after = sut.Next();

  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, ClientError::kDaemonStopped);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_GT(*after, before);
  EXPECT_EQ(sut.GetStatus().value().incarnation, 2u);
}

TEST_F(ClientTest, AClientMovesToANewSegmentWhenTheOldOneIsRetired) {
  std::optional<RingProducer> producer = MakeProducer(64);
  ASSERT_EQ(producer->Publish(IdsAt(100, 0, 1)).value(), 1u);
  producer->SetState(DaemonState::kServing);
  Client sut = OpenClient("billing");
  const uint64_t before = sut.Next().value();
  producer.reset();

  producer = MakeProducer(128);  // another capacity: a fresh segment, as at every start
  ASSERT_EQ(producer->Publish(IdsAt(101, 0, 3)).value(), 3u);
  producer->SetState(DaemonState::kServing);
  auto after = sut.Next();
  std::vector<shm::ServiceCount> counts;
  producer->ForEachService([&](const shm::ServiceCount& c) { counts.push_back(c); });

  ASSERT_TRUE(after) << after.error().message;
  EXPECT_GT(*after, before);
  EXPECT_EQ(sut.GetStatus().value().ring_capacity, 128u);
  EXPECT_EQ(sut.GetStatus().value().client_taken, 2u);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0].name, "billing");
  EXPECT_EQ(counts[0].taken, 1u);
}

// Milliseconds since kEpoch now, by the wall clock.
int64_t NowOffsetMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() -
         kEpoch;
}

// Finding 6 of issue 9: the fast path handed out a dead or hung daemon's leftovers at any
// age. With the header's bound (max_age_ms 0 + liveness_ms 50) an ID 300 ms old is
// refused, nothing is taken, and the call says why.
TEST_F(ClientTest, NextNeverReturnsAnIdOlderThanTheFreshnessBound) {
  // Arrange: a "daemon" that published IDs 300 ms ago and looks healthy to a client
  // that tolerates old heartbeats.
  bound_freshness_ = true;
  RingProducer producer = MakeProducer();
  ASSERT_EQ(producer.Publish(IdsAt(NowOffsetMs() - 300, 0, 10)).value(), 10u);
  producer.SetState(DaemonState::kServing);
  Client sut = OpenClient();
  uint64_t batch[4];

  // Act
  auto taken = sut.Next();
  auto batch_taken = sut.NextBatch(batch);

  // Assert
  ASSERT_FALSE(taken) << "received an ID " << NowOffsetMs() - IdLayout().OffsetMsOf(*taken)
                      << " ms old";
  EXPECT_EQ(taken.error().code, ClientError::kTimedOut) << taken.error().message;
  EXPECT_NE(taken.error().message.find("freshness bound (50 ms)"), std::string::npos)
      << taken.error().message;
  // A daemon that does not drain its ring is no daemon to wait for: fail over.
  EXPECT_TRUE(AnotherDaemonMayServe(taken.error().code));
  EXPECT_TRUE(taken.error().message.ends_with("; fail over")) << taken.error().message;
  ASSERT_FALSE(batch_taken);
  EXPECT_EQ(producer.size(), 10u) << "a refused take must take nothing";
}

TEST_F(ClientTest, NextNeverReturnsAnIdFromTheClocksFutureBeyondTheBound) {
  bound_freshness_ = true;
  RingProducer producer = MakeProducer();
  ASSERT_EQ(producer.Publish(IdsAt(NowOffsetMs() + 300, 0, 10)).value(), 10u);
  producer.SetState(DaemonState::kServing);
  Client sut = OpenClient();

  auto taken = sut.Next();

  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kTimedOut) << taken.error().message;
  EXPECT_EQ(producer.size(), 10u);
}

TEST_F(ClientTest, NextTakesIdsWithinTheFreshnessBound) {
  bound_freshness_ = true;
  RingProducer producer = MakeProducer();
  ASSERT_EQ(producer.Publish(IdsAt(NowOffsetMs() - 20, 0, 3)).value(), 3u);
  producer.SetState(DaemonState::kServing);
  Client sut = OpenClient();

  auto taken = sut.Next();

  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(producer.size(), 2u);
}

// Finding 8, client side: the "not heartbeating" limit is the daemon's liveness_ms from
// the header unless the caller sets one.
TEST_F(ClientTest, TheHeartbeatLimitComesFromTheHeadersLivenessByDefault) {
  // Arrange: liveness 50 ms; the producer's last beat was 80 ms ago.
  manual_time_ = true;
  bound_freshness_ = true;
  RingProducer producer = MakeProducer();
  producer.SetState(DaemonState::kServing);
  ClientOptions options = Options();
  options.max_heartbeat_age = std::chrono::milliseconds(0);
  Client sut = OpenClient("orders", options);
  clock_.Tick(80);

  // Act
  auto taken = sut.Next();
  auto status = sut.GetStatus();

  // Assert
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ClientError::kDaemonNotHeartbeating) << taken.error().message;
  EXPECT_NE(taken.error().message.find("limit 50 ms"), std::string::npos) << taken.error().message;
  ASSERT_TRUE(status);
  EXPECT_EQ(status->health, "not_heartbeating");
  EXPECT_EQ(status->liveness_ms, 50u);
  EXPECT_EQ(status->freshness_bound_ms, 50u);
}

// Counting without a read-modify-write: each thread stores to its own lane. Property:
// counts stay exact with more threads than lanes, with threads that exit (their lanes
// are reused), and after the Client closes.
TEST_F(ClientTest, CountsStayExactWithMoreThreadsThanLanesAndThreadsThatExit) {
  // Arrange
  RingProducer producer = MakeProducer(4096);
  ASSERT_EQ(producer.Publish(IdsAt(100, 0, 4000)).value(), 4000u);
  producer.SetState(DaemonState::kServing);
  constexpr int kWaves = 3;
  constexpr int kThreadsPerWave = static_cast<int>(shm::kLanesPerService) + 4;
  constexpr int kTakesPerThread = 100;
  std::vector<shm::ServiceCount> open_counts;
  std::vector<shm::ServiceCount> closed_counts;
  uint64_t status_count = 0;
  std::atomic<int> failures{0};

  // Act: waves of threads that take and exit, half by Next, half by NextBatch.
  {
    Client sut = OpenClient("billing");
    for (int wave = 0; wave < kWaves; ++wave) {
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreadsPerWave; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < kTakesPerThread;) {
            if (t % 2 == 0) {
              if (!sut.Next()) failures.fetch_add(1);
              ++i;
            } else {
              uint64_t two[2];
              auto n = sut.NextBatch(std::span(two, std::min(2, kTakesPerThread - i)));
              if (!n) {
                failures.fetch_add(1);
                ++i;
              } else {
                i += static_cast<int>(*n);
              }
            }
          }
        });
      }
      for (auto& thread : threads) thread.join();
    }
    status_count = sut.GetStatus().value().client_taken;
    producer.ForEachService([&](const shm::ServiceCount& c) { open_counts.push_back(c); });
  }
  producer.ForEachService([&](const shm::ServiceCount& c) { closed_counts.push_back(c); });

  // Assert
  const uint64_t expected = uint64_t{kWaves} * kThreadsPerWave * kTakesPerThread;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(producer.head(), expected);
  EXPECT_EQ(status_count, expected);
  ASSERT_EQ(open_counts.size(), 1u);
  EXPECT_EQ(open_counts[0].taken, expected);
  ASSERT_EQ(closed_counts.size(), 1u);
  EXPECT_TRUE(closed_counts[0].retired);
  EXPECT_EQ(closed_counts[0].taken, expected);
}

TEST_F(ClientTest, TakesOfAClientWithoutACounterSlotAreReportedAsUncounted) {
  // Arrange: every counter slot is in use.
  RingProducer producer = MakeProducer();
  ASSERT_EQ(producer.Publish(IdsAt(100, 0, 20)).value(), 20u);
  producer.SetState(DaemonState::kServing);
  std::vector<Client> holders;
  for (size_t i = 0; i < shm::kServiceSlotCount; ++i) holders.push_back(OpenClient("holder"));
  Client sut = OpenClient("late");

  // Act
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sut.Next());
  uint64_t batch[4];
  ASSERT_EQ(sut.NextBatch(batch).value(), 4u);

  // Assert
  EXPECT_EQ(sut.GetStatus().value().uncounted, 7u);
  EXPECT_EQ(sut.GetStatus().value().client_taken, 7u);
  EXPECT_EQ(Client::Inspect(Options()).value().uncounted, 7u);
  EXPECT_EQ(producer.uncounted(), 7u);
}

#ifdef SNOWFLAKE_SANITIZED
constexpr size_t kTakesPerThread = 5'000;
#else
constexpr size_t kTakesPerThread = 50'000;
#endif

// Property: with many threads sharing one Client, half with Next and half with NextBatch,
// every ID is handed out at most once, each thread's IDs strictly increase, and a take
// that began after another completed gets a larger ID. Capacities from 1 to 4096.
class ClientThreadsTest : public ClientTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(ClientThreadsTest, ManyThreadsTakeUniqueIncreasingIds) {
  RingProducer producer = MakeProducer(GetParam());
  std::atomic<bool> stop{false};
  // Serving before any taker starts: otherwise a taker that beats the serving thread to
  // an empty ring is rightly told the daemon is still starting.
  producer.SetState(DaemonState::kServing);
  std::thread daemon([&] { testing::ServeUntil(producer, stop); });
  ClientOptions options = Options();
  options.wait_timeout = std::chrono::seconds(10);
  // This test is about uniqueness and order, not liveness: on a loaded 2-core machine the
  // serving thread may miss heartbeats for longer than the production default.
  options.max_heartbeat_age = std::chrono::seconds(10);
  Client sut = OpenClient("orders", options);
  constexpr int kThreads = 6;
  std::vector<std::vector<testing::TakeRecord>> records(kThreads);
  std::atomic<uint64_t> baton{0};
  std::atomic<int> failures{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = records[t];
      mine.reserve(kTakesPerThread);
      uint64_t batch[7];
      while (mine.size() < kTakesPerThread) {
        const uint64_t before = baton.load(std::memory_order_seq_cst);
        if (t % 2 == 0) {
          auto id = sut.Next();
          if (!id) {
            ADD_FAILURE() << "Next: " << id.error().message;
            failures.fetch_add(1);
            return;
          }
          mine.push_back({*id, before});
          testing::RaiseBaton(baton, *id);
        } else {
          auto n = sut.NextBatch(batch);
          if (!n) {
            ADD_FAILURE() << "NextBatch: " << n.error().message;
            failures.fetch_add(1);
            return;
          }
          for (size_t i = 0; i < *n; ++i) mine.push_back({batch[i], before});
          testing::RaiseBaton(baton, batch[*n - 1]);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  stop = true;
  daemon.join();

  EXPECT_EQ(failures.load(), 0);
  testing::IdChecker checker;
  for (int t = 0; t < kThreads; ++t) checker.AddRecorder("thread " + std::to_string(t), records[t]);
  const testing::IdCheckResult result = checker.Check();
  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_GE(result.ids, kThreads * kTakesPerThread);
  EXPECT_EQ(sut.GetStatus().value().client_taken, result.ids);
}

INSTANTIATE_TEST_SUITE_P(Capacities, ClientThreadsTest, ::testing::Values(1, 2, 64, 4096));

}  // namespace
}  // namespace snowflake
