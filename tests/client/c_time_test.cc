// The C ABI's daemon-free time functions, sf_parse_time and sf_bounds: results, every
// status they document, and the messages sf_last_error gives.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "snowflake/id_layout.h"
#include "snowflake/snowflake.h"

namespace snowflake {
namespace {

TEST(CTime, ParseTimeAcceptsWhatTheConfigAccepts) {
  int64_t unix_ms = 0;

  ASSERT_EQ(sf_parse_time("2026-01-01T05:30:00.250+05:30", &unix_ms), SF_OK);
  EXPECT_EQ(unix_ms, SF_DEFAULT_EPOCH_UNIX_MS + 250);
  ASSERT_EQ(sf_parse_time("1767225600000", &unix_ms), SF_OK);
  EXPECT_EQ(unix_ms, kDefaultEpochUnixMs);
}

TEST(CTime, ParseTimeRefusesBadTextSayingWhy) {
  int64_t unix_ms = 42;

  EXPECT_EQ(sf_parse_time("2026-01-01T00:00:00", &unix_ms), SF_INVALID_ARGUMENT);

  EXPECT_EQ(unix_ms, 42);
  const std::string message = sf_last_error();
  EXPECT_NE(message.find("'2026-01-01T00:00:00'"), std::string::npos) << message;
  EXPECT_NE(message.find("a time zone is required"), std::string::npos) << message;
  EXPECT_EQ(sf_parse_time(nullptr, &unix_ms), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_parse_time("0", nullptr), SF_INVALID_ARGUMENT);
}

TEST(CTime, BoundsMatchTheCppApi) {
  sf_id_bounds sut{};
  const int64_t from = kDefaultEpochUnixMs + 60'000;

  ASSERT_EQ(sf_bounds(SF_DEFAULT_EPOCH_UNIX_MS, from, from + 999, &sut), SF_OK);

  const IdBounds expected = IdLayout().Bounds(from, from + 999).value();
  EXPECT_EQ(sut.first_id, expected.first_id);
  EXPECT_EQ(sut.last_id, expected.last_id);
  EXPECT_EQ(sut.first_unix_ms, from);
  EXPECT_EQ(sut.last_unix_ms, from + 999);
}

TEST(CTime, BoundsCutARangeToTheEpochsTimes) {
  sf_id_bounds sut{};

  ASSERT_EQ(sf_bounds(1000, 0, INT64_MAX, &sut), SF_OK);

  EXPECT_EQ(sut.first_id, 0u);
  EXPECT_EQ(sut.last_id, (uint64_t{1} << 63) - 1);
  EXPECT_EQ(sut.first_unix_ms, 1000);
  EXPECT_EQ(sut.last_unix_ms, 1000 + IdLayout().max_offset_ms());
}

TEST(CTime, BoundsReportEveryErrorWithItsStatus) {
  sf_id_bounds sut{.first_id = 7, .last_id = 7, .first_unix_ms = 7, .last_unix_ms = 7};

  EXPECT_EQ(sf_bounds(SF_DEFAULT_EPOCH_UNIX_MS, 0, 1, &sut), SF_TIME_OUT_OF_RANGE);
  EXPECT_NE(std::string(sf_last_error()).find("before the epoch"), std::string::npos);
  EXPECT_EQ(sf_bounds(0, IdLayout().max_offset_ms() + 1, INT64_MAX, &sut), SF_TIME_OUT_OF_RANGE);
  EXPECT_NE(std::string(sf_last_error()).find("range of the layout's time bits"),
            std::string::npos);
  EXPECT_EQ(
      sf_bounds(SF_DEFAULT_EPOCH_UNIX_MS, kDefaultEpochUnixMs + 2, kDefaultEpochUnixMs + 1, &sut),
      SF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sf_last_error()).find("ends before it begins"), std::string::npos);
  EXPECT_EQ(sf_bounds(-1, 0, 1, &sut), SF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sf_last_error()).find("epoch out of range"), std::string::npos);
  EXPECT_EQ(sf_bounds(0, 0, 1, nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sut.first_id, 7u) << "written only on SF_OK";
  EXPECT_STREQ(sf_status_str(SF_TIME_OUT_OF_RANGE), "time_out_of_range");
}

}  // namespace
}  // namespace snowflake
