// The register backends' table (register_backends.h): every row parses its own keys and
// makes its own register; the config loader refuses an unknown backend naming the known
// ones, another backend's key naming that backend, and an unknown key naming the backend.

#include "register/register_backends.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <set>
#include <string>

#include "daemon/config/config.h"
#include "error_of.h"
#include "register/machine_register.h"

namespace snowflake::reg {
namespace {

using testing::ErrorOf;
using ::testing::HasSubstr;

// Where the texts below come from, as their errors name it.
constexpr std::string_view kConfigPath = "/etc/snowflaked.toml";

toml::table Toml(std::string_view text, std::string_view source) {
  return toml::parse(text, source);
}

// A [register] table each backend accepts.
std::string ValidRegister(std::string_view backend) {
  std::string text = "[register]\nbackend = \"" + std::string(backend) + "\"\n";
  if (backend == "static") text += "machine = 7\n";
  if (backend == "etcd") text += "[register.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n";
  return text;
}

// Every register error code has its own snake-case name (the `code` label of
// snowflake_register_errors_total): none shared, none left to a catch-all.
TEST(RegisterErrorCodeName, EveryCodeHasItsOwnName) {
  std::set<std::string> names;
  const int last = static_cast<int>(RegisterErrorCode::kUnsupported);
  for (int i = 0; i <= last; ++i) {
    const std::string name(RegisterErrorCodeName(static_cast<RegisterErrorCode>(i)));
    EXPECT_THAT(name, ::testing::MatchesRegex("[a-z]+(_[a-z]+)*")) << i;
    EXPECT_NE(name, "unknown") << i;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(last + 1));
  EXPECT_EQ(RegisterErrorCodeName(RegisterErrorCode::kClaimLost), "claim_lost");
  EXPECT_EQ(RegisterErrorCodeName(RegisterErrorCode::kUnsupported), "unsupported");
}

TEST(RegisterBackends, UnknownBackendIsNamedWithTheKnownOnes) {
  auto sut = FindRegisterBackend("zk");

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error(),
            "unknown register backend \"zk\" (known: \"file\", \"static\" or \"etcd\")");
  EXPECT_THAT(ErrorOf(daemon::ParseConfig("[register]\nbackend = \"zk\"\n", kConfigPath)),
              HasSubstr(":2: register.backend: must be \"file\", \"static\" or \"etcd\", got "
                        "\"zk\""));
}

TEST(RegisterBackends, FileIsTheDefaultAndFirst) {
  ASSERT_FALSE(RegisterBackends().empty());
  EXPECT_EQ(RegisterBackends().front().name, "file");
  EXPECT_EQ(RegisterConfig{}.backend(), "file");
}

TEST(RegisterBackends, EachRowParsesItsConfigAndMakesItsRegister) {
  for (const RegisterBackendInfo& row : RegisterBackends()) {
    SCOPED_TRACE(std::string(row.name));
    auto config = daemon::ParseConfig(ValidRegister(row.name), "x.toml");
    ASSERT_TRUE(config) << config.error().message;

    auto sut = MakeMachineRegister(config->machine_register, "/srv/state");

    EXPECT_EQ(config->machine_register.backend(), row.name);
    EXPECT_EQ(config->machine_register.options.index(), row.alternative);
    EXPECT_EQ(sut->backend_name(), row.name);
    auto found = FindRegisterBackend(row.name);
    ASSERT_TRUE(found);
    EXPECT_EQ(*found, &row);
  }
}

TEST(RegisterBackends, AnotherBackendsKeyIsRefusedNamingThatBackend) {
  EXPECT_THAT(ErrorOf(daemon::ParseConfig("[register]\nbackend = \"etcd\"\nmachine = 3\n"
                                          "[register.etcd]\nendpoints = [\"http://a:1\"]\n",
                                          kConfigPath)),
              HasSubstr(":3: register.machine: only valid with register.backend = \"static\" "
                        "(the file and etcd registers assign numbers"));
  EXPECT_THAT(ErrorOf(daemon::ParseConfig("[register]\nbackend = \"static\"\nmachine = 3\n"
                                          "[register.etcd]\nendpoints = [\"http://a:1\"]\n",
                                          kConfigPath)),
              HasSubstr("register.etcd: only valid with register.backend = \"etcd\""));
}

TEST(RegisterBackends, UnknownRegisterKeyIsRefusedNamingKeyAndBackend) {
  EXPECT_EQ(ErrorOf(daemon::ParseConfig(
                "[register]\nbackend = \"static\"\nmachine = 1\nmachin = 2\n", kConfigPath)),
            "/etc/snowflaked.toml:4: register.machin: unknown key (with register.backend = "
            "\"static\" [register] takes backend, path, machines, holder_id, machine)");
  EXPECT_THAT(ErrorOf(daemon::ParseConfig("[register]\nbogus = 1\n", kConfigPath)),
              HasSubstr(":2: register.bogus: unknown key (with register.backend = \"file\""));
}

// The sample config sets path and machines under [register] whatever the backend.
TEST(RegisterBackends, SharedKeysAreAcceptedWithEveryBackend) {
  for (const RegisterBackendInfo& row : RegisterBackends()) {
    SCOPED_TRACE(std::string(row.name));
    const std::string text = "[register]\npath = \"\"\nmachines = \"4-9\"\nholder_id = \"h\"\n" +
                             ValidRegister(row.name).substr(std::string("[register]\n").size());

    auto sut = daemon::ParseConfig(text, "x.toml");

    ASSERT_TRUE(sut) << text << sut.error().message;
    EXPECT_EQ(sut->machine_register.backend(), row.name);
    EXPECT_EQ(sut->machine_register.first_machine, 4u);
    EXPECT_EQ(sut->machine_register.holder_id, "h");
  }
}

TEST(StaticRegisterConfig, ParserRefusesAMissingOrBadMachine) {
  const toml::table missing = Toml("backend = \"static\"\n", "s.toml");
  const toml::table big = Toml("machine = 65536\n", "s.toml");
  const toml::table text = Toml("machine = \"3\"\n", "s.toml");
  const toml::table good = Toml("machine = 1023\n", "s.toml");

  auto sut_missing = ParseStaticRegisterConfig(missing, "s.toml");
  auto sut_big = ParseStaticRegisterConfig(big, "s.toml");
  auto sut_text = ParseStaticRegisterConfig(text, "s.toml");
  auto sut_good = ParseStaticRegisterConfig(good, "s.toml");

  ASSERT_FALSE(sut_missing);
  EXPECT_EQ(sut_missing.error().message,
            "s.toml: register.machine: required when register.backend = \"static\"");
  ASSERT_FALSE(sut_big);
  EXPECT_EQ(sut_big.error().message,
            "s.toml:1: register.machine: must be from 0 to 65535, below 2^machine bits of "
            "id.layout, got 65536");
  ASSERT_FALSE(sut_text);
  EXPECT_THAT(sut_text.error().message, HasSubstr("must be an integer, got a string"));
  ASSERT_TRUE(sut_good);
  EXPECT_EQ(sut_good->machine, 1023u);
}

TEST(EtcdRegisterConfig, ParserRefusesItsBadKeys) {
  const toml::table unknown =
      Toml("[etcd]\nendpoints = [\"http://a:1\"]\nendpoint = 1\n", "e.toml");
  const toml::table no_endpoints = Toml("backend = \"etcd\"\n", "e.toml");
  const toml::table bad_ttl =
      Toml("[etcd]\nendpoints = [\"http://a:1\"]\nlease_ttl_s = 1\n", "e.toml");

  auto sut_unknown = ParseEtcdRegisterConfig(unknown, "e.toml");
  auto sut_no_endpoints = ParseEtcdRegisterConfig(no_endpoints, "e.toml");
  auto sut_bad_ttl = ParseEtcdRegisterConfig(bad_ttl, "e.toml");

  ASSERT_FALSE(sut_unknown);
  EXPECT_THAT(sut_unknown.error().message,
              HasSubstr("e.toml:3: register.etcd.endpoint: unknown key (register.etcd takes "
                        "endpoints, prefix"));
  ASSERT_FALSE(sut_no_endpoints);
  EXPECT_THAT(sut_no_endpoints.error().message,
              HasSubstr("e.toml: register.etcd.endpoints: required when register.backend = "
                        "\"etcd\""));
  ASSERT_FALSE(sut_bad_ttl);
  EXPECT_THAT(sut_bad_ttl.error().message,
              HasSubstr("e.toml:3: register.etcd.lease_ttl_s: must be from 2 to 3600, got 1"));
}

TEST(FileRegisterConfig, HasNoKeysOfItsOwn) {
  auto sut = ParseFileRegisterConfig(toml::table{}, "f.toml");

  ASSERT_TRUE(sut);
  EXPECT_EQ(*sut, FileRegisterConfig{});
}

}  // namespace
}  // namespace snowflake::reg
