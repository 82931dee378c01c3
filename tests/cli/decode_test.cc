// `snowflakectl decode`: the pure parsing/formatting functions, then the real binary as a
// process (stdout, stderr and exit status).
//
// Hand-computed vectors (default epoch 2026-01-01T00:00:00Z = 20454 days * 86,400,000
// = 1,767,225,600,000 Unix ms; an ID is offset_ms << 22 | machine << 12 | sequence):
// - ID 0: offset 0 → 1767225600000, 2026-01-01T00:00:00.000Z, machine 0, sequence 0.
// - ID 8388607 = 2^23 - 1 = 1 << 22 (4194304) + 1023 << 12 (4190208) + 4095: offset 1 ms
//   → 1767225600001, 2026-01-01T00:00:00.001Z, machine 1023, sequence 4095.
// - ID 460169687040 = 109713 << 22 (109713 * 4194304 = 460169674752) + 3 << 12 (12288):
//   offset 109,713 ms = 1 min 49.713 s → 1767225709713, 2026-01-01T00:01:49.713Z,
//   machine 3, sequence 0.
// - ID 2^63 - 1 = 9223372036854775807: offset 2^41 - 1 = 2199023255551 ms, machine 1023,
//   sequence 4095 → 1767225600000 + 2199023255551 = 3966248855551,
//   2095-09-07T15:47:35.551Z (3966248855 s = 45905 days + 56855 s; day 45905 after 1970
//   is 2095-09-07; 56855 s = 15 h 47 min 35 s).
// - --epoch 0, ID 4194305 = 1 << 22 + 1: offset 1 ms → 1, 1970-01-01T00:00:00.001Z,
//   machine 0, sequence 1.
// - --epoch 2020-01-01T00:00:00Z = 18262 days * 86,400,000 = 1577836800000; ID 4194304
//   (offset 1) → 1577836800001, 2020-01-01T00:00:00.001Z.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "decode_command.h"
#include "snowflake/time_text.h"
#include "subprocess.h"
#include "test_paths.h"

