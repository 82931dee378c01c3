// The real snowflaked with the etcd register when etcd does not answer
// (docs/daemon.md, "The etcd register"):
//   - at startup: the daemon neither exits nor sends READY=1; STATUS= (and its log) say
//     it waits for the register, naming the endpoints and the retry; once the cluster
//     answers it claims a number and serves;
//   - a stop signal while waiting ends it cleanly (exit 0), still without READY=1;
//   - while serving, a quorum loss (two of three members SIGSTOPped): every daemon pauses
//     with a reason naming the unreachable register (register_unreachable), hands out
//     nothing while paused, and serves again by itself once the members continue; no ID is
//     handed out twice. While paused, `snowflakectl status`, `status --json` and a
//     client's Next() error name the register's endpoints, how long the daemon has waited
//     and the register's last error.
// Properties, not timings: every wait is generous and only bounds a failure.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "etcd_cluster.h"
#include "snowflake/client.h"
#include "subprocess.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::EtcdCluster;
using testing::NotifyMessage;
using testing::RunCommand;
using testing::RunResult;

RunResult Ctl(const std::filesystem::path& runtime_dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {testing::kSnowflakectlPath};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--runtime-dir");
  argv.push_back(runtime_dir.string());
  return RunCommand(argv, {.env = {}, .stdin_text = {}, .timeout = 60s, .working_dir = {}});
}

// `status --json` once its "renewal" names a last error (the first attempt may still be
// under way when the daemon pauses), or the last answer when `timeout` passes first.
nlohmann::json WaitForRenewalError(const std::filesystem::path& runtime_dir,
                                   std::chrono::milliseconds timeout) {
  return testing::AttemptUntil(
      [&] {
        return nlohmann::json::parse(Ctl(runtime_dir, {"status", "--json"}).out, nullptr, false);
      },
      [](const nlohmann::json& status) {
        return status.is_object() && status.contains("renewal") && status["renewal"].is_object() &&
               status["renewal"].contains("last_error") &&
               status["renewal"]["last_error"].is_string();
      },
      timeout, 100ms);
}

// Next()'s error once it contains `words`, or the last one when `timeout` passes first;
// `took` is set if Next() ever returned an ID.
std::string WaitForNextError(Client& client, std::string_view words,
                             std::chrono::milliseconds timeout, bool& took) {
  std::string last;
  return testing::AttemptUntil(
      [&] {
        auto id = client.Next();
        if (id) {
          took = true;
        } else {
          last = id.error().message;
        }
        return last;
      },
      [&](const std::string& error) { return error.find(words) != std::string::npos; }, timeout,
      100ms);
}

bool NamesOneOf(std::string_view text, const std::vector<std::string>& endpoints) {
  return std::any_of(endpoints.begin(), endpoints.end(), [&](const std::string& endpoint) {
    return text.find(endpoint) != std::string_view::npos;
  });
}

class DaemonEtcdStart : public ::testing::Test {
 protected:
  std::string Prefix() const {
    return "/s/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
           "/";
  }

  DaemonOptions OptionsFor(const std::string& name, const std::vector<std::string>& endpoints,
                           const std::string& machines = "0-63",
                           const std::string& etcd_extra = "") {
    return harness_.NamedOptions(
        name, testing::EtcdDaemonToml(name, endpoints, Prefix(), machines, etcd_extra));
  }

  static bool IsWaitingStatus(const NotifyMessage& m) {
    const auto status = m.Value("STATUS");
    return status && status->starts_with("waiting for the register: etcd unreachable at ");
  }

  DaemonHarness harness_{"etcd-start"};
};

