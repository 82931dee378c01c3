// Single-threaded behaviour of the ring, producer and consumer in one process, at the
// capacities that stress its arithmetic: 1 and 2 (the producer laps at once), 64 and
// 65536.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "manual_clock.h"
#include "ring_test_util.h"
#include "snowflake/id_layout.h"
#include "snowflake/pid_namespace.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "snowflake/segment_layout.h"
#include "snowflake/unique_fd.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace snowflake::shm {
namespace {

using namespace std::chrono_literals;
using snowflake::testing::ManualClock;
using snowflake::testing::TempDir;
using testing::BeatOf;
using testing::MakeConsumer;
using testing::MakeProducer;
using testing::OptionsFor;
using testing::Range;
using testing::Unwrap;

// Succeeds once thread `tid` (0 until the thread has stored it) sleeps in futex(2), as the
// kernel reports in /proc/self/task/<tid>/syscall (its first field is the number of the
// system call the thread is blocked in); fails after 30 s, naming `who`. A wake test waits
// for this before it makes its event, so only the wake can end the sleep.
::testing::AssertionResult WaitUntilInFutexWait(const std::atomic<pid_t>& tid,
                                                std::string_view who) {
  return snowflake::testing::WaitUntil(
      [&tid] {
        const pid_t id = tid.load();
        if (id == 0) return false;
        std::ifstream file("/proc/self/task/" + std::to_string(id) + "/syscall");
        long number = -1;
        return file >> number && number == SYS_futex;
      },
      30s, std::string(who) + " to sleep in futex(2)", 1ms);
}

class RingAtCapacity : public ::testing::TestWithParam<uint64_t> {
 protected:
  uint64_t capacity() const { return GetParam(); }
  TempDir dir_;
};

INSTANTIATE_TEST_SUITE_P(Capacities, RingAtCapacity, ::testing::Values(1, 2, 64, 65536));

TEST_P(RingAtCapacity, TakeFailsWhenNothingPublished) {
  RingProducer producer = MakeProducer(dir_.path(), capacity());
  RingConsumer sut = MakeConsumer(dir_.path(), producer);
  uint64_t id = 0;
  uint64_t batch[4];

  EXPECT_FALSE(sut.TryTake(&id));
  EXPECT_EQ(sut.TryTakeBatch(batch, 4), 0u);
  EXPECT_EQ(sut.capacity(), capacity());
  EXPECT_EQ(sut.size(), 0u);
}

TEST_P(RingAtCapacity, TakesReturnPublishedIdsInOrder) {
  RingProducer producer = MakeProducer(dir_.path(), capacity());
  RingConsumer sut = MakeConsumer(dir_.path(), producer);
  ASSERT_EQ(Unwrap(producer.Publish(Range(100, capacity()))), capacity());

  std::vector<uint64_t> taken;
  uint64_t id = 0;
  while (sut.TryTake(&id)) taken.push_back(id);

  EXPECT_EQ(taken, Range(100, capacity()));
  EXPECT_EQ(sut.head(), capacity());
  EXPECT_EQ(sut.tail(), capacity());
}

TEST_P(RingAtCapacity, FullRingPublishesOnlyFreeSlots) {
  RingProducer sut = MakeProducer(dir_.path(), capacity());
  RingConsumer consumer = MakeConsumer(dir_.path(), sut);

  const size_t first = Unwrap(sut.Publish(Range(1, capacity() + 5)));
  const size_t when_full = Unwrap(sut.Publish(Range(capacity() + 1, 3)));
  uint64_t id = 0;
  ASSERT_TRUE(consumer.TryTake(&id));
  const size_t after_one_take = Unwrap(sut.Publish(Range(capacity() + 1, 3)));

  EXPECT_EQ(first, capacity());
  EXPECT_EQ(when_full, 0u);
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(after_one_take, 1u);
  EXPECT_EQ(sut.free_slots(), 0u);
  EXPECT_EQ(sut.last_published_id(), capacity() + 1);
}

TEST_P(RingAtCapacity, BatchTakesAtMostWhatIsPublished) {
  RingProducer producer = MakeProducer(dir_.path(), capacity());
  RingConsumer sut = MakeConsumer(dir_.path(), producer);
  ASSERT_EQ(Unwrap(producer.Publish(Range(1, capacity()))), capacity());
  std::vector<uint64_t> out(capacity() + 3);

  const size_t n = sut.TryTakeBatch(out.data(), out.size());
  const size_t again = sut.TryTakeBatch(out.data(), out.size());

  EXPECT_EQ(n, capacity());
  out.resize(n);
  EXPECT_EQ(out, Range(1, capacity()));
  EXPECT_EQ(again, 0u);
}

TEST_P(RingAtCapacity, BatchOfZeroTakesNothing) {
  RingProducer producer = MakeProducer(dir_.path(), capacity());
  RingConsumer sut = MakeConsumer(dir_.path(), producer);
  ASSERT_EQ(Unwrap(producer.Publish(Range(1, 1))), 1u);
  uint64_t out = 0;

  EXPECT_EQ(sut.TryTakeBatch(&out, 0), 0u);
  EXPECT_EQ(sut.size(), 1u);
}

TEST_P(RingAtCapacity, WrapsAroundManyLaps) {
  // Publish chunks of random size and take them with a random mix of single and batch
  // takes until the tickets have gone round the ring at least 5 times (and at least
  // 2000 IDs): every ID comes out once, in order.
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  RingProducer producer = MakeProducer(dir_.path(), capacity());
  RingConsumer sut = MakeConsumer(dir_.path(), producer);
  const uint64_t total = std::max<uint64_t>(5 * capacity(), 2000);
  uint64_t next_publish = 1;
  std::vector<uint64_t> taken;
  std::vector<uint64_t> batch(capacity());

  while (taken.size() < total) {
    const uint64_t want = std::min<uint64_t>(total + 1 - next_publish, 1 + rng() % capacity());
    if (want > 0) next_publish += Unwrap(producer.Publish(Range(next_publish, want)));
    if (rng() % 2 == 0) {
      uint64_t id = 0;
      while (sut.TryTake(&id)) taken.push_back(id);
    } else {
      size_t n = 0;
      while ((n = sut.TryTakeBatch(batch.data(), 1 + rng() % capacity())) > 0) {
        taken.insert(taken.end(), batch.begin(), batch.begin() + static_cast<long>(n));
      }
    }
  }

  ASSERT_EQ(taken, Range(1, total)) << "seed " << seed;
  EXPECT_EQ(sut.head(), total);
  EXPECT_GE(sut.head() / capacity(), 5u);
}

TEST_P(RingAtCapacity, DrainAllTakesBackEveryUnclaimedId) {
  RingProducer sut = MakeProducer(dir_.path(), capacity());
  RingConsumer consumer = MakeConsumer(dir_.path(), sut);
  ASSERT_EQ(Unwrap(sut.Publish(Range(1, capacity()))), capacity());
  uint64_t id = 0;

  const uint64_t drained = sut.DrainAll();

  EXPECT_EQ(drained, capacity());
  EXPECT_FALSE(consumer.TryTake(&id));
  EXPECT_EQ(sut.head(), sut.tail());
  EXPECT_EQ(sut.header().drained_total.load(), capacity());
  EXPECT_EQ(sut.DrainAll(), 0u);
}

TEST_P(RingAtCapacity, PublishContinuesAboveDrainedIds) {
  RingProducer sut = MakeProducer(dir_.path(), capacity());
  RingConsumer consumer = MakeConsumer(dir_.path(), sut);
  ASSERT_EQ(Unwrap(sut.Publish(Range(1, capacity()))), capacity());
  sut.DrainAll();

  const auto refused = sut.Publish(Range(capacity(), 1));
  const auto accepted = sut.Publish(Range(capacity() + 1, 1));
  uint64_t id = 0;

  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, SegmentError::kNotIncreasing);
  EXPECT_EQ(Unwrap(accepted), 1u);
  ASSERT_TRUE(consumer.TryTake(&id));
  EXPECT_EQ(id, capacity() + 1);
}

