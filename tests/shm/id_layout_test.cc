#include "snowflake/id_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

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

  auto id = sut.Encode(sut.max_unix_ms(), sut.max_machine(), sut.max_sequence());

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
  const int64_t max_offset = IdLayout().max_offset_ms();
  EXPECT_EQ(IdLayout::Create(INT64_MAX - max_offset + 1).error(), IdError::kEpochOutOfRange);
  EXPECT_TRUE(IdLayout::Create(INT64_MAX - max_offset).has_value());
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
  EXPECT_LT(sut.Encode(kDefaultEpochUnixMs + 10, sut.max_machine(), sut.max_sequence()).value(),
            sut.Encode(kDefaultEpochUnixMs + 11, 0, 0).value());
}

TEST(IdLayout, OffsetMsOfIgnoresTheSignBit) {
  const IdLayout sut;
  const uint64_t id = sut.EncodeUnchecked(12345, 9, 9);

  EXPECT_EQ(sut.OffsetMsOf(id), 12345);
  EXPECT_EQ(sut.OffsetMsOf(id | (uint64_t{1} << 63)), 12345);
}

TEST(IdLayout, EncodeDecodeRoundTripsOnRandomFields) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  const IdLayout sut = IdLayout::Create(static_cast<int64_t>(rng() % kDefaultEpochUnixMs)).value();

  for (int i = 0; i < 100'000; ++i) {
    const DecodedId fields{
        .unix_ms = sut.epoch_unix_ms() + static_cast<int64_t>(rng() % (sut.max_offset_ms() + 1)),
        .machine = static_cast<uint32_t>(rng() % sut.machine_count()),
        .sequence = static_cast<uint32_t>(rng() % sut.ids_per_ms())};

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
  EXPECT_EQ(bounds.last_id, sut.Encode(ms, sut.max_machine(), sut.max_sequence()).value());
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
        IdError::kRangeReversed, IdError::kBitsInvalid}) {
    EXPECT_FALSE(IdErrorMessage(error).empty());
    EXPECT_NE(IdErrorMessage(error), "unknown ID error");
  }
}

// --- Layouts other than the default: every preset and the extremes of each width.

std::vector<IdBits> EveryLayoutUnderTest() {
  std::vector<IdBits> out;
  for (const IdLayoutPreset& preset : kIdLayoutPresets) out.push_back(preset.bits);
  // The extremes of each width that still make a layout.
  out.push_back({kMinTimeBits, kMaxMachineBits, 63 - kMinTimeBits - kMaxMachineBits});
  out.push_back({kMinTimeBits, kMinMachineBits, kMaxSequenceBits});
  out.push_back({kMaxTimeBits, 63 - kMaxTimeBits - kMinSequenceBits, kMinSequenceBits});
  out.push_back({kMaxTimeBits, kMinMachineBits, 63 - kMaxTimeBits - kMinMachineBits});
  return out;
}

TEST(IdLayoutBits, EveryLayoutUnderTestIsValid) {
  for (const IdBits bits : EveryLayoutUnderTest()) {
    EXPECT_TRUE(IsValidIdBits(bits)) << FormatIdBits(bits);
    EXPECT_EQ(IdBitsProblem(bits, kDefaultEpochUnixMs), "") << FormatIdBits(bits);
  }
}

TEST(IdLayoutBits, FieldsLandInTheirBitsInEveryLayout) {
  for (const IdBits bits : EveryLayoutUnderTest()) {
    SCOPED_TRACE(FormatIdBits(bits));
    const IdLayout sut = IdLayout::Create(0, bits).value();

    EXPECT_EQ(sut.Encode(1, 1, 1).value(),
              (uint64_t{1} << (bits.machine + bits.sequence)) | (uint64_t{1} << bits.sequence) | 1);
    EXPECT_EQ(sut.time_shift(), bits.machine + bits.sequence);
    EXPECT_EQ(sut.machine_count(), uint32_t{1} << bits.machine);
    EXPECT_EQ(sut.ids_per_ms(), uint32_t{1} << bits.sequence);
    EXPECT_EQ(sut.max_offset_ms(), (int64_t{1} << bits.time) - 1);
  }
}

