// The C ABI's daemon-free time and layout functions, sf_parse_time, sf_bounds,
// sf_parse_layout, sf_decode_in and sf_bounds_in: results, every status they document,
// and the messages sf_last_error gives.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

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

TEST(CLayout, ParseLayoutReadsPresetsAndBitsAsTheConfigDoes) {
  const std::pair<const char*, IdBits> cases[] = {
      {"default", kDefaultIdBits},  {"8192-hosts", {41, 13, 9}},
      {"65536-hosts", {41, 16, 6}}, {"41/16/6", {41, 16, 6}},
      {"42/15/6", {42, 15, 6}},     {"time40-machine11-sequence12", {40, 11, 12}},
  };
  for (const auto& [text, expected] : cases) {
    sf_id_bits sut{};

    ASSERT_EQ(sf_parse_layout(text, &sut), SF_OK) << text << ": " << sf_last_error();

    EXPECT_EQ((IdBits{sut.time, sut.machine, sut.sequence}), expected) << text;
  }
}

TEST(CLayout, ParseLayoutRefusesWhatIsNoLayoutSayingWhy) {
  sf_id_bits sut{7, 7, 7};

  EXPECT_EQ(sf_parse_layout("41/17/6", &sut), SF_INVALID_ARGUMENT);
  std::string message = sf_last_error();
  EXPECT_NE(message.find("sf_parse_layout: layout \"41/17/6\" is not a layout"), std::string::npos)
      << message;
  EXPECT_NE(message.find("= 64 bits, not 63"), std::string::npos) << message;
  EXPECT_NE(message.find("\"65536-hosts\" = 41/16/6"), std::string::npos) << message;
  EXPECT_EQ(sf_parse_layout("many-hosts", &sut), SF_INVALID_ARGUMENT);
  message = sf_last_error();
  EXPECT_NE(message.find("neither a preset nor time/machine/sequence bits"), std::string::npos)
      << message;
  EXPECT_EQ(sf_parse_layout(nullptr, &sut), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_parse_layout("default", nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sut.time, 7) << "written only on SF_OK";
}

TEST(CLayout, DecodeInSplitsByTheGivenBitsAndEpoch) {
  const int64_t epoch = kDefaultEpochUnixMs + 86'400'000;
  const IdLayout wide = IdLayout::Create(epoch, {41, 16, 6}).value();
  const uint64_t id = wide.Encode(epoch + 1234, 65535, 63).value();
  const sf_id_bits bits{41, 16, 6};
  sf_decoded_id sut{};

  ASSERT_EQ(sf_decode_in(&bits, epoch, id, &sut), SF_OK) << sf_last_error();

  EXPECT_EQ(sut.unix_ms, epoch + 1234);
  EXPECT_EQ(sut.machine, 65535u);
  EXPECT_EQ(sut.sequence, 63u);
  sf_decoded_id in_default{};
  ASSERT_EQ(sf_decode(nullptr, id, &in_default), SF_OK);
  EXPECT_NE(in_default.machine, sut.machine) << "the default bits split the same ID elsewhere";
}

TEST(CLayout, BoundsInMatchTheCppApiInEveryLayout) {
  const IdBits layouts[] = {kDefaultIdBits, {41, 13, 9}, {41, 16, 6}, {42, 15, 6}, {44, 1, 18}};
  const int64_t from = kDefaultEpochUnixMs + 60'000;
  for (const IdBits& bits : layouts) {
    const sf_id_bits given{bits.time, bits.machine, bits.sequence};
    sf_id_bounds sut{};

    ASSERT_EQ(sf_bounds_in(&given, kDefaultEpochUnixMs, from, from + 999, &sut), SF_OK)
        << sf_last_error();

    const IdBounds expected =
        IdLayout::Create(kDefaultEpochUnixMs, bits).value().Bounds(from, from + 999).value();
    EXPECT_EQ(sut.first_id, expected.first_id) << FormatIdBits(bits);
    EXPECT_EQ(sut.last_id, expected.last_id) << FormatIdBits(bits);
    EXPECT_EQ(sut.first_unix_ms, from);
    EXPECT_EQ(sut.last_unix_ms, from + 999);
  }
}

TEST(CLayout, BoundsInCutARangeToTheLayoutsTimeBits) {
  const sf_id_bits bits{44, 1, 18};
  sf_id_bounds sut{};

  ASSERT_EQ(sf_bounds_in(&bits, 1000, 0, INT64_MAX, &sut), SF_OK) << sf_last_error();

  EXPECT_EQ(sut.first_id, 0u);
  EXPECT_EQ(sut.last_id, (uint64_t{1} << 63) - 1);
  EXPECT_EQ(sut.last_unix_ms, 1000 + (int64_t{1} << 44) - 1) << "44 time bits, not 41";
}

TEST(CLayout, DecodeInAndBoundsInRefuseBadArgumentsSayingWhy) {
  const sf_id_bits no_layout{41, 17, 6};
  const sf_id_bits bits{41, 16, 6};
  sf_decoded_id decoded{.unix_ms = 7, .machine = 7, .sequence = 7};
  sf_id_bounds bounds{.first_id = 7, .last_id = 7, .first_unix_ms = 7, .last_unix_ms = 7};

  EXPECT_EQ(sf_decode_in(&no_layout, kDefaultEpochUnixMs, 1, &decoded), SF_INVALID_ARGUMENT);
  std::string message = sf_last_error();
  EXPECT_NE(message.find("sf_decode_in: sf_id_bits 41/17/6 is not a layout"), std::string::npos)
      << message;
  EXPECT_NE(message.find("= 64 bits, not 63"), std::string::npos) << message;
  EXPECT_EQ(sf_bounds_in(&no_layout, kDefaultEpochUnixMs, 0, 1, &bounds), SF_INVALID_ARGUMENT);
  message = sf_last_error();
  EXPECT_NE(message.find("sf_bounds_in: sf_id_bits 41/17/6 is not a layout"), std::string::npos)
      << message;
  EXPECT_EQ(sf_bounds_in(&no_layout, -1, 0, 1, &bounds), SF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sf_last_error()).find("is not a layout"), std::string::npos)
      << "bad bits are named even with a bad epoch";
  EXPECT_EQ(sf_decode_in(&bits, -1, 1, &decoded), SF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sf_last_error()).find("sf_decode_in: epoch out of range: -1 is not"),
            std::string::npos)
      << sf_last_error();
  EXPECT_EQ(sf_decode_in(&bits, 0, uint64_t{1} << 63, &decoded), SF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sf_last_error()).find("the sign bit (bit 63) is set"), std::string::npos)
      << sf_last_error();
  EXPECT_EQ(sf_bounds_in(&bits, kDefaultEpochUnixMs, 2, 1, &bounds), SF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sf_last_error()).find("ends before it begins"), std::string::npos);
  EXPECT_EQ(sf_bounds_in(&bits, kDefaultEpochUnixMs, 0, 1, &bounds), SF_TIME_OUT_OF_RANGE);
  EXPECT_EQ(sf_decode_in(nullptr, 0, 1, &decoded), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_decode_in(&bits, 0, 1, nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(sf_bounds_in(nullptr, 0, 0, 1, &bounds), SF_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sf_last_error()).find("NULL argument"), std::string::npos);
  EXPECT_EQ(sf_bounds_in(&bits, 0, 0, 1, nullptr), SF_INVALID_ARGUMENT);
  EXPECT_EQ(decoded.unix_ms, 7) << "written only on SF_OK";
  EXPECT_EQ(bounds.first_id, 7u) << "written only on SF_OK";
}

}  // namespace
}  // namespace snowflake