TEST(Ring, PublishRefusesAnIdNotAboveTheLastPublished) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  ASSERT_EQ(Unwrap(sut.Publish(Range(5, 1))), 1u);

  const auto equal = sut.Publish(Range(5, 1));
  const auto lower = sut.Publish(Range(4, 2));

  ASSERT_FALSE(equal);
  EXPECT_EQ(equal.error().code, SegmentError::kNotIncreasing);
  EXPECT_NE(equal.error().message.find("not above the last published ID 5"), std::string::npos)
      << equal.error().message;
  ASSERT_FALSE(lower);
  EXPECT_EQ(lower.error().code, SegmentError::kNotIncreasing);
  EXPECT_EQ(sut.tail(), 1u);
}

TEST(Ring, EmptyPublishPublishesNothing) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);

  EXPECT_EQ(Unwrap(sut.Publish({})), 0u);
  EXPECT_EQ(sut.tail(), 0u);
}

// What attach hands a client: each call a new descriptor (close-on-exec, so no program a
// daemon execs inherits it) of the one region, sealed at its size, paired with the ring.
TEST(Ring, ConsumerDescriptorIsANewCloseOnExecDescriptorOfTheSealedRegion) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);

  const UniqueFd first = sut.ConsumerDescriptor();
  const UniqueFd second = sut.ConsumerDescriptor();

  ASSERT_TRUE(first) << std::strerror(errno);
  ASSERT_TRUE(second) << std::strerror(errno);
  EXPECT_NE(first.get(), second.get());
  struct stat first_info {};
  struct stat second_info {};
  ASSERT_EQ(fstat(first.get(), &first_info), 0);
  ASSERT_EQ(fstat(second.get(), &second_info), 0);
  EXPECT_EQ(first_info.st_ino, second_info.st_ino) << "two regions for one segment";
  EXPECT_TRUE(S_ISREG(first_info.st_mode));
  EXPECT_EQ(static_cast<uint64_t>(first_info.st_size), kConsumerRegionSize);
  EXPECT_NE(fcntl(first.get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_TRUE(IsConsumerRegionSealed(static_cast<uint32_t>(fcntl(first.get(), F_GET_SEALS))));
  uint64_t region_segment_id = 0;
  ASSERT_EQ(pread(first.get(), &region_segment_id, sizeof region_segment_id,
                  offsetof(ConsumerRegion, segment_id)),
            static_cast<ssize_t>(sizeof region_segment_id));
  EXPECT_EQ(region_segment_id, sut.segment_id());
  EXPECT_EQ(sut.header().segment_id.load(), sut.segment_id());
  EXPECT_FALSE(std::filesystem::exists(dir.path() / kLegacyConsumerFileName))
      << "the region is never a file in the runtime directory";
}

// Open maps the region and keeps no descriptor of it, also when it refuses the segment: a
// client that execs passes nothing on.
TEST(Ring, OpenClosesTheRegionDescriptorItIsGiven) {
  TempDir dir;
  TempDir empty_dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  const int fd = producer.ConsumerDescriptor().release();
  const int refused_fd = producer.ConsumerDescriptor().release();
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_GE(refused_fd, 0) << std::strerror(errno);

  auto sut = RingConsumer::Open(dir.path(), UniqueFd(fd));
  auto refused = RingConsumer::Open(empty_dir.path(), UniqueFd(refused_fd));

  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_TRUE(sut->has_region());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, SegmentError::kNotFound);
  for (const int closed : {fd, refused_fd}) {
    errno = 0;
    EXPECT_EQ(fcntl(closed, F_GETFD), -1) << "descriptor " << closed << " is still open";
    EXPECT_EQ(errno, EBADF);
  }
}

// Every descriptor is the same memory: two clients attached separately share one head, so
// a ticket goes to one of them only.
TEST(Ring, ConsumersOfSeparateDescriptorsTakeFromOneHead) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  RingConsumer first = MakeConsumer(dir.path(), producer);
  RingConsumer second = MakeConsumer(dir.path(), producer);
  ASSERT_EQ(Unwrap(producer.Publish(Range(1, 3))), 3u);
  uint64_t a = 0;
  uint64_t b = 0;
  uint64_t c = 0;

  ASSERT_TRUE(first.TryTake(&a));
  ASSERT_TRUE(second.TryTake(&b));
  ASSERT_TRUE(first.TryTake(&c));

  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(c, 3u);
  EXPECT_EQ(second.head(), 3u);
  EXPECT_EQ(producer.head(), 3u);
  EXPECT_FALSE(second.TryTake(&b));
}

TEST(Ring, DrainOlderThanDrainsOnlyTheStalePrefix) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  const std::vector<uint64_t> ids = {
      IdLayout().EncodeUnchecked(10, testing::kTestMachine, 0),
      IdLayout().EncodeUnchecked(11, testing::kTestMachine, 0),
      IdLayout().EncodeUnchecked(20, testing::kTestMachine, 0),
      IdLayout().EncodeUnchecked(21, testing::kTestMachine, 0),
  };
  ASSERT_EQ(Unwrap(sut.Publish(ids)), 4u);

  const uint64_t none = sut.DrainOlderThan(10);
  const uint64_t drained = sut.DrainOlderThan(20);
  uint64_t id = 0;

  EXPECT_EQ(none, 0u);
  EXPECT_EQ(drained, 2u);
  ASSERT_TRUE(consumer.TryTake(&id));
  EXPECT_EQ(id, ids[2]);
  EXPECT_EQ(sut.DrainOlderThan(1000), 1u);
  EXPECT_EQ(sut.DrainOlderThan(1000), 0u);
}

