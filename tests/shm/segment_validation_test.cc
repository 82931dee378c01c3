// Bad segments: each is refused with its own SegmentError and a message that names the
// file (or the group to join), so an operator knows what to fix. The segment (the ring
// file and its consumer file) is made valid by a real producer, then damaged with
// pwrite/truncate/chmod at the offsets shm/LAYOUT.md documents.

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "ring_test_util.h"
#include "snowflake/account_names.h"
#include "snowflake/boot_id.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "snowflake/segment_layout.h"
#include "temp_dir.h"

namespace snowflake::shm {
namespace {

using snowflake::testing::TempDir;
using testing::MakeProducer;
using testing::Unwrap;

constexpr uid_t kNobody = 65534;

// A valid, serving segment of `capacity` slots in a fresh directory; the producer is
// closed again (the file stays), so tests damage a file nobody is writing.
class BadSegment : public ::testing::Test {
 protected:
  void SetUp() override {
    RingProducer producer = MakeProducer(dir_.path(), kCapacity);
    producer.SetState(DaemonState::kServing);
  }

  std::filesystem::path path() const { return dir_.path() / kSegmentFileName; }
  std::string consumer_path() const { return ConsumerFilePath(path().string()); }

  // Writes `value` at `offset` of the ring file (header and slots).
  template <typename T>
  void Poke(uint64_t offset, T value) {
    PokeFile(path().string(), offset, value);
  }
  // Writes `value` at `offset` of the consumer file (the consumer region).
  template <typename T>
  void PokeConsumer(uint64_t offset, T value) {
    PokeFile(consumer_path(), offset, value);
  }
  template <typename T>
  static void PokeFile(const std::string& file, uint64_t offset, T value) {
    const int fd = open(file.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, &value, sizeof(value), static_cast<off_t>(offset)),
              static_cast<ssize_t>(sizeof(value)));
    close(fd);
  }

  SegmentFailure OpenFails(const ConsumerOptions& options = {}) {
    auto consumer = RingConsumer::Open(dir_.path(), options);
    EXPECT_FALSE(consumer) << "opened a bad segment";
    return consumer ? SegmentFailure{} : consumer.error();
  }

  static constexpr uint64_t kCapacity = 1024;  // two slot pages, so truncation can cut one
  TempDir dir_;
};

bool Names(const SegmentFailure& failure, const std::string& text) {
  return failure.message.find(text) != std::string::npos;
}

TEST_F(BadSegment, ValidSegmentOpens) {
  auto sut = RingConsumer::Open(dir_.path());

  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->capacity(), kCapacity);
}

TEST(SegmentValidation, MissingFileIsNotFound) {
  TempDir dir;

  const auto sut = RingConsumer::Open(dir.path());

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, SegmentError::kNotFound);
  EXPECT_TRUE(Names(sut.error(), (dir.path() / kSegmentFileName).string())) << sut.error().message;
  EXPECT_TRUE(Names(sut.error(), "not running")) << sut.error().message;
}

TEST(SegmentValidation, MissingRuntimeDirIsNotFound) {
  TempDir dir;
  const std::filesystem::path missing = dir.path() / "no-such-dir";

  const auto sut = RingConsumer::Open(missing);

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

TEST_F(BadSegment, CapacityNotAPowerOfTwoIsBadCapacity) {
  Poke<uint64_t>(offsetof(SegmentHeader, capacity), 1000);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kBadCapacity);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "capacity 1000")) << sut.message;
}

TEST_F(BadSegment, HeadAboveTailIsCorruptCounters) {
  Poke<uint64_t>(offsetof(SegmentHeader, tail), 3);
  PokeConsumer<uint64_t>(offsetof(ConsumerRegion, head), 5);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kCorruptCounters);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "head 5, tail 3")) << sut.message;
}

TEST_F(BadSegment, TailBeyondHeadPlusCapacityIsCorruptCounters) {
  Poke<uint64_t>(offsetof(SegmentHeader, tail), 10 + kCapacity + 1);
  PokeConsumer<uint64_t>(offsetof(ConsumerRegion, head), 10);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kCorruptCounters);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
}

