// Bad segments: each is refused with its own SegmentError and a message that names the
// file (or the group to join), so an operator knows what to fix. The segment (the ring
// file and its consumer region) is made valid by a real producer, then damaged with
// pwrite/truncate/chmod at the offsets shm/LAYOUT.md documents; a bad region is a memfd
// (or something else) offered in place of the one the daemon hands out, and is refused
// before anything maps it.

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "protocol/descriptor_passing.h"
#include "ring_test_util.h"
#include "snowflake/account_names.h"
#include "snowflake/boot_id.h"
#include "snowflake/consumer_region.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "snowflake/segment_layout.h"
#include "snowflake/unique_fd.h"
#include "temp_dir.h"

namespace snowflake::shm {
namespace {

using snowflake::testing::TempDir;
using testing::MakeProducer;
using testing::Unwrap;

constexpr uid_t kNobody = 65534;

// A memfd standing in for a consumer region: `size` bytes, the segment id `segment_id` at
// its offset, then sealed with `seals` (none when 0). `flags` are memfd_create's.
UniqueFd MakeRegion(uint64_t segment_id, uint64_t size = kConsumerRegionSize,
                    int seals = static_cast<int>(kConsumerRegionSeals),
                    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING) {
  UniqueFd fd(memfd_create("test-region", flags));
  EXPECT_TRUE(fd) << "memfd_create: " << std::strerror(errno);
  EXPECT_EQ(ftruncate(fd.get(), static_cast<off_t>(size)), 0) << std::strerror(errno);
  if (size >= offsetof(ConsumerRegion, segment_id) + sizeof segment_id) {
    EXPECT_EQ(
        pwrite(fd.get(), &segment_id, sizeof segment_id, offsetof(ConsumerRegion, segment_id)),
        static_cast<ssize_t>(sizeof segment_id));
  }
  if (seals != 0) {
    EXPECT_EQ(fcntl(fd.get(), F_ADD_SEALS, seals), 0) << std::strerror(errno);
  }
  return fd;
}

// A valid, serving segment of `capacity` slots in a fresh directory; the producer is
// closed again (the ring file stays, and the test keeps a descriptor of its region as a
// client that attached would), so tests damage a segment nobody is writing.
class BadSegment : public ::testing::Test {
 protected:
  void SetUp() override {
    RingProducer producer = MakeProducer(dir_.path(), kCapacity);
    producer.SetState(DaemonState::kServing);
    region_ = producer.ConsumerDescriptor();
    ASSERT_TRUE(region_) << std::strerror(errno);
    segment_id_ = producer.segment_id();
  }

  std::filesystem::path path() const { return dir_.path() / kSegmentFileName; }
  // A new descriptor of the segment's region, as attach hands one out.
  UniqueFd Region() const { return UniqueFd(fcntl(region_.get(), F_DUPFD_CLOEXEC, 0)); }

  // Writes `value` at `offset` of the ring file (header and slots).
  template <typename T>
  void Poke(uint64_t offset, T value) {
    const int fd = open(path().c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, &value, sizeof(value), static_cast<off_t>(offset)),
              static_cast<ssize_t>(sizeof(value)));
    close(fd);
  }
  // Writes `value` at `offset` of the consumer region (what any client holding it may do).
  template <typename T>
  void PokeRegion(uint64_t offset, T value) {
    ASSERT_EQ(pwrite(region_.get(), &value, sizeof(value), static_cast<off_t>(offset)),
              static_cast<ssize_t>(sizeof(value)));
  }

  // Open with the segment's own region, or with `region` when given.
  SegmentFailure OpenFails(const ConsumerOptions& options = {}) {
    return OpenFailsWith(Region(), options);
  }
  SegmentFailure OpenFailsWith(UniqueFd region, const ConsumerOptions& options = {}) {
    auto consumer = RingConsumer::Open(dir_.path(), std::move(region), options);
    EXPECT_FALSE(consumer) << "opened a bad segment";
    return consumer ? SegmentFailure{} : consumer.error();
  }

  static constexpr uint64_t kCapacity = 1024;  // two slot pages, so truncation can cut one
  TempDir dir_;
  UniqueFd region_;
  uint64_t segment_id_ = 0;
};

bool Names(const SegmentFailure& failure, const std::string& text) {
  return failure.message.find(text) != std::string::npos;
}

TEST_F(BadSegment, ValidSegmentOpens) {
  auto sut = RingConsumer::Open(dir_.path(), Region());

  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->capacity(), kCapacity);
  EXPECT_TRUE(sut->has_region());
  EXPECT_EQ(sut->segment_id(), segment_id_);
  EXPECT_EQ(sut->owner(), getuid());
}

// A client finds no daemon the same way whether it observes or already holds a region
// (one from a daemon that has since gone): the ring file is checked first.
TEST(SegmentValidation, MissingFileIsNotFound) {
  TempDir dir;
  auto region = CreateConsumerRegion(1);
  ASSERT_TRUE(region) << region.error().message;

  const auto observed = RingConsumer::Observe(dir.path());
  const auto sut = RingConsumer::Open(dir.path(), std::move(*region));

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, SegmentError::kNotFound);
  EXPECT_TRUE(Names(sut.error(), (dir.path() / kSegmentFileName).string())) << sut.error().message;
  EXPECT_TRUE(Names(sut.error(), "not running")) << sut.error().message;
  ASSERT_FALSE(observed);
  EXPECT_EQ(observed.error().code, SegmentError::kNotFound);
}

TEST(SegmentValidation, MissingRuntimeDirIsNotFound) {
  TempDir dir;
  const std::filesystem::path missing = dir.path() / "no-such-dir";

  const auto sut = RingConsumer::Observe(missing);

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, SegmentError::kNotFound);
  EXPECT_TRUE(Names(sut.error(), missing.string())) << sut.error().message;
  EXPECT_TRUE(Names(sut.error(), "runtime directory")) << sut.error().message;
}