// Overwrites `size` bytes of the ring file in `dir` at `offset` (what another boot, or
// an older daemon, left there).
void PatchRingFile(const std::filesystem::path& dir, off_t offset, const void* bytes, size_t size) {
  const std::string path = (dir / kSegmentFileName).string();
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(pwrite(fd, bytes, size, offset), static_cast<ssize_t>(size));
  close(fd);
}

// The same for the consumer region of `producer`'s segment, through a descriptor of it
// (what any client that attached may do: the region is writable, only its size is sealed).
void PatchRegion(const RingProducer& producer, off_t offset, const void* bytes, size_t size) {
  const UniqueFd region = producer.ConsumerDescriptor();
  ASSERT_TRUE(region) << std::strerror(errno);
  ASSERT_EQ(pwrite(region.get(), bytes, size, offset), static_cast<ssize_t>(size));
}

TEST(Ring, ARestartContinuesAboveTheOldSegmentAndItsClientsMoveToTheNewOne) {
  TempDir dir;
  uint64_t first_incarnation = 0;
  uint64_t first_segment_id = 0;
  std::optional<RingConsumer> consumer;
  uint64_t id = 0;
  {
    RingProducer first = MakeProducer(dir.path(), 8);
    ASSERT_EQ(Unwrap(first.Publish(Range(1, 5))), 5u);
    first.SetState(DaemonState::kServing);
    first_incarnation = first.incarnation();
    first_segment_id = first.segment_id();
    consumer.emplace(MakeConsumer(dir.path(), first));
    ASSERT_TRUE(consumer->TryTake(&id));
    // A client wrote into the consumer region: nothing of it reaches the new start (the
    // restart never reads the region, which ended with the daemon that held it).
    const uint64_t forged_head = 3;
    PatchRegion(first, offsetof(ConsumerRegion, head), &forged_head, sizeof forged_head);
  }

  RingProducer sut = MakeProducer(dir.path(), 8);

  EXPECT_TRUE(sut.continued());
  EXPECT_EQ(first_incarnation, 1u);
  EXPECT_EQ(sut.incarnation(), 2u);
  EXPECT_NE(sut.segment_id(), first_segment_id) << "the segment was reopened";
  EXPECT_EQ(sut.head(), 0u);
  EXPECT_EQ(sut.tail(), 0u);
  EXPECT_EQ(sut.last_published_id(), 5u);
  EXPECT_EQ(sut.Publish(Range(5, 1)).error().code, SegmentError::kNotIncreasing);
  EXPECT_EQ(sut.state(), DaemonState::kStarting);
  EXPECT_EQ(sut.header().pid.load(), static_cast<uint64_t>(getpid()));
  // The consumer attached before the restart finds its segment empty and stopped, and a
  // new one, with a region of its own, at the path.
  EXPECT_FALSE(consumer->TryTake(&id));
  EXPECT_EQ(consumer->CheckProducer(1h, Clock::Real()).health, ProducerHealth::kStopped);
  EXPECT_EQ(consumer->segment_id(), first_segment_id);
  RingConsumer reattached = MakeConsumer(dir.path(), sut);
  EXPECT_NE(reattached.inode(), consumer->inode());
  EXPECT_EQ(reattached.segment_id(), sut.segment_id());
  EXPECT_EQ(reattached.head(), 0u) << "the new region starts from zero, not from the old head";
  EXPECT_EQ(reattached.CheckProducer(1h, Clock::Real()).health, ProducerHealth::kStarting);
}

// The restart cannot reach the old region to take its tickets back, so it retracts the
// old ring's tail: a client still mapping the old pair finds it empty and stopped, and
// takes no old ID after a client of the new segment took a new one (real-time order
// across the restart); the old untaken IDs are a gap below the new ones.
TEST(Ring, ARestartLeavesTheOldSegmentsUntakenIdsAsAGapBelowTheNewOnes) {
  TempDir dir;
  std::optional<RingConsumer> old_consumer;
  {
    RingProducer first = MakeProducer(dir.path(), 8);
    ASSERT_EQ(Unwrap(first.Publish(Range(1, 5))), 5u);
    first.SetState(DaemonState::kServing);
    old_consumer.emplace(MakeConsumer(dir.path(), first));
  }
  uint64_t id = 0;
  ASSERT_TRUE(old_consumer->TryTake(&id));
  ASSERT_EQ(id, 1u);

  RingProducer sut = MakeProducer(dir.path(), 8);
  const auto refused = sut.Publish(Range(5, 1));
  ASSERT_EQ(Unwrap(sut.Publish(Range(6, 2))), 2u);
  RingConsumer reattached = MakeConsumer(dir.path(), sut);
  uint64_t first_new = 0;
  ASSERT_TRUE(reattached.TryTake(&first_new));
  // After a take of the new segment: every way a client of the old pair could take.
  uint64_t batch[8];
  TakeResult batch_result = TakeResult::kTaken;
  const bool old_took = old_consumer->TryTake(&id);
  const size_t old_batch = old_consumer->TryTakeBatch(batch, 8);
  const TakeResult old_fresh = old_consumer->TryTakeFresh(&id);
  const size_t old_fresh_batch = old_consumer->TryTakeBatchFresh(batch, 8, &batch_result);
  uint64_t second_new = 0;
  ASSERT_TRUE(reattached.TryTake(&second_new));

  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, SegmentError::kNotIncreasing);
  EXPECT_EQ(first_new, 6u);
  EXPECT_EQ(second_new, 7u);
  EXPECT_FALSE(old_took) << "took " << id << " of the old ring after 6 of the new one";
  EXPECT_EQ(old_batch, 0u);
  EXPECT_EQ(old_fresh, TakeResult::kEmpty);
  EXPECT_EQ(old_fresh_batch, 0u);
  EXPECT_EQ(old_consumer->size(), 0u);
  EXPECT_EQ(old_consumer->CheckProducer(1h, Clock::Real()).health, ProducerHealth::kStopped);
  EXPECT_EQ(old_consumer->CheckProducer(1h, Clock::Real()).reason, StateReason::kShutdown);
  EXPECT_NE(old_consumer->inode(), reattached.inode());
}

TEST(Ring, LastPublishedIdSurvivesARestartAfterEveryIdWasTaken) {
  TempDir dir;
  {
    RingProducer first = MakeProducer(dir.path(), 2);
    RingConsumer consumer = MakeConsumer(dir.path(), first);
    ASSERT_EQ(Unwrap(first.Publish(Range(41, 2))), 2u);
    uint64_t out[2];
    ASSERT_EQ(consumer.TryTakeBatch(out, 2), 2u);
  }

  RingProducer sut = MakeProducer(dir.path(), 2);
  const auto refused = sut.Publish(Range(42, 1));

  EXPECT_EQ(sut.last_published_id(), 42u);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, SegmentError::kNotIncreasing);
}