TEST_F(DaemonEtcdStart, WaitsForAnUnreachableClusterWithoutReadyThenClaimsAndServes) {
  // Arrange: a cluster that existed, now entirely down (data kept).
  EtcdCluster cluster(3);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const std::vector<std::string> endpoints = cluster.ClientUrls();
  for (int i = 0; i < cluster.size(); ++i) cluster.Kill(i);
  const DaemonOptions options = OptionsFor("w", endpoints);

  // Act 1: the daemon starts with no etcd member answering.
  Daemon daemon = Daemon::Spawn(options);
  const auto waiting = daemon.notify().WaitFor(&IsWaitingStatus, 60s);
  // A few more attempts, so the backoff has run while nothing answers.
  const auto later = waiting ? daemon.notify().WaitFor(&IsWaitingStatus, 60s, *waiting + 2)
                             : std::nullopt;

  // Assert 1: waiting, alive, not ready, and saying so.
  ASSERT_TRUE(waiting) << daemon.Describe();
  ASSERT_TRUE(later) << daemon.Describe();
  EXPECT_TRUE(daemon.Running()) << daemon.Describe();
  EXPECT_EQ(daemon.notify().CountLine("READY=1"), 0u) << daemon.Describe();
  const NotifyMessage first = daemon.notify().Messages()[*waiting];
  const std::string status = *first.Value("STATUS");
  EXPECT_NE(status.find(endpoints[0]), std::string::npos) << status;
  EXPECT_NE(status.find("; retrying in "), std::string::npos) << status;
  EXPECT_TRUE(first.Value("EXTEND_TIMEOUT_USEC").has_value()) << first.text;
  EXPECT_FALSE(Client::Inspect(DaemonHarness::ClientOptionsFor(options.runtime_dir)))
      << "a segment exists before the claim";

  // Act 2: the cluster comes back.
  for (int i = 0; i < cluster.size(); ++i) cluster.Restart(i);
  for (int i = 0; i < cluster.size(); ++i) ASSERT_TRUE(cluster.WaitReady(i, 60s)) << cluster.Logs();
  const bool ready = daemon.WaitForReady(90s);

  // Assert 2: claimed, serving, IDs of the claimed number.
  ASSERT_TRUE(ready) << daemon.Describe();
  auto client = Client::Open("etcd-start", DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(client) << client.error().message;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 1000; ++i) {
    auto id = client->Next();
    ASSERT_TRUE(id) << id.error().message;
    ids.push_back(*id);
  }
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::set<uint64_t>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_TRUE(daemon.WaitForErr("waiting for the register: etcd unreachable at")) << daemon.err();
  EXPECT_TRUE(daemon.Stop().value_or(testing::ExitStatus{}).ExitedWith(0)) << daemon.Describe();
}

TEST_F(DaemonEtcdStart, StopsCleanlyWhileWaitingForTheRegister) {
  // Arrange: nothing listens on the endpoint.
  const std::string nowhere = "http://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  Daemon daemon = Daemon::Spawn(OptionsFor("s", {nowhere}));
  ASSERT_TRUE(daemon.notify().WaitFor(&IsWaitingStatus, 60s)) << daemon.Describe();

  // Act
  const auto exit = daemon.Stop(60s);

  // Assert
  ASSERT_TRUE(exit) << daemon.Describe();
  EXPECT_TRUE(exit->ExitedWith(0)) << daemon.Describe();
  EXPECT_EQ(daemon.notify().CountLine("READY=1"), 0u) << daemon.Describe();
  EXPECT_NE(daemon.err().find("while waiting for the register"), std::string::npos)
      << daemon.err();
}

