#include "daemon/core/generator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "manual_clock.h"
#include "snowflake/id_layout.h"

namespace snowflake::daemon {
namespace {

using testing::ManualClock;

constexpr int64_t kEpoch = kDefaultEpochUnixMs;
constexpr int64_t kStart = kEpoch + 1'000'000;  // some time after the epoch
constexpr uint32_t kMachine = 7;

GeneratorConfig Config(int64_t high_water_unix_ms = 0) {
  return GeneratorConfig{.layout = IdLayout(),
                         .machine = kMachine,
                         .max_backward_ms = 100,
                         .high_water_unix_ms = high_water_unix_ms,
                         .start_wait_ms = 0};
}

Generator MustCreate(const GeneratorConfig& config, Clock& clock) {
  auto created = Generator::Create(config, clock);
  EXPECT_TRUE(created.has_value()) << (created ? "" : created.error().message);
  return std::move(created).value();
}

DecodedId Fields(uint64_t id) { return IdLayout().Decode(id).value(); }

// Takes every ID the generator will give at the current clock reading.
std::vector<uint64_t> Drain(Generator& sut) {
  std::vector<uint64_t> all;
  std::vector<uint64_t> batch(1000);
  for (;;) {
    auto generated = sut.Generate(batch);
    if (!generated) break;
    all.insert(all.end(), batch.begin(), batch.begin() + *generated);
  }
  return all;
}

// ---- Create() -------------------------------------------------------------------------

TEST(Generator, CreateRejectsMachine1024) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config();
  config.machine = 1024;

  auto created = Generator::Create(config, clock);

  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code, GeneratorErrorCode::kMachineOutOfRange);
  EXPECT_NE(created.error().message.find("1024"), std::string::npos) << created.error().message;
}

TEST(Generator, CreateAcceptsMachine1023) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config();
  config.machine = 1023;
  auto sut = MustCreate(config, clock);

  auto id = sut.Next();

  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(Fields(*id).machine, 1023u);
}

TEST(Generator, CreateRejectsEpochInTheFuture) {
  ManualClock clock(kEpoch - 1);

  auto created = Generator::Create(Config(), clock);

  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code, GeneratorErrorCode::kEpochInFuture);
}

TEST(Generator, CreateAcceptsClockExactlyAtTheEpoch) {
  ManualClock clock(kEpoch);
  auto sut = MustCreate(Config(), clock);

  auto id = sut.Next();

  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(*id, IdLayout().EncodeUnchecked(0, kMachine, 0));
}

TEST(Generator, CreateRejectsNegativeMaxBackwardMs) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config();
  config.max_backward_ms = -1;

  auto created = Generator::Create(config, clock);

  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code, GeneratorErrorCode::kNegativeMaxBackwardMs);
}

TEST(Generator, StartsServingWithNothingIssued) {
  ManualClock clock(kStart);

  auto sut = MustCreate(Config(), clock);

  EXPECT_EQ(sut.state(), GeneratorState::kServing);
  EXPECT_EQ(sut.reason(), "");
  EXPECT_FALSE(sut.last_issued_id().has_value());
  EXPECT_EQ(sut.pauses_total(), 0u);
  EXPECT_EQ(sut.ms_behind(), 0);
}

// ---- The sequence ---------------------------------------------------------------------

TEST(Generator, IdCarriesClockMillisecondMachineAndSequenceZero) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);

  auto id = sut.Next();

  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(Fields(*id), (DecodedId{kStart, kMachine, 0}));
  EXPECT_EQ(sut.last_issued_id(), *id);
  EXPECT_EQ(sut.last_unix_ms(), kStart);
}

TEST(Generator, SequenceCountsUpWithinOneMillisecond) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);

  const uint64_t first = sut.Next().value();
  const uint64_t second = sut.Next().value();
  const uint64_t third = sut.Next().value();

  EXPECT_EQ(Fields(first), (DecodedId{kStart, kMachine, 0}));
  EXPECT_EQ(Fields(second), (DecodedId{kStart, kMachine, 1}));
  EXPECT_EQ(Fields(third), (DecodedId{kStart, kMachine, 2}));
}