TEST(Ring, NewCapacityStopsTheOldSegmentAndCarriesItsLastId) {
  TempDir dir;
  RingProducer old_producer = MakeProducer(dir.path(), 8);
  ASSERT_EQ(Unwrap(old_producer.Publish(Range(1, 3))), 3u);
  old_producer.SetState(DaemonState::kServing);
  RingConsumer old_consumer = MakeConsumer(dir.path(), old_producer);

  RingProducer sut = MakeProducer(dir.path(), 16);
  RingConsumer new_consumer = MakeConsumer(dir.path(), sut);
  uint64_t id = 0;

  // Same machine, epoch and boot: continued, whatever the capacity.
  EXPECT_TRUE(sut.continued());
  EXPECT_EQ(sut.capacity(), 16u);
  EXPECT_EQ(sut.last_published_id(), 3u);
  EXPECT_EQ(sut.incarnation(), 2u);
  EXPECT_EQ(sut.Publish(Range(3, 1)).error().code, SegmentError::kNotIncreasing);
  // The old ring was emptied for its clients and marked stopped, so they fail over.
  EXPECT_FALSE(old_consumer.TryTake(&id));
  EXPECT_EQ(old_consumer.CheckProducer(1h, Clock::Real()).health, ProducerHealth::kStopped);
  EXPECT_EQ(old_consumer.CheckProducer(1h, Clock::Real()).reason, StateReason::kShutdown);
  EXPECT_NE(old_consumer.inode(), new_consumer.inode());
  EXPECT_NE(old_consumer.segment_id(), new_consumer.segment_id());
  EXPECT_EQ(new_consumer.capacity(), 16u);
}

// The header's boot id (bytes 272-287, shm/LAYOUT.md) as another boot of the host wrote it.
constexpr uint64_t kForeignBootId[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};
constexpr off_t kBootIdOffset = 272;

TEST(Ring, ASegmentLeftByAnotherBootIsNotContinuedButItsLastIdIsABound) {
  TempDir dir;
  // Attached before the boot id is rewritten (a client of this boot would refuse it after).
  std::optional<RingConsumer> old_consumer;
  {
    RingProducer before_reboot = MakeProducer(dir.path(), 8);
    ASSERT_EQ(Unwrap(before_reboot.Publish(Range(1, 5))), 5u);
    before_reboot.SetState(DaemonState::kServing);
    old_consumer.emplace(MakeConsumer(dir.path(), before_reboot));
  }
  PatchRingFile(dir.path(), kBootIdOffset, kForeignBootId, sizeof kForeignBootId);

  RingProducer sut = MakeProducer(dir.path(), 8);
  uint64_t id = 0;

  EXPECT_FALSE(sut.continued()) << "a ring left by another boot was trusted";
  EXPECT_EQ(sut.incarnation(), 1u);
  EXPECT_EQ(sut.tail(), 0u);
  // Emptied and stopped, so nothing of it is handed out and its clients move on.
  EXPECT_FALSE(old_consumer->TryTake(&id));
  EXPECT_EQ(old_consumer->CheckProducer(1h, Clock::Real()).health, ProducerHealth::kStopped);
  EXPECT_NE(old_consumer->inode(), MakeConsumer(dir.path(), sut).inode());
  EXPECT_EQ(sut.Publish(Range(5, 1)).error().code, SegmentError::kNotIncreasing)
      << "the old segment's last ID is not carried over as a bound";
}

TEST(Ring, ASegmentThatRecordsNoBootIdIsNotContinued) {
  TempDir dir;
  {
    RingProducer older_daemon = MakeProducer(dir.path(), 8);
    ASSERT_EQ(Unwrap(older_daemon.Publish(Range(1, 5))), 5u);
  }
  const uint64_t unknown[2] = {0, 0};
  PatchRingFile(dir.path(), kBootIdOffset, unknown, sizeof unknown);

  RingProducer sut = MakeProducer(dir.path(), 8);

  EXPECT_FALSE(sut.continued()) << "a ring of an unknown boot was trusted";
  EXPECT_EQ(sut.last_published_id(), 5u);
}

TEST(Ring, ARestartContinuesASegmentOfThisBoot) {
  TempDir dir;
  { RingProducer first = MakeProducer(dir.path(), 8); }

  RingProducer sut = MakeProducer(dir.path(), 8);

  EXPECT_TRUE(sut.continued());
  EXPECT_TRUE(sut.replaced_because().empty()) << sut.replaced_because();
}

TEST(Ring, AProducerContinuesOnlyASegmentWrittenInItsOwnBoot) {
  TempDir dir;
  const BootId first_boot{0x1111, 0x2222};
  const BootId second_boot{0x3333, 0x4444};
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.boot_id = first_boot;
  {
    RingProducer before_reboot = MakeProducer(options);
    ASSERT_EQ(Unwrap(before_reboot.Publish(Range(10, 3))), 3u);
  }
  RingProducer same_boot = MakeProducer(options);
  const bool continued_in_same_boot = same_boot.continued();
  options.boot_id = second_boot;

  RingProducer sut = MakeProducer(options);

  EXPECT_TRUE(continued_in_same_boot);
  EXPECT_FALSE(sut.continued());
  EXPECT_NE(sut.replaced_because().find("another boot of this host"), std::string::npos)
      << sut.replaced_because();
  EXPECT_EQ(sut.last_published_id(), 12u);
  EXPECT_EQ(sut.header().boot_id_high.load(), second_boot.high);
  EXPECT_EQ(sut.header().boot_id_low.load(), second_boot.low);
}

TEST(Ring, AProducerThatCannotReadItsBootIdContinuesNothing) {
  TempDir dir;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.boot_id = BootId{};
  { RingProducer first = MakeProducer(options); }

  RingProducer sut = MakeProducer(options);

  EXPECT_FALSE(sut.continued());
  EXPECT_NE(sut.replaced_because().find("cannot be read"), std::string::npos)
      << sut.replaced_because();
}

TEST(Ring, CheckProducerReportsAHeartbeatFromTheFutureAsNotHeartbeating) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  sut.SetState(DaemonState::kServing);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  // CLOCK_MONOTONIC of a previous boot that ran for a day longer than this one so far.
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t beat = static_cast<uint64_t>(now.tv_sec + 86'400) * 1'000'000'000u;
  PatchRingFile(dir.path(), 144, &beat, sizeof beat);

  const ProducerStatus status = consumer.CheckProducer(1h, Clock::Real());

  EXPECT_EQ(status.health, ProducerHealth::kNotHeartbeating);
}

