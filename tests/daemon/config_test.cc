#include "daemon/config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "error_of.h"
#include "register/register_settings.h"
#include "snowflake/time_text.h"
#include "temp_dir.h"

namespace snowflake::daemon {
namespace {

using testing::ErrorOf;
using ::testing::HasSubstr;

// Where the texts below come from, as their errors name it.
constexpr std::string_view kConfigPath = "/etc/snowflaked.toml";

TEST(Config, DefaultTextParsesToBuiltInDefaults) {
  // Arrange
  const Config defaults;

  // Act
  auto sut = ParseConfig(DefaultConfigText(), "built-in defaults");

  // Assert
  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(*sut, defaults);
}

TEST(Config, DefaultTextSetsEveryKeyExplicitly) {
  // The sample documents every key: each one appears (machine commented out, as it only
  // applies to the static backend).
  const std::string_view text = DefaultConfigText();
  for (const char* key : {"runtime_dir =",    "state_dir =",
                          "instance =",       "log_level =",
                          "group =",          "liveness_ms =",
                          "epoch =",          "layout =",
                          "backend =",        "path =",
                          "machines =",       "holder_id =",
                          "# machine =",      "max_backward_ms =",
                          "max_forward_ms =", "capacity =",
                          "max_age_ms =",     "min_fill =",
                          "reservation_ms =", "status_interval_ms ="}) {
    EXPECT_NE(text.find(key), std::string_view::npos) << key;
  }
}

TEST(Config, EmptyTextGivesDefaults) {
  auto sut = ParseConfig("", "x.toml");

  ASSERT_TRUE(sut);
  EXPECT_EQ(*sut, Config{});
}

TEST(Config, ParsesEveryKey) {
  // Arrange
  const std::string text = R"(
[daemon]
runtime_dir = "/tmp/rt"
state_dir = "/tmp/st"
instance = "b-2"
log_level = "debug"
group = "snowflake"
[id]
epoch = 1700000000000
[register]
backend = "static"
path = "/tmp/reg.json"
machines = "3-7"
holder_id = "host-a"
machine = 5
[clock]
max_backward_ms = 20
max_forward_ms = 3600000
[ring]
capacity = 1024
max_age_ms = 10
min_fill = 16
[persistence]
reservation_ms = 500
[systemd]
status_interval_ms = 2000
)";

  // Act
  auto sut = ParseConfig(text, "x.toml");

  // Assert
  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->daemon.runtime_dir, "/tmp/rt");
  EXPECT_EQ(sut->daemon.state_dir, "/tmp/st");
  EXPECT_EQ(sut->daemon.instance, "b-2");
  EXPECT_EQ(sut->daemon.log_level, "debug");
  EXPECT_EQ(sut->daemon.group, "snowflake");
  EXPECT_EQ(sut->id.epoch_unix_ms, 1'700'000'000'000);
  EXPECT_EQ(sut->machine_register.backend(), "static");
  EXPECT_EQ(sut->machine_register.path, "/tmp/reg.json");
  EXPECT_EQ(sut->machine_register.first_machine, 3u);
  EXPECT_EQ(sut->machine_register.last_machine, 7u);
  EXPECT_EQ(sut->machine_register.holder_id, "host-a");
  EXPECT_EQ(std::get<reg::StaticRegisterConfig>(sut->machine_register.options).machine, 5u);
  EXPECT_EQ(sut->clock.max_backward_ms, 20);
  EXPECT_EQ(sut->clock.max_forward_ms, 3'600'000);
  EXPECT_EQ(sut->ring.capacity, 1024u);
  EXPECT_EQ(sut->ring.max_age_ms, 10);
  EXPECT_EQ(sut->ring.min_fill, 16u);
  EXPECT_EQ(sut->persistence.reservation_ms, 500);
  EXPECT_EQ(sut->systemd.status_interval_ms, 2000);
  EXPECT_EQ(sut->RegisterPath(), "/tmp/reg.json");
  EXPECT_EQ(sut->HighWaterPath(), "/tmp/st/high-water.json");
}

TEST(Config, RegisterPathDefaultsToStateDir) {
  auto sut = ParseConfig("[daemon]\nstate_dir = \"/srv/x\"\n", "x.toml");

  ASSERT_TRUE(sut);
  EXPECT_EQ(sut->RegisterPath(), "/srv/x/register.json");
}