TEST_F(BadSegment, WrongMagicIsBadMagic) {
  Poke<uint64_t>(offsetof(SegmentHeader, magic), 0x1122334455667788ull);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kBadMagic);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "1122334455667788")) << sut.message;
}

TEST_F(BadSegment, ZeroMagicSaysNeverInitialised) {
  Poke<uint64_t>(offsetof(SegmentHeader, magic), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kBadMagic);
  EXPECT_TRUE(Names(sut, "never initialised")) << sut.message;
}

TEST_F(BadSegment, WrongVersionIsIncompatibleVersion) {
  Poke<uint32_t>(offsetof(SegmentHeader, version), kVersion + 1);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kIncompatibleVersion);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "version " + std::to_string(kVersion + 1))) << sut.message;
}

TEST_F(BadSegment, TruncatedFileIsTruncated) {
  ASSERT_EQ(truncate(path().c_str(), static_cast<off_t>(SegmentSizeFor(kCapacity) - kPageSize)), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kTruncated);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "truncated")) << sut.message;
}

TEST_F(BadSegment, FileShorterThanItsFixedPartIsTruncated) {
  ASSERT_EQ(truncate(path().c_str(), 100), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kTruncated);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
}

TEST_F(BadSegment, LargerFileIsSizeMismatch) {
  ASSERT_EQ(truncate(path().c_str(), static_cast<off_t>(SegmentSizeFor(kCapacity) + kPageSize)), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kSizeMismatch);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "resized")) << sut.message;
}

TEST_F(BadSegment, HeaderSizeDisagreeingWithCapacityIsSizeMismatch) {
  Poke<uint64_t>(offsetof(SegmentHeader, segment_size), SegmentSizeFor(kCapacity) + kPageSize);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kSizeMismatch);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
}

// Every take subtracts the epoch from the clock: an epoch no layout has (found by the
// segment fuzzer as a signed overflow in the take) is refused at open.
TEST_F(BadSegment, AnEpochNoIdLayoutHasIsBadEpoch) {
  for (const uint64_t epoch : {uint64_t{1} << 63, ~uint64_t{0}, uint64_t{INT64_MAX}}) {
    Poke<uint64_t>(offsetof(SegmentHeader, epoch_unix_ms), epoch);

    const SegmentFailure sut = OpenFails();

    EXPECT_EQ(sut.code, SegmentError::kBadEpoch) << epoch;
    EXPECT_TRUE(Names(sut, "epoch " + std::to_string(epoch))) << sut.message;
    EXPECT_TRUE(IsDamagedSegmentError(sut.code));
  }
}

// Every take shifts by the header's layout: bits that are no layout (zero: version 4's
// reserved0; widths that do not fill 63 bits; a unit byte) are refused at open.
TEST_F(BadSegment, IdBitsThatAreNoLayoutAreBadEpoch) {
  for (const uint32_t word : {uint32_t{0}, PackIdBits({41, 17, 6}), PackIdBits({39, 12, 12}),
                              PackIdBits(kDefaultIdBits) | uint32_t{1} << 24}) {
    Poke<uint32_t>(offsetof(SegmentHeader, id_bits), word);

    const SegmentFailure sut = OpenFails();

    EXPECT_EQ(sut.code, SegmentError::kBadEpoch) << word;
    EXPECT_TRUE(Names(sut, "is no ID layout")) << sut.message;
    EXPECT_TRUE(IsDamagedSegmentError(sut.code));
  }
}

TEST_F(BadSegment, AnEpochWhoseRangeOverflowsInTheHeadersLayoutIsBadEpoch) {
  // Fits 41 time bits, not 44.
  const int64_t epoch = INT64_MAX - ((int64_t{1} << 41) - 1);
  Poke<uint64_t>(offsetof(SegmentHeader, epoch_unix_ms), static_cast<uint64_t>(epoch));
  Poke<uint32_t>(offsetof(SegmentHeader, id_bits), PackIdBits({44, 13, 6}));

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kBadEpoch);
}

TEST_F(BadSegment, CapacityNotAPowerOfTwoIsBadCapacity) {
  Poke<uint64_t>(offsetof(SegmentHeader, capacity), 1000);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kBadCapacity);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "capacity 1000")) << sut.message;
}

TEST_F(BadSegment, HeadAboveTailIsCorruptCounters) {
  Poke<uint64_t>(offsetof(SegmentHeader, tail), 3);
  PokeRegion<uint64_t>(offsetof(ConsumerRegion, head), 5);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kCorruptCounters);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "head 5, tail 3")) << sut.message;
}

TEST_F(BadSegment, TailBeyondHeadPlusCapacityIsCorruptCounters) {
  Poke<uint64_t>(offsetof(SegmentHeader, tail), 10 + kCapacity + 1);
  PokeRegion<uint64_t>(offsetof(ConsumerRegion, head), 10);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kCorruptCounters);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
}

TEST_F(BadSegment, TailExactlyHeadPlusCapacityIsAFullRing) {
  Poke<uint64_t>(offsetof(SegmentHeader, tail), 10 + kCapacity);
  PokeRegion<uint64_t>(offsetof(ConsumerRegion, head), 10);

  auto sut = RingConsumer::Open(dir_.path(), Region());

  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->size(), kCapacity);
}