TEST(Ring, NewMachineStartsAFreshOrder) {
  TempDir dir;
  {
    RingProducer old_producer = MakeProducer(dir.path(), 8);
    ASSERT_EQ(Unwrap(old_producer.Publish(Range(1, 3))), 3u);
  }
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.machine = testing::kTestMachine + 1;

  RingProducer sut = MakeProducer(options);

  EXPECT_FALSE(sut.continued());
  EXPECT_EQ(sut.last_published_id(), 0u);
  EXPECT_EQ(sut.header().machine.load(), testing::kTestMachine + 1);
}

TEST(Ring, CreatesTheSegmentWithTheRequestedMode) {
  TempDir dir;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.mode = 0640;
  const mode_t old_umask = umask(0077);

  RingProducer sut = MakeProducer(options);
  umask(old_umask);
  struct stat info {};
  ASSERT_EQ(stat(sut.path().c_str(), &info), 0);

  EXPECT_EQ(info.st_mode & 07777, 0640u);
  EXPECT_EQ(sut.path(), dir.path() / kSegmentFileName);
}

TEST(Ring, CreateRefusesAModeOpenToOthers) {
  TempDir dir;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.mode = 0664;

  const auto sut = RingProducer::CreateOrOpen(options);

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, SegmentError::kModeTooOpen);
}

TEST(Ring, CreateRefusesACapacityNotAPowerOfTwo) {
  TempDir dir;

  const auto sut = RingProducer::CreateOrOpen(OptionsFor(dir.path(), 12));

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, SegmentError::kBadCapacity);
}

TEST(Ring, StateReasonAndHeartbeatAreVisibleToConsumers) {
  TempDir dir;
  ManualClock clock;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.clock = &clock;
  RingProducer sut = MakeProducer(options);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  const uint64_t beat_before = consumer.header().heartbeat_mono_ns.load();
  clock.Tick(2);

  sut.SetState(DaemonState::kPaused, StateReason::kClockBehind, 7);
  const ProducerStatus status = consumer.CheckProducer(1h, clock.SteadyNow());

  EXPECT_EQ(status.health, ProducerHealth::kPaused);
  EXPECT_EQ(status.reason, StateReason::kClockBehind);
  EXPECT_EQ(status.reason_detail, 7);
  EXPECT_EQ(status.pid, static_cast<uint64_t>(getpid()));
  EXPECT_EQ(consumer.header().heartbeat_mono_ns.load(), beat_before + 2'000'000)
      << "a state change beats, on the producer's clock";
  EXPECT_EQ(sut.state(), DaemonState::kPaused);
}

TEST(Ring, CheckProducerReportsEachState) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);

  EXPECT_EQ(consumer.CheckProducer(1h, Clock::Real()).health, ProducerHealth::kStarting);
  sut.SetState(DaemonState::kServing);
  EXPECT_EQ(consumer.CheckProducer(1h, Clock::Real()).health, ProducerHealth::kServing);
  sut.SetState(DaemonState::kPaused, StateReason::kClockBehind, 3);
  EXPECT_EQ(consumer.CheckProducer(1h, Clock::Real()).health, ProducerHealth::kPaused);
  sut.SetState(DaemonState::kOutOfService, StateReason::kClockStepTooLarge, 5000);
  EXPECT_EQ(consumer.CheckProducer(1h, Clock::Real()).health, ProducerHealth::kOutOfService);
  EXPECT_EQ(consumer.CheckProducer(1h, Clock::Real()).reason, StateReason::kClockStepTooLarge);
  sut.SetState(DaemonState::kStopped, StateReason::kShutdown);
  EXPECT_EQ(consumer.CheckProducer(1h, Clock::Real()).health, ProducerHealth::kStopped);
}

// A live daemon may beat between a client's read of its clock and its read of the header.
// CheckProducer with a clock reads the clock after the header, so such a beat is never
// taken for one from the future (which reads as "not heartbeating": a spurious failover).
TEST(Ring, CheckProducerReadsItsClockAfterTheHeader) {
  TempDir dir;
  ManualClock daemon_clock;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.clock = &daemon_clock;
  RingProducer sut = MakeProducer(options);
  sut.SetState(DaemonState::kServing);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  // The client's clock: the daemon's, preempted for 5 ms right after each reading, while
  // the daemon beats.
  class PreemptedAfterReading final : public Clock {
   public:
    PreemptedAfterReading(ManualClock& clock, RingProducer& daemon)
        : clock_(clock), daemon_(daemon) {}
    int64_t NowUnixMs() noexcept override { return clock_.NowUnixMs(); }
    SteadyTime SteadyNow() noexcept override {
      const SteadyTime now = clock_.SteadyNow();
      clock_.Tick(5);
      daemon_.Heartbeat();
      return now;
    }

   private:
    ManualClock& clock_;
    RingProducer& daemon_;
  };
  PreemptedAfterReading client_clock(daemon_clock, sut);

  const ProducerStatus status = consumer.CheckProducer(1h, client_clock);

  EXPECT_EQ(status.health, ProducerHealth::kServing)
      << "a beat stored after the client read its clock was taken for one from the future";
  EXPECT_FALSE(status.heartbeat_in_future);
}

TEST(Ring, CheckProducerReportsAServingDaemonThatStoppedHeartbeating) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  sut.SetState(DaemonState::kServing);
  const Clock::SteadyTime five_ms_later = BeatOf(consumer) + 5ms;

  const ProducerStatus stale = consumer.CheckProducer(1ms, five_ms_later);
  const ProducerStatus fresh = consumer.CheckProducer(1h, five_ms_later);

  EXPECT_EQ(stale.health, ProducerHealth::kNotHeartbeating);
  EXPECT_EQ(stale.heartbeat_age_ns, 5'000'000u);
  EXPECT_EQ(fresh.health, ProducerHealth::kServing);
}

// A daemon (a forked child restarting on the segment with `options`) that serves, then is
// SIGKILLed; what a consumer saw of it alive, and (judged at its last beat + 20 ms) after
// its death.
struct KilledDaemon {
  ProducerStatus alive;
  ProducerStatus dead;
  ProducerStatus dead_at_5ms_limit;  // the same judgement with a 5 ms heartbeat limit
  uint64_t child_pid = 0;
  uint32_t recorded_namespace = 0;
};
KilledDaemon ServeThenKill(const ProducerOptions& options) {
  { RingProducer creator = MakeProducer(options.runtime_dir, 8); }
  int ready[2];
  EXPECT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  EXPECT_GE(child, 0);
  if (child == 0) {
    // The child restarts on the segment as the serving daemon, says so, and waits to die.
    auto producer = RingProducer::CreateOrOpen(options);
    if (!producer) _exit(2);
    producer->SetState(DaemonState::kServing);
    const char byte = 'r';
    if (write(ready[1], &byte, 1) != 1) _exit(3);
    for (;;) pause();
  }
  close(ready[1]);
  char byte = 0;
  EXPECT_EQ(read(ready[0], &byte, 1), 1) << "the child producer did not start";
  close(ready[0]);
  // The ring file alone: what a client reads of a daemon it cannot attach to (the child
  // holds the region, and dies with it).
  RingConsumer consumer = testing::Observe(options.runtime_dir);
  KilledDaemon seen;
  seen.child_pid = static_cast<uint64_t>(child);
  seen.alive = consumer.CheckProducer(1h, Clock::Real());
  seen.recorded_namespace = consumer.header().pid_namespace.load();
  EXPECT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  // A missing pid counts once the heartbeat is 10 ms old.
  seen.dead = consumer.CheckProducer(1h, BeatOf(consumer) + 20ms);
  seen.dead_at_5ms_limit = consumer.CheckProducer(5ms, BeatOf(consumer) + 20ms);
  return seen;
}

