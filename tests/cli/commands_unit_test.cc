// The pure pieces of snowflakectl's commands: count parsing, the status text and JSON
// built from a gathered report, durations, bounds, the JSON error object.

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "bounds_command.h"
#include "command_error.h"
#include "libclient/status/status_report.h"
#include "next_command.h"
#include "status_command.h"

namespace snowflake::cli {
namespace {

using status::FormatDuration;
using status::StatusReport;
using status::StatusToJson;
using status::StatusToText;

TEST(ParseCount, AcceptsOneToABillionInDecimal) {
  EXPECT_EQ(ParseCount("1").value(), 1u);
  EXPECT_EQ(ParseCount("010").value(), 10u) << "leading zeros are still decimal";
  EXPECT_EQ(ParseCount("1000000000").value(), 1'000'000'000u);
}

TEST(ParseCount, SaysPreciselyWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc", "not a decimal number"}, {"0x10", "not a decimal number"},
      {"1e3", "not a decimal number"}, {"+5", "not a decimal number"},
      {" 5", "not a decimal number"},  {"", "it is empty"},
      {"-5", "it is negative"},        {"0", "zero IDs is nothing to do"},
      {"1000000001", "too large"},     {"99999999999999999999999", "too large"}};
  for (const auto& [text, why] : cases) {
    auto sut = ParseCount(text);

    ASSERT_FALSE(sut) << text;
    EXPECT_NE(sut.error().find("bad count '" + text + "': " + why), std::string::npos)
        << sut.error();
    EXPECT_NE(sut.error().find("expected a decimal whole number from 1 to 1000000000"),
              std::string::npos);
  }
}

TEST(FormatDuration, PicksTwoUnits) {
  EXPECT_EQ(FormatDuration(450), "450 ms");
  EXPECT_EQ(FormatDuration(12'000), "12s");
  EXPECT_EQ(FormatDuration(185'000), "3m 05s");
  EXPECT_EQ(FormatDuration(7'380'000), "2h 03m");
  EXPECT_EQ(FormatDuration(352'800'000), "4d 02h");
  EXPECT_EQ(FormatDuration(-5), "0 ms");
}

StatusReport ServingReport() {
  StatusReport report;
  report.segment.state = "serving";
  report.segment.health = "serving";
  report.segment.reason = "none";
  report.segment.machine = 3;
  report.segment.epoch_unix_ms = 1'767'225'600'000;
  report.segment.published_total = 100;
  report.segment.taken_total = 60;
  report.segment.ring_capacity = 64;
  report.now_unix_ms = 1'767'225'700'000;
  report.runtime_dir = "/run/x";
  report.segment.uncounted = 4;
  protocol::StatusRecord daemon;
  daemon.state = "serving";
  daemon.version = "9.8.7";
  daemon.instance = "blue";
  daemon.started_unix_ms = 1'767'225'690'000;
  daemon.state_since_unix_ms = 1'767'225'695'000;
  daemon.register_backend = "static";
  daemon.register_location = "register.machine = 3";
  daemon.holder_id = "host-a";
  daemon.last_issued_id = 4194304;  // 1 ms after the epoch, machine 0, sequence 0
  daemon.generator_mark_unix_ms = 1'767'225'600'001;
  daemon.reserved_through_unix_ms = 1'767'225'601'001;
  daemon.services = {{"orders", 12}};
  report.daemon = daemon;
  return report;
}

TEST(StatusToText, ShowsWhoWhatAndSinceWhenForPeople) {
  const std::string sut = StatusToText(ServingReport());

  for (const std::string expected :
       {"snowflaked 9.8.7, instance \"blue\", pid 0, up 10s (since 2026-01-01T00:01:30.000Z)",
        "runtime dir:    /run/x", "state:          serving for 5s",
        "machine:        3, from the static register register.machine = 3 as holder \"host-a\"",
        "last ID made:   4194304, made at 2026-01-01T00:00:00.001Z (1767225600001)",
        "reserved until: 2026-01-01T00:00:01.001Z (1767225601001), 1000 ms past the last ID",
        "layout:         41/10/12: 1,024 hosts, 4,096,000 IDs per second per host, until "
        "2095-09-07",
        "  orders                          12", "  (uncounted)                     4"}) {
    EXPECT_NE(sut.find(expected), std::string::npos) << expected << "\n" << sut;
  }
}

TEST(StatusToText, ShowsTheSegmentsLayout) {
  StatusReport report = ServingReport();
  report.segment.id_bits = {41, 16, 6};
  report.daemon->last_issued_id = (uint64_t{1} << 22) | (3 << 6);  // 1 ms, machine 3

  const std::string sut = StatusToText(report);
  const nlohmann::json json = StatusToJson(report);

  EXPECT_NE(sut.find("layout:         41/16/6: 65,536 hosts, 64,000 IDs per second per host"),
            std::string::npos)
      << sut;
  EXPECT_EQ(json["layout"], "41/16/6");
  EXPECT_EQ(json["last_issued_id_unix_ms"], 1'767'225'600'001) << "decoded in the layout";
}

TEST(StatusToText, ExplainsDrainedOnlyWhenThereAreSome) {
  StatusReport report = ServingReport();
  const std::string none = StatusToText(report);
  report.segment.drained_total = 7;
  report.segment.taken_total = 67;

  const std::string some = StatusToText(report);

  EXPECT_EQ(none.find("(drained: "), std::string::npos) << none;
  EXPECT_NE(some.find("IDs drained:    7\n                (drained: IDs the daemon took back"),
            std::string::npos)
      << some;
  EXPECT_NE(some.find("not lost or duplicate IDs"), std::string::npos) << some;
}

TEST(StatusToText, SaysWhereItsFactsComeFromWhenTheDaemonDoesNotAnswer) {
  StatusReport report = ServingReport();
  report.daemon.reset();
  report.daemon_error = "no control socket at /run/x/control.sock";

  const std::string sut = StatusToText(report);

  EXPECT_NE(sut.find("its control socket did not answer (no control socket at "
                     "/run/x/control.sock): what follows is read from the segment"),
            std::string::npos)
      << sut;
  EXPECT_EQ(sut.find("last ID"), std::string::npos) << sut;
}

TEST(StatusToText, ShowsTheDaemonsWordsFromTheSegmentOnlyWhenTheSocketGaveNoRenewal) {
  StatusReport report = ServingReport();
  report.segment.state = "paused";
  report.segment.status_text = "register etcd http://127.0.0.1:1 /p/; last error: timed out";
  report.daemon->renewal = protocol::RenewalStatus{.store = "register",
                                                   .location = "etcd http://127.0.0.1:1 /p/",
                                                   .since_unix_ms = 1'767'225'600'000,
                                                   .waited_ms = 4'210,
                                                   .last_error = "timed out",
                                                   .last_error_store = "register",
                                                   .unanswered = true};
  StatusReport unanswered = report;
  unanswered.daemon.reset();
  unanswered.daemon_error = "no control socket at /run/x/control.sock";

  const std::string with_renewal = StatusToText(report);
  const std::string from_segment = StatusToText(unanswered);

  EXPECT_NE(with_renewal.find("renewal:        waiting on the register etcd http://127.0.0.1:1"),
            std::string::npos)
      << with_renewal;
  EXPECT_EQ(with_renewal.find("daemon says:"), std::string::npos) << with_renewal;
  EXPECT_NE(from_segment.find("daemon says:    register etcd http://127.0.0.1:1 /p/; last "
                              "error: timed out"),
            std::string::npos)
      << from_segment;
}

// A pause for the clock: the millisecond, who set it and when the clock passes it, in
// words and in the JSON; a wait the clock already passed is called what it is.
TEST(StatusToText, ShowsWhatAPauseForTheClockWaitsFor) {
  StatusReport report = ServingReport();
  report.segment.state = "paused";
  report.daemon->clock_wait = protocol::ClockWait{
      .until_unix_ms = 1'767'225'600'258, .set_by = "register", .clock_passes_in_ms = 259};
  StatusReport overdue = report;
  overdue.daemon->clock_wait->clock_passes_in_ms = -52'000;

  const std::string text = StatusToText(report);
  const std::string overdue_text = StatusToText(overdue);
  const nlohmann::json json = StatusToJson(report);

  EXPECT_NE(text.find("clock wait:     until the clock passes 2026-01-01T00:00:00.258Z (unix ms "
                      "1767225600258), set by the register's mark (the number's last holder); it "
                      "passes it in 259 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(overdue_text.find("it passed it 52s ago: the pause outlasts its cause"),
            std::string::npos)
      << overdue_text;
  EXPECT_EQ(json["clock_wait"]["until_unix_ms"], 1'767'225'600'258);
  EXPECT_EQ(json["clock_wait"]["set_by"], "register");
  EXPECT_EQ(json["clock_wait"]["clock_passes_in_ms"], 259);
  EXPECT_TRUE(StatusToJson(ServingReport())["clock_wait"].is_null());
}

TEST(StatusToJson, HasTheDaemonsFactsAndNullsWhenItDoesNotAnswer) {
  const nlohmann::json serving = StatusToJson(ServingReport());
  StatusReport silent_report = ServingReport();
  silent_report.daemon.reset();
  silent_report.daemon_error = "gone";
  const nlohmann::json silent = StatusToJson(silent_report);

  EXPECT_EQ(serving["ok"], true);
  EXPECT_EQ(serving["version"], "9.8.7");
  EXPECT_EQ(serving["uptime_ms"], 10'000);
  EXPECT_EQ(serving["state_age_ms"], 5'000);
  EXPECT_EQ(serving["last_issued_id"], "4194304");
  EXPECT_EQ(serving["last_issued_id_unix_ms"], 1'767'225'600'001);
  EXPECT_EQ(serving["reserved_through_time"], "2026-01-01T00:00:01.001Z");
  EXPECT_EQ(serving["generator_mark_unix_ms"], 1'767'225'600'001);
  // Deprecated duplicates, kept for one release: the same values as their new keys.
  EXPECT_EQ(serving["last_issued_unix_ms"], serving["generator_mark_unix_ms"]);
  EXPECT_EQ(serving["uncounted_taken"], serving["uncounted"]);
  EXPECT_EQ(serving["uncounted"], 4);
  EXPECT_EQ(serving["services"], nlohmann::json({{"orders", 12}}));
  EXPECT_EQ(serving["daemon"]["ok"], true);
  EXPECT_EQ(serving["daemon"]["holder_id"], "host-a");
  EXPECT_EQ(silent["ok"], false);
  EXPECT_EQ(silent["daemon_error"], "gone");
  for (const char* key : {"version", "instance", "uptime_ms", "state_age_ms", "register_backend",
                          "holder_id", "last_issued_id", "reserved_through_unix_ms",
                          "generator_mark_unix_ms", "last_issued_unix_ms", "services", "daemon"}) {
    EXPECT_TRUE(silent.contains(key) && silent[key].is_null()) << key;
  }
}

TEST(RunBounds, PrintsTheIdsOfARangeAndAWhereClause) {
  BoundsRequest request{.from = "2026-01-01T00:00:00Z",
                        .to = "2026-01-01T00:00:00.001Z",
                        .epoch = std::string("2026-01-01T00:00:00Z"),
                        .runtime_dir = {},
                        .layout = {},
                        .json = false};
  std::ostringstream out, err;

  EXPECT_EQ(RunBounds(request, out, err), 0);

  EXPECT_NE(out.str().find("first ID:  0\nlast ID:   8388607\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("SQL:       WHERE id BETWEEN 0 AND 8388607"), std::string::npos);
  EXPECT_EQ(err.str(), "");
}

TEST(RunBounds, SaysWhenARangeWasCutToTheEpoch) {
  BoundsRequest request{.from = "0",
                        .to = "1767225600000",
                        .epoch = std::string("1767225600000"),
                        .runtime_dir = {},
                        .layout = {},
                        .json = true};
  std::ostringstream out, err;

  EXPECT_EQ(RunBounds(request, out, err), 0);

  const auto sut = nlohmann::json::parse(out.str());
  EXPECT_EQ(sut["first_id"], "0");
  EXPECT_EQ(sut["last_id"], "4194303");
  EXPECT_EQ(sut["clamped"], true);
  EXPECT_EQ(sut["from_unix_ms"], 0);
  EXPECT_EQ(sut["first_unix_ms"], 1767225600000);
  EXPECT_EQ(sut["epoch_source"], "option");
}

TEST(RunBounds, RefusesEachBadRangeWithExit2AndAJsonError) {
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> cases = {
      {"2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z", "usage", "ends before it begins"},
      {"2020-01-01T00:00:00Z", "2020-12-31T00:00:00Z", "time_out_of_range", "before the epoch"},
      {"2100-01-01T00:00:00Z", "2100-01-02T00:00:00Z", "time_out_of_range", "the last millisecond"},
      {"yesterday", "2026-01-01T00:00:00Z", "usage", "bad --from 'yesterday'"},
      {"2026-01-01T00:00:00Z", "2026-01-01T00:00:00", "usage", "a time zone is required"}};
  for (const auto& [from, to, code, why] : cases) {
    BoundsRequest request{.from = from,
                          .to = to,
                          .epoch = std::nullopt,
                          .runtime_dir = {},
                          .layout = {},
                          .json = true};
    std::ostringstream out, err;

    EXPECT_EQ(RunBounds(request, out, err), 2) << from << " " << to;

    const auto sut = nlohmann::json::parse(out.str(), nullptr, false);
    ASSERT_TRUE(sut.is_object()) << out.str();
    EXPECT_EQ(sut["ok"], false);
    EXPECT_EQ(sut["error_code"], code) << from << " " << to;
    EXPECT_NE(err.str().find(why), std::string::npos) << err.str();
  }
}

TEST(ErrorJson, HasTheDocumentedKeysInOrder) {
  EXPECT_EQ(ErrorJson({1, "daemon_not_running", "no daemon"}).dump(),
            R"({"ok":false,"error_code":"daemon_not_running","error":"no daemon",)"
            R"("exit_status":1})");
}

}  // namespace
}  // namespace snowflake::cli