TEST_F(BadSegment, ModeReadableByOthersIsModeTooOpen) {
  for (const mode_t mode : {mode_t{0664}, mode_t{0604}, mode_t{0661}}) {
    ASSERT_EQ(chmod(path().c_str(), mode), 0);

    const SegmentFailure sut = OpenFails();

    EXPECT_EQ(sut.code, SegmentError::kModeTooOpen) << std::oct << mode;
    EXPECT_TRUE(Names(sut, path().string())) << sut.message;
    char text[8];
    std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode));
    EXPECT_TRUE(Names(sut, text)) << sut.message;
  }
}

TEST_F(BadSegment, GroupWritableRingFileIsModeTooOpen) {
  ASSERT_EQ(chmod(path().c_str(), 0660), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kModeTooOpen);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "0660")) << sut.message;
  EXPECT_TRUE(Names(sut, "forge IDs")) << sut.message;
}

TEST_F(BadSegment, RingFileIsReadOnlyForTheGroupAndNoConsumerFileIsMade) {
  struct stat ring {};
  ASSERT_EQ(stat(path().c_str(), &ring), 0);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    names.push_back(entry.path().filename().string());
  }

  // The producer was asked for 0660: the ring file drops the group's write bit. The
  // consumer region is a memfd, never a file a member of the group could open.
  EXPECT_EQ(ring.st_mode & 07777, 0640u);
  EXPECT_EQ(names, std::vector<std::string>{std::string(kSegmentFileName)});
}

// The region is refused unless sealed with exactly seal|shrink|grow: without shrink or
// grow any holder could resize it under every taker, without seal it could add a seal
// that stops later clients from mapping it writable, and with write sealed too no take
// could CAS its head.
TEST_F(BadSegment, RegionNotSealedExactlyIsUnsealed) {
  struct Case {
    const char* what;
    int seals;
    unsigned flags;
    const char* named;
  };
  const unsigned sealable = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  const int exact = static_cast<int>(kConsumerRegionSeals);
  const Case cases[] = {
      {"no seals", 0, sealable, "sealed with none (0x0)"},
      {"only shrink", F_SEAL_SHRINK, sealable, "sealed with shrink (0x2)"},
      {"shrink and grow, seals still open", F_SEAL_SHRINK | F_SEAL_GROW, sealable,
       "sealed with shrink|grow (0x6)"},
      {"write sealed too", exact | F_SEAL_WRITE, sealable,
       "sealed with seal|shrink|grow|write (0xf)"},
      {"future writes sealed too", exact | F_SEAL_FUTURE_WRITE, sealable,
       "sealed with seal|shrink|grow|future_write (0x17)"},
      {"a memfd made without sealing", 0, MFD_CLOEXEC, "sealed with seal (0x1)"},
  };
  for (const Case& c : cases) {
    const SegmentFailure sut =
        OpenFailsWith(MakeRegion(segment_id_, kConsumerRegionSize, c.seals, c.flags));

    EXPECT_EQ(sut.code, SegmentError::kUnsealed) << c.what << ": " << sut.message;
    EXPECT_TRUE(Names(sut, c.named)) << c.what << ": " << sut.message;
    EXPECT_TRUE(Names(sut, "not exactly seal|shrink|grow (0x7, with exec or not)")) << sut.message;
    EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  }
}

// The seals are checked before the size: an unsealed region's size is whatever its holder
// makes it next.
TEST_F(BadSegment, UnsealedRegionOfAnotherSizeIsUnsealed) {
  const SegmentFailure sut = OpenFailsWith(MakeRegion(segment_id_, kConsumerRegionSize / 2, 0));

  EXPECT_EQ(sut.code, SegmentError::kUnsealed) << sut.message;
}

// A plain file is no memfd: not sealable (or, on tmpfs, sealed with "seal" alone).
TEST_F(BadSegment, RegularFileOfTheRightSizeIsUnsealed) {
  const std::filesystem::path file = dir_.path() / "region";
  UniqueFd fd(open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd) << std::strerror(errno);
  ASSERT_EQ(ftruncate(fd.get(), static_cast<off_t>(kConsumerRegionSize)), 0);
  ASSERT_EQ(
      pwrite(fd.get(), &segment_id_, sizeof segment_id_, offsetof(ConsumerRegion, segment_id)),
      static_cast<ssize_t>(sizeof segment_id_));

  const SegmentFailure sut = OpenFailsWith(std::move(fd));

  EXPECT_EQ(sut.code, SegmentError::kUnsealed) << sut.message;
}

// Sealed, so no one can fix it: a region of another size than the format's is refused,
// shorter as truncated, longer as a size mismatch, the message naming both sizes.
TEST_F(BadSegment, RegionSealedAtAnotherSizeIsRefused) {
  const struct {
    uint64_t size;
    SegmentError code;
  } cases[] = {
      {kConsumerRegionSize - kPageSize, SegmentError::kTruncated},
      {0, SegmentError::kTruncated},
      {kConsumerRegionSize + kPageSize, SegmentError::kSizeMismatch},
      {2 * kConsumerRegionSize, SegmentError::kSizeMismatch},
  };
  for (const auto& c : cases) {
    const SegmentFailure sut = OpenFailsWith(MakeRegion(segment_id_, c.size));

    EXPECT_EQ(sut.code, c.code) << c.size << " bytes: " << sut.message;
    EXPECT_TRUE(Names(sut, "sealed with " + std::to_string(c.size) + " bytes")) << sut.message;
    EXPECT_TRUE(Names(sut, std::to_string(kConsumerRegionSize))) << sut.message;
  }
}