TEST(Ring, CheckProducerReportsADaemonKilledWhileServing) {
  TempDir dir;
  const KilledDaemon sut = ServeThenKill(OptionsFor(dir.path(), 8));

  EXPECT_EQ(sut.alive.health, ProducerHealth::kServing);
  EXPECT_EQ(sut.alive.pid, sut.child_pid);
  EXPECT_EQ(sut.recorded_namespace, CurrentPidNamespace());
  EXPECT_NE(sut.recorded_namespace, 0u) << "this test host has /proc";
  EXPECT_EQ(sut.dead.health, ProducerHealth::kDead);
}

// A client in a container shares the runtime directory but not the daemon's pid
// namespace: kill(pid, 0) answers ESRCH for a live daemon there. The header's namespace
// says so, and the client judges the daemon by its heartbeat alone: a heartbeat 20 ms old
// is within the caller's limit, so the daemon still counts as serving, and past the
// limit it is not heartbeating, never "dead" on the word of an invisible pid.
TEST(Ring, CheckProducerNeverProbesThePidOfADaemonInAnotherPidNamespace) {
  TempDir dir;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.pid_namespace = CurrentPidNamespace() + 1;
  const KilledDaemon sut = ServeThenKill(options);

  EXPECT_EQ(sut.recorded_namespace, CurrentPidNamespace() + 1);
  EXPECT_EQ(sut.alive.health, ProducerHealth::kServing);
  EXPECT_EQ(sut.dead.health, ProducerHealth::kServing) << "the pid was probed";
  EXPECT_EQ(sut.dead_at_5ms_limit.health, ProducerHealth::kNotHeartbeating);
}

// A daemon older than the field records no namespace (0): its pid is probed as before.
TEST(Ring, CheckProducerProbesThePidWhenTheDaemonRecordedNoNamespace) {
  TempDir dir;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.pid_namespace = 0;
  const KilledDaemon sut = ServeThenKill(options);

  EXPECT_EQ(sut.recorded_namespace, 0u);
  EXPECT_EQ(sut.dead.health, ProducerHealth::kDead);
}

TEST(Ring, AwaitPublishWakesOnPublish) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  sut.SetState(DaemonState::kServing);
  constexpr auto kTimeout = 120s;
  std::chrono::steady_clock::duration waited{};
  uint64_t id = 0;
  bool took = false;

  const uint32_t refill_before = sut.refill_request();
  std::thread waiter([&] {
    const auto start = std::chrono::steady_clock::now();
    const uint32_t seen = consumer.wake_seq();
    if (!consumer.TryTake(&id)) consumer.AwaitPublish(seen, kTimeout);
    waited = std::chrono::steady_clock::now() - start;
    took = id != 0 || consumer.TryTake(&id);
  });
  // The waiter found the ring empty and is in AwaitPublish: it bumps the refill word just
  // before it sleeps on wake_seq (a publish between the two changes wake_seq, so its
  // sleep returns at once). Either way the wake path, not a lucky TryTake, takes the ID.
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (sut.refill_request() == refill_before && std::chrono::steady_clock::now() < deadline) {
    sut.WaitForRefillRequest(refill_before, 100ms);
  }
  EXPECT_NE(sut.refill_request(), refill_before) << "the waiter never reached AwaitPublish";
  ASSERT_EQ(Unwrap(sut.Publish(Range(9, 1))), 1u);
  waiter.join();

  EXPECT_LT(waited, kTimeout) << "woken by the publish, not by the timeout";
  EXPECT_TRUE(took);
  EXPECT_EQ(id, 9u);
}

TEST(Ring, AwaitPublishWakesOnStateChange) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  sut.SetState(DaemonState::kServing);
  constexpr auto kTimeout = 30s;
  std::chrono::steady_clock::duration waited{};
  ProducerHealth health = ProducerHealth::kServing;
  std::atomic<pid_t> waiter_tid{0};

  // `seen` before the waiter starts: a waiter that came late returns at once instead of
  // sleeping through the change it missed.
  const uint32_t seen = consumer.wake_seq();
  std::thread waiter([&] {
    waiter_tid = gettid();
    const auto start = std::chrono::steady_clock::now();
    consumer.AwaitPublish(seen, kTimeout);
    waited = std::chrono::steady_clock::now() - start;
    health = consumer.CheckProducer(1h, Clock::Real()).health;
  });
  // The change comes while the waiter sleeps in the kernel, so only the wake can end it.
  const ::testing::AssertionResult asleep = WaitUntilInFutexWait(waiter_tid, "the waiter");
  sut.SetState(DaemonState::kStopped, StateReason::kShutdown);
  waiter.join();

  EXPECT_TRUE(asleep) << "the waiter never slept in AwaitPublish";
  EXPECT_LT(waited, kTimeout) << "woken by the state change, not by the timeout";
  EXPECT_EQ(health, ProducerHealth::kStopped);
}

TEST(Ring, AwaitPublishTimesOutAndAsksForARefill) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  RingConsumer sut = MakeConsumer(dir.path(), producer);
  const uint32_t refill_before = producer.refill_request();
  uint64_t id = 0;

  sut.AwaitPublish(sut.wake_seq(), 10ms);

  EXPECT_FALSE(sut.TryTake(&id));
  EXPECT_NE(producer.refill_request(), refill_before);
}

TEST(Ring, AwaitPublishReturnsAtOnceWhenTheRingHasIds) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  RingConsumer sut = MakeConsumer(dir.path(), producer);
  const uint32_t stale_seen = sut.wake_seq();
  ASSERT_EQ(Unwrap(producer.Publish(Range(1, 1))), 1u);
  const uint32_t refill_before = producer.refill_request();

  sut.AwaitPublish(stale_seen, 120s);  // would hang the test if it slept

  EXPECT_EQ(producer.refill_request(), refill_before);
  EXPECT_EQ(sut.size(), 1u);
}

