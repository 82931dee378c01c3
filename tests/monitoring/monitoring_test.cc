// The operator's side of the metrics: monitoring/snowflaked.rules.yml passes promtool's
// checker and its unit tests (which can fail: a changed threshold breaks them), and every
// metric and label value that the rules and the Grafana dashboard name is one a real
// snowflaked exports on /metrics, so a renamed metric breaks the build, not a pager.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "etcd_cluster.h"
#include "http_probe.h"
#include "subprocess.h"
#include "test_paths.h"
#include "wait_until.h"

namespace snowflake::testing {
namespace {

const std::filesystem::path kMonitoring = ::snowflake::testing::SourcePath("monitoring");
const std::filesystem::path kRules = kMonitoring / "snowflaked.rules.yml";
const std::filesystem::path kRuleTests = kMonitoring / "tests" / "snowflaked.rules.test.yml";
const std::filesystem::path kDashboard = kMonitoring / "grafana" / "snowflaked.json";
constexpr const char* kPromtool = "/usr/bin/promtool";

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// promtool comes from Debian's prometheus package (scripts/setup installs it).
void RequirePromtool() {
  ASSERT_TRUE(std::filesystem::exists(kPromtool))
      << kPromtool << " is missing: run scripts/setup (Debian package prometheus)";
}

// A reference to a metric in a PromQL expression: its name and the label values it
// requires with `=` matchers (regex and negative matchers require nothing).
struct Reference {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string text;  // as written, for the failure message
};

std::vector<Reference> ReferencesIn(const std::string& expression) {
  static const std::regex kSelector(R"((snowflake[_:][A-Za-z0-9_:]+)(\{([^}]*)\})?)");
  static const std::regex kMatcher(R"re(\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)")re");
  std::vector<Reference> found;
  for (auto it = std::sregex_iterator(expression.begin(), expression.end(), kSelector);
       it != std::sregex_iterator(); ++it) {
    Reference reference{.name = (*it)[1].str(), .labels = {}, .text = (*it)[0].str()};
    const std::string matchers = (*it)[3].str();
    for (auto m = std::sregex_iterator(matchers.begin(), matchers.end(), kMatcher);
         m != std::sregex_iterator(); ++m) {
      const std::string label = (*m)[1].str();
      const std::string value = (*m)[3].str();
      // instance and job are the scrape's labels, $x a dashboard variable: not the daemon's.
      if ((*m)[2].str() != "=" || label == "instance" || label == "job" ||
          value.find('$') != std::string::npos) {
        continue;
      }
      reference.labels[label] = value;
    }
    found.push_back(std::move(reference));
  }
  return found;
}

// Every PromQL expression of the dashboard: panel targets and variable queries.
void CollectDashboardExpressions(const nlohmann::json& node, std::vector<std::string>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if ((key == "expr" || key == "query") && value.is_string()) {
        out.push_back(value.get<std::string>());
      } else {
        CollectDashboardExpressions(value, out);
      }
    }
  } else if (node.is_array()) {
    for (const nlohmann::json& item : node) CollectDashboardExpressions(item, out);
  }
}

// The samples of one scrape: name -> the label sets seen ("k=v" strings).
using Exported = std::map<std::string, std::vector<std::set<std::string>>>;

// What is wrong with `references` against `exported` and the rules' recorded names: one
// line per reference that names a metric or a label value nobody exports. Empty: all good.
std::vector<std::string> Missing(const std::vector<Reference>& references, const Exported& exported,
                                 const std::set<std::string>& recorded) {
  std::vector<std::string> missing;
  for (const Reference& reference : references) {
    if (reference.name.find(':') != std::string::npos) {
      if (recorded.count(reference.name) == 0) {
        missing.push_back(reference.text + ": no recording rule defines " + reference.name);
      }
      continue;
    }
    const auto samples = exported.find(reference.name);
    if (samples == exported.end()) {
      missing.push_back(reference.text + ": the daemon exports no metric " + reference.name);
      continue;
    }
    bool matched = false;
    for (const std::set<std::string>& labels : samples->second) {
      bool all = true;
      for (const auto& [label, value] : reference.labels) {
        all = all && labels.count(label + "=" + value) == 1;
      }
      matched = matched || all;
    }
    if (!matched) missing.push_back(reference.text + ": no exported sample has these labels");
  }
  return missing;
}

