#include "snowflake/id_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace snowflake {
namespace {

TEST(IdLayout, DefaultEpochIs2026) {
  const IdLayout sut;

  EXPECT_EQ(sut.epoch_unix_ms(), 1'767'225'600'000);
}

TEST(IdLayout, EncodeOfTheEpochMillisecondZeroZeroIsZero) {
  const IdLayout sut;

  EXPECT_EQ(sut.Encode(kDefaultEpochUnixMs, 0, 0).value(), 0u);
}

TEST(IdLayout, FieldsLandInTheirBits) {
  const IdLayout sut;

  // 1 ms after the epoch = 1 << 22; machine 3 = 3 << 12 = 12288; sequence 5.
  EXPECT_EQ(sut.Encode(kDefaultEpochUnixMs + 1, 3, 5).value(), (1ull << 22) + 12288 + 5);
}

TEST(IdLayout, LargestIdIsTwoToThe63MinusOne) {
  const IdLayout sut;

  auto id = sut.Encode(sut.max_unix_ms(), kMaxMachine, kMaxSequence);

  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(*id, (uint64_t{1} << 63) - 1);
}

TEST(IdLayout, MaxUnixMsIs2ToThe41MinusOneAfterTheEpoch) {
  const IdLayout sut;

  EXPECT_EQ(sut.max_unix_ms(), kDefaultEpochUnixMs + 2'199'023'255'551);
}

TEST(IdLayout, EncodeRejectsMachine1024) {
  const IdLayout sut;

  EXPECT_EQ(sut.Encode(kDefaultEpochUnixMs, 1024, 0).error(), IdError::kMachineOutOfRange);
}

TEST(IdLayout, EncodeRejectsSequence4096) {
  const IdLayout sut;

  EXPECT_EQ(sut.Encode(kDefaultEpochUnixMs, 0, 4096).error(), IdError::kSequenceOutOfRange);
}

TEST(IdLayout, EncodeRejectsTimeBeforeTheEpoch) {
  const IdLayout sut;

  EXPECT_EQ(sut.Encode(kDefaultEpochUnixMs - 1, 0, 0).error(), IdError::kTimeBeforeEpoch);
}

TEST(IdLayout, EncodeRejectsTimeBeyondTheRange) {
  const IdLayout sut;

  EXPECT_EQ(sut.Encode(sut.max_unix_ms() + 1, 0, 0).error(), IdError::kTimeBeyondRange);
}

TEST(IdLayout, DecodeRejectsTheSignBit) {
  const IdLayout sut;

  EXPECT_EQ(sut.Decode(uint64_t{1} << 63).error(), IdError::kSignBitSet);
  EXPECT_EQ(sut.Decode(UINT64_MAX).error(), IdError::kSignBitSet);
}

TEST(IdLayout, CreateRejectsNegativeEpoch) {
  EXPECT_EQ(IdLayout::Create(-1).error(), IdError::kEpochOutOfRange);
}

TEST(IdLayout, CreateRejectsEpochWhoseRangeOverflows) {
  EXPECT_EQ(IdLayout::Create(INT64_MAX - kMaxTimeOffsetMs + 1).error(), IdError::kEpochOutOfRange);
  EXPECT_TRUE(IdLayout::Create(INT64_MAX - kMaxTimeOffsetMs).has_value());
}

TEST(IdLayout, CustomEpochShiftsTheTime) {
  const IdLayout sut = IdLayout::Create(0).value();

  auto decoded = sut.Decode(uint64_t{1000} << 22);

  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->unix_ms, 1000);
}

TEST(IdLayout, NumericOrderIsTimeOrder) {
  const IdLayout sut;

  // A later ms wins over any machine and sequence of an earlier one.
  EXPECT_LT(sut.Encode(kDefaultEpochUnixMs + 10, kMaxMachine, kMaxSequence).value(),
            sut.Encode(kDefaultEpochUnixMs + 11, 0, 0).value());
}

TEST(IdLayout, OffsetMsOfIgnoresTheSignBit) {
  const uint64_t id = IdLayout::EncodeUnchecked(12345, 9, 9);

  EXPECT_EQ(IdLayout::OffsetMsOf(id), 12345);
  EXPECT_EQ(IdLayout::OffsetMsOf(id | (uint64_t{1} << 63)), 12345);
}

TEST(IdLayout, EncodeDecodeRoundTripsOnRandomFields) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  const IdLayout sut = IdLayout::Create(static_cast<int64_t>(rng() % kDefaultEpochUnixMs)).value();

  for (int i = 0; i < 100'000; ++i) {
    const DecodedId fields{
        .unix_ms = sut.epoch_unix_ms() + static_cast<int64_t>(rng() % (kMaxTimeOffsetMs + 1)),
        .machine = static_cast<uint32_t>(rng() % (kMaxMachine + 1)),
        .sequence = static_cast<uint32_t>(rng() % (kMaxSequence + 1))};

    auto id = sut.Encode(fields.unix_ms, fields.machine, fields.sequence);

    ASSERT_TRUE(id.has_value());
    ASSERT_EQ(*id >> 63, 0u);
    ASSERT_EQ(sut.Decode(*id).value(), fields) << "id " << *id;
  }
}