TEST(Ring, WaitForRefillRequestWakesOnAConsumersRequest) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  constexpr auto kTimeout = 30s;
  const uint32_t seen = sut.refill_request();
  std::chrono::steady_clock::duration waited{};
  std::atomic<pid_t> daemon_tid{0};

  std::thread daemon([&] {
    daemon_tid = gettid();
    const auto start = std::chrono::steady_clock::now();
    sut.WaitForRefillRequest(seen, kTimeout);
    waited = std::chrono::steady_clock::now() - start;
  });
  // The request comes while the daemon's thread sleeps in the kernel: a request made
  // before it slept would end its wait without any wake.
  const ::testing::AssertionResult asleep = WaitUntilInFutexWait(daemon_tid, "the daemon's thread");
  consumer.AwaitPublish(consumer.wake_seq(), 1ms);
  daemon.join();

  EXPECT_TRUE(asleep) << "the daemon's thread never slept in WaitForRefillRequest";
  EXPECT_LT(waited, kTimeout) << "woken by the request, not by the timeout";
  EXPECT_NE(sut.refill_request(), seen);
}

TEST(Ring, AwaitPublishWithAWantAddsItToTheRefillHintBeforeTheRequest) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  RingConsumer sut = MakeConsumer(dir.path(), producer);
  const uint32_t refill_before = producer.refill_request();

  sut.AwaitPublish(sut.wake_seq(), 1ms, false, 1000);

  EXPECT_NE(producer.refill_request(), refill_before);
  EXPECT_EQ(sut.refill_hint(), 1000u);
  EXPECT_EQ(producer.TakeRefillHint(), 1000u);
  EXPECT_EQ(sut.refill_hint(), 0u) << "taking the hint resets it";
  EXPECT_EQ(producer.TakeRefillHint(), 0u);
}

TEST(Ring, RefillHintsOfSeveralTakersAddUpAndSaturate) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  RingConsumer first = MakeConsumer(dir.path(), producer);
  RingConsumer second = MakeConsumer(dir.path(), producer);

  first.AwaitPublish(first.wake_seq(), 1ms, false, 300);
  second.AwaitPublish(second.wake_seq(), 1ms, false, 200);
  EXPECT_EQ(producer.TakeRefillHint(), 500u);

  first.AwaitPublish(first.wake_seq(), 1ms, false, uint64_t{1} << 40);
  second.AwaitPublish(second.wake_seq(), 1ms, false, 7);
  EXPECT_EQ(producer.TakeRefillHint(), UINT32_MAX) << "a sum past 32 bits must not wrap";
}

// A single take (want 0 or 1) and a caller that predates the hint leave the word alone:
// the daemon then fills to its own target, as before the hint existed.
TEST(Ring, ASingleTakeLeavesTheRefillHintZero) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  RingConsumer sut = MakeConsumer(dir.path(), producer);
  const uint32_t refill_before = producer.refill_request();

  sut.AwaitPublish(sut.wake_seq(), 1ms);
  sut.AwaitPublish(sut.wake_seq(), 1ms, false, 1);

  EXPECT_NE(producer.refill_request(), refill_before);
  EXPECT_EQ(producer.TakeRefillHint(), 0u);
}

TEST(Ring, AwaitPublishOnANonEmptyRingSendsNoHint) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  RingConsumer sut = MakeConsumer(dir.path(), producer);
  ASSERT_EQ(Unwrap(producer.Publish(Range(1, 1))), 1u);

  sut.AwaitPublish(sut.wake_seq(), 120s, false, 4096);  // would hang the test if it slept

  EXPECT_EQ(producer.TakeRefillHint(), 0u);
}

// The hint sits in bytes every segment of format version 3 held zero (reserved0 before),
// at the same offset of the region in format 4: a fresh region reads as "no hint", and a
// producer that never reads the word leaves it as clients wrote it, harmlessly.
TEST(Ring, TheRefillHintIsTheOnceReservedWordBesideTheRequest) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  const UniqueFd region = producer.ConsumerDescriptor();
  ASSERT_TRUE(region) << std::strerror(errno);
  uint32_t word = 0;
  ASSERT_EQ(pread(region.get(), &word, sizeof word, 68), static_cast<ssize_t>(sizeof word));
  EXPECT_EQ(word, 0u) << "a fresh segment holds no hint";
  word = 123;
  ASSERT_EQ(pwrite(region.get(), &word, sizeof word, 68), static_cast<ssize_t>(sizeof word));

  EXPECT_EQ(producer.TakeRefillHint(), 123u);
}

TEST(Ring, WaitForRefillRequestTimesOut) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  const uint32_t seen = sut.refill_request();

  sut.WaitForRefillRequest(seen, 5ms);

  EXPECT_EQ(sut.refill_request(), seen);
}

TEST(Ring, ServiceSlotIsClaimedCountedRetiredAndFreed) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  auto snapshot = [&] {
    std::vector<ServiceCount> counts;
    sut.ForEachService([&](const ServiceCount& count) { counts.push_back(count); });
    return counts;
  };

  ServiceSlot* slot = consumer.ClaimServiceSlot("orders");
  ASSERT_NE(slot, nullptr);
  slot->taken.fetch_add(5);
  const auto active = snapshot();
  consumer.ReleaseServiceSlot(slot);
  const auto retired = snapshot();
  const bool freed_by_stranger = sut.FreeServiceSlot(retired.at(0).slot, retired.at(0).pid + 1);
  const auto still_retired = snapshot();
  const bool freed = sut.FreeServiceSlot(retired.at(0).slot, retired.at(0).pid);
  const auto after_free = snapshot();

  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].name, "orders");
  EXPECT_EQ(active[0].pid, static_cast<uint64_t>(getpid()));
  EXPECT_EQ(active[0].taken, 5u);
  EXPECT_FALSE(active[0].retired);
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_TRUE(retired[0].retired);
  EXPECT_EQ(retired[0].taken, 5u);
  EXPECT_FALSE(freed_by_stranger);
  EXPECT_EQ(still_retired.size(), 1u);
  EXPECT_TRUE(freed);
  EXPECT_TRUE(after_free.empty());
}

TEST(Ring, ServiceSlotsKeepLongNamesAndRunOut) {
  TempDir dir;
  RingProducer sut = MakeProducer(dir.path(), 8);
  RingConsumer consumer = MakeConsumer(dir.path(), sut);
  const std::string longest(kServiceNameMax, 'x');
  std::vector<ServiceSlot*> slots;
  for (size_t i = 0; i < kServiceSlotCount; ++i) {
    slots.push_back(consumer.ClaimServiceSlot(i == 0 ? longest : "svc" + std::to_string(i)));
  }

  ServiceSlot* one_too_many = consumer.ClaimServiceSlot("late");
  std::vector<std::string> names;
  sut.ForEachService([&](const ServiceCount& count) { names.push_back(count.name); });

  EXPECT_EQ(std::count(slots.begin(), slots.end(), nullptr), 0);
  EXPECT_EQ(one_too_many, nullptr);
  ASSERT_EQ(names.size(), kServiceSlotCount);
  EXPECT_EQ(names[0], longest);
  EXPECT_EQ(names[1], "svc1");
}