TEST(Config, UnknownKeyIsAnErrorNamingKeyAndLine) {
  EXPECT_EQ(ErrorOf(ParseConfig("[ring]\ncapacity = 8\ncapacty = 8\n", kConfigPath)),
            "/etc/snowflaked.toml:3: ring.capacty: unknown key");
}

TEST(Config, UnknownTableIsAnError) {
  EXPECT_THAT(ErrorOf(ParseConfig("\n[rings]\ncapacity = 8\n", kConfigPath)),
              HasSubstr("/etc/snowflaked.toml:2: rings: unknown table (known: clock, daemon, "
                        "http, id, persistence, register, ring, systemd)"));
}

TEST(Config, UnknownNestedTableIsAnError) {
  EXPECT_THAT(ErrorOf(ParseConfig("[ring.extra]\nx = 1\n", kConfigPath)),
              HasSubstr(":1: ring.extra: unknown key"));
}

TEST(Config, TopLevelKeyIsAnError) {
  EXPECT_THAT(ErrorOf(ParseConfig("capacity = 8\n", kConfigPath)),
              HasSubstr(":1: capacity: unknown table"));
}

TEST(Config, SectionThatIsNotATableIsAnError) {
  EXPECT_THAT(ErrorOf(ParseConfig("ring = 5\n", kConfigPath)),
              HasSubstr(":1: ring: must be a table, got an integer"));
}

TEST(Config, WrongTypeIsAnError) {
  EXPECT_EQ(ErrorOf(ParseConfig("[ring]\ncapacity = \"4096\"\n", kConfigPath)),
            "/etc/snowflaked.toml:2: ring.capacity: must be an integer, got a string");
  EXPECT_EQ(ErrorOf(ParseConfig("[daemon]\n\nruntime_dir = 3\n", kConfigPath)),
            "/etc/snowflaked.toml:3: daemon.runtime_dir: must be a string, got an integer");
  EXPECT_THAT(ErrorOf(ParseConfig("[clock]\nmax_backward_ms = 1.5\n", kConfigPath)),
              HasSubstr(":2: clock.max_backward_ms: must be an integer, got a float"));
}

TEST(Config, CapacityMustBeAPowerOfTwo) {
  EXPECT_EQ(ErrorOf(ParseConfig("[ring]\n\n\n\n\n\n\n\n\n\n\ncapacity = 1000\n", kConfigPath)),
            "/etc/snowflaked.toml:12: ring.capacity: must be a power of two from 1 to 1048576, "
            "got 1000");
  EXPECT_THAT(ErrorOf(ParseConfig("[ring]\ncapacity = 0\n", kConfigPath)),
              HasSubstr("power of two"));
  EXPECT_THAT(ErrorOf(ParseConfig("[ring]\ncapacity = 2097152\n", kConfigPath)),
              HasSubstr("power of two"));
  EXPECT_TRUE(ParseConfig("[ring]\ncapacity = 1\nmin_fill = 1\n", "x"));
  EXPECT_TRUE(ParseConfig("[ring]\ncapacity = 1048576\n", "x"));
}

TEST(Config, OutOfRangeIsAnError) {
  EXPECT_EQ(ErrorOf(ParseConfig("[clock]\nmax_backward_ms = -1\n", kConfigPath)),
            "/etc/snowflaked.toml:2: clock.max_backward_ms: must be from 0 to 60000, got -1");
  EXPECT_THAT(ErrorOf(ParseConfig("[ring]\nmax_age_ms = -1\n", kConfigPath)),
              HasSubstr("ring.max_age_ms: must be from 0"));
  EXPECT_EQ(ErrorOf(ParseConfig("[clock]\nmax_forward_ms = 1000\n", kConfigPath)),
            "/etc/snowflaked.toml:2: clock.max_forward_ms: must be from 3600000 (1 h) to "
            "31536000000 (365 days), got 1000");
  EXPECT_THAT(ErrorOf(ParseConfig("[persistence]\nreservation_ms = 0\n", kConfigPath)),
              HasSubstr("persistence.reservation_ms: must be from 1 to 60000, got 0"));
  EXPECT_THAT(ErrorOf(ParseConfig("[systemd]\nstatus_interval_ms = 1\n", kConfigPath)),
              HasSubstr("systemd.status_interval_ms: must be from 10"));
  EXPECT_THAT(
      ErrorOf(ParseConfig("[register]\nbackend = \"static\"\nmachine = 65536\n", kConfigPath)),
      HasSubstr(":3: register.machine: must be from 0 to 65535, below 2^machine bits of "
                "id.layout, got 65536"));
  EXPECT_EQ(ErrorOf(ParseConfig("[daemon]\nliveness_ms = 9\n", kConfigPath)),
            "/etc/snowflaked.toml:2: daemon.liveness_ms: must be from 10 to 10000, got 9");
  EXPECT_THAT(ErrorOf(ParseConfig("[daemon]\nliveness_ms = 10001\n", kConfigPath)),
              HasSubstr("daemon.liveness_ms: must be from 10 to 10000, got 10001"));
}