TEST(Generator, SequenceRestartsAtZeroInANewerMillisecond) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());
  ASSERT_TRUE(sut.Next().has_value());
  clock.Advance(3);

  const uint64_t id = sut.Next().value();

  EXPECT_EQ(Fields(id), (DecodedId{kStart + 3, kMachine, 0}));
}

// The cap per millisecond is the layout's: 2^sequence bits (64 in 41/16/6), and a machine
// number beyond the default's 1023 is one of the wide layout's.
TEST(Generator, TheCapPerMillisecondFollowsTheSequenceBits) {
  for (const IdBits bits : {IdBits{41, 16, 6}, IdBits{41, 13, 9}, IdBits{40, 1, 22}}) {
    SCOPED_TRACE(FormatIdBits(bits));
    ManualClock clock(kStart);
    GeneratorConfig config = Config();
    config.layout = IdLayout::Create(kEpoch, bits).value();
    config.machine = config.layout.max_machine();
    auto sut = MustCreate(config, clock);
    std::vector<uint64_t> ids(config.layout.ids_per_ms() + 10);

    auto generated = sut.Generate(ids);

    ASSERT_TRUE(generated.has_value());
    ASSERT_EQ(*generated, config.layout.ids_per_ms());  // short: the ms is used up
    EXPECT_EQ(config.layout.Decode(ids[*generated - 1]).value(),
              (DecodedId{kStart, config.layout.max_machine(), config.layout.max_sequence()}));
    EXPECT_EQ(sut.Next().error(), GenerateError::kSequenceExhausted);
    clock.Advance(1);
    EXPECT_EQ(config.layout.Decode(sut.Next().value()).value(),
              (DecodedId{kStart + 1, config.layout.max_machine(), 0}));
  }
}

TEST(Generator, CreateRejectsAMachineBeyondTheLayout) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config();
  config.layout = IdLayout::Create(kEpoch, {41, 13, 9}).value();
  config.machine = 8192;

  auto created = Generator::Create(config, clock);

  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code, GeneratorErrorCode::kMachineOutOfRange);
  EXPECT_NE(created.error().message.find("between 0 and 8191 (the layout 41/13/9"),
            std::string::npos)
      << created.error().message;
}

TEST(Generator, ExhaustionOf4096NeverWraps) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  std::vector<uint64_t> ids(IdLayout().ids_per_ms() + 10);

  auto generated = sut.Generate(ids);

  ASSERT_TRUE(generated.has_value());
  EXPECT_EQ(*generated,
            IdLayout().ids_per_ms());  // short: the ms is used up and the clock stood still
  EXPECT_EQ(Fields(ids[IdLayout().ids_per_ms() - 1]),
            (DecodedId{kStart, kMachine, IdLayout().max_sequence()}));
  auto next = sut.Next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error(), GenerateError::kSequenceExhausted);
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
}

TEST(Generator, ExhaustedMillisecondNeverBorrowsTheNextOne) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  std::vector<uint64_t> ids(IdLayout().ids_per_ms());
  ASSERT_EQ(sut.Generate(ids).value(), IdLayout().ids_per_ms());

  // Called many times without the clock moving: never an ID from kStart + 1.
  for (int i = 0; i < 100; ++i) {
    auto next = sut.Next();
    ASSERT_FALSE(next.has_value());
    EXPECT_EQ(next.error(), GenerateError::kSequenceExhausted);
  }
  clock.Advance(1);
  EXPECT_EQ(Fields(sut.Next().value()), (DecodedId{kStart + 1, kMachine, 0}));
}