namespace snowflake::cli {
namespace {

using snowflake::testing::kSnowflakectlPath;
using snowflake::testing::RunCommand;
using snowflake::testing::RunResult;

// Without --epoch, decode looks for a local daemon: these tests point it at a directory
// that does not exist, so they get the default epoch whatever runs on this host.
const std::string kNoDaemonDir = "/nonexistent/snowflake-decode-test";

RunResult Decode(std::vector<std::string> args) {
  std::vector<std::string> argv = {kSnowflakectlPath, "decode"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, {.env = {.set = {{"SNOWFLAKE_RUNTIME_DIR", kNoDaemonDir}}, .unset = {}},
                           .stdin_text = {},
                           .timeout = std::chrono::seconds(60),
                           .working_dir = {}});
}

// ---- ParseId --------------------------------------------------------------------------

TEST(ParseId, AcceptsZeroAndTheLargestId) {
  EXPECT_EQ(ParseId("0").value(), 0u);
  EXPECT_EQ(ParseId("9223372036854775807").value(), 9223372036854775807u);
}

TEST(ParseId, RejectsEmpty) {
  auto sut = ParseId("");

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error(),
            "bad ID '': it is empty; expected a decimal number from 0 to 9223372036854775807 "
            "(2^63-1)");
}

TEST(ParseId, RejectsNegative) {
  auto sut = ParseId("-1");

  ASSERT_FALSE(sut.has_value());
  EXPECT_NE(sut.error().find("'-1': it is negative"), std::string::npos) << sut.error();
}

TEST(ParseId, RejectsNotANumber) {
  for (const char* text : {"abc", "12x", " 12", "12 ", "+12", "0x10", "1.5", "1e3"}) {
    auto sut = ParseId(text);

    ASSERT_FALSE(sut.has_value()) << text;
    EXPECT_NE(sut.error().find("not a decimal number"), std::string::npos) << sut.error();
  }
}

TEST(ParseId, RejectsTwoToThe63WithTheSignBitSet) {
  auto sut = ParseId("9223372036854775808");

  ASSERT_FALSE(sut.has_value());
  EXPECT_NE(sut.error().find("too large"), std::string::npos) << sut.error();
}

TEST(ParseId, RejectsAboveTwoToThe64) {
  EXPECT_FALSE(ParseId("18446744073709551616").has_value());
  EXPECT_FALSE(ParseId("18446744073709551615").has_value());
}

// ---- ParseEpoch -----------------------------------------------------------------------

TEST(ParseEpoch, AcceptsUnixMilliseconds) {
  EXPECT_EQ(ParseEpoch("0").value().epoch_unix_ms(), 0);
  EXPECT_EQ(ParseEpoch("1767225600000").value().epoch_unix_ms(), 1767225600000);
}

TEST(ParseEpoch, AcceptsIsoUtcWithAndWithoutMilliseconds) {
  EXPECT_EQ(ParseEpoch("2020-01-01T00:00:00Z").value().epoch_unix_ms(), 1577836800000);
  // 2024-02-29 is day 19782 after 1970: 19782 * 86400000 + 12:34:56.789 (45296789 ms).
  EXPECT_EQ(ParseEpoch("2024-02-29T12:34:56.789Z").value().epoch_unix_ms(), 1709210096789);
  EXPECT_EQ(ParseEpoch("1970-01-01T00:00:00.000Z").value().epoch_unix_ms(), 0);
}

TEST(ParseEpoch, AcceptsAnEpochInTheFuture) {
  EXPECT_EQ(ParseEpoch("2100-01-01T00:00:00Z").value().epoch_unix_ms(), 4102444800000);
}

TEST(ParseEpoch, RejectsEmpty) {
  auto sut = ParseEpoch("");

  ASSERT_FALSE(sut.has_value());
  EXPECT_NE(sut.error().find("bad epoch '': it is empty"), std::string::npos) << sut.error();
}

TEST(ParseEpoch, RejectsNegative) {
  auto sut = ParseEpoch("-1");

  ASSERT_FALSE(sut.has_value());
  EXPECT_NE(sut.error().find("negative"), std::string::npos) << sut.error();
}

TEST(ParseEpoch, RejectsNotANumberNorAnIsoDate) {
  for (const char* text : {"abc", "12x", "2026-01-01", "0x10", "yesterday"}) {
    auto sut = ParseEpoch(text);

    ASSERT_FALSE(sut.has_value()) << text;
    EXPECT_NE(sut.error().find("expected Unix milliseconds"), std::string::npos) << sut.error();
  }
}

TEST(ParseEpoch, RejectsImpossibleDatesAndTimes) {
  for (const char* text : {"2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z",
                           "2026-01-32T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:60:00Z",
                           "2026-01-01T00:00:60Z"}) {
    EXPECT_FALSE(ParseEpoch(text).has_value()) << text;
  }
}

// --epoch accepts every form the daemon's config accepts (one parser: ParseTimeText).
TEST(ParseEpoch, AcceptsOffsetsAsTheConfigDoes) {
  EXPECT_EQ(ParseEpoch("2026-01-01T05:30:00+05:30").value().epoch_unix_ms(), 1767225600000);
  EXPECT_EQ(ParseEpoch("2025-12-31T19:00:00-05:00").value().epoch_unix_ms(), 1767225600000);
  EXPECT_EQ(ParseEpoch("2026-01-01t00:00:00z").value().epoch_unix_ms(), 1767225600000);
  EXPECT_EQ(ParseEpoch("2026-01-01 00:00:00Z").value().epoch_unix_ms(), 1767225600000);
}

TEST(ParseEpoch, RejectsATimeWithoutAZoneOrWithJunkAfterIt) {
  for (const char* text : {"2026-01-01T00:00:00", "2026-01-01T00:00:00ZZ"}) {
    auto sut = ParseEpoch(text);

    ASSERT_FALSE(sut.has_value()) << text;
    EXPECT_NE(sut.error().find("zone"), std::string::npos) << sut.error();
  }
}

TEST(ParseEpoch, KeepsMillisecondsOfAnyFraction) {
  EXPECT_EQ(ParseEpoch("2026-01-01T00:00:00.5Z").value().epoch_unix_ms(), 1767225600500);
  EXPECT_EQ(ParseEpoch("2026-01-01T00:00:00.5009Z").value().epoch_unix_ms(), 1767225600500);
}

TEST(ParseEpoch, RejectsIsoTimesBefore1970) {
  auto sut = ParseEpoch("1969-12-31T23:59:59.999Z");

  ASSERT_FALSE(sut.has_value());
  EXPECT_NE(sut.error().find("before 1970"), std::string::npos) << sut.error();
}

TEST(ParseEpoch, RejectsEpochsWhoseIdsWouldPassTheYear9999) {
  EXPECT_TRUE(ParseEpoch(std::to_string(kMaxEpochUnixMs)).has_value());
  EXPECT_FALSE(ParseEpoch(std::to_string(kMaxEpochUnixMs + 1)).has_value());
  EXPECT_FALSE(ParseEpoch("99999999999999999999999").has_value());
}

// ---- Formatting -----------------------------------------------------------------------

// decode writes times with the one formatter of shm/ (snowflake/time_text.h); every time a
// decode can print, up to kMaxIsoUnixMs, has a four-digit year.
TEST(DecodeTime, IsTheSharedIsoTextUpToTheLatestFourDigitYear) {
  EXPECT_EQ(FormatTimeText(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTimeText(1767225600000), "2026-01-01T00:00:00.000Z");
  // 2026-03-04 is day 20516 (20454 + 31 + 28 + 3): 20516 * 86400000 + 5:06:07.089.
  EXPECT_EQ(FormatTimeText(int64_t{20516} * 86'400'000 + 18'367'089), "2026-03-04T05:06:07.089Z");
  EXPECT_EQ(FormatTimeText(kMaxIsoUnixMs), "9999-12-31T23:59:59.999Z");
}

TEST(FormatDecodedHuman, WritesOneLineWithEveryField) {
  EXPECT_EQ(FormatDecodedHuman(460169687040, IdLayout()),
            "460169687040  unix_ms=1767225709713 time=2026-01-01T00:01:49.713Z machine=3 "
            "sequence=0");
}

TEST(FormatDecodedJson, WritesIdAsADecimalString) {
  EXPECT_EQ(FormatDecodedJson(9223372036854775807u, IdLayout()),
            R"({"id":"9223372036854775807","unix_ms":3966248855551,)"
            R"("time":"2095-09-07T15:47:35.551Z","machine":1023,"sequence":4095,)"
            R"("epoch_unix_ms":1767225600000,"epoch_source":"default",)"
            R"("layout":"41/10/12","layout_source":"default"})");
}

TEST(FormatDecodedJson, NamesTheLayoutAndWhereItCameFrom) {
  const IdLayout wide = IdLayout::Create(kDefaultEpochUnixMs, {41, 16, 6}).value();

  EXPECT_EQ(FormatDecodedJson((uint64_t{1} << 22) | (65535u << 6) | 63, wide, "option", "option"),
            R"({"id":"8388607","unix_ms":1767225600001,"time":"2026-01-01T00:00:00.001Z",)"
            R"("machine":65535,"sequence":63,"epoch_unix_ms":1767225600000,)"
            R"("epoch_source":"option","layout":"41/16/6","layout_source":"option"})");
}

TEST(ChooseEpoch, TakesTheLayoutFromTheOption) {
  const auto sut =
      ChooseEpoch(std::nullopt, std::nullopt, {.layout = "65536-hosts", .config = std::nullopt});

  ASSERT_TRUE(sut.has_value()) << sut.error();
  EXPECT_EQ(sut->layout.bits(), (IdBits{41, 16, 6}));
  EXPECT_EQ(sut->layout.epoch_unix_ms(), kDefaultEpochUnixMs);
  EXPECT_EQ(sut->layout_source, "option");
  EXPECT_NE(sut->description.find("layout 41/16/6, given by --layout"), std::string::npos)
      << sut->description;
}

TEST(ChooseEpoch, RefusesALayoutThatIsNoneAndSaysWhatEachCosts) {
  const auto sut =
      ChooseEpoch(std::nullopt, std::nullopt, {.layout = "41/17/6", .config = std::nullopt});

  ASSERT_FALSE(sut.has_value());
  EXPECT_NE(sut.error().find("bad --layout"), std::string::npos) << sut.error();
  EXPECT_NE(sut.error().find("= 64 bits, not 63"), std::string::npos) << sut.error();
}

TEST(RunDecode, PrintsNothingWhenAnyArgumentIsBad) {
  std::ostringstream out, err;
  const DecodeRequest request{.ids = {"0", "x", "1"},
                              .epoch = "",
                              .has_epoch = false,
                              .json = false,
                              .runtime_dir = {},
                              .layout = {}};

  const int status = RunDecode(request, out, err);

  EXPECT_EQ(status, 2);
  EXPECT_EQ(out.str(), "");
  EXPECT_NE(err.str().find("'x'"), std::string::npos) << err.str();
}

// ---- The binary -----------------------------------------------------------------------

TEST(DecodeBinary, DecodesIdZeroWithTheDefaultEpoch) {
  auto result = Decode({"0"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << " " << result.err;
  EXPECT_EQ(result.out,
            "0  unix_ms=1767225600000 time=2026-01-01T00:00:00.000Z machine=0 sequence=0\n");
  // One line on stderr says which epoch was used, and why.
  EXPECT_EQ(result.err,
            "snowflakectl decode: epoch 2026-01-01T00:00:00.000Z (1767225600000), the default "
            "epoch (no daemon's segment readable in " +
                kNoDaemonDir +
                "; pass --epoch if your fleet uses another); layout 41/10/12, the default (no "
                "daemon's segment readable in " +
                kNoDaemonDir + "; pass --layout if your fleet uses another)\n");
}

TEST(DecodeBinary, DecodesInTheLayoutGivenByLayout) {
  // 41/16/6: 1 ms after the epoch, machine 65535, sequence 63 = 2^22 - 1 + 2^22.
  auto result = Decode({"--layout", "41/16/6", "8388607"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.err;
  EXPECT_EQ(result.out,
            "8388607  unix_ms=1767225600001 time=2026-01-01T00:00:00.001Z machine=65535 "
            "sequence=63\n");
  EXPECT_NE(result.err.find("layout 41/16/6, given by --layout"), std::string::npos) << result.err;
}

TEST(DecodeBinary, RefusesABadLayoutWithTheTradeOff) {
  auto result = Decode({"--layout", "41/17/6", "0"});

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_NE(result.err.find("time 41 + machine 17 + sequence 6 = 64 bits, not 63"),
            std::string::npos)
      << result.err;
}

TEST(DecodeBinary, DecodesSeveralIdsOneLineEachInOrder) {
  auto result = Decode({"8388607", "460169687040", "9223372036854775807"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.err;
  EXPECT_EQ(result.out,
            "8388607  unix_ms=1767225600001 time=2026-01-01T00:00:00.001Z machine=1023 "
            "sequence=4095\n"
            "460169687040  unix_ms=1767225709713 time=2026-01-01T00:01:49.713Z machine=3 "
            "sequence=0\n"
            "9223372036854775807  unix_ms=3966248855551 time=2095-09-07T15:47:35.551Z "
            "machine=1023 sequence=4095\n");
}

TEST(DecodeBinary, JsonIsOneObjectPerLineWithTheIdAsAString) {
  auto result = Decode({"--json", "0", "9223372036854775807"});

  ASSERT_TRUE(result.status.ExitedWith(0)) << result.err;
  std::istringstream lines(result.out);
  std::string first, second, extra;
  ASSERT_TRUE(std::getline(lines, first));
  ASSERT_TRUE(std::getline(lines, second));
  EXPECT_FALSE(std::getline(lines, extra));
  const auto zero = nlohmann::json::parse(first);
  EXPECT_EQ(zero["id"], "0");
  EXPECT_EQ(zero["unix_ms"], 1767225600000);
  EXPECT_EQ(zero["time"], "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(zero["machine"], 0);
  EXPECT_EQ(zero["sequence"], 0);
  const auto max = nlohmann::json::parse(second);
  EXPECT_EQ(max["id"], "9223372036854775807");
  EXPECT_EQ(max["unix_ms"], 3966248855551);
  EXPECT_EQ(max["time"], "2095-09-07T15:47:35.551Z");
  EXPECT_EQ(max["machine"], 1023);
  EXPECT_EQ(max["sequence"], 4095);
  EXPECT_EQ(max["epoch_unix_ms"], 1767225600000);
  EXPECT_EQ(max["epoch_source"], "default");
  EXPECT_EQ(result.err, "") << "with --json, the epoch is in every object";
}

TEST(DecodeBinary, JsonErrorsAreAJsonObjectOnStdout) {
  auto result = Decode({"--json", "x"});

  EXPECT_TRUE(result.status.ExitedWith(2));
  const auto error = nlohmann::json::parse(result.out, nullptr, false);
  ASSERT_TRUE(error.is_object()) << result.out;
  EXPECT_EQ(error["ok"], false);
  EXPECT_EQ(error["error_code"], "usage");
  EXPECT_EQ(error["exit_status"], 2);
  EXPECT_NE(error["error"].get<std::string>().find("bad ID 'x'"), std::string::npos);
}

TEST(DecodeBinary, EpochWithAnOffsetSaysItCameFromTheOption) {
  auto result = Decode({"--epoch", "2026-01-01T05:30:00+05:30", "4194304"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.err;
  EXPECT_EQ(result.out,
            "4194304  unix_ms=1767225600001 time=2026-01-01T00:00:00.001Z machine=0 sequence=0\n");
  EXPECT_NE(result.err.find("given by --epoch"), std::string::npos) << result.err;
}

TEST(DecodeBinary, EpochZero) {
  auto result = Decode({"--epoch", "0", "4194305"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.err;
  EXPECT_EQ(result.out, "4194305  unix_ms=1 time=1970-01-01T00:00:00.001Z machine=0 sequence=1\n");
}

TEST(DecodeBinary, EpochAsIsoTime) {
  auto result = Decode({"--epoch", "2020-01-01T00:00:00Z", "4194304"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.err;
  EXPECT_EQ(result.out,
            "4194304  unix_ms=1577836800001 time=2020-01-01T00:00:00.001Z machine=0 sequence=0\n");
}

// Each bad input: exit 2, nothing on stdout, one line on stderr naming the argument.
struct BadInput {
  std::vector<std::string> args;
  std::string named;  // what the stderr line must quote
};

class DecodeBinaryBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(DecodeBinaryBadInput, ExitsTwoWithOneLineOnStderrAndNothingOnStdout) {
  auto result = Decode(GetParam().args);

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString();
  EXPECT_EQ(result.out, "");
  ASSERT_FALSE(result.err.empty());
  EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << "more than one line: " << result.err;
  EXPECT_NE(result.err.find(GetParam().named), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("expected"), std::string::npos) << result.err;
}

INSTANTIATE_TEST_SUITE_P(
    DecodeBinary, DecodeBinaryBadInput,
    ::testing::Values(BadInput{{"abc"}, "bad ID 'abc'"}, BadInput{{"-5"}, "bad ID '-5'"},
                      BadInput{{""}, "bad ID ''"},
                      BadInput{{"9223372036854775808"}, "bad ID '9223372036854775808'"},
                      BadInput{{"99999999999999999999"}, "bad ID '99999999999999999999'"},
                      // good IDs around a bad one: still nothing printed
                      BadInput{{"0", "1x", "1"}, "bad ID '1x'"},
                      BadInput{{"--epoch", "abc", "0"}, "bad epoch 'abc'"},
                      BadInput{{"--epoch", "", "0"}, "bad epoch ''"},
                      BadInput{{"--epoch", "-1", "0"}, "bad epoch '-1'"},
                      BadInput{{"--epoch=-1", "0"}, "bad epoch '-1'"},
                      BadInput{{"--epoch", "2026-02-30T00:00:00Z", "0"}, "no such date"},
                      BadInput{{"--epoch", "2026-01-01T00:00:00+1:00", "0"}, "bad time zone"},
                      BadInput{{"--epoch", "2026-01-01T00:00:00", "0"}, "a time zone is required"},
                      BadInput{{"--epoch", "2026-01-01", "0"}, "bad epoch '2026-01-01'"}));

TEST(DecodeBinary, ReportsEveryBadArgumentOnItsOwnLine) {
  auto result = Decode({"x", "0", "-1"});

  EXPECT_TRUE(result.status.ExitedWith(2));
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 2) << result.err;
}

TEST(DecodeBinary, NoIdIsAUsageError) {
  auto result = Decode({});

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString();
  EXPECT_EQ(result.out, "");
  EXPECT_NE(result.err.find("id is required"), std::string::npos) << result.err;
}

TEST(DecodeBinary, UnknownOptionIsAUsageError) {
  auto result = Decode({"--bogus", "0"});

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString();
  EXPECT_EQ(result.out, "");
}

TEST(DecodeBinary, HelpExitsZeroAndExplainsValidation) {
  auto result = Decode({"--help"});

  EXPECT_TRUE(result.status.ExitedWith(0));
  EXPECT_NE(result.out.find("--epoch"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("checked before anything is printed"), std::string::npos);
}

TEST(SnowflakectlBinary, NoSubcommandIsAUsageError) {
  auto result = RunCommand({kSnowflakectlPath});

  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString();
}

}  // namespace
}  // namespace snowflake::cli