TEST_F(BadSegment, RegionThatIsNoFileIsNotRegularFile) {
  int pipe_ends[2];
  ASSERT_EQ(pipe2(pipe_ends, O_CLOEXEC), 0);
  UniqueFd read_end(pipe_ends[0]);
  const UniqueFd write_end(pipe_ends[1]);
  int socket_ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, socket_ends), 0);
  UniqueFd socket_end(socket_ends[0]);
  const UniqueFd other_socket_end(socket_ends[1]);
  UniqueFd directory(open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(directory) << std::strerror(errno);

  const SegmentFailure of_pipe = OpenFailsWith(std::move(read_end));
  const SegmentFailure of_socket = OpenFailsWith(std::move(socket_end));
  const SegmentFailure of_directory = OpenFailsWith(std::move(directory));

  for (const SegmentFailure& sut : {of_pipe, of_socket, of_directory}) {
    EXPECT_EQ(sut.code, SegmentError::kNotRegularFile) << sut.message;
    EXPECT_TRUE(Names(sut, "is not a memory file")) << sut.message;
    EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  }
}

// The daemon replaced the segment between handing out the region and the client's open
// of the ring file: the ids differ, and the client retries.
TEST_F(BadSegment, RegionOfAnotherSegmentIsUnpaired) {
  TempDir other_dir;
  RingProducer other = MakeProducer(other_dir.path(), kCapacity);
  const uint64_t made_up_id = segment_id_ + 1;

  const SegmentFailure of_other_segment = OpenFailsWith(other.ConsumerDescriptor());
  const SegmentFailure made_up = OpenFailsWith(MakeRegion(made_up_id));

  EXPECT_EQ(of_other_segment.code, SegmentError::kUnpaired) << of_other_segment.message;
  EXPECT_TRUE(Names(of_other_segment, "segment id " + std::to_string(other.segment_id())))
      << of_other_segment.message;
  EXPECT_TRUE(Names(of_other_segment, "retry")) << of_other_segment.message;
  EXPECT_EQ(made_up.code, SegmentError::kUnpaired) << made_up.message;
  EXPECT_TRUE(Names(
      made_up, "segment id " + std::to_string(made_up_id) + ", not " + std::to_string(segment_id_)))
      << made_up.message;
}

// Observe maps the ring file alone: a client reads the daemon's state through it but can
// take nothing, whatever the ring holds (its stand-in head is past every tail), and moves
// no ticket of the real region.
TEST(SegmentValidation, ObserveHoldsNoRegionAndTakesNothingFromAFullRing) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  producer.SetState(DaemonState::kServing);
  ASSERT_EQ(Unwrap(producer.Publish(testing::Range(1, 8))), 8u);
  auto sut = RingConsumer::Observe(dir.path());
  ASSERT_TRUE(sut) << sut.error().message;
  uint64_t id = 0;
  uint64_t batch[8];
  TakeResult batch_result = TakeResult::kTaken;

  const bool took = sut->TryTake(&id);
  const size_t batch_taken = sut->TryTakeBatch(batch, 8);
  const TakeResult fresh = sut->TryTakeFresh(&id);
  const size_t fresh_batch_taken = sut->TryTakeBatchFresh(batch, 8, &batch_result);
  RingConsumer attached = testing::MakeConsumer(dir.path(), producer);

  EXPECT_FALSE(sut->has_region());
  EXPECT_FALSE(took);
  EXPECT_EQ(batch_taken, 0u);
  EXPECT_EQ(fresh, TakeResult::kEmpty);
  EXPECT_EQ(fresh_batch_taken, 0u);
  EXPECT_EQ(batch_result, TakeResult::kEmpty);
  EXPECT_EQ(sut->size(), 0u);
  EXPECT_EQ(sut->tail(), 8u) << "the ring file itself is read";
  EXPECT_EQ(sut->segment_id(), producer.segment_id());
  EXPECT_EQ(sut->owner(), getuid());
  EXPECT_EQ(sut->CheckProducer(std::chrono::hours(1), Clock::Real()).health,
            ProducerHealth::kServing);
  EXPECT_EQ(producer.head(), 0u) << "an observer moved the head";
  EXPECT_TRUE(attached.has_region());
  ASSERT_TRUE(attached.TryTake(&id));
  EXPECT_EQ(id, 1u);
}

TEST_F(BadSegment, ObserveChecksTheRingFileAsOpenDoes) {
  Poke<uint64_t>(offsetof(SegmentHeader, magic), 0x1122334455667788ull);

  const auto sut = RingConsumer::Observe(dir_.path());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, SegmentError::kBadMagic);
  EXPECT_TRUE(Names(sut.error(), path().string())) << sut.error().message;
}

// A daemon of format 3 left its consumer file beside the ring file: a restart removes it,
// and Retire() too, with the ring file, so nothing of the old format lingers for a client.
TEST_F(BadSegment, ARestartOrRetireRemovesTheConsumerFileOfFormat3) {
  const std::filesystem::path legacy = dir_.path() / kLegacyConsumerFileName;
  const auto make_legacy = [&] {
    std::ofstream(legacy) << std::string(kConsumerRegionSize, '\0');
    return std::filesystem::exists(legacy);
  };
  ASSERT_TRUE(make_legacy());

  RingProducer restarted = MakeProducer(testing::OptionsFor(dir_.path(), kCapacity));
  const bool left_by_restart = std::filesystem::exists(legacy);
  ASSERT_TRUE(make_legacy());
  RingProducer::Retire(dir_.path());

  EXPECT_FALSE(left_by_restart);
  EXPECT_FALSE(std::filesystem::exists(legacy));
  EXPECT_FALSE(std::filesystem::exists(path()));
}