TEST(Generator, BatchCrossesMillisecondBoundariesWhenTheClockHasAdvanced) {
  // The clock is read again only when a ms is used up; make it advance on every read
  // after the first by stepping it from inside the batch via a clock wrapper.
  class SteppingClock final : public Clock {
   public:
    explicit SteppingClock(int64_t start) : now_(start) {}
    int64_t NowUnixMs() noexcept override { return now_++; }
    int64_t now_;
  };
  SteppingClock clock(kStart);
  auto sut = MustCreate(Config(), clock);  // Create() reads kStart
  std::vector<uint64_t> ids(3 * IdLayout().ids_per_ms() + 5);

  auto generated = sut.Generate(ids);

  ASSERT_TRUE(generated.has_value());
  ASSERT_EQ(*generated, ids.size());
  for (size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]) << "at " << i;
  EXPECT_EQ(Fields(ids[0]), (DecodedId{kStart + 1, kMachine, 0}));
  EXPECT_EQ(Fields(ids[IdLayout().ids_per_ms() - 1]),
            (DecodedId{kStart + 1, kMachine, IdLayout().max_sequence()}));
  EXPECT_EQ(Fields(ids[IdLayout().ids_per_ms()]), (DecodedId{kStart + 2, kMachine, 0}));
  EXPECT_EQ(Fields(ids.back()), (DecodedId{kStart + 4, kMachine, 4}));
  // One reading per ms issued in, no more (Create's + one per ms).
  EXPECT_EQ(clock.now_, kStart + 5);
}

TEST(Generator, BatchReadsTheClockOncePerMillisecondNotPerId) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  const int64_t reads_before = clock.reads();
  std::vector<uint64_t> ids(1000);

  ASSERT_EQ(sut.Generate(ids).value(), 1000u);

  EXPECT_EQ(clock.reads() - reads_before, 1);
}

TEST(Generator, BatchReturnsShortCountWhenTheClockHasNotAdvanced) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  std::vector<uint64_t> first(100);
  ASSERT_EQ(sut.Generate(first).value(), 100u);
  std::vector<uint64_t> rest(IdLayout().ids_per_ms());

  auto generated = sut.Generate(rest);

  ASSERT_TRUE(generated.has_value());
  EXPECT_EQ(*generated, IdLayout().ids_per_ms() - 100);
  EXPECT_EQ(Fields(rest[0]).sequence, 100u);
}

TEST(Generator, EmptyBatchReturnsZeroWithoutReadingTheClock) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  const int64_t reads_before = clock.reads();

  auto generated = sut.Generate({});

  ASSERT_TRUE(generated.has_value());
  EXPECT_EQ(*generated, 0u);
  EXPECT_EQ(clock.reads(), reads_before);
}

TEST(Generator, BatchIsStrictlyIncreasingAcrossCalls) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  std::vector<uint64_t> all;

  for (int step = 0; step < 5; ++step) {
    const auto drained = Drain(sut);
    all.insert(all.end(), drained.begin(), drained.end());
    clock.Advance(1 + step);
  }

  ASSERT_EQ(all.size(), 5u * IdLayout().ids_per_ms());
  for (size_t i = 1; i < all.size(); ++i) ASSERT_LT(all[i - 1], all[i]) << "at " << i;
}

// ---- Clock steps back -----------------------------------------------------------------

TEST(Generator, SmallStepBackPausesWithReason) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());
  clock.Advance(-5);

  auto next = sut.Next();

  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error(), GenerateError::kPaused);
  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
  EXPECT_EQ(sut.reason(), "clock moved back 5 ms");
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kClockBehind);
  EXPECT_EQ(sut.ms_behind(), 5);
  EXPECT_EQ(sut.pauses_total(), 1u);
}

TEST(Generator, StepBackOfExactlyMaxBackwardMsPauses) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());
  clock.Advance(-100);

  EXPECT_FALSE(sut.Next().has_value());

  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
}

TEST(Generator, SmallStepBackResumesByItselfWithNoIdAtOrBelowTheMark) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  const auto before = Drain(sut);  // uses up kStart entirely
  ASSERT_EQ(before.size(), IdLayout().ids_per_ms());
  clock.Advance(-50);

  // While the clock climbs back to the mark, nothing is issued.
  for (int64_t ms = kStart - 50; ms <= kStart; ++ms) {
    clock.Set(ms);
    EXPECT_FALSE(sut.Next().has_value()) << "at clock " << ms;
  }
  EXPECT_EQ(sut.state(), GeneratorState::kPaused);  // at the mark, not past it: still paused
  clock.Set(kStart + 1);
  auto next = sut.Next();

  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Fields(*next), (DecodedId{kStart + 1, kMachine, 0}));
  EXPECT_GT(*next, before.back());
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
  EXPECT_EQ(sut.reason(), "");
  EXPECT_EQ(sut.ms_behind(), 0);
  EXPECT_EQ(sut.pauses_total(), 1u);
}