TEST(IdLayoutBits, EdgesOfEveryLayout) {
  for (const IdBits bits : EveryLayoutUnderTest()) {
    SCOPED_TRACE(FormatIdBits(bits));
    const IdLayout sut = IdLayout::Create(kDefaultEpochUnixMs, bits).value();

    // The largest fields fill all 63 bits; one more in any field is refused.
    EXPECT_EQ(sut.Encode(sut.max_unix_ms(), sut.max_machine(), sut.max_sequence()).value(),
              (uint64_t{1} << 63) - 1);
    EXPECT_EQ(sut.Encode(sut.epoch_unix_ms(), sut.machine_count(), 0).error(),
              IdError::kMachineOutOfRange);
    EXPECT_EQ(sut.Encode(sut.epoch_unix_ms(), 0, sut.ids_per_ms()).error(),
              IdError::kSequenceOutOfRange);
    EXPECT_EQ(sut.Encode(sut.max_unix_ms() + 1, 0, 0).error(), IdError::kTimeBeyondRange);
    EXPECT_EQ(sut.Encode(sut.epoch_unix_ms() - 1, 0, 0).error(), IdError::kTimeBeforeEpoch);
    // A later ms wins over the largest machine and sequence of an earlier one.
    EXPECT_LT(sut.Encode(sut.epoch_unix_ms() + 10, sut.max_machine(), sut.max_sequence()).value(),
              sut.Encode(sut.epoch_unix_ms() + 11, 0, 0).value());
    EXPECT_EQ(sut.OffsetMsOf(sut.Encode(sut.epoch_unix_ms() + 77, sut.max_machine(), 5).value() |
                             (uint64_t{1} << 63)),
              77);
    EXPECT_EQ(sut.Decode(uint64_t{1} << 63).error(), IdError::kSignBitSet);
  }
}

TEST(IdLayoutBits, RoundTripsInEveryLayout) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const IdBits bits : EveryLayoutUnderTest()) {
    SCOPED_TRACE(FormatIdBits(bits));
    const IdLayout sut =
        IdLayout::Create(static_cast<int64_t>(rng() % kDefaultEpochUnixMs), bits).value();
    for (int i = 0; i < 20'000; ++i) {
      const DecodedId fields{
          .unix_ms = sut.epoch_unix_ms() + static_cast<int64_t>(rng() % (sut.max_offset_ms() + 1)),
          .machine = static_cast<uint32_t>(rng() % sut.machine_count()),
          .sequence = static_cast<uint32_t>(rng() % sut.ids_per_ms())};
      const uint64_t id = sut.Encode(fields.unix_ms, fields.machine, fields.sequence).value();
      ASSERT_EQ(sut.Decode(id).value(), fields) << "id " << id;
      const uint64_t any = rng() >> 1;
      const DecodedId back = sut.Decode(any).value();
      ASSERT_EQ(sut.Encode(back.unix_ms, back.machine, back.sequence).value(), any);
    }
  }
}

TEST(IdLayoutBits, BoundsSpanEveryMachineAndSequenceOfTheLayout) {
  for (const IdBits bits : EveryLayoutUnderTest()) {
    SCOPED_TRACE(FormatIdBits(bits));
    const IdLayout sut = IdLayout::Create(kDefaultEpochUnixMs, bits).value();
    const int64_t from = kDefaultEpochUnixMs + 5000;

    const IdBounds bounds = sut.Bounds(from, from + 2).value();

    EXPECT_EQ(bounds.last_id - bounds.first_id + 1, uint64_t{3} << sut.time_shift());
    EXPECT_EQ(sut.Decode(bounds.first_id - 1).value().unix_ms, from - 1);
    EXPECT_EQ(sut.Decode(bounds.last_id + 1).value().unix_ms, from + 3);
    EXPECT_EQ(sut.Bounds(0, INT64_MAX).value().last_id, (uint64_t{1} << 63) - 1);
  }
}

TEST(IdLayoutBits, TheSameIdDecodesDifferentlyInAnotherLayout) {
  const IdLayout narrow;
  const IdLayout wide = IdLayout::Create(kDefaultEpochUnixMs, {41, 16, 6}).value();
  const uint64_t id = narrow.Encode(kDefaultEpochUnixMs + 9, 1000, 4000).value();

  const DecodedId in_wide = wide.Decode(id).value();

  EXPECT_EQ(in_wide.unix_ms, kDefaultEpochUnixMs + 9) << "the time bits are the same";
  EXPECT_NE(in_wide.machine, 1000u);
  EXPECT_NE(narrow, wide);
}

TEST(IdLayoutBits, CreateRefusesWidthsThatAreNoLayout) {
  EXPECT_EQ(IdLayout::Create(0, {41, 17, 6}).error(), IdError::kBitsInvalid);
  EXPECT_EQ(IdLayout::Create(0, {41, 17, 5}).error(), IdError::kBitsInvalid);
  EXPECT_EQ(IdLayout::Create(0, {39, 12, 12}).error(), IdError::kBitsInvalid);
  EXPECT_EQ(IdLayout::Create(0, {45, 12, 6}).error(), IdError::kBitsInvalid);
  EXPECT_EQ(IdLayout::Create(0, {41, 0, 22}).error(), IdError::kBitsInvalid);
  EXPECT_EQ(IdLayout::Create(0, {-1, 32, 32}).error(), IdError::kBitsInvalid);
}

