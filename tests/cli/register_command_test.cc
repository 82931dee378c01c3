// `snowflakectl register list/show/release` run as a process against a real etcd (one
// member) and a real file register: what a holder recorded is shown, a live holder's
// number is never released, and a release keeps the high-water mark.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "etcd_cluster.h"
#include "register/etcd_client.h"
#include "register/etcd_records.h"
#include "register/etcd_register.h"
#include "register/file_register.h"
#include "register/machine_lock.h"
#include "register/register_settings.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace snowflake::daemon {
namespace {

using testing::kSnowflakectlPath;
constexpr int64_t kEpoch = 1'767'225'600'000;

testing::RunResult Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), kSnowflakectlPath);
  return testing::RunCommand(std::move(args));
}

TEST(RegisterCommand, EtcdListShowsTheHolderAndReleaseRefusesItThenKeepsTheMark) {
  // Arrange
  testing::EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  testing::TempDir dir("register-cli");
  const std::string config = (dir / "snowflaked.toml").string();
  {
    std::ofstream out(config);
    out << "[register]\nbackend = \"etcd\"\nmachines = \"3-5\"\n[register.etcd]\nendpoints = [\""
        << cluster.ClientUrl(0) << "\"]\nprefix = \"/cli/\"\n";
  }
  reg::EtcdRegisterOptions options;
  options.client.endpoints = {cluster.ClientUrl(0)};
  options.prefix = "/cli/";
  options.first_machine = 3;
  options.last_machine = 5;
  options.host = "host-x";
  options.host_lock_dir = dir / "host-locks";
  std::filesystem::create_directories(options.host_lock_dir);
  auto holder = std::make_unique<reg::EtcdRegister>(options);
  auto claim = holder->Claim({"cli-holder", kEpoch});
  ASSERT_TRUE(claim) << claim.error().message;
  ASSERT_TRUE(holder->UpdateHighWater(kEpoch + 4242));
  const std::string n = std::to_string(claim->machine);

  // Act
  const auto list = Ctl({"register", "list", "--json", "--config", config});
  const auto table = Ctl({"register", "list", "--config", config});
  const auto refused = Ctl({"register", "release", n, "--config", config});
  holder.reset();  // the daemon stops: its lease is revoked
  const auto released = Ctl({"register", "release", n, "--config", config});
  const auto show = Ctl({"register", "show", n, "--json", "--config", config});
  const auto unknown = Ctl({"register", "show", "1000", "--config", config});

  // Assert
  ASSERT_TRUE(list.status.ExitedWith(0)) << list.err;
  const auto j = nlohmann::json::parse(list.out);
  EXPECT_EQ(j["backend"], "etcd");
  ASSERT_EQ(j["machines"].size(), 1u);
  EXPECT_EQ(j["machines"][0]["machine"], claim->machine);
  EXPECT_EQ(j["machines"][0]["holder"], "cli-holder");
  EXPECT_EQ(j["machines"][0]["host"], "host-x");
  EXPECT_EQ(j["machines"][0]["live"], true);
  EXPECT_GT(j["machines"][0]["lease_ttl_left_s"].get<int64_t>(), 0);
  EXPECT_EQ(j["machines"][0]["high_water_unix_ms"], kEpoch + 4242);
  EXPECT_NE(table.out.find("cli-holder"), std::string::npos) << table.out;
  EXPECT_TRUE(refused.status.ExitedWith(1)) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("held by a live daemon"), std::string::npos) << refused.err;
  EXPECT_TRUE(released.status.ExitedWith(0)) << released.err;
  ASSERT_TRUE(show.status.ExitedWith(0)) << show.err;
  const auto shown = nlohmann::json::parse(show.out);
  EXPECT_EQ(shown["holder"], "");
  EXPECT_EQ(shown["high_water_unix_ms"], kEpoch + 4242);
  EXPECT_TRUE(unknown.status.ExitedWith(1)) << unknown.err;
}