TEST_F(BadSegment, TailExactlyHeadPlusCapacityIsAFullRing) {
  Poke<uint64_t>(offsetof(SegmentHeader, tail), 10 + kCapacity);
  PokeConsumer<uint64_t>(offsetof(ConsumerRegion, head), 10);

  auto sut = RingConsumer::Open(dir_.path());

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

TEST_F(BadSegment, RingFileIsReadOnlyForTheGroupAndTheConsumerFileIsNot) {
  struct stat ring {};
  struct stat consumer {};

  ASSERT_EQ(stat(path().c_str(), &ring), 0);
  ASSERT_EQ(stat(consumer_path().c_str(), &consumer), 0);

  // The producer was asked for 0660: the ring file drops the group's write bit.
  EXPECT_EQ(ring.st_mode & 07777, 0640u);
  EXPECT_EQ(consumer.st_mode & 07777, 0660u);
  EXPECT_EQ(consumer.st_size, static_cast<off_t>(kConsumerFileSize));
}

TEST_F(BadSegment, GroupWritableRingFileIsModeTooOpen) {
  ASSERT_EQ(chmod(path().c_str(), 0660), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kModeTooOpen);
  EXPECT_TRUE(Names(sut, path().string())) << sut.message;
  EXPECT_TRUE(Names(sut, "0660")) << sut.message;
  EXPECT_TRUE(Names(sut, "forge IDs")) << sut.message;
}

TEST_F(BadSegment, ConsumerFileReadableByOthersIsModeTooOpen) {
  ASSERT_EQ(chmod(consumer_path().c_str(), 0664), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kModeTooOpen);
  EXPECT_TRUE(Names(sut, consumer_path())) << sut.message;
}

TEST_F(BadSegment, MissingConsumerFileIsUnpaired) {
  ASSERT_EQ(unlink(consumer_path().c_str()), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kUnpaired);
  EXPECT_TRUE(Names(sut, consumer_path())) << sut.message;
  EXPECT_TRUE(Names(sut, "retry")) << sut.message;
}

TEST_F(BadSegment, ConsumerFileOfAnotherSegmentIsUnpaired) {
  PokeConsumer<uint64_t>(offsetof(ConsumerRegion, segment_id), 12345);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kUnpaired);
  EXPECT_TRUE(Names(sut, "segment id 12345")) << sut.message;
}

TEST_F(BadSegment, TruncatedConsumerFileIsTruncated) {
  ASSERT_EQ(truncate(consumer_path().c_str(), static_cast<off_t>(kPageSize)), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kTruncated);
  EXPECT_TRUE(Names(sut, consumer_path())) << sut.message;
}

TEST_F(BadSegment, GrownConsumerFileIsSizeMismatch) {
  ASSERT_EQ(truncate(consumer_path().c_str(), static_cast<off_t>(kConsumerFileSize + kPageSize)), 0);

  const SegmentFailure sut = OpenFails();

  EXPECT_EQ(sut.code, SegmentError::kSizeMismatch);
  EXPECT_TRUE(Names(sut, consumer_path())) << sut.message;
}

TEST_F(BadSegment, ProducerRetiresAnUnpairedSegmentAndCreatesAFreshPair) {
  ASSERT_EQ(unlink(consumer_path().c_str()), 0);

  const auto refused = RingProducer::CreateOrOpen(testing::OptionsFor(dir_.path(), kCapacity));
  RingProducer::Retire(dir_.path());
  const auto fresh = RingProducer::CreateOrOpen(testing::OptionsFor(dir_.path(), kCapacity));

  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, SegmentError::kUnpaired);
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_FALSE(fresh->continued());
  EXPECT_TRUE(RingConsumer::Open(dir_.path())) << "the fresh pair opens";
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

  const auto sut = RingConsumer::Open(dir.path());

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
}

// Opens the segment as user and group `nobody` in a child process (we run as root in CI,
// and root is never refused) and reports the error code and message through a pipe.
struct ChildResult {
  int code = -1;  // static_cast<int>(SegmentError), or -1 if it opened, -2 on setup failure
  std::string message;
};

ChildResult OpenAsNobody(const std::filesystem::path& dir) {
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
    auto consumer = RingConsumer::Open(dir, ConsumerOptions{.expected_owner = 0});
    if (consumer) report(-1, "opened");
    report(static_cast<int>(consumer.error().code), consumer.error().message);
  }
  close(out[1]);
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

ChildResult OpenWithoutPermission(const std::filesystem::path& dir) {
  if (AsRoot()) return OpenAsNobody(dir);
  auto consumer = RingConsumer::Open(dir);
  if (consumer) return {-1, "opened"};
  return {static_cast<int>(consumer.error().code), consumer.error().message};
}

TEST_F(BadSegment, UnreadableFileIsPermissionDeniedNamingTheGroup) {
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  ASSERT_EQ(chown(path().c_str(), getuid(), SegmentGroup()), 0);
  ASSERT_EQ(chmod(path().c_str(), AsRoot() ? 0640 : 0040), 0);

  const ChildResult sut = OpenWithoutPermission(dir_.path());

  ASSERT_NE(sut.code, -2) << sut.message;
  EXPECT_EQ(sut.code, static_cast<int>(SegmentError::kPermissionDenied)) << sut.message;
  EXPECT_NE(sut.message.find(path().string()), std::string::npos) << sut.message;
  EXPECT_NE(sut.message.find("add this user to group " + GroupName(SegmentGroup())),
            std::string::npos)
      << sut.message;
}