TEST(Generator, PauseEndsOnlyOnceTheClockPassesTheMarkEvenWithSequenceLeft) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  const uint64_t last = sut.Next().value();  // kStart has 4,095 sequences left
  clock.Advance(-10);
  ASSERT_FALSE(sut.Next().has_value());
  clock.Set(kStart);
  EXPECT_EQ(sut.Next().error(), GenerateError::kPaused);  // the step closed the mark's ms
  clock.Set(kStart + 1);

  const uint64_t next = sut.Next().value();

  EXPECT_EQ(Fields(next), (DecodedId{kStart + 1, kMachine, 0}));
  EXPECT_GT(next, last);
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
}

TEST(Generator, LargeStepBackGoesOutOfServiceUntilResume) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());
  clock.Advance(-101);

  auto next = sut.Next();

  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error(), GenerateError::kOutOfService);
  EXPECT_EQ(sut.state(), GeneratorState::kOutOfService);
  EXPECT_EQ(sut.reason(),
            "clock moved back 101 ms, more than max_backward_ms (max_backward_ms=100); run "
            "`snowflakectl resume` after checking the clock");
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kClockStepTooLarge);
  EXPECT_EQ(sut.pauses_total(), 1u);
  // Even once the clock is far past the mark, only Resume() brings it back.
  clock.Set(kStart + 10'000);
  EXPECT_EQ(sut.Next().error(), GenerateError::kOutOfService);
  sut.Resume();
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
  EXPECT_EQ(Fields(sut.Next().value()), (DecodedId{kStart + 10'000, kMachine, 0}));
}

TEST(Generator, ResumeWhileTheClockIsBehindNeverIssuesAtOrBelowTheMark) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  const auto before = Drain(sut);
  clock.Advance(-5'000);
  ASSERT_EQ(sut.Next().error(), GenerateError::kOutOfService);

  sut.Resume();

  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
  EXPECT_EQ(sut.ms_behind(), 5'000);
  for (int64_t ms = kStart - 5'000; ms <= kStart; ms += 7) {
    clock.Set(ms);
    auto next = sut.Next();
    ASSERT_FALSE(next.has_value()) << "at clock " << ms;
    // Behind by more than max_backward_ms, but the operator vouched: only a pause.
    EXPECT_EQ(sut.state(), GeneratorState::kPaused) << "at clock " << ms;
  }
  clock.Set(kStart + 1);
  const uint64_t next = sut.Next().value();
  EXPECT_GT(next, before.back());
  EXPECT_EQ(Fields(next).unix_ms, kStart + 1);
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
}

TEST(Generator, ResumeHasNoEffectWhenServing) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);

  sut.Resume();

  EXPECT_EQ(sut.state(), GeneratorState::kServing);
  EXPECT_TRUE(sut.Next().has_value());
}

TEST(Generator, StartBehindTheMarkWithinStartWaitOnlyPausesAndServesOnceItPasses) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config(/*high_water_unix_ms=*/kStart + 900);
  config.start_wait_ms = 1100;  // a reservation lead of 1000 ms + max_backward_ms

  auto sut = MustCreate(config, clock);
  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
  clock.Set(kStart + 500);  // still 400 ms behind: more than max_backward_ms, still waiting
  EXPECT_EQ(sut.Next().error(), GenerateError::kPaused);
  clock.Set(kStart + 901);
  auto next = sut.Next();

  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Fields(*next).unix_ms, kStart + 901);
}