TEST(IdLayout, DecodeEncodeRoundTripsOnRandomIds) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const IdLayout sut;

  for (int i = 0; i < 100'000; ++i) {
    const uint64_t id = rng() >> 1;  // any value below 2^63 is an ID

    const DecodedId fields = sut.Decode(id).value();

    ASSERT_EQ(sut.Encode(fields.unix_ms, fields.machine, fields.sequence).value(), id);
  }
}

TEST(IdLayoutBounds, OneMillisecondSpansEveryMachineAndSequence) {
  const IdLayout sut;
  const int64_t ms = kDefaultEpochUnixMs + 1000;

  const IdBounds bounds = sut.Bounds(ms, ms).value();

  EXPECT_EQ(bounds.first_id, sut.Encode(ms, 0, 0).value());
  EXPECT_EQ(bounds.last_id, sut.Encode(ms, kMaxMachine, kMaxSequence).value());
  EXPECT_EQ(bounds.last_id - bounds.first_id + 1, uint64_t{1} << 22);
  EXPECT_EQ(bounds.first_unix_ms, ms);
  EXPECT_EQ(bounds.last_unix_ms, ms);
}

TEST(IdLayoutBounds, ContainExactlyTheIdsOfTheRange) {
  const IdLayout sut;
  const int64_t from = kDefaultEpochUnixMs + 5000;
  const int64_t to = from + 2;

  const IdBounds bounds = sut.Bounds(from, to).value();

  // The neighbours just outside belong to the milliseconds just outside.
  EXPECT_EQ(sut.Decode(bounds.first_id - 1).value().unix_ms, from - 1);
  EXPECT_EQ(sut.Decode(bounds.first_id).value().unix_ms, from);
  EXPECT_EQ(sut.Decode(bounds.last_id).value().unix_ms, to);
  EXPECT_EQ(sut.Decode(bounds.last_id + 1).value().unix_ms, to + 1);
}

TEST(IdLayoutBounds, UseTheLayoutsEpoch) {
  const IdLayout sut = IdLayout::Create(0).value();

  const IdBounds bounds = sut.Bounds(1, 1).value();

  EXPECT_EQ(bounds.first_id, uint64_t{1} << 22);
}

TEST(IdLayoutBounds, ARangeStartingBeforeTheEpochStartsAtIdZero) {
  const IdLayout sut;

  const IdBounds bounds = sut.Bounds(0, kDefaultEpochUnixMs + 1).value();

  EXPECT_EQ(bounds.first_id, 0u);
  EXPECT_EQ(bounds.first_unix_ms, kDefaultEpochUnixMs);
  EXPECT_EQ(bounds.last_unix_ms, kDefaultEpochUnixMs + 1);
}

TEST(IdLayoutBounds, ARangeEndingPastTheLastMillisecondEndsAtTheLargestId) {
  const IdLayout sut;

  const IdBounds bounds = sut.Bounds(sut.max_unix_ms() - 1, INT64_MAX).value();

  EXPECT_EQ(bounds.last_id, (uint64_t{1} << 63) - 1);
  EXPECT_EQ(bounds.last_unix_ms, sut.max_unix_ms());
}

TEST(IdLayoutBounds, ReportsRangesNoIdCanCarry) {
  const IdLayout sut;

  EXPECT_EQ(sut.Bounds(0, kDefaultEpochUnixMs - 1).error(), IdError::kTimeBeforeEpoch);
  EXPECT_EQ(sut.Bounds(INT64_MIN, INT64_MIN).error(), IdError::kTimeBeforeEpoch);
  EXPECT_EQ(sut.Bounds(sut.max_unix_ms() + 1, INT64_MAX).error(), IdError::kTimeBeyondRange);
}

TEST(IdLayoutBounds, ReportsAReversedRange) {
  const IdLayout sut;

  EXPECT_EQ(sut.Bounds(kDefaultEpochUnixMs + 2, kDefaultEpochUnixMs + 1).error(),
            IdError::kRangeReversed);
}

TEST(IdLayout, EveryErrorHasAMessage) {
  for (IdError error :
       {IdError::kMachineOutOfRange, IdError::kSequenceOutOfRange, IdError::kTimeBeforeEpoch,
        IdError::kTimeBeyondRange, IdError::kSignBitSet, IdError::kEpochOutOfRange,
        IdError::kRangeReversed}) {
    EXPECT_FALSE(IdErrorMessage(error).empty());
    EXPECT_NE(IdErrorMessage(error), "unknown ID error");
  }
}

}  // namespace
}  // namespace snowflake
