// Retiring a segment that fails validation (finding 5): clients that attached before it
// went bad must not keep taking from the orphan after the daemon unlinks it.
//
// Property: after Retire(), a client still mapping the retired segment finds it stopped and
// takes nothing from it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "snowflake/id_layout.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "temp_dir.h"

namespace snowflake::shm {
namespace {

TEST(SegmentRetire, CorruptSegmentIsStoppedAndDrainedBeforeItIsUnlinked) {
  testing::TempDir dir("retire");
  auto producer = RingProducer::CreateOrOpen(ProducerOptions{.runtime_dir = dir.path(),
                                                             .capacity = 64,
                                                             .epoch_unix_ms = kDefaultEpochUnixMs,
                                                             .machine = 1,
                                                             .mode = 0600,
                                                             .group = std::nullopt});
  ASSERT_TRUE(producer) << producer.error().message;
  std::vector<uint64_t> ids;
  for (uint64_t i = 1; i <= 32; ++i) ids.push_back(IdLayout::EncodeUnchecked(1000, 1, i));
  ASSERT_EQ(producer->Publish(ids).value(), 32u);
  producer->SetState(DaemonState::kServing);
  auto client = RingConsumer::Open(dir.path());
  ASSERT_TRUE(client) << client.error().message;
  uint64_t id = 0;
  ASSERT_TRUE(client->TryTake(&id));
  // Something scribbles over the magic: the next daemon cannot validate the segment.
  {
    const int fd = open((dir / std::string(kSegmentFileName)).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const uint64_t garbage = 0xdeadbeef;
    ASSERT_EQ(pwrite(fd, &garbage, sizeof garbage, 0), static_cast<ssize_t>(sizeof garbage));
    close(fd);
  }
  ASSERT_FALSE(RingConsumer::Open(dir.path()).has_value());

  RingProducer::Retire(dir.path());

  EXPECT_FALSE(std::filesystem::exists(dir / std::string(kSegmentFileName)));
  EXPECT_FALSE(std::filesystem::exists(ConsumerFilePath((dir / std::string(kSegmentFileName)).string())));
  EXPECT_FALSE(client->TryTake(&id)) << "a client took from the retired orphan";
  EXPECT_EQ(client->header().state.load(), static_cast<uint32_t>(DaemonState::kStopped));
}

}  // namespace
}  // namespace snowflake::shm