// Retire() stops the segment for the clients still mapping it (also one that no longer
// validates, through the header's fixed offsets), empties its ring for them, and unlinks
// its ring file, so they take nothing more, see "stopped" and reattach to whatever comes
// next.
TEST_F(BadSegment, RetireStopsAndEmptiesTheSegmentForItsClientsAndUnlinksIt) {
  for (const bool corrupt : {false, true}) {
    RingProducer producer = MakeProducer(testing::OptionsFor(dir_.path(), kCapacity));
    producer.SetState(DaemonState::kServing);
    RingConsumer client = testing::MakeConsumer(dir_.path(), producer);
    const uint64_t first_id = producer.last_published_id() + 1;
    ASSERT_EQ(Unwrap(producer.Publish(testing::Range(first_id, 4))), 4u);
    if (corrupt) Poke<uint64_t>(offsetof(SegmentHeader, magic), 42);

    RingProducer::Retire(dir_.path());
    uint64_t id = 0;
    const bool took = client.TryTake(&id);

    const char* what = corrupt ? "corrupt" : "valid";
    EXPECT_FALSE(took) << what << ": took " << id << " from a retired segment";
    EXPECT_EQ(client.CheckProducer(std::chrono::hours(1), Clock::Real()).health,
              ProducerHealth::kStopped)
        << what;
    EXPECT_FALSE(std::filesystem::exists(path())) << what;
  }
}

TEST_F(BadSegment, OwnerOtherThanExpectedIsWrongOwner) {
  const uid_t someone_else = getuid() + 1;

  const SegmentFailure sut = OpenFails(ConsumerOptions{.expected_owner = someone_else});

  EXPECT_EQ(sut.code, SegmentError::kWrongOwner);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  // Users by name, the uid in parentheses: "is owned by root (uid 0), expected daemon (uid 1)".
  EXPECT_TRUE(Names(sut, "is owned by " + DescribeUser(getuid()) + ", expected " +
                             DescribeUser(someone_else)))
      << sut.message;
  EXPECT_TRUE(Names(sut, "(uid " + std::to_string(someone_else) + ")")) << sut.message;
}

TEST_F(BadSegment, SymlinkIsNotRegularFile) {
  const std::filesystem::path real = dir_.path() / "real.ring";
  std::filesystem::rename(path(), real);
  std::filesystem::create_symlink(real, path());

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kNotRegularFile);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
}

TEST(SegmentValidation, DirectoryInItsPlaceIsNotRegularFile) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / kSegmentFileName);

  const auto sut = RingConsumer::Observe(dir.path());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, SegmentError::kNotRegularFile);
}

TEST_F(BadSegment, ProducerRefusesACorruptSegmentUntilRetired) {
  Poke<uint64_t>(offsetof(SegmentHeader, magic), 42);

  const auto refused = RingProducer::CreateOrOpen(testing::OptionsFor(dir_.path(), kCapacity));
  RingProducer::Retire(dir_.path());
  const auto fresh = RingProducer::CreateOrOpen(testing::OptionsFor(dir_.path(), kCapacity));

  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, SegmentError::kBadMagic);
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_FALSE(fresh->continued());
  EXPECT_TRUE(RingConsumer::Open(dir_.path(), fresh->ConsumerDescriptor()))
      << "the fresh segment opens";
}

// Opens the segment, with `region` as attach handed it out, as user and group `nobody` in
// a child process (we run as root in CI, and root is never refused) and reports the error
// code and message through a pipe.
struct ChildResult {
  int code = -1;  // static_cast<int>(SegmentError), or -1 if it opened, -2 on setup failure
  std::string message;
};