std::set<std::string> RecordedNames(const std::string& rules) {
  static const std::regex kRecord(R"(record:\s*(\S+))");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), kRecord);
       it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1].str());
  }
  return names;
}

TEST(MonitoringRules, PromtoolAcceptsTheRules) {
  RequirePromtool();
  const RunResult checked = RunCommand({kPromtool, "check", "rules", kRules.string()});
  EXPECT_TRUE(checked.status.ExitedWith(0)) << checked.out << checked.err;
  std::printf("%s", checked.out.c_str());
}

TEST(MonitoringRules, UnitTestsPassForSeriesThatFireAndSeriesThatMustNot) {
  RequirePromtool();
  const RunResult tested = RunCommand({kPromtool, "test", "rules", kRuleTests.string()});
  EXPECT_TRUE(tested.status.ExitedWith(0)) << tested.out << tested.err;
}

// The unit tests see a threshold change: the 5xx alert at 50 % instead of 5 % no longer
// fires for the series at 25 %, and promtool says so.
TEST(MonitoringRules, UnitTestsFailWhenAThresholdChanges) {
  RequirePromtool();
  DaemonHarness harness("monitoring-mutant");
  std::string rules = ReadText(kRules);
  const std::string threshold = "snowflake:http_5xx:ratio_rate5m > 0.05";
  const size_t at = rules.find(threshold);
  ASSERT_NE(at, std::string::npos) << "the 5xx alert's expression changed; update this test";
  rules.replace(at, threshold.size(), "snowflake:http_5xx:ratio_rate5m > 0.5");
  const std::filesystem::path dir = harness.root() / "monitoring";
  std::filesystem::create_directories(dir / "tests");
  std::ofstream(dir / "snowflaked.rules.yml") << rules;
  std::filesystem::copy_file(kRuleTests, dir / "tests" / "snowflaked.rules.test.yml");
  const RunResult tested = RunCommand(
      {kPromtool, "test", "rules", (dir / "tests" / "snowflaked.rules.test.yml").string()});
  EXPECT_FALSE(tested.status.ExitedWith(0)) << tested.out << tested.err;
  EXPECT_NE((tested.out + tested.err).find("SnowflakeHttp5xx"), std::string::npos)
      << tested.out << tested.err;
}

TEST(MonitoringMetrics, TheCheckFindsANameOrLabelValueNobodyExports) {
  const Exported exported = {{"snowflake_state", {{"state=serving"}, {"state=paused"}}}};
  const std::vector<std::string> missing =
      Missing(ReferencesIn(R"(snowflake_state{state="napping"} + snowflake_no_such_total)"
                           R"( + snowflake:not_recorded + snowflake_state{state="paused"})"),
              exported, {"snowflake:recorded"});
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_NE(missing[0].find("napping"), std::string::npos);
  EXPECT_NE(missing[1].find("snowflake_no_such_total"), std::string::npos);
  EXPECT_NE(missing[2].find("snowflake:not_recorded"), std::string::npos);
}

