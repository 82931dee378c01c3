// Two real snowflaked processes on one host, over every combination of what their configs
// can share (findings 1, 2 and 7 of issue 9):
//   state directory   shared | separate
//   register path     default (<state_dir>/register.json) | one explicit path for both |
//                     an explicit path each
//   daemon.instance   the same | distinct
//   register backend  file+file | static+static (the same number) | file, then static on
//                     the file daemon's number | static, then file
// Property: two live daemons never hold the same machine number. Whenever the second
// daemon serves, both serve different numbers and 2,000 IDs from each share none;
// whenever it is refused, it exits 2 (systemd does not restart it) with a message that
// says why, and the first keeps serving. The expected outcome of each combination is
// spelled out, so a daemon refused without need fails too.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/client.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;

enum class StateDirs { kShared, kSeparate };
enum class RegisterPaths { kDefault, kSharedExplicit, kSeparateExplicit };
enum class Instances { kSame, kDistinct };
enum class Backends { kFileFile, kStaticStatic, kFileThenStatic, kStaticThenFile };

struct Combination {
  StateDirs state;
  RegisterPaths register_path;
  Instances instances;
  Backends backends;
};

std::string Name(const Combination& c) {
  std::string name = c.state == StateDirs::kShared ? "SharedState" : "SeparateState";
  name += c.register_path == RegisterPaths::kDefault          ? "DefaultRegister"
          : c.register_path == RegisterPaths::kSharedExplicit ? "SharedRegister"
                                                              : "SeparateRegisters";
  name += c.instances == Instances::kSame ? "SameInstance" : "DistinctInstances";
  switch (c.backends) {
    case Backends::kFileFile:
      return name + "FileFile";
    case Backends::kStaticStatic:
      return name + "StaticStatic";
    case Backends::kFileThenStatic:
      return name + "FileThenStatic";
    case Backends::kStaticThenFile:
      return name + "StaticThenFile";
  }
  return name;
}

// Why the second daemon must be refused, or nullopt if it may serve: the test's own
// statement of the rules, so an over-eager refusal fails as well as a duplicate.
std::optional<std::string> ExpectedRefusal(const Combination& c) {
  if (c.state == StateDirs::kShared) return "state directory";
  switch (c.backends) {
    case Backends::kStaticStatic:
    case Backends::kFileThenStatic:
      return "in use";  // the static daemon is configured with the number the first holds
    case Backends::kStaticThenFile:
      return std::nullopt;  // the file daemon skips the number the static one holds
    case Backends::kFileFile:
      // One register and one holder id: the second asks for the first one's number.
      if (c.instances == Instances::kSame && c.register_path == RegisterPaths::kSharedExplicit) {
        return "in use";
      }
      return std::nullopt;
  }
  return std::nullopt;
}

class TwoDaemonsOnOneHost : public ::testing::TestWithParam<Combination> {
 protected:
  DaemonOptions OptionsFor(const std::string& name, bool is_static) {
    const Combination& c = GetParam();
    std::string toml = "[daemon]\ninstance = \"" +
                       (c.instances == Instances::kSame ? std::string("same") : name) +
                       "\"\n[register]\n";
    if (c.register_path == RegisterPaths::kSharedExplicit) {
      toml += "path = \"" + (harness_.root() / "register.json").string() + "\"\n";
    } else if (c.register_path == RegisterPaths::kSeparateExplicit) {
      toml += "path = \"" + (harness_.root() / (name + "-register.json")).string() + "\"\n";
    }
    // A static daemon is given number 0: the one a file daemon claims first.
    if (is_static) toml += "backend = \"static\"\nmachine = 0\n";
    // Both daemons lock their numbers in the harness's one host-wide lock directory.
    DaemonOptions options = harness_.NamedOptions(name, toml, DaemonHarness::Host::kShared);
    if (c.state == StateDirs::kShared) options.state_dir = harness_.root() / "state";
    return options;
  }

  DaemonHarness harness_{"two"};
};