TEST(Config, LivenessDefaultsTo50AndAcceptsItsRange) {
  EXPECT_EQ(Config{}.daemon.liveness_ms, 50);
  auto low = ParseConfig("[daemon]\nliveness_ms = 10\n", "x.toml");
  auto high = ParseConfig("[daemon]\nliveness_ms = 10000\n", "x.toml");
  ASSERT_TRUE(low && high);
  EXPECT_EQ(low->daemon.liveness_ms, 10);
  EXPECT_EQ(high->daemon.liveness_ms, 10000);
}

TEST(Config, BadStringValuesAreErrors) {
  EXPECT_THAT(ErrorOf(ParseConfig("[daemon]\nlog_level = \"loud\"\n", kConfigPath)),
              HasSubstr(":2: daemon.log_level: must be one of trace"));
  EXPECT_THAT(ErrorOf(ParseConfig("[daemon]\nruntime_dir = \"run\"\n", kConfigPath)),
              HasSubstr("daemon.runtime_dir: must be an absolute path, got \"run\""));
  EXPECT_THAT(ErrorOf(ParseConfig("[daemon]\ninstance = \"a b\"\n", kConfigPath)),
              HasSubstr("daemon.instance: must be"));
  EXPECT_THAT(ErrorOf(ParseConfig("[register]\nbackend = \"zk\"\n", kConfigPath)),
              HasSubstr("register.backend: must be \"file\", \"static\" or \"etcd\", got \"zk\""));
  EXPECT_THAT(ErrorOf(ParseConfig("[register]\nmachines = \"7-3\"\n", kConfigPath)),
              HasSubstr("register.machines: must be"));
  EXPECT_THAT(ErrorOf(ParseConfig("[register]\nmachines = \"0-1024\"\n", kConfigPath)),
              HasSubstr("register.machines"));
}

TEST(Config, MachinesAcceptsOneNumber) {
  auto sut = ParseConfig("[register]\nmachines = \"9\"\n", "x");

  ASSERT_TRUE(sut);
  EXPECT_EQ(sut->machine_register.first_machine, 9u);
  EXPECT_EQ(sut->machine_register.last_machine, 9u);
}

TEST(Config, EpochAcceptsIsoStringDateTimeAndInteger) {
  for (const char* text :
       {"[id]\nepoch = \"2026-01-01T00:00:00Z\"\n", "[id]\nepoch = 2026-01-01T00:00:00Z\n",
        "[id]\nepoch = \"2026-01-01T01:00:00+01:00\"\n", "[id]\nepoch = 1767225600000\n"}) {
    auto sut = ParseConfig(text, "x");
    ASSERT_TRUE(sut) << text << sut.error().message;
    EXPECT_EQ(sut->id.epoch_unix_ms, kDefaultEpochUnixMs) << text;
  }
  auto with_ms = ParseConfig("[id]\nepoch = \"2020-02-29T12:34:56.789Z\"\n", "x");
  ASSERT_TRUE(with_ms);
  EXPECT_EQ(with_ms->id.epoch_unix_ms, 1'582'979'696'789);
}