// What a member of the clients' group can do to the files (as root: nobody in group
// `daemon`): read the ring file, read and write the consumer file, and nothing else — no
// write, no truncation of the header and slots.
TEST_F(BadSegment, GroupMemberCannotWriteOrTruncateTheRingFile) {
  if (!AsRoot()) GTEST_SKIP() << "needs root to act as a group member of another uid";
  ASSERT_EQ(chown(dir_.path().c_str(), 0, SegmentGroup()), 0);
  ASSERT_EQ(chmod(dir_.path().c_str(), 0750), 0);
  for (const std::string& file : {path().string(), consumer_path()}) {
    ASSERT_EQ(chown(file.c_str(), 0, SegmentGroup()), 0);
  }
  const std::string ring = path().string();
  const std::string consumer = consumer_path();
  int out[2];
  ASSERT_EQ(pipe(out), 0);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    const gid_t group = SegmentGroup();
    char result[6] = "-----";
    if (setgroups(1, &group) == 0 && setgid(kNobody) == 0 && setuid(kNobody) == 0) {
      auto outcome = [](int fd_or_status) {
        if (fd_or_status >= 0) return 'y';
        return errno == EACCES || errno == EPERM ? 'n' : '?';
      };
      const int write_ring = open(ring.c_str(), O_RDWR | O_CLOEXEC);
      result[0] = outcome(write_ring);
      result[1] = outcome(truncate(ring.c_str(), 0));
      result[2] = outcome(open(ring.c_str(), O_RDONLY | O_CLOEXEC));
      result[3] = outcome(open(consumer.c_str(), O_RDWR | O_CLOEXEC));
      auto opened = RingConsumer::Open(dir_.path(), ConsumerOptions{.expected_owner = 0});
      result[4] = opened ? 'y' : 'n';
    }
    const ssize_t ignored = write(out[1], result, 5);
    (void)ignored;
    _exit(0);
  }
  close(out[1]);
  char result[6] = {};
  const ssize_t n = read(out[0], result, 5);
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  chmod(dir_.path().c_str(), 0700);

  ASSERT_EQ(n, 5);
  // open(O_RDWR) and truncate of the ring file refused; read-only open, the consumer
  // file and a client's whole open allowed.
  EXPECT_EQ(std::string(result, 5), "nnyyy");
  struct stat info {};
  ASSERT_EQ(stat(ring.c_str(), &info), 0);
  EXPECT_EQ(static_cast<uint64_t>(info.st_size), SegmentSizeFor(kCapacity)) << "not truncated";
}

TEST_F(BadSegment, UnsearchableRuntimeDirIsPermissionDeniedNamingTheGroup) {
  ASSERT_EQ(chown(dir_.path().c_str(), getuid(), SegmentGroup()), 0);
  ASSERT_EQ(chmod(dir_.path().c_str(), AsRoot() ? 0750 : 0050), 0);

  const ChildResult sut = OpenWithoutPermission(dir_.path());
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
  auto same_boot = RingConsumer::Open(dir_.path(), of_this_boot);

  EXPECT_EQ(sut.code, SegmentError::kEarlierBoot) << sut.message;
  EXPECT_TRUE(Names(sut, "left by an earlier boot of this host")) << sut.message;
  EXPECT_TRUE(Names(sut, FormatBootId(this_boot))) << sut.message;
  EXPECT_TRUE(Names(sut, "snowflaked is not running")) << sut.message;
  EXPECT_TRUE(same_boot) << same_boot.error().message;
}

TEST_F(BadSegment, SegmentThatRecordsNoBootIdOpens) {
  Poke<uint64_t>(272, 0);
  Poke<uint64_t>(280, 0);

  auto sut = RingConsumer::Open(dir_.path());

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
        SegmentError::kSizeMismatch, SegmentError::kBadCapacity, SegmentError::kCorruptCounters,
        SegmentError::kUnpaired, SegmentError::kEarlierBoot}) {
    EXPECT_TRUE(IsDamagedSegmentError(damaged)) << SegmentErrorName(damaged);
  }
  for (const SegmentError other :
       {SegmentError::kNotFound, SegmentError::kPermissionDenied, SegmentError::kNotRegularFile,
        SegmentError::kWrongOwner, SegmentError::kModeTooOpen, SegmentError::kNotIncreasing,
        SegmentError::kSystemError}) {
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