ChildResult OpenAsNobody(const std::filesystem::path& dir, UniqueFd region) {
  int out[2];
  if (pipe(out) != 0) return {-2, "pipe"};
  const pid_t child = fork();
  if (child < 0) return {-2, "fork"};
  if (child == 0) {
    close(out[0]);
    auto report = [&](int code, const std::string& message) {
      const std::string text = std::to_string(code) + "\n" + message;
      const ssize_t ignored = write(out[1], text.data(), text.size());
      (void)ignored;
      _exit(0);
    };
    if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) {
      report(-2, std::string("cannot drop privileges: ") + std::strerror(errno));
    }
    auto consumer =
        RingConsumer::Open(dir, std::move(region), ConsumerOptions{.expected_owner = 0});
    if (consumer) report(-1, "opened");
    report(static_cast<int>(consumer.error().code), consumer.error().message);
  }
  close(out[1]);
  region.reset();
  std::string text;
  char buffer[512];
  ssize_t n = 0;
  while ((n = read(out[0], buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return {-2, "child reported nothing: " + text};
  return {std::stoi(text.substr(0, newline)), text.substr(newline + 1)};
}

// As root (CI) the segment gets group `daemon` (gid 1), which nobody is not in, and the
// open runs as nobody. Unprivileged, the open runs as ourselves and the modes leave the
// owner out (0060, 0050): owner bits apply to the owner even when the group bits allow.
bool AsRoot() { return getuid() == 0; }
gid_t SegmentGroup() { return AsRoot() ? 1 : getgid(); }

std::string GroupName(gid_t gid) {
  const group* entry = getgrgid(gid);
  if (entry == nullptr) return "gid " + std::to_string(gid);
  // Built with append: GCC 12 at -O3 warns (-Wrestrict, falsely) on "'" + std::string(...).
  std::string name = "'";
  name.append(entry->gr_name).append("'");
  return name;
}

ChildResult OpenWithoutPermission(const std::filesystem::path& dir, UniqueFd region) {
  if (AsRoot()) return OpenAsNobody(dir, std::move(region));
  auto consumer = RingConsumer::Open(dir, std::move(region));
  if (consumer) return {-1, "opened"};
  return {static_cast<int>(consumer.error().code), consumer.error().message};
}

TEST_F(BadSegment, UnreadableFileIsPermissionDeniedNamingTheGroup) {
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  ASSERT_EQ(chown(path().c_str(), getuid(), SegmentGroup()), 0);
  ASSERT_EQ(chmod(path().c_str(), AsRoot() ? 0640 : 0040), 0);

  const ChildResult sut = OpenWithoutPermission(dir_.path(), Region());

  ASSERT_NE(sut.code, -2) << sut.message;
  EXPECT_EQ(sut.code, static_cast<int>(SegmentError::kPermissionDenied)) << sut.message;
  EXPECT_NE(sut.message.find(path().string()), std::string::npos) << sut.message;
  EXPECT_NE(sut.message.find("add this user to group " + GroupName(SegmentGroup())),
            std::string::npos)
      << sut.message;
}

// Runs `body` in a child process as user nobody, a member of the segment's group (as
// root: group `daemon`), and returns what it returned; "setup: ..." if the child could
// not become that user or reported nothing.
std::string AsGroupMember(const std::function<std::string()>& body) {
  int out[2];
  if (pipe(out) != 0) return "setup: pipe";
  const pid_t child = fork();
  if (child < 0) return "setup: fork";
  if (child == 0) {
    close(out[0]);
    const gid_t group = SegmentGroup();
    std::string result;
    if (setgroups(1, &group) == 0 && setgid(kNobody) == 0 && setuid(kNobody) == 0) {
      result = body();
    } else {
      result = std::string("setup: cannot drop privileges: ") + std::strerror(errno);
    }
    const ssize_t ignored = write(out[1], result.data(), result.size());
    (void)ignored;
    _exit(0);
  }
  close(out[1]);
  std::string result;
  char buffer[512];
  ssize_t n = 0;
  while ((n = read(out[0], buffer, sizeof(buffer))) > 0)
    result.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return result.empty() ? "setup: the child reported nothing" : result;
}

// Lets the group into the runtime directory and the ring file as snowflaked does (as root:
// group `daemon`, directory 0750, ring file 0640).
void ShareWithTheGroup(const std::filesystem::path& dir) {
  ASSERT_EQ(chown(dir.c_str(), 0, SegmentGroup()), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0750), 0);
  ASSERT_EQ(chown((dir / kSegmentFileName).c_str(), 0, SegmentGroup()), 0);
}

char Outcome(int fd_or_status) {
  if (fd_or_status >= 0) return 'y';
  return errno == EACCES || errno == EPERM ? 'n' : '?';
}

// What a member of the clients' group can do to the ring file (as root: nobody in group
// `daemon`): read it, and nothing else — no write, no truncation of the header and slots,
// no file of its own beside it; and with a region from attach, open the segment as a
// client.
TEST_F(BadSegment, GroupMemberCannotWriteOrTruncateTheRingFile) {
  if (!AsRoot()) GTEST_SKIP() << "needs root to act as a group member of another uid";
  ShareWithTheGroup(dir_.path());
  const std::string ring = path().string();
  const std::string legacy = (dir_.path() / kLegacyConsumerFileName).string();

  const std::string result = AsGroupMember([&] {
    std::string outcome;
    outcome += Outcome(open(ring.c_str(), O_RDWR | O_CLOEXEC));
    outcome += Outcome(truncate(ring.c_str(), 0));
    outcome += Outcome(open(ring.c_str(), O_RDONLY | O_CLOEXEC));
    outcome += Outcome(open(legacy.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660));
    auto opened = RingConsumer::Open(dir_.path(), Region(), ConsumerOptions{.expected_owner = 0});
    outcome += opened ? 'y' : 'n';
    return outcome;
  });
  chmod(dir_.path().c_str(), 0700);

  // open(O_RDWR) and truncate of the ring file refused, and creating a file in the
  // directory; read-only open and a client's whole open allowed.
  EXPECT_EQ(result, "nnyny") << "[rdwr, truncate, rdonly, create, client open]";
  struct stat info {};
  ASSERT_EQ(stat(ring.c_str(), &info), 0);
  EXPECT_EQ(static_cast<uint64_t>(info.st_size), SegmentSizeFor(kCapacity)) << "not truncated";
  EXPECT_FALSE(std::filesystem::exists(legacy));
}

// Every way to change the region's size or seals through a descriptor of it, each as one
// character: 'E' refused with EPERM (what the seals answer), 'y' done, '?' refused
// otherwise. Then a growing mremap(2) of a mapping of it and a hole punched in its last
// page, which are allowed but leave its size alone.
constexpr const char* kResizeAttempts =
    "[ftruncate to 0, a page shorter, a page longer; fallocate a page past the end, the "
    "same keeping the size; a write past the end; add the write seal, the future-write "
    "seal]";
std::string TryToResize(int fd) {
  const auto size = static_cast<off_t>(kConsumerRegionSize);
  const auto page = static_cast<off_t>(kPageSize);
  const auto outcome = [](int status) {
    if (status >= 0) return 'y';
    return errno == EPERM ? 'E' : '?';
  };
  std::string result;
  result += outcome(ftruncate(fd, 0));
  result += outcome(ftruncate(fd, size - page));
  result += outcome(ftruncate(fd, size + page));
  result += outcome(fallocate(fd, 0, size, page));
  result += outcome(fallocate(fd, FALLOC_FL_KEEP_SIZE, size, page));
  const char byte = 1;
  result += outcome(static_cast<int>(pwrite(fd, &byte, 1, size)));
  result += outcome(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
  result += outcome(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE));
  void* mapped = mmap(nullptr, kConsumerRegionSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped != MAP_FAILED) {
    void* grown = mremap(mapped, kConsumerRegionSize, 2 * kConsumerRegionSize, MREMAP_MAYMOVE);
    if (grown != MAP_FAILED) {
      munmap(grown, 2 * kConsumerRegionSize);
    } else {
      munmap(mapped, kConsumerRegionSize);
    }
  }
  (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size - page, page);
  return result;
}

off_t SizeOf(int fd) {
  struct stat info {};
  return fstat(fd, &info) == 0 ? info.st_size : -1;
}

// The seals hold against every holder of the region, root included: no client can shrink
// it (which would fault every taker's next access) or grow it, nor change its seals, and
// the takes of every client go on.
TEST(RegionSeals, NoHolderCanResizeTheRegionOrChangeItsSealsAndTakesGoOn) {
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  producer.SetState(DaemonState::kServing);
  RingConsumer consumer = testing::MakeConsumer(dir.path(), producer);
  ASSERT_EQ(Unwrap(producer.Publish(testing::Range(1, 4))), 4u);
  uint64_t id = 0;
  ASSERT_TRUE(consumer.TryTake(&id));
  const UniqueFd region = producer.ConsumerDescriptor();
  ASSERT_TRUE(region) << std::strerror(errno);

  const std::string result = TryToResize(region.get());
  const bool took_after = consumer.TryTake(&id);
  const auto published_after = producer.Publish(testing::Range(5, 4));
  uint64_t batch[8];
  const size_t batch_after = consumer.TryTakeBatch(batch, 8);

  EXPECT_EQ(result, "EEEEEEEE") << kResizeAttempts;
  EXPECT_EQ(SizeOf(region.get()), static_cast<off_t>(kConsumerRegionSize));
  EXPECT_TRUE(IsConsumerRegionSealed(static_cast<uint32_t>(fcntl(region.get(), F_GET_SEALS))));
  EXPECT_TRUE(took_after);
  EXPECT_EQ(id, 2u);
  ASSERT_TRUE(published_after) << published_after.error().message;
  EXPECT_EQ(*published_after, 4u);
  EXPECT_EQ(batch_after, 6u);
  EXPECT_EQ(batch[0], 3u);
  EXPECT_EQ(batch[5], 8u);
  EXPECT_TRUE(producer.CheckCounters());
}

// The same from another user in the clients' group, who attached as a client: it takes,
// cannot resize the region, and takes again; so do the daemon's other clients.
TEST(RegionSeals, AGroupMemberThatAttachedCannotResizeTheRegionAndAllTakesGoOn) {
  if (!AsRoot()) GTEST_SKIP() << "needs root to act as a group member of another uid";
  TempDir dir;
  RingProducer producer = MakeProducer(dir.path(), 8);
  producer.SetState(DaemonState::kServing);
  RingConsumer consumer = testing::MakeConsumer(dir.path(), producer);
  ASSERT_EQ(Unwrap(producer.Publish(testing::Range(1, 4))), 4u);
  ShareWithTheGroup(dir.path());
  const UniqueFd region = producer.ConsumerDescriptor();
  ASSERT_TRUE(region) << std::strerror(errno);

  const std::string result = AsGroupMember([&] {
    std::string outcome;
    auto client = RingConsumer::Open(dir.path(), UniqueFd(fcntl(region.get(), F_DUPFD_CLOEXEC, 0)),
                                     ConsumerOptions{.expected_owner = 0});
    if (!client) return "setup: " + client.error().message;
    uint64_t id = 0;
    outcome += client->TryTake(&id) && id == 1 ? 't' : '-';
    outcome += TryToResize(region.get());
    outcome += client->TryTake(&id) && id == 2 ? 't' : '-';
    return outcome;
  });
  uint64_t id = 0;
  const bool took_after = consumer.TryTake(&id);
  chmod(dir.path().c_str(), 0700);

  EXPECT_EQ(result, "tEEEEEEEEt") << "[take, " << kResizeAttempts << ", take]";
  EXPECT_EQ(SizeOf(region.get()), static_cast<off_t>(kConsumerRegionSize));
  EXPECT_TRUE(took_after);
  EXPECT_EQ(id, 3u);
  EXPECT_TRUE(producer.CheckCounters());
}

// A region made by another user (as root: nobody, in a child that passes it back over a
// socket, as a rogue attach answer would) is not the daemon's: refused, sealed or not.
TEST_F(BadSegment, RegionMadeByAnotherUserIsWrongOwner) {
  if (!AsRoot()) GTEST_SKIP() << "needs root to make a region as another user";
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ends), 0);
  UniqueFd ours(ends[0]);
  UniqueFd theirs(ends[1]);
  const uint64_t segment_id = segment_id_;
  const std::string setup = AsGroupMember([&] {
    auto made = CreateConsumerRegion(segment_id);
    if (!made) return "setup: " + made.error().message;
    if (protocol::SendWithDescriptor(theirs.get(), "r", made->get(), 0) != 1) {
      return std::string("setup: sendmsg");
    }
    return std::string("sent");
  });
  ASSERT_EQ(setup, "sent");
  char byte = 0;
  std::vector<UniqueFd> passed;
  ASSERT_EQ(protocol::ReceiveWithDescriptors(ours.get(), std::span(&byte, 1), &passed), 1)
      << std::strerror(errno);
  ASSERT_FALSE(passed.empty()) << "no descriptor came back";
  UniqueFd region = std::move(passed.front());
  struct stat info {};
  ASSERT_EQ(fstat(region.get(), &info), 0);
  ASSERT_EQ(info.st_uid, kNobody);
  ASSERT_TRUE(IsConsumerRegionSealed(static_cast<uint32_t>(fcntl(region.get(), F_GET_SEALS))));

  const SegmentFailure sut = OpenFailsWith(std::move(region));

  EXPECT_EQ(sut.code, SegmentError::kWrongOwner) << sut.message;
  EXPECT_TRUE(
      Names(sut, "is owned by " + DescribeUser(kNobody) + ", expected " + DescribeUser(getuid())))
      << sut.message;
  EXPECT_TRUE(Names(sut, "the consumer region of " + path().string())) << sut.message;
}

