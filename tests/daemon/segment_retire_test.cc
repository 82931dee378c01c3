// Retiring a segment (finding 5): clients that attached before it was retired must not
// keep taking from the orphan once the daemon unlinks it or a new daemon replaces it.
//
// Property: after Retire() of a segment that fails validation, and after a restart that
// replaces a segment whose daemon is gone, a client still mapping the old segment finds it
// stopped and takes nothing from it, and a restart serves strictly above every ID the old
// ring held. Neither holds the old consumer region (it ended with the daemon that made it,
// and format 4 never reads an old one), so neither takes the ring back by CAS on head:
// each retracts the old ring's tail below every head instead, and the IDs left in it are
// a gap.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "snowflake/id_layout.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "temp_dir.h"

namespace snowflake::shm {
namespace {

ProducerOptions OptionsFor(const std::filesystem::path& dir) {
  return ProducerOptions{.runtime_dir = dir,
                         .capacity = 64,
                         .epoch_unix_ms = kDefaultEpochUnixMs,
                         .machine = 1,
                         .mode = 0600,
                         .group = std::nullopt};
}

// Publishes 32 IDs of the epoch's second second and serves them.
void PublishAndServe(RingProducer& producer) {
  std::vector<uint64_t> ids;
  for (uint64_t i = 1; i <= 32; ++i) ids.push_back(IdLayout().EncodeUnchecked(1000, 1, i));
  ASSERT_EQ(producer.Publish(ids).value(), 32u);
  producer.SetState(DaemonState::kServing);
}

TEST(SegmentRetire, ACorruptSegmentIsStoppedAndEmptiedBeforeItIsUnlinked) {
  // Arrange: a segment with 31 untaken IDs, a client attached to it, and a format-3
  // consumer file left beside it.
  testing::TempDir dir("retire");
  auto producer = RingProducer::CreateOrOpen(OptionsFor(dir.path()));
  ASSERT_TRUE(producer) << producer.error().message;
  PublishAndServe(*producer);
  auto client = RingConsumer::Open(dir.path(), producer->ConsumerDescriptor());
  ASSERT_TRUE(client) << client.error().message;
  uint64_t id = 0;
  ASSERT_TRUE(client->TryTake(&id));
  std::ofstream(dir / std::string(kLegacyConsumerFileName)) << "format 3";
  // Something scribbles over the magic: the next daemon cannot validate the segment.
  {
    const int fd = open((dir / std::string(kSegmentFileName)).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const uint64_t garbage = 0xdeadbeef;
    ASSERT_EQ(pwrite(fd, &garbage, sizeof garbage, 0), static_cast<ssize_t>(sizeof garbage));
    close(fd);
  }
  ASSERT_FALSE(RingConsumer::Observe(dir.path()).has_value());

  // Act
  RingProducer::Retire(dir.path());

  // Assert
  EXPECT_FALSE(std::filesystem::exists(dir / std::string(kSegmentFileName)));
  EXPECT_FALSE(std::filesystem::exists(dir / std::string(kLegacyConsumerFileName)));
  EXPECT_EQ(client->header().state.load(), static_cast<uint32_t>(DaemonState::kStopped));
  EXPECT_FALSE(client->TryTake(&id)) << "a client took " << id << " from the retired orphan";
}

TEST(SegmentRetire, ARestartEmptiesTheOldRingForItsClientsAndServesAboveEveryIdInIt) {
  // Arrange: a daemon's segment with 31 untaken IDs and a client attached to it. The
  // daemon is then as good as dead: it publishes nothing more.
  testing::TempDir dir("restart");
  auto old_daemon = RingProducer::CreateOrOpen(OptionsFor(dir.path()));
  ASSERT_TRUE(old_daemon) << old_daemon.error().message;
  PublishAndServe(*old_daemon);
  auto client = RingConsumer::Open(dir.path(), old_daemon->ConsumerDescriptor());
  ASSERT_TRUE(client) << client.error().message;
  uint64_t id = 0;
  ASSERT_TRUE(client->TryTake(&id));
  const uint64_t old_last = old_daemon->last_published_id();
  const uint64_t old_segment = old_daemon->segment_id();

  // Act: the next daemon starts on the same directory.
  auto new_daemon = RingProducer::CreateOrOpen(OptionsFor(dir.path()));

  // Assert
  ASSERT_TRUE(new_daemon) << new_daemon.error().message;
  EXPECT_NE(new_daemon->segment_id(), old_segment);
  EXPECT_EQ(client->header().state.load(), static_cast<uint32_t>(DaemonState::kStopped));
  EXPECT_FALSE(client->TryTake(&id)) << "a client took " << id << " from the old ring";
  EXPECT_GE(new_daemon->last_published_id(), old_last);
  const std::vector<uint64_t> repeat = {old_last};
  auto repeated = new_daemon->Publish(repeat);
  ASSERT_FALSE(repeated.has_value()) << "the new segment published an ID of the old ring";
  EXPECT_EQ(repeated.error().code, SegmentError::kNotIncreasing) << repeated.error().message;
  const std::vector<uint64_t> above = {old_last + 1};
  EXPECT_EQ(new_daemon->Publish(above).value_or(0), 1u);
}

}  // namespace
}  // namespace snowflake::shm