TEST(RegisterCommand, EtcdListOfManyNumbersPrintsASummaryReadInPagesAndPagesOnAsk) {
  // Arrange: 1,018 numbers with a mark (more than one page of 1,000 keys), 3 of them or
  // of the 6 fresh ones then held by live claims, in 0-1023.
  testing::EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  testing::TempDir dir("register-cli-many");
  const std::string config = (dir / "snowflaked.toml").string();
  {
    std::ofstream out(config);
    out << "[register]\nbackend = \"etcd\"\n[register.etcd]\nendpoints = [\""
        << cluster.ClientUrl(0) << "\"]\nprefix = \"/many/\"\n";
  }
  reg::etcd::ClientOptions client_options;
  client_options.endpoints = {cluster.ClientUrl(0)};
  reg::etcd::EtcdClient client(client_options);
  for (uint32_t n = 0; n < 1018; ++n) {
    ASSERT_TRUE(
        client.Put(reg::etcd::HighWaterKey("/many/", n),
                   reg::etcd::EncodeHighWater(reg::etcd::HighWaterRecord{kEpoch + n, "gone", 0})));
  }
  std::vector<std::unique_ptr<reg::EtcdRegister>> holders;
  int fresh_taken = 0;  // claims take a window's fresh number, else its oldest mark
  for (int i = 0; i < 3; ++i) {
    reg::EtcdRegisterOptions options;
    options.client.endpoints = {cluster.ClientUrl(0)};
    options.prefix = "/many/";
    options.host = "host-" + std::to_string(i);
    options.host_lock_dir = dir / ("host-locks-" + std::to_string(i));
    std::filesystem::create_directories(options.host_lock_dir);
    holders.push_back(std::make_unique<reg::EtcdRegister>(options));
    auto claim = holders.back()->Claim({"holder-" + std::to_string(i), kEpoch});
    ASSERT_TRUE(claim) << claim.error().message;
    fresh_taken += claim->machine >= 1018;
  }

  // Act
  const auto table = Ctl({"register", "list", "--config", config});
  const auto summary = Ctl({"register", "list", "--summary", "--json", "--config", config});
  const auto all = Ctl({"register", "list", "--json", "--config", config});
  const auto page =
      Ctl({"register", "list", "--from", "1000", "--count", "10", "--json", "--config", config});
  const auto both = Ctl({"register", "list", "--all", "--summary", "--config", config});

  // Assert: one screen, not a thousand lines.
  ASSERT_TRUE(table.status.ExitedWith(0)) << table.err;
  EXPECT_LT(std::count(table.out.begin(), table.out.end(), '\n'), 15) << table.out;
  EXPECT_NE(table.out.find("held, live:            3"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("1021 free"), std::string::npos) << table.out;
  ASSERT_TRUE(summary.status.ExitedWith(0)) << summary.err;
  const auto s = nlohmann::json::parse(summary.out)["summary"];
  EXPECT_EQ(s["held_live"], 3);
  EXPECT_EQ(s["free_with_mark"], 1018 - (3 - fresh_taken));
  EXPECT_EQ(s["never_used_in_range"], 6 - fresh_taken);
  EXPECT_EQ(s["free_in_range"], 1021);
  EXPECT_EQ(s["recorded"], 1018 + fresh_taken);
  ASSERT_TRUE(all.status.ExitedWith(0)) << all.err;
  EXPECT_EQ(nlohmann::json::parse(all.out)["machines"].size(),
            static_cast<size_t>(1018 + fresh_taken));
  ASSERT_TRUE(page.status.ExitedWith(0)) << page.err;
  const auto rows = nlohmann::json::parse(page.out)["machines"];
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(rows[0]["machine"], 1000);
  EXPECT_TRUE(both.status.ExitedWith(2)) << both.out << both.err;
}

TEST(RegisterCommand, FileListShowsTheHolderAndReleaseRefusesALiveOne) {
  // Arrange
  testing::TempDir dir("register-cli-file");
  const std::string config = (dir / "snowflaked.toml").string();
  {
    std::ofstream out(config);
    out << "[register]\npath = \"" << (dir / "register.json").string() << "\"\n";
  }
  auto holder = std::make_unique<reg::FileRegister>(
      reg::FileRegisterOptions{.path = dir / "register.json",
                               .first_machine = 0,
                               .last_machine = IdLayout().max_machine(),
                               .host_lock_dir = reg::HostLockDir()});
  auto claim = holder->Claim({"file-holder", kEpoch});
  ASSERT_TRUE(claim) << claim.error().message;
  ASSERT_TRUE(holder->UpdateHighWater(kEpoch + 77));

  // Act
  const auto list = Ctl({"register", "list", "--json", "--config", config});
  const auto refused = Ctl({"register", "release", "0", "--config", config});
  holder.reset();
  const auto released = Ctl({"register", "release", "0", "--config", config});
  const auto show = Ctl({"register", "show", "0", "--json", "--config", config});

  // Assert
  ASSERT_TRUE(list.status.ExitedWith(0)) << list.err;
  const auto j = nlohmann::json::parse(list.out);
  EXPECT_EQ(j["backend"], "file");
  ASSERT_EQ(j["machines"].size(), 1u);
  EXPECT_EQ(j["machines"][0]["holder"], "file-holder");
  EXPECT_EQ(j["machines"][0]["live"], true);
  EXPECT_TRUE(refused.status.ExitedWith(1)) << refused.err;
  EXPECT_TRUE(released.status.ExitedWith(0)) << released.err;
  const auto shown = nlohmann::json::parse(show.out);
  EXPECT_EQ(shown["holder"], "");
  EXPECT_EQ(shown["high_water_unix_ms"], kEpoch + 77);
}

// The static backend keeps no register and only etcd can be restored behind the daemons'
// back: each refusal is a usage error (exit 2) that names the config and what to do, and
// touches nothing.
TEST(RegisterCommand, BackendsWithoutAnOperationRefuseItNamingTheConfig) {
  // Arrange
  testing::TempDir dir("register-cli-unsupported");
  const std::string static_config = (dir / "static.toml").string();
  const std::string file_config = (dir / "file.toml").string();
  std::ofstream(static_config) << "[register]\nbackend = \"static\"\nmachine = 5\n";
  std::ofstream(file_config) << "[register]\npath = \"" << (dir / "register.json").string()
                             << "\"\n";
  const std::string above = "2026-06-01T00:00:00Z";

  // Act
  const auto list = Ctl({"register", "list", "--config", static_config});
  const auto show = Ctl({"register", "show", "5", "--config", static_config});
  const auto release = Ctl({"register", "release", "5", "--config", static_config});
  const auto raise_static =
      Ctl({"register", "raise-all", "--above", above, "--config", static_config});
  const auto raise_file = Ctl({"register", "raise-all", "--above", above, "--config", file_config});

  // Assert
  EXPECT_TRUE(list.status.ExitedWith(2)) << list.err;
  EXPECT_EQ(list.err, "snowflakectl: " + static_config +
                          ": register.backend is \"static\": there is no register to show (the "
                          "number is register.machine in the config)\n");
  EXPECT_TRUE(show.status.ExitedWith(2)) << show.err;
  EXPECT_EQ(show.err, list.err);
  EXPECT_TRUE(release.status.ExitedWith(2)) << release.err;
  EXPECT_NE(release.err.find(static_config + ": register.backend is \"static\": there is no "
                                             "register to release"),
            std::string::npos)
      << release.err;
  EXPECT_TRUE(raise_static.status.ExitedWith(2)) << raise_static.err;
  EXPECT_TRUE(raise_file.status.ExitedWith(2)) << raise_file.err;
  EXPECT_EQ(raise_file.err, "snowflakectl: " + file_config +
                                ": raise-all is for the etcd register; a file register is this "
                                "host's own and is never restored behind the daemon's back\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "register.json"));
}

// A mark raised far past the clock takes every number out of service until the clock
// reaches it, and no later command can lower it: a mistyped year must not do that.
// Property: raise-all refuses a time more than clock.max_forward_ms past the clock unless
// --force-far says the operator means it; with the flag the command goes on to the register.
TEST(RegisterCommand, RaiseAllRefusesATimeFarPastTheClockUnlessForced) {
  // Arrange
  testing::TempDir dir("register-cli-far");
  const std::string config = (dir / "file.toml").string();
  std::ofstream(config) << "[register]\npath = \"" << (dir / "register.json").string() << "\"\n";
  // Two days past the clock, twice the default bound, as Unix ms.
  const std::string far = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count() +
                                         2 * reg::kDefaultMaxForwardMs);

  // Act
  const auto refused = Ctl({"register", "raise-all", "--above", far, "--config", config});
  const auto forced =
      Ctl({"register", "raise-all", "--above", far, "--force-far", "--config", config});

  // Assert
  EXPECT_TRUE(refused.status.ExitedWith(2)) << refused.err;
  EXPECT_NE(refused.err.find("clock.max_forward_ms"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force-far"), std::string::npos) << refused.err;
  EXPECT_TRUE(forced.status.ExitedWith(2)) << forced.err;
  EXPECT_NE(forced.err.find("raise-all is for the etcd register"), std::string::npos)
      << forced.err;
}

}  // namespace
}  // namespace snowflake::daemon