// The config and snowflakectl (--epoch, bounds) share one time grammar: every text means
// the same instant to both, and what one refuses the other refuses.
TEST(Config, EpochTextMeansWhatParseTimeTextSays) {
  for (const std::string text :
       {"2026-01-01T00:00:00Z", "2026-01-01t05:30:00+05:30", "2026-01-01 00:00:00.5z",
        "2025-12-31T19:00:00.123456789-05:00", "1767225600000", "0", "2024-02-29T23:59:59Z"}) {
    auto sut = ParseConfig("[id]\nepoch = \"" + text + "\"\n", "x");
    auto shared = ParseTimeText(text);

    ASSERT_TRUE(sut) << text << ": " << sut.error().message;
    ASSERT_TRUE(shared) << text << ": " << shared.error();
    EXPECT_EQ(sut->id.epoch_unix_ms, *shared) << text;
  }
  for (const std::string text : {"2026-01-01T00:00:00", "2026-02-30T00:00:00Z", "1e9", "0x10",
                                 "2026-01-01T00:00:00+5:00", ""}) {
    EXPECT_FALSE(ParseConfig("[id]\nepoch = \"" + text + "\"\n", "x")) << text;
    EXPECT_FALSE(ParseTimeText(text)) << text;
  }
}

TEST(Config, LayoutIsAPresetOrBits) {
  for (const auto& [text, bits] :
       std::vector<std::pair<std::string, IdBits>>{{"default", {41, 10, 12}},
                                                   {"8192-hosts", {41, 13, 9}},
                                                   {"65536-hosts", {41, 16, 6}},
                                                   {"42/15/6", {42, 15, 6}}}) {
    auto sut = ParseConfig("[id]\nlayout = \"" + text + "\"\n", kConfigPath);

    ASSERT_TRUE(sut) << text << ": " << sut.error().message;
    EXPECT_EQ(sut->id.bits, bits) << text;
  }
  EXPECT_EQ(ParseConfig("", kConfigPath)->id.bits, kDefaultIdBits);
}

TEST(Config, BadLayoutIsAnErrorThatStatesTheTradeOff) {
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nlayout = \"41/17/6\"\n", kConfigPath)),
              HasSubstr(":2: id.layout: layout \"41/17/6\" is not a layout: time 41 + machine "
                        "17 + sequence 6 = 64 bits, not 63"));
  // What each preset gives, the year counted from the configured epoch.
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nepoch = 0\nlayout = \"41/17/6\"\n", kConfigPath)),
              HasSubstr("\"65536-hosts\" = 41/16/6: 65,536 hosts, 64,000 IDs per second per "
                        "host, until 2039-09-07"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nlayout = \"39/12/12\"\n", kConfigPath)),
              HasSubstr("time 39 bits last only until 2043-06-03"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nlayout = \"huge\"\n", kConfigPath)),
              HasSubstr("is neither a preset nor time/machine/sequence bits"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nlayout = 41\n", kConfigPath)), HasSubstr("id.layout"));
}

TEST(Config, MachinesMustLieWithinTheLayout) {
  EXPECT_THAT(ErrorOf(ParseConfig("[register]\nmachines = \"0-2000\"\n", kConfigPath)),
              HasSubstr(":2: register.machines 0-2000 reaches outside the layout: id.layout "
                        "41/10/12 numbers machines 0-1023"));
  EXPECT_THAT(
      ErrorOf(ParseConfig("[register]\nbackend = \"static\"\nmachine = 1024\n", kConfigPath)),
      HasSubstr(":3: register.machine 1024 is outside the layout: id.layout 41/10/12 "
                "numbers machines 0-1023"));
  auto wide = ParseConfig("[id]\nlayout = \"65536-hosts\"\n[register]\nmachines = \"0-65535\"\n",
                          kConfigPath);
  ASSERT_TRUE(wide) << wide.error().message;
  EXPECT_EQ(wide->machine_register.Common("/s", wide->id.bits).last_machine, 65535u);
  // Unset, the range is the layout's whole.
  auto unset = ParseConfig("[id]\nlayout = \"8192-hosts\"\n", kConfigPath);
  ASSERT_TRUE(unset) << unset.error().message;
  EXPECT_EQ(unset->machine_register.Common("/s", unset->id.bits).last_machine, 8191u);
}

