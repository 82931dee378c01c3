// Internal to snowflake::shm: opening, validating and mapping a segment's ring file and its
// consumer region's memfd with open/fstat/mmap (each check needs the descriptor itself).
// Kept out of the public headers.

#ifndef SNOWFLAKE_SHM_MAPPED_SEGMENT_H_
#define SNOWFLAKE_SHM_MAPPED_SEGMENT_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <tl/expected.hpp>

#include "snowflake/boot_id.h"
#include "snowflake/segment_error.h"
#include "snowflake/segment_layout.h"
#include "snowflake/unique_fd.h"

namespace snowflake::shm {

enum class MapAccess {
  kProducer,  // everything read-write (the daemon)
  kConsumer,  // header and slots read-only, the consumer region read-write (clients)
};

// The stand-in consumer region of a segment mapped without one (ring only): its head is
// past every tail, so a take finds the ring empty and nothing can be taken or drained.
inline constexpr uint64_t kNoRegionHead = ~uint64_t{0};

struct MapChecks {
  // Refuse a file not owned by this uid. nullopt: no owner check (the daemon's own file).
  std::optional<uid_t> expected_owner;
  // Refuse a file with any permission bit for "others".
  bool refuse_other_access = true;
  // Refuse a segment whose header records another boot id than this one (kEarlierBoot).
  // nullopt, or an unknown id: no check (the daemon checks its own files itself).
  std::optional<BootId> boot_id = std::nullopt;
};

class MappedSegment {
 public:
  ~MappedSegment();
  MappedSegment(const MappedSegment&) = delete;
  MappedSegment& operator=(const MappedSegment&) = delete;

  // Opens an existing ring file and validates its header (magic, version, sizes,
  // capacity), then maps `region`, the consumer region's memfd, after checking it
  // (CheckConsumerDescriptor), and checks the pair (segment id) and the counters. Without
  // a region (an invalid descriptor) only the ring file is mapped, beside a stand-in
  // region that holds no ticket (kNoRegionHead): has_region() is false.
  static tl::expected<std::unique_ptr<MappedSegment>, SegmentFailure> Open(
      const std::filesystem::path& path, UniqueFd region, MapAccess access,
      const MapChecks& checks) noexcept;

  bool has_region() const { return has_region_; }
  SegmentHeader* header() const { return header_; }
  ConsumerRegion* consumer() const { return consumer_; }
  std::atomic<uint64_t>* slots() const { return slots_; }
  uint64_t capacity() const { return capacity_; }
  dev_t device() const { return device_; }
  ino_t inode() const { return inode_; }
  gid_t group() const { return group_; }
  uid_t owner() const { return owner_; }
  mode_t mode() const { return mode_; }

 private:
  struct Regions;
  MappedSegment();

  std::unique_ptr<Regions> regions_;
  bool has_region_ = false;
  SegmentHeader* header_ = nullptr;
  ConsumerRegion* consumer_ = nullptr;
  std::atomic<uint64_t>* slots_ = nullptr;
  uint64_t capacity_ = 0;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  gid_t group_ = 0;
  uid_t owner_ = 0;
  mode_t mode_ = 0;
};

// Checks head <= tail <= head + capacity without assuming the three loads are atomic
// together: head is read before and after tail.
tl::expected<void, SegmentFailure> ValidateCounters(const SegmentHeader& header,
                                                    const ConsumerRegion& consumer,
                                                    uint64_t capacity,
                                                    const std::filesystem::path& path);

// "group 'snowflaked' (gid 998)", or "gid 998" when it has no name.
std::string DescribeGroup(gid_t gid);

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_SHM_MAPPED_SEGMENT_H_
