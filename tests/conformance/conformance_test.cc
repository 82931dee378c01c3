// The takers' conformance table (cases.json) for the C++ client: every row, from the
// fixtures conformance_fixture writes (the Python, Go, Java and Node.js packages run the
// same rows). For a row that expects an error, the error's class must also follow the
// vocabulary's action for its code: AnotherDaemonMayServe exactly for fail_over.

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "snowflake/client.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace {

using nlohmann::json;

const std::string kFixture =
    ::snowflake::testing::BinaryPath("tests/conformance/conformance_fixture");

const json& Table() {
  static const json table = [] {
    std::ifstream in(::snowflake::testing::SourcePath("tests/conformance/cases.json"));
    return json::parse(in);
  }();
  return table;
}

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  for (const json& row : Table().at("cases")) names.push_back(row.at("name"));
  return names;
}

const json& Row(const std::string& name) {
  for (const json& row : Table().at("cases")) {
    if (row.at("name") == name) return row;
  }
  throw std::runtime_error("no case " + name);
}

// What the fixture writer prints for `args`, as JSON.
json FixtureJson(const std::string& args) {
  const std::string command = kFixture + " " + args;
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buffer{};
  while (pipe != nullptr && fgets(buffer.data(), buffer.size(), pipe) != nullptr) out += buffer.data();
  if (pipe == nullptr || pclose(pipe) != 0) throw std::runtime_error("fixture failed: " + command);
  return json::parse(out);
}

// The vocabulary's action for a library error code ("fail_over", ...), from the C++ tables
// as conformance_fixture --vocabulary prints them for every taker's runner: the one rule
// each taker's error classes must follow.
std::string ActionOf(const std::string& code) {
  static const json vocabulary = FixtureJson("--vocabulary");
  const json& codes = vocabulary.at("errors");
  for (size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] == code) return vocabulary.at("error_actions").at(i);
  }
  throw std::runtime_error("\"" + code + "\" is no library error code of the vocabulary");
}

// Runs the fixture writer; returns the IDs it published.
std::vector<uint64_t> Fixture(const std::string& name, const std::string& dir, bool after_open) {
  const json printed =
      FixtureJson("--cases " + ::snowflake::testing::SourcePath("tests/conformance/cases.json") +
                  " --case " + name + " --dir " + dir + " --live-pid " + std::to_string(getpid()) +
                  (after_open ? " --after-open" : ""));
  std::vector<uint64_t> ids;
  for (const json& id : printed.at("ids")) ids.push_back(std::stoull(id.get<std::string>()));
  return ids;
}

struct Outcome {
  std::string stage = "take";
  std::string code = "ok";
  std::string message;
  std::vector<uint64_t> ids;
  // For an error: whether this taker's class for it says "fail over" (the C++ API's
  // AnotherDaemonMayServe, which the failover client and the HTTP front's 503 follow).
  bool fails_over = false;
};

// The expect keys this runner checks. A row with another fails here rather than pass
// with the check left out (the fixture writer accepts only keys that every runner checks).
const std::set<std::string>& KnownExpectKeys() {
  static const std::set<std::string> keys = {
      "stage",     "code",        "message_contains",   "count",
      "ids",       "refill_hint", "refill_request_min", "service_taken",
      "uncounted", "waiters"};
  return keys;
}

// The keys of `expect` that are words of the consumer region.
bool ChecksRegion(const json& expect) {
  for (const char* key :
       {"refill_hint", "refill_request_min", "service_taken", "uncounted", "waiters"}) {
    if (expect.contains(key)) return true;
  }
  return false;
}

Outcome Failed(std::string stage, const snowflake::Error& error) {
  return Outcome{.stage = std::move(stage),
                 .code = std::string(snowflake::ClientErrorName(error.code)),
                 .message = error.message,
                 .ids = {},
                 .fails_over = snowflake::AnotherDaemonMayServe(error.code)};
}

// The region's words (refill, waiters, counts), read by the fixture attached to the row's
// socket as a taker attaches (the region is a memfd: no file to read).
json RegionWords(const std::string& dir) { return FixtureJson("--region-words --dir " + dir); }