TEST(Generator, StartWaitDoesNotExcuseAClockThatFallsFurtherBehind) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config(/*high_water_unix_ms=*/kStart + 900);
  config.start_wait_ms = 1100;
  auto sut = MustCreate(config, clock);
  ASSERT_EQ(sut.state(), GeneratorState::kPaused);

  clock.Set(kStart - 300);  // now 1200 ms behind the mark

  EXPECT_EQ(sut.Next().error(), GenerateError::kOutOfService);
  EXPECT_NE(sut.reason().find("more than the 1100 ms a restart may wait"), std::string::npos)
      << sut.reason();
  // Started behind, and the status says so: the same reason however far it then falls.
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kBehindHighWater) << sut.reason();
  EXPECT_EQ(sut.reason().rfind("clock started 1200 ms behind the persisted high-water mark", 0), 0u)
      << sut.reason();
}

TEST(Generator, StartWaitAppliesOnlyAtStartNotToLaterSteps) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config();
  config.start_wait_ms = 1100;
  auto sut = MustCreate(config, clock);
  ASSERT_TRUE(sut.Next().has_value());

  clock.Advance(-500);

  EXPECT_EQ(sut.Next().error(), GenerateError::kOutOfService);
}

TEST(Generator, PausedStepThatGrowsBeyondTheBoundGoesOutOfService) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());
  clock.Advance(-50);
  ASSERT_EQ(sut.Next().error(), GenerateError::kPaused);
  clock.Advance(-200);

  auto next = sut.Next();

  EXPECT_EQ(next.error(), GenerateError::kOutOfService);
  EXPECT_EQ(sut.pauses_total(), 1u);  // one episode of clock trouble
}

TEST(Generator, ClockBeforeTheEpochIsRefused) {
  ManualClock clock(kEpoch);
  auto sut = MustCreate(Config(), clock);  // nothing issued yet
  clock.Set(kEpoch - 1);

  auto next = sut.Next();

  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error(), GenerateError::kSequenceExhausted);  // at the mark epoch-1
  clock.Set(kEpoch - 2);
  EXPECT_EQ(sut.Next().error(), GenerateError::kPaused);
  EXPECT_NE(sut.reason().find("before the epoch"), std::string::npos) << sut.reason();
  clock.Set(kEpoch - 1000);
  EXPECT_EQ(sut.Next().error(), GenerateError::kOutOfService);
}

TEST(Generator, StepBackMidBatchReturnsWhatItHasAndPauses) {
  class ScriptedClock final : public Clock {
   public:
    int64_t NowUnixMs() noexcept override { return readings_.at(next_++); }
    std::vector<int64_t> readings_;
    size_t next_ = 0;
  };
  ScriptedClock clock;
  clock.readings_ = {kStart, kStart, kStart - 3};
  auto sut = MustCreate(Config(), clock);
  std::vector<uint64_t> ids(IdLayout().ids_per_ms() + 1);

  auto generated = sut.Generate(ids);

  ASSERT_TRUE(generated.has_value());
  EXPECT_EQ(*generated, IdLayout().ids_per_ms());
  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
  EXPECT_EQ(sut.last_issued_id(), ids[IdLayout().ids_per_ms() - 1]);
}

// ---- The high-water mark --------------------------------------------------------------

TEST(Generator, FirstIdIsStrictlyAfterTheHighWaterMark) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(/*high_water_unix_ms=*/kStart), clock);

  auto at_mark = sut.Next();
  clock.Advance(1);
  auto after_mark = sut.Next();

  ASSERT_FALSE(at_mark.has_value());
  EXPECT_EQ(at_mark.error(), GenerateError::kSequenceExhausted);
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
  ASSERT_TRUE(after_mark.has_value());
  EXPECT_EQ(Fields(*after_mark), (DecodedId{kStart + 1, kMachine, 0}));
}