// The daemon an operator alerts on: an etcd register (a real member on loopback) and the
// HTTP front. Some families have samples only once something happened (a register error,
// a reply of a code), so the test makes it happen: traffic on every endpoint, and the
// member stopped until the daemon counts failed register calls. The mark has no window of
// its own (mark_reservation_ms = 0: a raise with each local reservation, every 250 ms), so a
// register call fails within the lease's TTL of the stop, and the daemon keeps its claim.
TEST(MonitoringMetrics, EveryNameInTheRulesAndTheDashboardIsExportedByARealDaemon) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  DaemonHarness harness("monitoring-names");
  const uint16_t port = FreePort();
  const std::string toml = EtcdDaemonToml("mon", etcd.ClientUrls(), "/monitoring/", "0-3",
                                          "connect_timeout_ms = 100\nrequest_timeout_ms = 300\n"
                                          "mark_reservation_ms = 0\n") +
                           HttpFrontToml(port);
  Daemon daemon = harness.Start(harness.NamedOptions("mon", toml));
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  // Traffic on every labelled path the rules and the dashboard read.
  ASSERT_EQ(FetchOnce(port, "/v1/id?service=orders").status, 200);
  ASSERT_EQ(FetchOnce(port, "/v1/ids?service=orders&count=10").status, 200);
  ASSERT_EQ(FetchOnce(port, "/healthz").status, 200);
  // Register calls fail while the member is stopped (each within request_timeout_ms).
  etcd.Pause(0);
  const bool failed = WaitUntil(
      [&] {
        return FetchOnce(port, "/metrics").body.find("snowflake_register_errors_total{") !=
               std::string::npos;
      },
      std::chrono::seconds(30), "a failed register call in /metrics", std::chrono::milliseconds(50));
  etcd.Resume(0);
  ASSERT_TRUE(failed) << daemon.Describe();
  const HttpReply scrape = FetchOnce(port, "/metrics");
  ASSERT_EQ(scrape.status, 200);
  const ParsedExposition parsed = ParseExposition(scrape.body);
  ASSERT_TRUE(parsed.error.empty()) << parsed.error << "\n" << scrape.body;
  Exported exported;
  // "name{k=v,k=v} value" per sample.
  std::istringstream lines(parsed.samples);
  for (std::string line; std::getline(lines, line);) {
    const size_t open = line.find('{');
    const size_t close = line.rfind('}');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::set<std::string> labels;
    std::istringstream list(line.substr(open + 1, close - open - 1));
    for (std::string label; std::getline(list, label, ',');) {
      if (!label.empty()) labels.insert(label);
    }
    exported[line.substr(0, open)].push_back(std::move(labels));
  }
  ASSERT_FALSE(exported.empty()) << scrape.body;

  const std::string rules = ReadText(kRules);
  const std::set<std::string> recorded = RecordedNames(rules);
  std::vector<Reference> references = ReferencesIn(rules);
  std::vector<std::string> expressions;
  CollectDashboardExpressions(nlohmann::json::parse(ReadText(kDashboard)), expressions);
  ASSERT_GE(expressions.size(), 10u) << "the dashboard lost its panels?";
  for (const std::string& expression : expressions) {
    for (Reference& reference : ReferencesIn(expression))
      references.push_back(std::move(reference));
  }
  ASSERT_GE(references.size(), 20u);
  std::set<std::string> names;
  for (const Reference& reference : references) names.insert(reference.name);
  std::printf("%zu references to %zu names checked against %zu exported metrics\n",
              references.size(), names.size(), exported.size());

  const std::vector<std::string> missing = Missing(references, exported, recorded);
  std::string report;
  for (const std::string& line : missing) report += "  " + line + "\n";
  EXPECT_TRUE(missing.empty()) << "names the daemon does not export:\n" << report;
  // The other way round: every family the daemon exports is on the dashboard or in a rule,
  // so a new metric gets a panel or a reason.
  std::set<std::string> unused;
  for (const auto& [name, samples] : exported) {
    // A histogram's _bucket, _sum and _count samples belong to one family.
    std::string family = name;
    for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
      const std::string base = name.substr(0, name.size() - std::min(name.size(), suffix.size()));
      if (name.ends_with(suffix) && exported.count(base + "_bucket") != 0) family = base;
    }
    bool used = false;
    for (const std::string& referenced : names) used = used || referenced.starts_with(family);
    if (!used) unused.insert(family);
  }
  std::string unused_report;
  for (const std::string& name : unused) unused_report += "  " + name + "\n";
  EXPECT_TRUE(unused.empty()) << "exported but on no panel and in no rule:\n" << unused_report;
  EXPECT_TRUE(daemon.Stop().value_or(ExitStatus{}).ExitedWith(0));
}

}  // namespace
}  // namespace snowflake::testing
