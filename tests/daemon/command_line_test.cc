#include "daemon/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "temp_dir.h"

namespace snowflake::daemon {
namespace {

using ::testing::HasSubstr;

tl::expected<CommandLine, int> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "snowflaked");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

TEST(CommandLine, NoArgumentsMeansBuiltInDefaults) {
  auto sut = Parse({});

  ASSERT_TRUE(sut);
  EXPECT_FALSE(sut->config_path);
  auto config = ResolveConfig(*sut);
  ASSERT_TRUE(config);
  EXPECT_EQ(*config, Config{});
}

TEST(CommandLine, FlagsOverrideTheFile) {
  // Arrange
  snowflake::testing::TempDir dir;
  const auto path = dir / "c.toml";
  std::ofstream(path) << "[daemon]\nruntime_dir = \"/x/run\"\nlog_level = \"error\"\n"
                         "[ring]\ncapacity = 8\n";
  const std::string config_arg = path.string();

  // Act
  auto sut = Parse({"--config", config_arg.c_str(), "--runtime-dir", "/y/run", "--state-dir",
                    "/y/state", "--log-level", "debug"});

  // Assert
  ASSERT_TRUE(sut);
  auto config = ResolveConfig(*sut);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->daemon.runtime_dir, "/y/run");
  EXPECT_EQ(config->daemon.state_dir, "/y/state");
  EXPECT_EQ(config->daemon.log_level, "debug");
  EXPECT_EQ(config->ring.capacity, 8u);
}

TEST(CommandLine, RelativeDirectoriesBecomeAbsolute) {
  auto sut = Parse({"--runtime-dir", "rel/run"});

  ASSERT_TRUE(sut);
  auto config = ResolveConfig(*sut);
  ASSERT_TRUE(config);
  EXPECT_TRUE(config->daemon.runtime_dir.is_absolute());
  EXPECT_EQ(config->daemon.runtime_dir.filename(), "run");
}

TEST(CommandLine, BadLogLevelIsAConfigError) {
  auto sut = Parse({"--log-level", "loud"});

  ASSERT_TRUE(sut);
  auto config = ResolveConfig(*sut);
  ASSERT_FALSE(config);
  EXPECT_THAT(config.error().message, HasSubstr("--log-level: must be one of"));
}

TEST(CommandLine, ModeFlagsAreParsed) {
  auto sut = Parse({"--check-config", "--print-default-config", "--version"});

  ASSERT_TRUE(sut);
  EXPECT_TRUE(sut->check_config);
  EXPECT_TRUE(sut->print_default_config);
  EXPECT_TRUE(sut->version);
}

TEST(CommandLine, UnknownFlagExitsWithTwo) {
  auto sut = Parse({"--bogus"});

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error(), 2);
}

TEST(CommandLine, HelpExitsWithZero) {
  auto sut = Parse({"--help"});

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error(), 0);
}

}  // namespace
}  // namespace snowflake::daemon