TEST(Config, BadEpochIsAnError) {
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nepoch = \"yesterday\"\n", kConfigPath)),
              HasSubstr(":2: id.epoch: must be Unix milliseconds (e.g. 1767225600000) or an "
                        "RFC 3339 time with a zone"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nepoch = \"2026-01-01T00:00:00\"\n", kConfigPath)),
              HasSubstr("id.epoch: must be"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nepoch = \"2026-01-01T00:00:00Z\\nx = 1\"\n", kConfigPath)),
              HasSubstr("id.epoch"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nepoch = 2026-01-01T00:00:00\n", kConfigPath)),
              HasSubstr("a time zone is required"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nepoch = -5\n", kConfigPath)),
              HasSubstr("id.epoch: must be at or after 1970"));
  EXPECT_THAT(ErrorOf(ParseConfig("[id]\nepoch = true\n", kConfigPath)),
              HasSubstr("got a boolean"));
}

TEST(Config, MinFillAboveCapacityIsAnError) {
  EXPECT_THAT(ErrorOf(ParseConfig("[ring]\ncapacity = 16\nmin_fill = 32\n", kConfigPath)),
              HasSubstr(":3: ring.min_fill: must not exceed ring.capacity (16), got 32"));
}

TEST(Config, DefaultMinFillFollowsASmallCapacity) {
  auto sut = ParseConfig("[ring]\ncapacity = 8\n", "x");

  ASSERT_TRUE(sut);
  EXPECT_EQ(sut->ring.min_fill, 8u);
}

TEST(Config, StaticBackendNeedsMachine) {
  EXPECT_THAT(ErrorOf(ParseConfig("[register]\nbackend = \"static\"\n", kConfigPath)),
              HasSubstr("register.machine: required when register.backend = \"static\""));
}

TEST(Config, MachineWithFileBackendIsAnError) {
  EXPECT_THAT(ErrorOf(ParseConfig("[register]\nmachine = 3\n", kConfigPath)),
              HasSubstr(":2: register.machine: only valid with register.backend = \"static\""));
}

TEST(Config, SyntaxErrorNamesLineAndColumn) {
  EXPECT_THAT(ErrorOf(ParseConfig("[ring]\ncapacity = = 3\n", kConfigPath)),
              HasSubstr("/etc/snowflaked.toml:2:"));
}

TEST(Config, LoadConfigReadsAFile) {
  // Arrange
  snowflake::testing::TempDir dir;
  const auto path = dir / "c.toml";
  std::ofstream(path) << "[ring]\ncapacity = 8\nbogus = 1\n";

  // Act
  auto sut = LoadConfig(path);

  // Assert
  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().message, path.string() + ":3: ring.bogus: unknown key");
}

TEST(Config, LoadConfigOfMissingFileIsAnError) {
  snowflake::testing::TempDir dir;

  auto sut = LoadConfig(dir / "missing.toml");

  ASSERT_FALSE(sut);
  EXPECT_THAT(sut.error().message, HasSubstr("missing.toml: cannot read the config file"));
}

TEST(Config, LoadConfigOfAnEndlessFileFailsAtTheSizeBound) {
  auto sut = LoadConfig("/dev/zero");

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().message,
            "/dev/zero: the config file is larger than 1048576 bytes; is it the right file? "
            "(snowflaked's config is a small TOML file)");
}

TEST(Config, LoadConfigAcceptsAFileAtTheSizeBoundAndRefusesOneByteMore) {
  // Arrange: valid TOML padded with a comment to exactly kMaxConfigBytes.
  snowflake::testing::TempDir dir;
  std::string text = "[ring]\ncapacity = 8\n#";
  text += std::string(util::kMaxConfigBytes - text.size() - 1, 'x') + "\n";
  ASSERT_EQ(text.size(), util::kMaxConfigBytes);
  std::ofstream(dir / "at.toml") << text;
  std::ofstream(dir / "over.toml") << text << "\n";

  // Act
  auto at = LoadConfig(dir / "at.toml");
  auto over = LoadConfig(dir / "over.toml");

  // Assert
  ASSERT_TRUE(at) << at.error().message;
  EXPECT_EQ(at->ring.capacity, 8u);
  ASSERT_FALSE(over);
  EXPECT_THAT(over.error().message, HasSubstr("larger than 1048576 bytes"));
}