TEST_F(BadSegment, UnsearchableRuntimeDirIsPermissionDeniedNamingTheGroup) {
  ASSERT_EQ(chown(dir_.path().c_str(), getuid(), SegmentGroup()), 0);
  ASSERT_EQ(chmod(dir_.path().c_str(), AsRoot() ? 0750 : 0050), 0);

  const ChildResult sut = OpenWithoutPermission(dir_.path(), Region());
  chmod(dir_.path().c_str(), 0700);  // so TempDir can remove it

  ASSERT_NE(sut.code, -2) << sut.message;
  EXPECT_EQ(sut.code, static_cast<int>(SegmentError::kPermissionDenied)) << sut.message;
  EXPECT_NE(sut.message.find(dir_.path().string()), std::string::npos) << sut.message;
  EXPECT_NE(sut.message.find("group " + GroupName(SegmentGroup())), std::string::npos)
      << sut.message;
}

// The header's boot id (shm/LAYOUT.md, line 4): a client of another boot than the one
// that wrote it finds no daemon; one that was never recorded (0: an older daemon) is
// accepted, the heartbeat and pid still tell whether a daemon serves it.
TEST_F(BadSegment, SegmentOfAnotherBootIsEarlierBoot) {
  const BootId this_boot = CurrentBootId();
  ASSERT_TRUE(this_boot.known()) << "cannot read /proc/sys/kernel/random/boot_id";
  const BootId other_boot{this_boot.high ^ 1, this_boot.low};

  ConsumerOptions of_other_boot;
  of_other_boot.boot_id = other_boot;
  ConsumerOptions of_this_boot;
  of_this_boot.boot_id = this_boot;

  const SegmentFailure sut = OpenFails(of_other_boot);
  auto same_boot = RingConsumer::Open(dir_.path(), Region(), of_this_boot);

  EXPECT_EQ(sut.code, SegmentError::kEarlierBoot) << sut.message;
  EXPECT_TRUE(Names(sut, "left by an earlier boot of this host")) << sut.message;
  EXPECT_TRUE(Names(sut, FormatBootId(this_boot))) << sut.message;
  EXPECT_TRUE(Names(sut, "snowflaked is not running")) << sut.message;
  EXPECT_TRUE(same_boot) << same_boot.error().message;
}