// Takes `count` IDs; appends them to `ids`. Returns the first error's message, or "".
std::string TakeIds(const std::filesystem::path& runtime_dir, size_t count,
                    std::vector<uint64_t>& ids) {
  auto client = Client::Open("matrix", DaemonHarness::ClientOptionsFor(runtime_dir));
  if (!client) return client.error().message;
  std::vector<uint64_t> batch(256);
  while (count > 0) {
    auto taken = client->NextBatch(std::span(batch.data(), std::min(count, batch.size())));
    if (!taken) return taken.error().message;
    ids.insert(ids.end(), batch.begin(), batch.begin() + static_cast<ptrdiff_t>(*taken));
    count -= *taken;
  }
  return "";
}

TEST_P(TwoDaemonsOnOneHost, NeverHoldTheSameMachineNumber) {
  // Arrange
  const Combination& c = GetParam();
  const bool first_static =
      c.backends == Backends::kStaticStatic || c.backends == Backends::kStaticThenFile;
  const bool second_static =
      c.backends == Backends::kStaticStatic || c.backends == Backends::kFileThenStatic;
  const DaemonOptions a_options = OptionsFor("a", first_static);
  const DaemonOptions b_options = OptionsFor("b", second_static);
  Daemon a = harness_.Start(a_options);
  ASSERT_TRUE(a.ready()) << a.Describe();

  // Act: the second daemon either becomes ready or exits.
  Daemon b = Daemon::Spawn(b_options);
  const bool b_ready = b.WaitForReady(30s);
  const auto a_status = Client::Inspect(DaemonHarness::ClientOptionsFor(a_options.runtime_dir));
  const auto b_status = Client::Inspect(DaemonHarness::ClientOptionsFor(b_options.runtime_dir));

  // Assert
  ASSERT_TRUE(a_status);
  EXPECT_EQ(a_status->state, "serving") << a.Describe();
  const std::optional<std::string> refusal = ExpectedRefusal(c);
  if (refusal) {
    ASSERT_FALSE(b_ready) << "the second daemon serves although it must be refused ("
                          << *refusal << "): " << b.Describe();
    auto b_exit = b.Wait(30s);
    ASSERT_TRUE(b_exit) << b.Describe();
    EXPECT_TRUE(b_exit->ExitedWith(2)) << b_exit->ToString() << ": " << b.Describe();
    EXPECT_NE(b.err().find(*refusal), std::string::npos)
        << "the refusal does not say \"" << *refusal << "\": " << b.err();
    EXPECT_NE(b.err().find("pid " + std::to_string(a.pid())), std::string::npos)
        << "the refusal does not name the holder: " << b.err();
    EXPECT_TRUE(!b_status || b_status->state != "serving");
    return;
  }
  ASSERT_TRUE(b_ready) << b.Describe();
  ASSERT_TRUE(b_status);
  EXPECT_EQ(b_status->state, "serving");
  EXPECT_NE(a_status->machine, b_status->machine)
      << "two live daemons hold machine " << a_status->machine;
  std::vector<uint64_t> ids;
  ASSERT_EQ(TakeIds(a_options.runtime_dir, 2000, ids), "");
  ASSERT_EQ(TakeIds(b_options.runtime_dir, 2000, ids), "");
  const std::set<uint64_t> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), ids.size()) << ids.size() - distinct.size() << " duplicate IDs";
}

std::vector<Combination> AllCombinations() {
  std::vector<Combination> all;
  for (StateDirs state : {StateDirs::kShared, StateDirs::kSeparate}) {
    for (RegisterPaths path : {RegisterPaths::kDefault, RegisterPaths::kSharedExplicit,
                               RegisterPaths::kSeparateExplicit}) {
      for (Instances instances : {Instances::kSame, Instances::kDistinct}) {
        for (Backends backends : {Backends::kFileFile, Backends::kStaticStatic,
                                  Backends::kFileThenStatic, Backends::kStaticThenFile}) {
          all.push_back({state, path, instances, backends});
        }
      }
    }
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(EveryConfig, TwoDaemonsOnOneHost, ::testing::ValuesIn(AllCombinations()),
                         [](const auto& info) { return Name(info.param); });

}  // namespace
}  // namespace snowflake