// `snowflakectl register` reads the config file with the register's own reader. For each
// file it must see what the daemon sees: the same register, state directory and epoch, and
// the same refusal, word for word, of a bad [register] key or a bad value of the two others.
TEST(RegisterSettings, SeeWhatTheDaemonsConfigSeesInEveryFileThatBothAccept) {
  // Arrange
  snowflake::testing::TempDir dir;
  const std::vector<std::string> texts = {
      std::string(DefaultConfigText()),
      "",
      "[daemon]\nstate_dir = \"/srv/sf\"\n[id]\nepoch = \"2020-01-01T00:00:00Z\"\n",
      "[id]\nepoch = 2021-06-01T12:00:00Z\n[register]\npath = \"/srv/r.json\"\n"
      "machines = \"3-9\"\nholder_id = \"a:b\"\n",
      "[register]\nbackend = \"static\"\nmachine = 7\n",
      "[register]\nbackend = \"etcd\"\nmachines = \"10\"\n[register.etcd]\n"
      "endpoints = [\"http://127.0.0.1:2379\"]\nprefix = \"/sf/\"\n",
      "[id]\nlayout = \"41/16/6\"\n[register]\nmachines = \"60000-65535\"\n",
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE("config " + std::to_string(i) + ":\n" + texts[i]);
    const auto path = dir / ("c" + std::to_string(i) + ".toml");
    std::ofstream(path) << texts[i];

    // Act
    auto config = LoadConfig(path);
    auto settings = reg::LoadRegisterSettings(path);

    // Assert
    ASSERT_TRUE(config) << config.error().message;
    ASSERT_TRUE(settings) << settings.error().message;
    EXPECT_EQ(settings->machine_register, config->machine_register);
    EXPECT_EQ(settings->state_dir, config->daemon.state_dir);
    EXPECT_EQ(settings->epoch_unix_ms, config->id.epoch_unix_ms);
    EXPECT_EQ(settings->id_bits, config->id.bits);
  }
}

TEST(RegisterSettings, RefuseWhatTheDaemonsConfigRefusesOfTheirKeysInTheSameWords) {
  snowflake::testing::TempDir dir;
  const std::vector<std::string> texts = {
      "[register]\nbackend = \"zk\"\n",
      "[register]\nmachine = 3\n",
      "[register]\nbackend = \"static\"\nbogus = 1\n",
      "[register]\nmachines = \"9-3\"\n",
      "[register]\nbackend = \"etcd\"\n",
      "register = 5\n",
      "[daemon]\nstate_dir = \"relative\"\n",
      "[id]\nepoch = \"yesterday\"\n",
      "[id]\nepoch = -1\n",
      "[id]\nlayout = \"41/17/6\"\n",
      "[register]\nmachines = \"0-2000\"\n",
      "[register\n",
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE("config " + std::to_string(i) + ":\n" + texts[i]);
    const auto path = dir / ("bad" + std::to_string(i) + ".toml");
    std::ofstream(path) << texts[i];

    auto config = LoadConfig(path);
    auto settings = reg::LoadRegisterSettings(path);

    ASSERT_FALSE(config);
    ASSERT_FALSE(settings);
    EXPECT_EQ(settings.error().message, config.error().message);
  }
}

TEST(RegisterSettings, LeaveEveryOtherKeyToTheDaemon) {
  // The daemon refuses the file; the register's reader reads only its keys.
  snowflake::testing::TempDir dir;
  const auto path = dir / "c.toml";
  std::ofstream(path) << "[http]\nbogus = 1\n[register]\nbackend = \"static\"\nmachine = 4\n";

  auto config = LoadConfig(path);
  auto settings = reg::LoadRegisterSettings(path);

  ASSERT_FALSE(config);
  EXPECT_THAT(config.error().message, HasSubstr("http.bogus: unknown key"));
  ASSERT_TRUE(settings) << settings.error().message;
  EXPECT_EQ(settings->machine_register.backend(), "static");
}

TEST(RegisterSettings, ReadTheFileWithTheSameBoundsAsTheDaemon) {
  snowflake::testing::TempDir dir;

  EXPECT_EQ(reg::LoadRegisterSettings("/dev/zero").error().message,
            LoadConfig("/dev/zero").error().message);
  EXPECT_EQ(reg::LoadRegisterSettings(dir.path()).error().message,
            LoadConfig(dir.path()).error().message);
  EXPECT_EQ(reg::LoadRegisterSettings(dir / "missing.toml").error().message,
            LoadConfig(dir / "missing.toml").error().message);
}

}  // namespace
}  // namespace snowflake::daemon
