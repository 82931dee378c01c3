#include "daemon/core/high_water_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/core/state_identity.h"
#include "daemon/instance_lock.h"
#include "temp_dir.h"
#include "util/atomic_file.h"

namespace snowflake::daemon {
namespace {

using ::testing::HasSubstr;

HighWaterState Reserved(int64_t through) {
  HighWaterState state;
  state.reserved_through_unix_ms = through;
  return state;
}

TEST(HighWaterStore, MissingFileIsAFirstStart) {
  snowflake::testing::TempDir dir;
  HighWaterStore sut(dir / "high-water.json");

  auto loaded = sut.Load();

  ASSERT_TRUE(loaded);
  EXPECT_FALSE(loaded->has_value());
}

TEST(HighWaterStore, SaveThenLoadRoundTrips) {
  // Arrange
  snowflake::testing::TempDir dir;
  HighWaterStore sut(dir / "high-water.json");
  const HighWaterState running{.machine = 3,
                               .epoch_unix_ms = 10,
                               .reserved_through_unix_ms = 500,
                               .last_issued_unix_ms_at_clean_stop = std::nullopt,
                               .segment_path = std::nullopt,
                               .segment_incarnation = 0};
  // The segment the reservation covered round-trips too (a fast restart relies on it).
  const HighWaterState stopped{.machine = 3,
                               .epoch_unix_ms = 10,
                               .reserved_through_unix_ms = 420,
                               .last_issued_unix_ms_at_clean_stop = 420,
                               .segment_path = "/run/x/snowflake.ring",
                               .segment_incarnation = 9};
  // So do the claim and the register's identity (a restart's trust and a restored etcd's
  // detection rely on them); the cluster id uses all 64 bits, as etcd's do.
  const HighWaterState registered{.machine = 3,
                                  .epoch_unix_ms = 10,
                                  .reserved_through_unix_ms = 420,
                                  .last_issued_unix_ms_at_clean_stop = std::nullopt,
                                  .segment_path = "/run/x/snowflake.ring",
                                  .segment_incarnation = 9,
                                  .register_claim = 7'587'869'141'920'127'761,
                                  .register_seen = {.cluster_id = 0xcdf818194e3a8c32ULL,
                                                    .revision = 123'456,
                                                    .fence_revision = 98'765},
                                  .floor_unix_ms = 400};

  // Act
  ASSERT_TRUE(sut.Save(running));
  auto first = sut.Load();
  ASSERT_TRUE(sut.Save(stopped));
  auto second = sut.Load();
  ASSERT_TRUE(sut.Save(registered));
  auto third = sut.Load();

  // Assert
  ASSERT_TRUE(first && first->has_value());
  EXPECT_EQ(**first, running);
  ASSERT_TRUE(second && second->has_value());
  EXPECT_EQ(**second, stopped);
  ASSERT_TRUE(third && third->has_value()) << (third ? "" : third.error().message);
  EXPECT_EQ(**third, registered);
}

TEST(HighWaterStore, SaveLeavesNoTemporaryFileBehind) {
  snowflake::testing::TempDir dir;
  HighWaterStore sut(dir / "high-water.json");

  ASSERT_TRUE(sut.Save(HighWaterState{}));
  ASSERT_TRUE(sut.Save(Reserved(5)));

  // The state file and the state directory's lock, nothing else.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"high-water.json", "high-water.json.lock"}));
}

TEST(HighWaterStore, FailedSaveKeepsThePreviousFile) {
  // Arrange: the temporary file's name is taken by a directory, so the write fails.
  snowflake::testing::TempDir dir;
  HighWaterStore sut(dir / "high-water.json");
  ASSERT_TRUE(sut.Save(Reserved(7)));
  std::filesystem::create_directory(dir / ("high-water.json.tmp." + std::to_string(getpid())));

  // Act
  auto saved = sut.Save(Reserved(8));

  // Assert
  ASSERT_FALSE(saved);
  EXPECT_EQ(saved.error().code, HighWaterErrorCode::kIo);
  auto loaded = sut.Load();
  ASSERT_TRUE(loaded && loaded->has_value());
  EXPECT_EQ((*loaded)->reserved_through_unix_ms, 7);
}

TEST(HighWaterStore, CorruptFileIsAClearError) {
  for (
      const char* text :
      {"", "{", "[1]", R"({"version":2})", R"({"version":1,"machine":1,"epoch_unix_ms":0})",
       R"({"version":1,"machine":1,"epoch_unix_ms":0,"reserved_through_unix_ms":"x","last_issued_unix_ms_at_clean_stop":null})",
       R"({"version":1,"machine":1,"epoch_unix_ms":0,"reserved_through_unix_ms":-4,"last_issued_unix_ms_at_clean_stop":null})"}) {
    snowflake::testing::TempDir dir;
    std::ofstream(dir / "high-water.json") << text;
    HighWaterStore sut(dir / "high-water.json");

    auto loaded = sut.Load();

    ASSERT_FALSE(loaded) << text;
    EXPECT_EQ(loaded.error().code, HighWaterErrorCode::kCorrupt) << text;
    EXPECT_THAT(loaded.error().message, HasSubstr("high-water.json is corrupt")) << text;
  }
}

TEST(AtomicFile, WriteReplacesContents) {
  snowflake::testing::TempDir dir;
  ASSERT_TRUE(util::WriteFileAtomically(dir / "f", "one"));

  ASSERT_TRUE(util::WriteFileAtomically(dir / "f", "two"));

  EXPECT_EQ(util::ReadWholeFile(dir / "f").value(), "two");
}

TEST(InstanceLock, SecondDaemonIsRefusedNamingTheHolder) {
  // Arrange
  snowflake::testing::TempDir dir;
  auto first = AcquireInstanceLock(dir.path());
  ASSERT_TRUE(first) << first.error().message;

  // Act
  auto sut = AcquireInstanceLock(dir.path());

  // Assert
  ASSERT_FALSE(sut);
  EXPECT_TRUE(sut.error().already_running);
  EXPECT_EQ(sut.error().message, "another snowflaked (pid " + std::to_string(getpid()) +
                                     ") already serves " + dir.path().string());
}

TEST(InstanceLock, FreedWhenTheHolderGoesAway) {
  snowflake::testing::TempDir dir;
  {
    auto first = AcquireInstanceLock(dir.path());
    ASSERT_TRUE(first);
  }

  auto sut = AcquireInstanceLock(dir.path());

  EXPECT_TRUE(sut);
}

TEST(InstanceLock, MissingDirectoryIsASystemError) {
  snowflake::testing::TempDir dir;

  auto sut = AcquireInstanceLock(dir / "missing");

  ASSERT_FALSE(sut);
  EXPECT_FALSE(sut.error().already_running);
}

// The state directory's identity (core/state_identity.h). Property: written once, at the
// first call, as 32 lowercase hex digits; every later call returns it unchanged; a file
// that is not an identity, or a link, is refused, never replaced.
TEST(StateIdentity, IsCreatedOnceAndKept) {
  // Arrange
  snowflake::testing::TempDir dir;

  // Act
  auto first = LoadOrCreateStateIdentity(dir.path());
  auto second = LoadOrCreateStateIdentity(dir.path());

  // Assert
  ASSERT_TRUE(first) << first.error();
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(first->size(), 32u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos) << *first;
  EXPECT_EQ(*second, *first);
  std::ifstream in(dir / "identity");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, *first);
  EXPECT_FALSE(std::filesystem::exists(dir / "identity.tmp"));
}

TEST(StateIdentity, TwoDirectoriesGetDifferentIdentities) {
  snowflake::testing::TempDir a;
  snowflake::testing::TempDir b;

  auto sut_a = LoadOrCreateStateIdentity(a.path());
  auto sut_b = LoadOrCreateStateIdentity(b.path());

  ASSERT_TRUE(sut_a && sut_b);
  EXPECT_NE(*sut_a, *sut_b);
}

TEST(StateIdentity, AFileThatIsNotAnIdentityIsRefusedAndKept) {
  // Arrange
  snowflake::testing::TempDir dir;
  std::ofstream(dir / "identity") << "/var/lib/snowflaked\n";

  // Act
  auto sut = LoadOrCreateStateIdentity(dir.path());

  // Assert
  ASSERT_FALSE(sut);
  EXPECT_THAT(sut.error(), HasSubstr((dir / "identity").string()));
  EXPECT_THAT(sut.error(), HasSubstr("Delete it"));
  std::ifstream in(dir / "identity");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "/var/lib/snowflaked");
}

TEST(StateIdentity, ASymlinkIsNeverFollowed) {
  // Arrange: the identity of another directory, linked.
  snowflake::testing::TempDir dir;
  snowflake::testing::TempDir other;
  auto theirs = LoadOrCreateStateIdentity(other.path());
  ASSERT_TRUE(theirs);
  std::filesystem::create_symlink(other / "identity", dir / "identity");

  // Act
  auto sut = LoadOrCreateStateIdentity(dir.path());

  // Assert
  ASSERT_FALSE(sut) << "took another directory's identity through a link: " << *sut;
}

}  // namespace
}  // namespace snowflake::daemon