TEST(IdLayoutBits, CreateRefusesAnEpochWhoseRangeOverflowsInThatLayout) {
  const IdBits wide{kMaxTimeBits, 63 - kMaxTimeBits - kMinSequenceBits, kMinSequenceBits};
  const int64_t max_offset = (int64_t{1} << kMaxTimeBits) - 1;

  EXPECT_EQ(IdLayout::Create(INT64_MAX - max_offset + 1, wide).error(), IdError::kEpochOutOfRange);
  EXPECT_TRUE(IdLayout::Create(INT64_MAX - max_offset, wide).has_value());
}

TEST(IdLayoutBits, ParsesPresetsAndBothForms) {
  EXPECT_EQ(ParseIdBits("default", 0).value(), kDefaultIdBits);
  EXPECT_EQ(ParseIdBits("8192-hosts", 0).value(), (IdBits{41, 13, 9}));
  EXPECT_EQ(ParseIdBits("65536-hosts", 0).value(), (IdBits{41, 16, 6}));
  EXPECT_EQ(ParseIdBits("41/16/6", 0).value(), (IdBits{41, 16, 6}));
  EXPECT_EQ(ParseIdBits("time42-machine15-sequence6", 0).value(), (IdBits{42, 15, 6}));
  EXPECT_EQ(ParseIdBits(IdBitsRecordName(kDefaultIdBits), 0).value(), kDefaultIdBits);
  EXPECT_EQ(IdBitsRecordName(kDefaultIdBits), "time41-machine10-sequence12");
  EXPECT_EQ(FormatIdBits({41, 13, 9}), "41/13/9");
}

TEST(IdLayoutBits, ParseRefusesTextThatIsNoLayout) {
  for (const char* text : {"", "41/16", "41/16/6/0", "41-16-6", "41/16/x", "41/ 16/6", "-1/32/32",
                           "100/1/1", "time41-machine16", "Default", "hosts-65536"}) {
    auto parsed = ParseIdBits(text, kDefaultEpochUnixMs);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_NE(parsed.error().find("41/16/6"), std::string::npos) << parsed.error();
    EXPECT_NE(parsed.error().find("65536-hosts"), std::string::npos) << parsed.error();
  }
}

TEST(IdLayoutBits, AWrongSumStatesTheTradeOff) {
  auto parsed = ParseIdBits("41/17/6", kDefaultEpochUnixMs);

  ASSERT_FALSE(parsed.has_value());
  EXPECT_NE(parsed.error().find("time 41 + machine 17 + sequence 6 = 64 bits, not 63"),
            std::string::npos)
      << parsed.error();
  // What each preset gives: hosts, IDs per second per host, the year its range runs out.
  EXPECT_NE(parsed.error().find("41/16/6: 65,536 hosts, 64,000 IDs per second per host, "
                                "until 2095-09-07 (69.7 years after the epoch)"),
            std::string::npos)
      << parsed.error();
  EXPECT_NE(parsed.error().find("41/10/12: 1,024 hosts, 4,096,000 IDs per second per host"),
            std::string::npos)
      << parsed.error();
}

TEST(IdLayoutBits, EachBoundSaysWhatItProtects) {
  EXPECT_NE(IdBitsProblem({39, 12, 12}, kDefaultEpochUnixMs).find("last only until 2043-06-03"),
            std::string::npos)
      << IdBitsProblem({39, 12, 12}, kDefaultEpochUnixMs);
  EXPECT_NE(IdBitsProblem({41, 17, 5}, kDefaultEpochUnixMs).find("131,072 hosts"),
            std::string::npos)
      << IdBitsProblem({41, 17, 5}, kDefaultEpochUnixMs);
  EXPECT_NE(IdBitsProblem({42, 16, 5}, kDefaultEpochUnixMs).find("32,000 IDs per second"),
            std::string::npos)
      << IdBitsProblem({42, 16, 5}, kDefaultEpochUnixMs);
  EXPECT_NE(IdBitsProblem({45, 12, 6}, kDefaultEpochUnixMs).find("at most 44 bits"),
            std::string::npos)
      << IdBitsProblem({45, 12, 6}, kDefaultEpochUnixMs);
}

TEST(IdLayoutBits, DescribeGivesHostsRateAndTheYearItRunsOut) {
  EXPECT_EQ(DescribeIdBits({41, 13, 9}, kDefaultEpochUnixMs),
            "41/13/9: 8,192 hosts, 512,000 IDs per second per host, until 2095-09-07 (69.7 "
            "years after the epoch)");
  EXPECT_EQ(DescribeIdBits({40, 13, 10}, 0),
            "40/13/10: 8,192 hosts, 1,024,000 IDs per second per host, until 2004-11-03 (34.8 "
            "years after the epoch)");
}

}  // namespace
}  // namespace snowflake