TEST(Generator, StartSlightlyBehindTheHighWaterMarkPausesUntilItPasses) {
  ManualClock clock(kStart);

  auto sut = MustCreate(Config(/*high_water_unix_ms=*/kStart + 30), clock);

  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
  EXPECT_EQ(sut.reason(), "clock started 30 ms behind the persisted high-water mark");
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kBehindHighWater);
  EXPECT_EQ(sut.ms_behind(), 30);
  EXPECT_EQ(sut.pauses_total(), 1u);
  clock.Set(kStart + 30);
  EXPECT_EQ(sut.Next().error(), GenerateError::kPaused);  // at the mark, not past it
  clock.Set(kStart + 31);
  EXPECT_EQ(Fields(sut.Next().value()).unix_ms, kStart + 31);
}

TEST(Generator, StartFarBehindTheHighWaterMarkIsOutOfService) {
  ManualClock clock(kStart);

  auto sut = MustCreate(Config(/*high_water_unix_ms=*/kStart + 5'000), clock);

  EXPECT_EQ(sut.state(), GeneratorState::kOutOfService);
  EXPECT_EQ(sut.reason(),
            "clock started 5000 ms behind the persisted high-water mark (more than "
            "max_backward_ms=100); run `snowflakectl resume` after checking the clock");
  clock.Set(kStart + 6'000);
  EXPECT_EQ(sut.Next().error(), GenerateError::kOutOfService);
}

TEST(Generator, ResumeAfterStartBehindTheHighWaterMarkNeverIssuesAtOrBelowIt) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(/*high_water_unix_ms=*/kStart + 5'000), clock);

  sut.Resume();

  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
  clock.Set(kStart + 5'000);
  EXPECT_FALSE(sut.Next().has_value());
  clock.Set(kStart + 5'001);
  EXPECT_EQ(Fields(sut.Next().value()).unix_ms, kStart + 5'001);
}

TEST(Generator, RaiseHighWaterStopsIssuingAtOrBelowIt) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());

  sut.RaiseHighWater(kStart);  // the rest of kStart is now off limits

  EXPECT_EQ(sut.Next().error(), GenerateError::kSequenceExhausted);
  EXPECT_EQ(sut.last_unix_ms(), kStart);
  sut.RaiseHighWater(kStart + 20);
  EXPECT_EQ(sut.last_unix_ms(), kStart + 20);
  clock.Set(kStart + 10);
  EXPECT_EQ(sut.Next().error(), GenerateError::kPaused);
  clock.Set(kStart + 21);
  EXPECT_EQ(Fields(sut.Next().value()).unix_ms, kStart + 21);
}

TEST(Generator, RaiseHighWaterNeverLowersTheMark) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(/*high_water_unix_ms=*/kStart + 50), clock);

  sut.RaiseHighWater(kStart - 1000);

  EXPECT_EQ(sut.last_unix_ms(), kStart + 50);
  clock.Set(kStart + 50);
  EXPECT_FALSE(sut.Next().has_value());
}

TEST(Generator, AFenceFarAheadOfTheClockOnlyPausesUntilTheClockPassesIt) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());

  // An operator's fence 5 s ahead: far beyond max_backward_ms (100), yet only a pause.
  sut.RaiseFence(kStart + 5000);
  const auto at_fence_time = sut.Next();
  clock.Set(kStart + 5000);
  const auto at_the_fence = sut.Next();
  clock.Set(kStart + 5001);
  const auto past = sut.Next();

  ASSERT_FALSE(at_fence_time.has_value());
  EXPECT_EQ(at_fence_time.error(), GenerateError::kPaused);
  ASSERT_FALSE(at_the_fence.has_value()) << "issued in the fence's own millisecond";
  EXPECT_EQ(at_the_fence.error(), GenerateError::kPaused);
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(Fields(*past).unix_ms, kStart + 5001);
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
}

TEST(Generator, AFencePauseSaysFencedAndHowFarAhead) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);

  sut.RaiseFence(kStart + 3000);
  (void)sut.Next();

  EXPECT_EQ(sut.state(), GeneratorState::kPaused);
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kFenced);
  EXPECT_EQ(sut.ms_behind(), 3000);
  EXPECT_NE(sut.reason().find("3000 ms ahead of the clock"), std::string::npos) << sut.reason();
}