// In a layout whose time bits start elsewhere (42/15/6: the millisecond is id >> 21, not
// >> 22), the header records the bits, and the take's freshness rule and the producer's
// drain read the millisecond by them: with the default's shift every ID would look half
// its age and be refused as stale (or drained too early).
TEST(Freshness, TakesAndDrainsJudgeTheMillisecondByTheHeadersLayout) {
  TempDir dir;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  options.id_bits = {42, 15, 6};
  RingProducer producer = MakeProducer(options);
  const IdLayout layout = IdLayout::Create(options.epoch_unix_ms, options.id_bits).value();
  constexpr int64_t kIdMs = 1'000'000;  // since the epoch
  std::vector<uint64_t> ids;
  for (uint32_t seq = 0; seq < 4; ++seq) ids.push_back(layout.EncodeUnchecked(kIdMs, 20000, seq));
  ASSERT_EQ(Unwrap(producer.Publish(ids)), 4u);
  ManualClock clock(options.epoch_unix_ms + kIdMs);
  RingConsumer sut = MakeConsumer(dir.path(), producer, clock);
  uint64_t id = 0;

  const uint32_t recorded = producer.header().id_bits.load();
  const TakeResult at_their_ms = sut.TryTakeFresh(&id);
  const uint64_t not_yet = producer.DrainOlderThan(kIdMs);
  clock.Tick(51);
  const TakeResult past_the_bound = sut.TryTakeFresh(&id);
  const uint64_t drained = producer.DrainOlderThan(kIdMs + 1);

  EXPECT_EQ(recorded, PackIdBits({42, 15, 6}));
  EXPECT_EQ(sut.layout(), layout);
  EXPECT_EQ(at_their_ms, TakeResult::kTaken);
  EXPECT_EQ(layout.Decode(id).value(), (DecodedId{layout.epoch_unix_ms() + kIdMs, 20000, 0}));
  EXPECT_EQ(not_yet, 0u);
  EXPECT_EQ(past_the_bound, TakeResult::kStale);
  EXPECT_EQ(drained, 3u);
}

// A segment of another layout is not continued, nor is its last ID carried: it numbers
// other fields with the same bits.
TEST(Ring, ASegmentOfAnotherLayoutIsReplacedNotContinued) {
  TempDir dir;
  ProducerOptions options = OptionsFor(dir.path(), 8);
  {
    RingProducer first = MakeProducer(options);
    ASSERT_EQ(Unwrap(first.Publish(Range(100, 4))), 4u);
  }
  options.id_bits = {41, 16, 6};

  RingProducer sut = MakeProducer(options);

  EXPECT_FALSE(sut.continued());
  EXPECT_EQ(sut.last_published_id(), 0u);
  EXPECT_NE(sut.replaced_because().find("ID layout differs"), std::string::npos)
      << sut.replaced_because();
  EXPECT_EQ(sut.header().id_bits.load(), PackIdBits({41, 16, 6}));
}

}  // namespace
}  // namespace snowflake::shm

namespace snowflake::shm {
namespace {

// The freshness rule a take applies (IsFresh, segment_layout.h), as a table: the ID's
// millisecond, the coarse clock's reading, the bound, the clock's lag.
struct FreshCase {
  int64_t id_ms;
  int64_t now_ms;
  int64_t bound_ms;
  int64_t lag_ms;
  bool fresh;
};

TEST(Freshness, IsFreshFollowsTheBoundAndTheCoarseClocksLag) {
  const FreshCase cases[] = {
      {1000, 1000, 50, 4, true},    // the current millisecond
      {954, 1000, 50, 4, true},     // 46 ms behind: with up to 4 ms of lag, at most 50 old
      {953, 1000, 50, 4, false},    // could be 51 ms old by the true clock
      {700, 1000, 50, 4, false},    // a hung daemon's leftover, 300 ms old
      {1050, 1000, 50, 4, true},    // ahead by the bound (the coarse clock lags)
      {1051, 1000, 50, 4, false},   // in the clock's future beyond the bound (a step back)
      {1300, 1000, 50, 4, false},
      {1000, 1000, 4, 10, true},    // a bound below the lag still takes the current ms
      {999, 1000, 4, 10, false},
      {0, 1'000'000, 0, 4, true},   // bound 0: a producer that set none (tests)
      {1000, 1000, 10'050, 4, true},
      {-9'000, 1000, 10'050, 4, true},
  };
  for (const FreshCase& c : cases) {
    EXPECT_EQ(IsFresh(c.id_ms, c.now_ms, c.bound_ms, c.lag_ms), c.fresh)
        << "id " << c.id_ms << " now " << c.now_ms << " bound " << c.bound_ms << " lag "
        << c.lag_ms;
  }
}

// A fresh take judges the front on the consumer's clock (ConsumerOptions::clock), not on
// the real one: IDs of a millisecond the real clock is far from are taken while the
// consumer's clock says they are within the bound (50 ms: max_age_ms 0 + liveness_ms 50,
// and a manual clock has no coarse lag), and refused once it says they are older.
TEST(Freshness, ATakeJudgesTheFrontOnTheConsumersClock) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  constexpr int64_t kIdMs = 1'000'000;  // since the epoch
  std::vector<uint64_t> ids;
  for (uint32_t seq = 0; seq < 4; ++seq) {
    ids.push_back(IdLayout().EncodeUnchecked(kIdMs, testing::kTestMachine, seq));
  }
  ASSERT_EQ(Unwrap(producer.Publish(ids)), 4u);
  ManualClock clock(kDefaultEpochUnixMs + kIdMs);
  RingConsumer sut = MakeConsumer(dir.path(), producer, clock);
  uint64_t id = 0;
  uint64_t batch[4] = {};
  TakeResult batch_result = TakeResult::kTaken;

  const TakeResult at_their_ms = sut.TryTakeFresh(&id);
  clock.Tick(50);
  const TakeResult at_the_bound = sut.TryTakeFresh(&id);
  clock.Tick(1);
  const TakeResult past_the_bound = sut.TryTakeFresh(&id);
  const size_t batch_taken = sut.TryTakeBatchFresh(batch, 4, &batch_result);

  EXPECT_EQ(at_their_ms, TakeResult::kTaken);
  EXPECT_EQ(at_the_bound, TakeResult::kTaken);
  EXPECT_EQ(past_the_bound, TakeResult::kStale);
  EXPECT_EQ(batch_taken, 0u);
  EXPECT_EQ(batch_result, TakeResult::kStale);
  EXPECT_EQ(producer.size(), 2u) << "a refused take took something";
}

}  // namespace
}  // namespace snowflake::shm
