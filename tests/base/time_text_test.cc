#include "snowflake/time_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "error_of.h"
#include "snowflake/id_layout.h"

namespace snowflake {
namespace {

using testing::ErrorOf;
using ::testing::HasSubstr;

TEST(ParseTimeText, AcceptsUnixMilliseconds) {
  EXPECT_EQ(ParseTimeText("1767225600000").value(), kDefaultEpochUnixMs);
  EXPECT_EQ(ParseTimeText("0").value(), 0);
  EXPECT_EQ(ParseTimeText("-1").value(), -1);
  EXPECT_EQ(ParseTimeText("9223372036854775807").value(), INT64_MAX);
  EXPECT_EQ(ParseTimeText("-9223372036854775808").value(), INT64_MIN);
}

TEST(ParseTimeText, AcceptsUtcWithAnyCaseAndSeparator) {
  for (const char* text :
       {"2026-01-01T00:00:00Z", "2026-01-01t00:00:00z", "2026-01-01 00:00:00Z",
        "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00-00:00"}) {
    auto sut = ParseTimeText(text);

    ASSERT_TRUE(sut) << text << ": " << sut.error();
    EXPECT_EQ(*sut, kDefaultEpochUnixMs) << text;
  }
}

TEST(ParseTimeText, AppliesTheOffset) {
  // 05:30 at +05:30 is midnight UTC; 19:00 the day before at -05:00 is too.
  EXPECT_EQ(ParseTimeText("2026-01-01T05:30:00+05:30").value(), kDefaultEpochUnixMs);
  EXPECT_EQ(ParseTimeText("2025-12-31T19:00:00-05:00").value(), kDefaultEpochUnixMs);
  EXPECT_EQ(ParseTimeText("2026-01-01T00:00:00+01:00").value(), kDefaultEpochUnixMs - 3'600'000);
}

TEST(ParseTimeText, KeepsMillisecondsAndCutsFinerFractions) {
  EXPECT_EQ(ParseTimeText("2026-01-01T00:00:00.5Z").value(), kDefaultEpochUnixMs + 500);
  EXPECT_EQ(ParseTimeText("2026-01-01T00:00:00.25Z").value(), kDefaultEpochUnixMs + 250);
  EXPECT_EQ(ParseTimeText("2026-01-01T00:00:00.123Z").value(), kDefaultEpochUnixMs + 123);
  EXPECT_EQ(ParseTimeText("2026-01-01T00:00:00.123999999Z").value(), kDefaultEpochUnixMs + 123);
}

TEST(ParseTimeText, AcceptsTimesBefore1970AndLeapDays) {
  EXPECT_EQ(ParseTimeText("1969-12-31T23:59:59.999Z").value(), -1);
  EXPECT_EQ(ParseTimeText("2024-02-29T00:00:00Z").value(), 1'709'164'800'000);
  EXPECT_EQ(ParseTimeText("0000-01-01T00:00:00Z").value(), kMinTextUnixMs);
  EXPECT_EQ(ParseTimeText("9999-12-31T23:59:59.999Z").value(), kMaxTextUnixMs);
}

TEST(ParseTimeText, RefusesATimeWithoutAZone) {
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T00:00:00")), HasSubstr("a time zone is required"));
}

TEST(ParseTimeText, RefusesBadZones) {
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T00:00:00+5:00")),
              HasSubstr("bad time zone '+5:00'"));
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T00:00:00+24:00")),
              HasSubstr("bad time zone offset"));
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T00:00:00 UTC")), HasSubstr("bad time zone ' UTC'"));
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T00:00:00Zjunk")), HasSubstr("nothing after it"));
}

TEST(ParseTimeText, RefusesImpossibleDatesAndTimes) {
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-02-29T00:00:00Z")), HasSubstr("no such date"));
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-13-01T00:00:00Z")), HasSubstr("no such date"));
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T24:00:00Z")), HasSubstr("no such time of day"));
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T00:00:60Z")), HasSubstr("no such time of day"));
}

TEST(ParseTimeText, RefusesWhatIsNeitherForm) {
  for (const char* text :
       {"yesterday", "0x10", "1e9", "12.5", "+5", "--1", " 1", "1 ", "2026-01-01",
        "2026-01-01X00:00:00Z", "2026-1-01T00:00:00Z", "2026-01-01T00:00:00.Z"}) {
    EXPECT_FALSE(ParseTimeText(text)) << text;
  }
  EXPECT_THAT(ErrorOf(ParseTimeText("")), HasSubstr("it is empty"));
  EXPECT_THAT(ErrorOf(ParseTimeText("99999999999999999999")), HasSubstr("must fit in 64 bits"));
  EXPECT_THAT(ErrorOf(ParseTimeText("2026-01-01T00:00:00.Z")), HasSubstr("fraction of a second"));
}

TEST(FormatTimeText, WritesUtcWithMillisecondsAndRoundTrips) {
  for (const int64_t ms :
       {int64_t{0}, int64_t{-1}, kDefaultEpochUnixMs + 123, kMinTextUnixMs, kMaxTextUnixMs}) {
    EXPECT_EQ(ParseTimeText(FormatTimeText(ms)).value(), ms) << FormatTimeText(ms);
  }
  EXPECT_EQ(FormatTimeText(kDefaultEpochUnixMs), "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTimeText(-1), "1969-12-31T23:59:59.999Z");
}

TEST(FormatTimeText, WritesMillisecondsOutsideFourDigitYears) {
  EXPECT_EQ(FormatTimeText(kMaxTextUnixMs + 1), "253402300800000 ms");
  EXPECT_EQ(FormatTimeText(INT64_MIN), "-9223372036854775808 ms");
}

}  // namespace
}  // namespace snowflake