TEST_F(BadSegment, SegmentThatRecordsNoBootIdOpens) {
  Poke<uint64_t>(272, 0);
  Poke<uint64_t>(280, 0);

  auto sut = RingConsumer::Open(dir_.path(), Region());

  EXPECT_TRUE(sut) << sut.error().message;
}

TEST(BootId, ParsesTheKernelsTextAndFormatsItBack) {
  const std::string text = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";

  const BootId sut = ParseBootId(text + "\n");

  EXPECT_EQ(sut.high, 0x0a1b2c3d4e5f6789ull);
  EXPECT_EQ(sut.low, 0xabcdef0123456789ull);
  EXPECT_EQ(FormatBootId(sut), text);
  EXPECT_FALSE(ParseBootId("0a1b2c3d-4e5f-6789-abcd-ef012345678").known()) << "31 digits";
  EXPECT_FALSE(ParseBootId("0a1b2c3d-4e5f-6789-abcd-ef01234567890").known()) << "33 digits";
  EXPECT_FALSE(ParseBootId("0a1b2c3d-4e5f-6789-abcd-ef012345678x").known());
  EXPECT_EQ(FormatBootId(BootId{}), "unknown");
  EXPECT_TRUE(CurrentBootId().known());
}

// What the daemon replaces (a fresh segment cures it) and what it must not paper over.
TEST(SegmentValidation, OnlyAFileOrCounterFaultIsADamagedSegment) {
  for (const SegmentError damaged :
       {SegmentError::kBadMagic, SegmentError::kIncompatibleVersion, SegmentError::kTruncated,
        SegmentError::kSizeMismatch, SegmentError::kBadCapacity, SegmentError::kBadEpoch,
        SegmentError::kCorruptCounters,
        SegmentError::kUnpaired, SegmentError::kEarlierBoot}) {
    EXPECT_TRUE(IsDamagedSegmentError(damaged)) << SegmentErrorName(damaged);
  }
  for (const SegmentError other :
       {SegmentError::kNotFound, SegmentError::kPermissionDenied, SegmentError::kNotRegularFile,
        SegmentError::kWrongOwner, SegmentError::kModeTooOpen, SegmentError::kNotIncreasing,
        SegmentError::kUnsealed, SegmentError::kSystemError}) {
    EXPECT_FALSE(IsDamagedSegmentError(other)) << SegmentErrorName(other);
  }
}

// Inside a user namespace that does not map the daemon's group, files show the kernel's
// overflow gid: the advice is to map the group, never to join "nogroup".
TEST(GroupAccessAdvice, AnUnmappedGroupAsksForAMappingNotAMembership) {
  std::ifstream in("/proc/sys/kernel/overflowgid");
  gid_t overflow = 65534;
  in >> overflow;
  ASSERT_TRUE(IsOverflowGroup(overflow));
  const std::string unmapped = GroupAccessAdvice(overflow, "join it");
  EXPECT_NE(unmapped.find("user namespace that does not map the daemon's group"), std::string::npos)
      << unmapped;
  EXPECT_EQ(unmapped.find("join it"), std::string::npos) << unmapped;

  ASSERT_FALSE(IsOverflowGroup(4101));
  const std::string member = GroupAccessAdvice(4101, "join it");
  EXPECT_EQ(member.rfind("join it", 0), 0u) << member;
  EXPECT_NE(member.find("--group-add 4101"), std::string::npos) << member;
  EXPECT_NE(member.find("supplementalGroups: [4101]"), std::string::npos) << member;
}

}  // namespace
}  // namespace snowflake::shm