class Conformance : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sf-conf-" + std::to_string(getpid()) + "-" + GetParam());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Opens, applies after_open, takes: what the row's `take` gives.
  Outcome Run(const json& row, std::vector<uint64_t>* published) {
    Outcome outcome;
    *published = Fixture(GetParam(), dir_, false);
    const json& take = row.at("take");
    snowflake::ClientOptions options;
    options.runtime_dir = dir_;
    options.remotes_from_environment = false;
    options.wait_timeout = std::chrono::milliseconds(take.value("timeout_ms", 100));
    auto client = snowflake::Client::Open("conformance", options);
    if (!client) return Failed("open", client.error());
    if (row.contains("after_open")) {
      auto replaced = Fixture(GetParam(), dir_, true);
      if (!replaced.empty()) *published = replaced;
    }
    if (take.at("call") == "next") {
      auto id = client->Next();
      if (id) {
        outcome.ids.push_back(*id);
      } else {
        outcome = Failed("take", id.error());
      }
    } else {
      std::vector<uint64_t> out(take.at("count").get<size_t>());
      auto n = client->NextBatch(out);
      if (n) {
        outcome.ids.assign(out.begin(), out.begin() + static_cast<ptrdiff_t>(*n));
      } else {
        outcome = Failed("take", n.error());
      }
    }
    return outcome;
  }

  std::filesystem::path dir_;
};

TEST_P(Conformance, TakerGivesTheRowsOutcome) {
  const json& row = Row(GetParam());
  json expect = row.at("expect");
  if (row.contains("expect_by_taker") && row.at("expect_by_taker").contains("cpp")) {
    expect = row.at("expect_by_taker").at("cpp");
    std::printf("%s: this taker's own expectation, because: %s\n",
                row.at("name").get<std::string>().c_str(),
                row.at("why").get<std::string>().c_str());
  }
  for (auto it = expect.begin(); it != expect.end(); ++it) {
    ASSERT_TRUE(KnownExpectKeys().contains(it.key()))
        << "expect key \"" << it.key() << "\" is not checked by this runner: add its check";
  }
  std::vector<uint64_t> published;
  // The client is closed when Run returns: the region words below are read after it.
  const Outcome got = Run(row, &published);
  EXPECT_EQ(got.stage, expect.at("stage")) << got.code << ": " << got.message;
  EXPECT_EQ(got.code, expect.at("code")) << got.message;
  if (expect.at("code") != "ok") {
    // The error's class follows the vocabulary's action: exactly the fail_over codes are
    // ones to fail over on (ring_empty, retry_here, is not).
    const std::string action = ActionOf(expect.at("code"));
    EXPECT_EQ(got.fails_over, action == "fail_over")
        << expect.at("code").get<std::string>() << " (action " << action << ") is classed as "
        << (got.fails_over ? "" : "not ") << "fail over";
  }
  if (expect.contains("message_contains")) {
    EXPECT_NE(got.message.find(expect.at("message_contains").get<std::string>()), std::string::npos)
        << got.message;
  }
  if (expect.contains("count")) {
    EXPECT_EQ(got.ids.size(), expect.at("count").get<size_t>());
  }
  if (expect.value("ids", "") == "published") {
    ASSERT_LE(got.ids.size(), published.size()) << "fixture printed no IDs";
    EXPECT_EQ(got.ids, std::vector<uint64_t>(published.begin(), published.begin() +
                                             static_cast<ptrdiff_t>(got.ids.size())));
  }
  if (ChecksRegion(expect)) {
    const json words = RegionWords(dir_);
    if (expect.contains("refill_hint")) {
      EXPECT_EQ(words.at("refill_hint"), expect.at("refill_hint").get<uint32_t>());
    }
    if (expect.contains("refill_request_min")) {
      EXPECT_GE(words.at("refill_request").get<uint32_t>(),
                expect.at("refill_request_min").get<uint32_t>());
    }
    if (expect.contains("waiters")) {
      EXPECT_EQ(words.at("waiters").get<uint64_t>(), expect.at("waiters").get<uint64_t>());
    }
    if (expect.contains("uncounted")) {
      EXPECT_EQ(words.at("uncounted").get<uint64_t>(), expect.at("uncounted").get<uint64_t>());
    }
    if (expect.contains("service_taken")) {
      EXPECT_EQ(words.at("service_taken"), expect.at("service_taken"))
          << "IDs taken per service: " << words.at("service_taken").dump() << ", want "
          << expect.at("service_taken").dump();
    }
  }
}