TEST_F(DaemonEtcdStart, QuorumLossPausesEveryDaemonNamingTheRegisterAndAllResume) {
  // Arrange: three daemons serving from one 3-member cluster.
  EtcdCluster cluster(3);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  // A lease well beyond the outage, so the claims survive it; quick request timeouts.
  const std::string etcd_extra = "lease_ttl_s = 30\nrequest_timeout_ms = 1000\n";
  std::vector<DaemonOptions> options;
  std::vector<Daemon> daemons;
  for (int i = 0; i < 3; ++i) {
    options.push_back(OptionsFor("q" + std::to_string(i), cluster.ClientUrls(), "0-63", etcd_extra));
    daemons.push_back(Daemon::Spawn(options.back()));
  }
  for (auto& d : daemons) ASSERT_TRUE(d.WaitForReady(60s)) << d.Describe();
  std::vector<Client> clients;
  for (int i = 0; i < 3; ++i) {
    auto client = Client::Open("quorum", DaemonHarness::ClientOptionsFor(options[i].runtime_dir));
    ASSERT_TRUE(client) << client.error().message;
    clients.push_back(std::move(*client));
  }
  std::vector<std::vector<uint64_t>> before(3);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 2000; ++k) {
      auto id = clients[i].Next();
      ASSERT_TRUE(id) << id.error().message;
      before[i].push_back(*id);
    }
  }
  std::vector<size_t> notify_from;
  for (auto& d : daemons) notify_from.push_back(d.notify().Messages().size());

  // Act 1: two members stop: no quorum.
  const int leader = cluster.Leader().value_or(0);
  std::vector<int> stopped;
  for (int i = 0; i < cluster.size() && stopped.size() < 2; ++i) {
    if (i != leader) stopped.push_back(i);
  }
  for (const int m : stopped) cluster.Pause(m);
  std::vector<std::optional<ClientStatus>> paused(3);
  for (int i = 0; i < 3; ++i) {
    paused[i] = testing::WaitForState(options[i].runtime_dir, "paused", 60s);
  }
  // While paused, nothing is handed out.
  std::vector<bool> took_while_paused(3, false);
  for (int i = 0; i < 3; ++i) took_while_paused[i] = clients[i].Next().has_value();
  // What an operator and a client are told while paused.
  const std::vector<std::string> endpoints = cluster.ClientUrls();
  std::vector<nlohmann::json> status_json(3);
  std::vector<std::string> status_text(3);
  std::vector<std::string> next_error(3);
  for (int i = 0; i < 3; ++i) {
    status_json[i] = WaitForRenewalError(options[i].runtime_dir, 60s);
    status_text[i] = Ctl(options[i].runtime_dir, {"status"}).out;
    bool took = false;
    next_error[i] = WaitForNextError(clients[i], "last error", 60s, took);
    took_while_paused[i] = took_while_paused[i] || took;
  }
  std::cout << "snowflakectl status while paused:\n"
            << status_text[0] << "\nstatus --json's renewal: " << status_json[0]["renewal"].dump()
            << "\nClient::Next() error while paused:\n"
            << next_error[0] << "\n";
  std::vector<std::optional<size_t>> reason(3);
  for (int i = 0; i < 3; ++i) {
    reason[i] = daemons[i].notify().WaitFor(
        [](const NotifyMessage& m) {
          const auto s = m.Value("STATUS");
          return s && s->starts_with("paused: ") &&
                 s->find("register unreachable: etcd unreachable at ") != std::string::npos;
        },
        30s, notify_from[i]);
  }

  // Act 2: the members continue.
  for (const int m : stopped) cluster.Resume(m);
  std::vector<std::optional<ClientStatus>> resumed(3);
  for (int i = 0; i < 3; ++i) {
    resumed[i] = testing::WaitForState(options[i].runtime_dir, "serving", 90s);
  }
  // Right after quorum returns, a renewal that committed late leaves little slack, and the
  // next one may still be slow: a daemon may pause again for a few milliseconds (never
  // issuing past its confirmed horizon). Take through such blips, for at most 30 s.
  std::vector<std::vector<uint64_t>> after(3);
  for (int i = 0; i < 3; ++i) {
    // Counted by the assertions below (2000 each), so the wait's own verdict adds nothing.
    [[maybe_unused]] const auto took = testing::WaitUntil(
        [&] {
          while (after[i].size() < 2000) {
            auto id = clients[i].Next();
            if (!id) return false;  // a blip: wait a poll interval, then take on
            after[i].push_back(*id);
          }
          return true;
        },
        30s, "2000 IDs from daemon " + std::to_string(i));
  }

  // Assert
  std::set<uint64_t> all;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(paused[i] && paused[i]->state == "paused") << daemons[i].Describe();
    EXPECT_EQ(paused[i]->reason, "register_unreachable");
    EXPECT_FALSE(took_while_paused[i]) << "daemon " << i << " handed out an ID while paused";
    // status --json: typed, the register with its endpoints, the wait, the last error.
    const nlohmann::json& json = status_json[i];
    ASSERT_TRUE(json.is_object() && json["renewal"].is_object()) << json.dump();
    const nlohmann::json& renewal = json["renewal"];
    EXPECT_EQ(json["reason_code"], "register_unreachable") << json.dump();
    EXPECT_EQ(renewal["store"], "register") << renewal.dump();
    EXPECT_EQ(renewal["unanswered"], true) << renewal.dump();
    ASSERT_TRUE(renewal["waited_ms"].is_number_integer()) << renewal.dump();
    EXPECT_GE(renewal["waited_ms"].get<int64_t>(), 0) << renewal.dump();
    EXPECT_GT(renewal["since_unix_ms"].get<int64_t>(), 0) << renewal.dump();
    ASSERT_TRUE(renewal["last_error"].is_string()) << renewal.dump();
    EXPECT_TRUE(NamesOneOf(renewal["last_error"].get<std::string>(), endpoints))
        << "the last error names no member: " << renewal.dump();
    for (const std::string& endpoint : endpoints) {
      EXPECT_NE(renewal["location"].get<std::string>().find(endpoint), std::string::npos)
          << renewal.dump();
      EXPECT_NE(status_text[i].find(endpoint), std::string::npos) << status_text[i];
      EXPECT_NE(next_error[i].find(endpoint), std::string::npos) << next_error[i];
    }
    // status: the reason with since when and how long ago, the daemon's words, the renewal.
    EXPECT_NE(status_text[i].find("waiting for the register since "), std::string::npos)
        << status_text[i];
    EXPECT_NE(status_text[i].find(" ms ago)"), std::string::npos) << status_text[i];
    EXPECT_NE(status_text[i].find("renewal:        waiting on the register etcd "),
              std::string::npos)
        << status_text[i];
    EXPECT_NE(status_text[i].find("last error"), std::string::npos) << status_text[i];
    // The client's error: the same, from the segment alone.
    EXPECT_NE(next_error[i].find("waiting for the register since "), std::string::npos)
        << next_error[i];
    EXPECT_NE(next_error[i].find(" ms ago)"), std::string::npos) << next_error[i];
    EXPECT_NE(next_error[i].find("snowflaked says: register etcd "), std::string::npos)
        << next_error[i];
    const size_t last_error = next_error[i].find("; last error: register unreachable: ");
    ASSERT_NE(last_error, std::string::npos) << next_error[i];
    EXPECT_TRUE(NamesOneOf(next_error[i].substr(last_error), endpoints))
        << "the last error names no member: " << next_error[i];
    EXPECT_TRUE(reason[i]) << "no STATUS= naming the unreachable register: "
                           << daemons[i].Describe();
    ASSERT_TRUE(resumed[i] && resumed[i]->state == "serving") << daemons[i].Describe();
    ASSERT_EQ(after[i].size(), 2000u) << daemons[i].Describe();
    EXPECT_GT(after[i].front(), before[i].back()) << "daemon " << i << " went backwards";
    for (const uint64_t id : before[i]) EXPECT_TRUE(all.insert(id).second) << "duplicate " << id;
    for (const uint64_t id : after[i]) EXPECT_TRUE(all.insert(id).second) << "duplicate " << id;
    EXPECT_TRUE(daemons[i].Running()) << daemons[i].Describe();
  }
}

}  // namespace
}  // namespace snowflake