TEST(Generator, AClockThatStepsBackFurtherWhileFencedGoesOutOfService) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  sut.RaiseFence(kStart + 3000);
  (void)sut.Next();
  clock.Set(kStart - 50);  // 50 ms further back: within max_backward_ms, still waiting
  const auto small = sut.Next();
  const GeneratorState after_small = sut.state();

  clock.Set(kStart - 500);  // 500 ms further back than when the fence came
  const auto large = sut.Next();

  EXPECT_FALSE(small.has_value());
  EXPECT_EQ(after_small, GeneratorState::kPaused);
  ASSERT_FALSE(large.has_value());
  EXPECT_EQ(sut.state(), GeneratorState::kOutOfService);
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kClockStepTooLarge);
}

TEST(Generator, AFenceBehindTheLastIssuedIdChangesNothing) {
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());
  clock.Set(kStart + 10);
  ASSERT_TRUE(sut.Next().has_value());

  sut.RaiseFence(kStart + 5);
  const auto next = sut.Next();

  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Fields(*next).unix_ms, kStart + 10);
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
}

// A caller that may not issue (the reservation's horizon is behind the clock) still learns
// when the clock has passed the mark: the pause ends without an ID, and one already passed
// stays over.
TEST(Generator, JudgeClockEndsAStartPauseOnceTheClockPassesTheMarkWithoutIssuing) {
  ManualClock clock(kStart);
  GeneratorConfig config = Config(kStart + 258);
  config.start_wait_ms = 1100;
  config.high_water_source = MarkSource::kRegister;
  Generator sut = MustCreate(config, clock);
  ASSERT_EQ(sut.state(), GeneratorState::kPaused);

  clock.Set(kStart + 258);  // at the closed mark: still paused
  sut.JudgeClock();
  const GeneratorState at_mark = sut.state();
  const MarkSource waited_for = sut.mark_source();
  clock.Set(kStart + 259);
  sut.JudgeClock();

  EXPECT_EQ(at_mark, GeneratorState::kPaused);
  EXPECT_EQ(waited_for, MarkSource::kRegister);
  EXPECT_EQ(sut.state(), GeneratorState::kServing);
  EXPECT_EQ(sut.reason(), "");
  EXPECT_FALSE(sut.last_issued_id().has_value());
  EXPECT_EQ(sut.last_unix_ms(), kStart + 258);
  auto id = sut.Next();
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(Fields(*id).unix_ms, kStart + 259);
  EXPECT_EQ(sut.mark_source(), MarkSource::kLastIssued);
}

TEST(Generator, JudgeClockLeavesOutOfServiceToResume) {
  ManualClock clock(kStart);
  Generator sut = MustCreate(Config(kStart + 5000), clock);
  ASSERT_EQ(sut.state(), GeneratorState::kOutOfService);

  clock.Set(kStart + 6000);
  sut.JudgeClock();

  EXPECT_EQ(sut.state(), GeneratorState::kOutOfService);
}

TEST(Generator, AFenceIsWhatThePauseWaitsFor) {
  ManualClock clock(kStart);
  Generator sut = MustCreate(Config(), clock);
  ASSERT_TRUE(sut.Next().has_value());

  sut.RaiseFence(kStart + 400);
  clock.Set(kStart + 1);
  auto refused = sut.Next();

  EXPECT_FALSE(refused.has_value());
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kFenced);
  EXPECT_EQ(sut.last_unix_ms(), kStart + 400);
  EXPECT_EQ(sut.mark_source(), MarkSource::kFence);
}

// ---- The end of the time range --------------------------------------------------------