// The table is strict: a typo'd key would test the default segment and pass, and an
// override could hide a taker's difference without a word. The fixture writer, which every
// taker runs for every row, refuses both; here on a planted copy of a real row.
TEST(ConformanceTable, ARowWithAnUnknownKeyOrAnOverrideWithoutWhyIsRefused) {
  const ::snowflake::testing::TempDir dir("conformance-strict");
  json row = Row("full_ring_next");
  auto refusal = [&](const json& planted) {
    json table = Table();
    table["cases"] = json::array({planted});
    const std::string cases = (dir.path() / "cases.json").string();
    std::ofstream(cases) << table.dump();
    return ::snowflake::testing::RunCommand(
        {kFixture, "--cases", cases, "--case", planted.at("name").get<std::string>(), "--dir",
         dir.path().string(), "--live-pid", std::to_string(getpid())});
  };
  // The row as it is: written.
  const auto fine = refusal(row);
  ASSERT_TRUE(fine.status.ExitedWith(0)) << fine.err;

  json typo = row;
  typo["fixture"]["fil"] = 8;
  auto run = refusal(typo);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("fixture has the unknown key \"fil\""), std::string::npos) << run.err;

  json expect_typo = row;
  expect_typo["expect"]["message_contain"] = "x";
  run = refusal(expect_typo);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("unknown key \"message_contain\""), std::string::npos) << run.err;

  json silent = row;
  silent["expect_by_taker"] = {{"go", {{"stage", "take"}, {"code", "ok"}}}};
  run = refusal(silent);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("needs a \"why\""), std::string::npos) << run.err;

  json after_open_typo = row;
  after_open_typo["after_open"] = {{"publish_while_waitin", 4}};
  run = refusal(after_open_typo);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("after_open has the unknown key \"publish_while_waitin\""),
            std::string::npos)
      << run.err;

  json delay_alone = row;
  delay_alone["after_open"] = {{"publish_delay_ms", 50}};
  run = refusal(delay_alone);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("publish_delay_ms without the publish_while_waiting"), std::string::npos)
      << run.err;

  json region_typo = row;
  region_typo["expect"]["waiter"] = 0;
  run = refusal(region_typo);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("unknown key \"waiter\""), std::string::npos) << run.err;

  json not_counts = row;
  not_counts["expect"]["service_taken"] = 1;
  run = refusal(not_counts);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("service_taken is 1, not an object"), std::string::npos) << run.err;

  json too_many = row;
  too_many["fixture"]["slots_claimed_by_others"] = 256;
  run = refusal(too_many);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("slots_claimed_by_others: 256 is not a number from 0 to 255"),
            std::string::npos)
      << run.err;

  // The region keys are known: a row with every one of them is written.
  json region_keys = row;
  region_keys["fixture"]["slots_claimed_by_others"] = 2;
  region_keys["expect"].update({{"service_taken", {{"conformance", 1}, {"other", 2}}},
                                {"uncounted", 0},
                                {"waiters", 0},
                                {"refill_hint", 0},
                                {"refill_request_min", 0}});
  run = refusal(region_keys);
  EXPECT_TRUE(run.status.ExitedWith(0)) << run.err;

  json unknown_taker = silent;
  unknown_taker["why"] = "a reason long enough to be one";
  unknown_taker["expect_by_taker"]["rust"] = unknown_taker["expect_by_taker"]["go"];
  run = refusal(unknown_taker);
  EXPECT_TRUE(run.status.ExitedWith(2));
  EXPECT_NE(run.err.find("unknown key \"rust\""), std::string::npos) << run.err;
}

INSTANTIATE_TEST_SUITE_P(Table, Conformance, testing::ValuesIn(CaseNames()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::erase(name, '_');  // GoogleTest names: no underscores
                           return name;
                         });

}  // namespace