namespace snowflake::daemon {
namespace {

// Finding 2 of issue 9: two daemons sharing a state directory overwrote each other's
// high-water file. The second store on a directory is refused, naming the holder.
TEST(HighWaterStore, ASecondStoreOnOneStateDirectoryIsRefused) {
  // Arrange
  snowflake::testing::TempDir dir;
  HighWaterStore first(dir / "high-water.json");
  ASSERT_TRUE(first.Load());
  HighWaterStore sut(dir / "high-water.json");

  // Act
  auto loaded = sut.Load();
  auto saved = sut.Save(HighWaterState{.machine = 1, .epoch_unix_ms = 0,
                                       .reserved_through_unix_ms = 5,
                                       .last_issued_unix_ms_at_clean_stop = std::nullopt,
                                       .segment_path = std::nullopt,
                                       .segment_incarnation = 0});

  // Assert
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, HighWaterErrorCode::kInUse);
  EXPECT_THAT(loaded.error().message, ::testing::HasSubstr("in use by pid " +
                                                           std::to_string(getpid())));
  EXPECT_THAT(loaded.error().message, ::testing::HasSubstr("daemon.state_dir"));
  ASSERT_FALSE(saved);
  EXPECT_EQ(saved.error().code, HighWaterErrorCode::kInUse);
}

TEST(HighWaterStore, TheStateDirectoryIsFreeAgainOnceTheStoreIsGone) {
  snowflake::testing::TempDir dir;
  { HighWaterStore first(dir / "high-water.json"); ASSERT_TRUE(first.Load()); }
  HighWaterStore sut(dir / "high-water.json");

  auto loaded = sut.Load();

  EXPECT_TRUE(loaded) << loaded.error().message;
}

}  // namespace
}  // namespace snowflake::daemon