TEST(Generator, TimeBeyondTheRangeIsOutOfServiceNeverAWrappedId) {
  // An epoch such that the clock is 2 ms before the end of the 41-bit range. The clock
  // must be more than 2^41 ms after 1970 for the epoch to be non-negative.
  constexpr int64_t kNow = IdLayout().max_offset_ms() + 1'000'000'000;
  const IdLayout layout = IdLayout::Create(kNow - IdLayout().max_offset_ms() + 2).value();
  ManualClock clock(kNow);
  GeneratorConfig config = Config();
  config.layout = layout;
  auto sut = MustCreate(config, clock);

  std::vector<uint64_t> issued;
  for (int64_t ms = kNow; ms <= layout.max_unix_ms(); ++ms) {
    clock.Set(ms);
    const auto drained = Drain(sut);
    issued.insert(issued.end(), drained.begin(), drained.end());
  }
  clock.Set(layout.max_unix_ms() + 1);
  auto beyond = sut.Next();

  ASSERT_EQ(issued.size(), 3u * IdLayout().ids_per_ms());
  EXPECT_EQ(layout.Decode(issued.back()).value(),
            (DecodedId{layout.max_unix_ms(), kMachine, IdLayout().max_sequence()}));
  ASSERT_FALSE(beyond.has_value());
  EXPECT_EQ(beyond.error(), GenerateError::kOutOfService);
  EXPECT_EQ(sut.state(), GeneratorState::kOutOfService);
  // max_unix_ms = 2^41 - 1 + 1e9 + 2 = 2,200,023,255,553 ms = 2039-09-19T05:34:15.553Z.
  EXPECT_EQ(sut.reason(), "the epoch's 41-bit time range is used up (ends 2039-09-19)");
  EXPECT_EQ(sut.reason_code(), shm::StateReason::kTimeRangeExhausted);
  sut.Resume();  // the operator cannot talk it out of this
  EXPECT_EQ(sut.state(), GeneratorState::kOutOfService);
}

TEST(Generator, StartBeyondTheRangeIsOutOfService) {
  constexpr int64_t kNow = IdLayout().max_offset_ms() + 1'000'000'000;
  const IdLayout layout = IdLayout::Create(kNow - IdLayout().max_offset_ms() - 1).value();
  ManualClock clock(kNow);
  GeneratorConfig config = Config();
  config.layout = layout;

  auto sut = MustCreate(config, clock);

  EXPECT_EQ(sut.state(), GeneratorState::kOutOfService);
  EXPECT_EQ(sut.Next().error(), GenerateError::kOutOfService);
}

// ---- Properties -----------------------------------------------------------------------

// Property: over any clock walk, every ID is strictly greater than the one before, carries
// a ms no later than the clock at that call, and never one at or below the high-water mark.
TEST(Generator, StrictlyIncreasingOverALongRandomizedClockWalk) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int64_t kHighWater = kStart + 20;
  ManualClock clock(kStart);
  auto sut = MustCreate(Config(kHighWater), clock);
  std::vector<uint64_t> batch(6000);
  uint64_t previous = 0;
  bool any = false;
  size_t total = 0;

  for (int step = 0; step < 20'000; ++step) {
    // Mostly forward, sometimes a small or a large step back, sometimes still.
    const int kind = static_cast<int>(rng() % 100);
    if (kind < 65) {
      clock.Advance(static_cast<int64_t>(rng() % 5));
    } else if (kind < 85) {
      clock.Advance(-static_cast<int64_t>(rng() % 30));
    } else if (kind < 88) {
      clock.Advance(-static_cast<int64_t>(rng() % 300));
    } else if (kind < 95) {
      clock.Advance(static_cast<int64_t>(rng() % 200));
    } else {
      sut.Resume();
    }
    const size_t want = 1 + rng() % batch.size();
    const int64_t now = clock.NowUnixMs();
    auto generated = sut.Generate(std::span<uint64_t>(batch.data(), want));
    if (!generated) continue;
    for (size_t i = 0; i < *generated; ++i) {
      const DecodedId fields = Fields(batch[i]);
      ASSERT_LE(fields.unix_ms, now) << "borrowed a future ms at step " << step;
      ASSERT_GT(fields.unix_ms, kHighWater) << "at step " << step;
      if (any) {
        ASSERT_GT(batch[i], previous) << "at step " << step;
      }
      previous = batch[i];
      any = true;
    }
    total += *generated;
  }

  EXPECT_GT(total, 0u);  // the walk did serve
  EXPECT_GT(sut.pauses_total(), 0u);
}

}  // namespace
}  // namespace snowflake::daemon
