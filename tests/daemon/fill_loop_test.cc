// The fill loop in-process, pass by pass: a real segment in a temporary directory, the
// generator over a ManualClock (wall and steady time under the test's control), and a
// horizon the test sets by hand.
//
// Properties: nothing above the confirmed horizon is ever published, and the loop pauses
// at its end with the failing store named, resuming by itself; a pass that enters
// dormancy leaves the ring empty; a clock step inside a batch publishes none of it; a
// clock step is reported with its size.
#include "daemon/core/fill_loop.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "daemon/control/status_reporter.h"
#include "manual_clock.h"
#include "protocol/vocabulary.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/status_text.h"
#include "snowflake/unique_fd.h"
#include "temp_dir.h"
#include "test_producer.h"
#include "wait_until.h"

namespace snowflake::daemon {
namespace {

using shm::DaemonState;
using shm::StateReason;
using snowflake::testing::ManualClock;
using snowflake::testing::TempDir;

constexpr int64_t kEpoch = kDefaultEpochUnixMs;
constexpr int64_t kStart = kEpoch + 7'000'000;

class ManualHorizon final : public Horizon {
 public:
  int64_t confirmed_through() const noexcept override { return through; }
  std::optional<ReservationProblem> problem() const override { return failure; }
  std::optional<RenewalWait> waiting() const override { return wait; }
  // The test sets the fields directly: every call is a change.
  uint64_t renewal_version() const noexcept override { return ++version_calls; }
  bool claim_lost() const noexcept override { return lost; }
  void NoteNeed(int64_t unix_ms) noexcept override { need = unix_ms; }

  int64_t through = kStart + 1000;
  std::optional<ReservationProblem> failure;
  std::optional<RenewalWait> wait;
  mutable uint64_t version_calls = 0;
  bool lost = false;
  int64_t need = 0;
};

struct Rig {
  // `replace_tampered`: a tampered segment is replaced by a fresh one in dir, as the daemon
  // does; otherwise the loop stops (fatal()).
  // `generator_config`: the generator's (the default: machine 3, no mark to stand above).
  explicit Rig(FillLoopOptions options = Defaults(), Clock* clock_override = nullptr,
               bool replace_tampered = false,
               GeneratorConfig generator_config = DefaultGeneratorConfig())
      : producer(testing::MakeProducer(shm::ProducerOptions{.runtime_dir = dir.path(),
                                                            .capacity = options.capacity,
                                                            .epoch_unix_ms = kEpoch,
                                                            .machine = 3,
                                                            .mode = 0600,
                                                            .group = std::nullopt})),
        generator(std::move(
            Generator::Create(generator_config, clock_override ? *clock_override : clock).value())),
        status(Identity(), board, std::chrono::milliseconds(1000)),
        sut(WithReplacer(options, replace_tampered), clock_override ? *clock_override : clock,
            generator, producer, horizon, status, nullptr) {}

  shm::ProducerOptions SegmentOptions(uint64_t capacity) const {
    return shm::ProducerOptions{.runtime_dir = dir.path(),
                                .capacity = capacity,
                                .epoch_unix_ms = kEpoch,
                                .machine = 3,
                                .mode = 0600,
                                .group = std::nullopt};
  }
  FillLoopOptions WithReplacer(FillLoopOptions options, bool replace) const {
    if (replace) {
      options.replace_segment = [segment = SegmentOptions(options.capacity)](
                                    const shm::FreshSegment& fresh) {
        return shm::RingProducer::CreateReplacement(segment, fresh);
      };
    }
    return options;
  }
  // Writes `value` at `offset` of the ring file (header and slots), as only the daemon's
  // user or root can (the group may only read it).
  void Poke(size_t offset, uint64_t value) const {
    PokeFile((dir / std::string(shm::kSegmentFileName)).string(), offset, value);
  }
  // Writes `value` at `offset` of the consumer region of the segment served now, through
  // the descriptor the loop hands to an attaching client (FillLoop::AttachPoint): what any
  // process that attached can do.
  template <typename T>
  void PokeRegion(size_t offset, T value) {
    UniqueFd region = sut.AttachPoint().first;
    ASSERT_TRUE(region.valid()) << "the loop handed out no region";
    ASSERT_EQ(pwrite(region.get(), &value, sizeof value, static_cast<off_t>(offset)),
              static_cast<ssize_t>(sizeof value));
  }
  void PokeHead(uint64_t value) { PokeRegion(offsetof(shm::ConsumerRegion, head), value); }
  static void PokeFile(const std::string& file, size_t offset, uint64_t value) {
    const int fd = open(file.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << file;
    ASSERT_EQ(pwrite(fd, &value, sizeof value, static_cast<off_t>(offset)),
              static_cast<ssize_t>(sizeof value));
    close(fd);
  }
  // A client of the segment served now, attached as over the control socket: the ring
  // file at the path and the region the loop hands out.
  tl::expected<shm::RingConsumer, shm::SegmentFailure> Attach() {
    return shm::RingConsumer::Open(dir.path(), sut.AttachPoint().first);
  }

  static DaemonStatus Identity() {
    DaemonStatus identity;
    identity.machine = 3;
    return identity;
  }
  static GeneratorConfig DefaultGeneratorConfig() {
    return GeneratorConfig{.layout = IdLayout::Create(kEpoch).value(), .machine = 3};
  }
  static FillLoopOptions Defaults() {
    FillLoopOptions options;
    options.epoch_unix_ms = kEpoch;
    options.machine = 3;
    return options;
  }
  int64_t MsOf(uint64_t id) const { return kEpoch + IdLayout().OffsetMsOf(id); }
  int64_t NewestPublishedMs() const {
    const uint64_t last = producer.last_published_id();
    return last == 0 ? 0 : MsOf(last);
  }

  TempDir dir{"fill-loop"};
  ManualClock clock{kStart};
  shm::RingProducer producer;
  Generator generator;
  ManualHorizon horizon;
  StatusBoard board{clock};
  StatusReporter status;
  FillLoop sut;
};

TEST(FillLoop, ServesWithinTheHorizon) {
  Rig rig;

  rig.sut.Pass();

  EXPECT_EQ(rig.sut.published().state, DaemonState::kServing);
  EXPECT_GT(rig.producer.size(), 0u);
  EXPECT_LE(rig.NewestPublishedMs(), rig.horizon.through);
}

TEST(FillLoop, NeverPublishesAboveTheHorizonAndPausesNamingTheStore) {
  Rig rig;
  rig.sut.Pass();
  ASSERT_EQ(rig.sut.published().state, DaemonState::kServing);
  rig.horizon.failure = ReservationProblem{ReservationStore::kStateFile, 5, "fsync failed"};
  const int64_t horizon = rig.horizon.through;

  // The clock runs past the horizon while the store fails.
  for (int i = 0; i < 1100; ++i) {
    rig.clock.Tick(1);
    rig.sut.Pass();
    ASSERT_LE(rig.NewestPublishedMs(), horizon) << "published above the confirmed reservation";
  }

  EXPECT_EQ(rig.sut.published().state, DaemonState::kPaused);
  EXPECT_EQ(rig.sut.published().reason, StateReason::kPersistenceFailed);
  EXPECT_EQ(rig.sut.published().detail, 5);
  EXPECT_EQ(rig.producer.size(), 0u);
  const DaemonStatus status = rig.board.Snapshot();
  EXPECT_NE(status.reason.find("state file"), std::string::npos) << status.reason;
  EXPECT_NE(status.reason.find("resumes by itself"), std::string::npos) << status.reason;

  // The store heals: a renewal moves the horizon, and the loop serves by itself.
  rig.horizon.failure.reset();
  rig.horizon.through = rig.clock.NowUnixMs() + 1000;
  rig.clock.Tick(1);
  rig.sut.Pass();

  EXPECT_EQ(rig.sut.published().state, DaemonState::kServing);
  EXPECT_GT(rig.producer.size(), 0u);
}

TEST(FillLoop, LaggingRenewalPausesAtTheHorizon) {
  Rig rig;
  rig.sut.Pass();
  rig.horizon.through = kStart + 3;

  for (int i = 0; i < 6; ++i) {
    rig.clock.Tick(1);
    rig.sut.Pass();
  }

  EXPECT_EQ(rig.sut.published().state, DaemonState::kPaused);
  EXPECT_EQ(rig.sut.published().reason, StateReason::kPersistenceFailed);
  EXPECT_LE(rig.NewestPublishedMs(), kStart + 3);
  EXPECT_GE(rig.horizon.need, kStart + 6) << "the service was told what is needed";
}

// A register that does not answer: paused as register_unreachable since the wait began,
// and the segment's status text names the register and follows its last error while the
// pause lasts; serving again clears it.
TEST(FillLoop, AnUnansweredRegisterPausesWithItsWordsInTheSegmentUntilItAnswers) {
  // Arrange
  Rig rig;
  rig.sut.Pass();
  ASSERT_EQ(rig.sut.published().state, DaemonState::kServing);
  const int64_t since = rig.clock.NowUnixMs();
  rig.horizon.through = since + 3;
  rig.horizon.wait = RenewalWait{.store = ReservationStore::kRegister,
                                 .location = "etcd http://127.0.0.1:1 /p/",
                                 .since_unix_ms = since};

  // Act 1: the horizon is reached with the register call still under way.
  for (int i = 0; i < 6; ++i) {
    rig.clock.Tick(1);
    rig.sut.Pass();
  }
  const StateDecision first = rig.sut.published();
  const int64_t first_detail = rig.producer.header().reason_detail.load();
  const auto first_text = shm::ReadStatusText(rig.producer.header());
  // Act 2: the call times out; the pause lasts.
  rig.horizon.failure = ReservationProblem{.store = ReservationStore::kRegister,
                                           .message = "no answer from http://127.0.0.1:1",
                                           .unreachable = true};
  rig.clock.Tick(1);
  rig.sut.Pass();
  const auto second_text = shm::ReadStatusText(rig.producer.header());
  rig.status.RefreshBoard(rig.sut.Facts());  // the board's 50 ms schedule, without waiting
  const DaemonStatus status = rig.board.Snapshot();
  // Act 3: it answers.
  rig.horizon.failure.reset();
  rig.horizon.wait.reset();
  rig.horizon.through = rig.clock.NowUnixMs() + 1000;
  rig.clock.Tick(1);
  rig.sut.Pass();
  const auto serving_text = shm::ReadStatusText(rig.producer.header());

  // Assert
  EXPECT_EQ(first.state, DaemonState::kPaused);
  EXPECT_EQ(first.reason, StateReason::kRegisterUnreachable);
  EXPECT_EQ(first.detail, since);
  EXPECT_EQ(first_detail, since);
  EXPECT_EQ(first_text,
            "register etcd http://127.0.0.1:1 /p/; no answer yet to the renewal under way");
  EXPECT_EQ(second_text, "register etcd http://127.0.0.1:1 /p/; last error: register "
                         "unreachable: no answer from http://127.0.0.1:1");
  EXPECT_EQ(status.reason_code, "register_unreachable");
  ASSERT_TRUE(status.renewal.has_value());
  EXPECT_EQ(status.renewal->waited_ms, 7);
  EXPECT_EQ(status.renewal->last_error, "no answer from http://127.0.0.1:1");
  EXPECT_EQ(rig.sut.published().state, DaemonState::kServing);
  EXPECT_EQ(serving_text, "");
}

// Issue 44: a start 258 ms behind the persisted mark, while the register does not answer
// (a quorum loss). The generator's own wait ends once the clock passes the mark; what the
// daemon then waits for is the register, and it must say so, not "clock started 258 ms
// behind" for as long as the register is out. Once a renewal covers the clock it serves.
TEST(FillLoop, AStartBehindTheMarkEndsWithTheClockAndThenNamesTheRegisterItWaitsFor) {
  // Arrange: the mark 258 ms ahead; the horizon what both stores held at start (below the
  // clock soon), the first renewal failing at the register.
  GeneratorConfig generator = Rig::DefaultGeneratorConfig();
  generator.high_water_unix_ms = kStart + 258;
  generator.start_wait_ms = 1100;
  generator.high_water_source = MarkSource::kStateFile;
  Rig rig(Rig::Defaults(), nullptr, false, generator);
  rig.horizon.through = kStart + 100;
  rig.horizon.wait = RenewalWait{.store = ReservationStore::kRegister,
                                 .location = "etcd http://127.0.0.1:1 /p/",
                                 .since_unix_ms = kStart};
  rig.horizon.failure = ReservationProblem{
      .store = ReservationStore::kRegister, .message = "no leader", .unreachable = true};
  rig.sut.Pass();
  const StateDecision at_start = rig.sut.published();
  const StatusFacts facts_at_start = rig.sut.Facts();
  const std::string text_at_start = shm::ReadStatusText(rig.producer.header()).value_or("");

  // Act 1: 60 s pass with the register out.
  for (int i = 0; i < 6000; ++i) {
    rig.clock.Tick(10);
    rig.sut.Pass();
  }
  const StateDecision register_out = rig.sut.published();
  const GeneratorState generator_then = rig.generator.state();
  const StatusFacts facts_register_out = rig.sut.Facts();
  const std::string text_register_out = shm::ReadStatusText(rig.producer.header()).value_or("");
  // Act 2: the register answers; the renewal covers the clock.
  rig.horizon.failure.reset();
  rig.horizon.wait.reset();
  rig.horizon.through = rig.clock.NowUnixMs() + 1000;
  rig.clock.Tick(1);
  rig.sut.Pass();

  // Assert
  EXPECT_EQ(at_start.state, DaemonState::kPaused);
  EXPECT_EQ(at_start.reason, StateReason::kBehindHighWater);
  EXPECT_EQ(at_start.detail, 258);
  ASSERT_TRUE(facts_at_start.clock_wait.has_value());
  EXPECT_EQ(facts_at_start.clock_wait->until_unix_ms, kStart + 258);
  EXPECT_EQ(facts_at_start.clock_wait->set_by, "state_file");
  EXPECT_EQ(facts_at_start.clock_wait->clock_passes_in_ms, 259);
  EXPECT_NE(text_at_start.find("waiting for the clock to pass"), std::string::npos)
      << text_at_start;
  EXPECT_NE(text_at_start.find("state file"), std::string::npos) << text_at_start;
  EXPECT_EQ(generator_then, GeneratorState::kServing)
      << "the clock passed the mark 59.7 s ago: " << rig.generator.reason();
  EXPECT_EQ(register_out.state, DaemonState::kPaused);
  EXPECT_EQ(register_out.reason, StateReason::kRegisterUnreachable)
      << "the daemon waits for the register, and says " << vocab::ReasonCode(register_out.reason);
  EXPECT_FALSE(facts_register_out.clock_wait.has_value());
  EXPECT_TRUE(facts_register_out.renewal.has_value());
  EXPECT_EQ(text_register_out,
            "register etcd http://127.0.0.1:1 /p/; last error: register unreachable: no leader");
  EXPECT_EQ(rig.sut.published().state, DaemonState::kServing);
  EXPECT_GT(rig.producer.size(), 0u);
}

// Issue 44's "starting" gaps: before the first ID, a first renewal that lags (no failure
// yet) leaves the state "starting"; the status and the segment's text then name the
// renewal it waits for.
TEST(FillLoop, AStartWhoseFirstRenewalLagsNamesTheRenewalItWaitsFor) {
  Rig rig;
  rig.horizon.through = kStart - 1;  // nothing confirmed for this start yet
  rig.horizon.wait = RenewalWait{.store = ReservationStore::kRegister,
                                 .location = "etcd http://127.0.0.1:1 /p/",
                                 .since_unix_ms = kStart};

  rig.sut.Pass();
  rig.clock.Tick(13'000);
  rig.sut.Pass();
  const StatusFacts facts = rig.sut.Facts();
  const std::string text = shm::ReadStatusText(rig.producer.header()).value_or("");

  EXPECT_EQ(rig.sut.published().state, DaemonState::kStarting);
  ASSERT_TRUE(facts.renewal.has_value());
  EXPECT_EQ(facts.renewal->store, "register");
  EXPECT_EQ(facts.renewal->waited_ms, 13'000);
  EXPECT_EQ(text, "register etcd http://127.0.0.1:1 /p/; no answer yet to the renewal under way");
}

// Finding 5: the pass that enters dormancy used to fill the ring and then sleep with it.
TEST(FillLoop, EnteringDormancyLeavesTheRingEmpty) {
  Rig rig;
  rig.sut.Pass();
  ASSERT_GT(rig.producer.size(), 0u);

  // Nobody takes for longer than dormant_after; passes every ms (max_age 0 drains and
  // refills each ms) until the loop goes dormant.
  bool dormant = false;
  for (int i = 0; i < 1100 && !dormant; ++i) {
    rig.clock.Tick(1);
    rig.sut.Pass();
    dormant = rig.sut.dormant();
  }

  ASSERT_TRUE(dormant);
  EXPECT_EQ(rig.producer.size(), 0u) << "a dormant daemon holds IDs that will turn stale";
  EXPECT_EQ(rig.sut.NextWait(), std::chrono::milliseconds(20));
}

// A clock that steps back 5 ms once armed, after `reads_before_step` more readings.
class SteppingClock final : public Clock {
 public:
  int64_t NowUnixMs() noexcept override {
    if (armed_ && reads_before_step_-- <= 0) now_ms_ = step_to_;
    return now_ms_;
  }
  void Arm(int reads_before_step, int64_t to) {
    armed_ = true;
    reads_before_step_ = reads_before_step;
    step_to_ = to;
  }
  int64_t now_ms_ = kStart;

 private:
  bool armed_ = false;
  int reads_before_step_ = 0;
  int64_t step_to_ = 0;
};

// Finding 5: a clock step inside a batch published the batch's first part.
TEST(FillLoop, ClockStepInsideABatchPublishesNothingOfIt) {
  SteppingClock clock;
  Rig rig(Rig::Defaults(), &clock);
  // Use up all but 6 sequences of this millisecond, so the next batch crosses into the
  // next millisecond and reads the clock again mid-batch.
  std::vector<uint64_t> used(IdLayout().ids_per_ms() - 6);
  ASSERT_EQ(rig.generator.Generate(used).value(), used.size());
  const uint64_t published_before = rig.producer.header().published_total.load();
  // The pass reads the clock once, the batch once at its start; the step comes at the
  // batch's second reading, when its 6 IDs of kStart are already generated.
  clock.Arm(2, kStart - 5);

  rig.sut.Pass();

  EXPECT_EQ(rig.producer.header().published_total.load(), published_before)
      << "IDs of a batch the clock stepped back in were published";
  EXPECT_EQ(rig.sut.published().state, DaemonState::kPaused);
}

// Finding 9: a step was reported as the lag behind an old mark ("moved back 1 ms").
TEST(FillLoop, ClockStepIsReportedWithItsSize) {
  FillLoopOptions options = Rig::Defaults();
  options.max_age_ms = 1000;  // the ring stays full: no ID is generated after kStart
  Rig rig(options);
  rig.sut.Pass();
  for (int i = 0; i < 4; ++i) {
    rig.clock.Tick(1);
    rig.sut.Pass();
  }
  ASSERT_EQ(rig.generator.last_unix_ms(), kStart);

  rig.clock.Advance(-5);  // kStart + 4 -> kStart - 1: one ms behind the mark, a 5 ms step
  rig.sut.Pass();

  EXPECT_EQ(rig.sut.published().state, DaemonState::kPaused);
  EXPECT_EQ(rig.sut.published().reason, StateReason::kClockBehind);
  EXPECT_EQ(rig.sut.published().detail, 5);
  EXPECT_EQ(rig.producer.header().reason_detail.load(), 5);
  const DaemonStatus status = rig.board.Snapshot();
  EXPECT_NE(status.reason.find("clock moved back 5 ms"), std::string::npos) << status.reason;
  EXPECT_EQ(status.reason_detail, 5);
}

TEST(FillLoop, LostClaimStopsServingAtOnce) {
  Rig rig;
  rig.sut.Pass();
  ASSERT_GT(rig.producer.size(), 0u);

  rig.horizon.lost = true;
  rig.sut.Pass();

  EXPECT_TRUE(rig.sut.claim_lost());
  EXPECT_EQ(rig.producer.state(), DaemonState::kStopped);
  EXPECT_EQ(rig.producer.size(), 0u);
}

// Property: after a client rewinds head, no ID is handed out twice. The loop stops serving
// the tampered segment (its clients find it stopped and empty) and serves a fresh one at the
// same path whose IDs are above every ID ever published; status says why.
TEST(FillLoop, RewoundHeadRetiresTheSegmentAndServesAFreshOneAboveEveryId) {
  Rig rig(Rig::Defaults(), nullptr, /*replace_tampered=*/true);
  rig.sut.Pass();
  auto old_client = rig.Attach();
  ASSERT_TRUE(old_client) << old_client.error().message;
  uint64_t taken[8];
  ASSERT_EQ(old_client->TryTakeBatch(taken, 8), 8u);
  rig.clock.Tick(1);
  rig.sut.Pass();  // the loop sees the takes (and drains the previous millisecond's IDs)
  const uint64_t published_before = rig.producer.published_through();
  const uint64_t incarnation_before = rig.producer.incarnation();
  struct stat before {};
  ASSERT_EQ(stat((rig.dir / std::string(shm::kSegmentFileName)).c_str(), &before), 0);

  rig.PokeHead(0);  // every ID ever taken is "in the ring" again
  rig.clock.Tick(1);
  rig.sut.Pass();

  uint64_t again = 0;
  EXPECT_FALSE(old_client->TryTake(&again)) << "re-took " << again << " from the tampered ring";
  EXPECT_EQ(old_client->header().state.load(), static_cast<uint32_t>(DaemonState::kStopped));
  struct stat after {};
  ASSERT_EQ(stat((rig.dir / std::string(shm::kSegmentFileName)).c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino) << "no fresh segment at the path";
  auto new_client = rig.Attach();  // the region of the fresh segment
  ASSERT_TRUE(new_client) << new_client.error().message;
  EXPECT_EQ(new_client->header().incarnation.load(), incarnation_before + 1);
  uint64_t fresh[8];
  const size_t got = new_client->TryTakeBatch(fresh, 8);
  ASSERT_GT(got, 0u);
  EXPECT_GT(fresh[0], published_before) << "the fresh segment repeats an old ID";
  EXPECT_EQ(rig.sut.published().state, DaemonState::kServing);
  EXPECT_FALSE(rig.sut.fatal().has_value());
  EXPECT_EQ(rig.sut.segments_retired(), 1u);
  const DaemonStatus status = rig.board.Snapshot();
  EXPECT_EQ(status.segments_retired, 1u);
  EXPECT_NE(status.segment_retired_reason.find(" to 0 (tail "), std::string::npos)
      << status.segment_retired_reason;
}

TEST(FillLoop, HeadPastTailRetiresTheSegment) {
  Rig rig(Rig::Defaults(), nullptr, /*replace_tampered=*/true);
  rig.sut.Pass();
  const uint64_t tail = rig.producer.tail();

  rig.PokeHead(tail + 1000);
  rig.clock.Tick(1);
  rig.sut.Pass();

  EXPECT_EQ(rig.sut.segments_retired(), 1u);
  EXPECT_NE(rig.sut.segment_retired_reason().find("tail"), std::string::npos);
  EXPECT_GT(rig.producer.size(), 0u) << "the fresh segment is filled";
}

TEST(FillLoop, ForgedTailInTheHeaderRetiresTheSegment) {
  Rig rig(Rig::Defaults(), nullptr, /*replace_tampered=*/true);
  rig.sut.Pass();

  rig.Poke(offsetof(shm::SegmentHeader, tail), rig.producer.tail() + 4096);
  rig.clock.Tick(1);
  rig.sut.Pass();

  EXPECT_EQ(rig.sut.segments_retired(), 1u);
  EXPECT_NE(rig.sut.segment_retired_reason().find("wrote the header"), std::string::npos)
      << rig.sut.segment_retired_reason();
}

// A client overwrote the region's segment id: every new client's attach would fail
// (kUnpaired), so the loop replaces the segment, and attaching works again.
TEST(FillLoop, ForgedSegmentIdInTheConsumerRegionRetiresTheSegment) {
  Rig rig(Rig::Defaults(), nullptr, /*replace_tampered=*/true);
  rig.sut.Pass();
  rig.PokeRegion(offsetof(shm::ConsumerRegion, segment_id), uint64_t{12345});
  const auto refused = rig.Attach();

  rig.clock.Tick(1);
  rig.sut.Pass();

  ASSERT_FALSE(refused.has_value()) << "a client attached to a region of another segment id";
  EXPECT_EQ(refused.error().code, shm::SegmentError::kUnpaired) << refused.error().message;
  EXPECT_EQ(rig.sut.segments_retired(), 1u);
  EXPECT_NE(rig.sut.segment_retired_reason().find("segment id is 12345"), std::string::npos)
      << rig.sut.segment_retired_reason();
  EXPECT_GT(rig.producer.size(), 0u) << "the fresh segment is filled";
  const auto attached = rig.Attach();
  EXPECT_TRUE(attached.has_value()) << attached.error().message;
}

// A dormant loop sleeps dormant_wait between passes; Interrupt() (the daemon's signal
// watcher calls it on SIGTERM) ends that sleep, so Run sees the stop flag at once. Here the
// wait is 120 s: without the interrupt the loop would still be asleep at the 30 s check.
TEST(FillLoop, InterruptEndsADormantWaitSoRunSeesTheStopAtOnce) {
  FillLoopOptions options = Rig::Defaults();
  options.dormant_after = std::chrono::milliseconds(0);
  options.dormant_wait = std::chrono::milliseconds(120'000);
  Rig rig(options);
  std::atomic<bool> stop{false};
  std::promise<void> ready;
  auto ran = std::async(std::launch::async, [&] {
    rig.sut.Run(stop, [&] { ready.set_value(); });
  });
  ASSERT_EQ(ready.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  // Until it has filled and turned dormant: a dormant pass drains the whole ring, and only
  // then (dormant_after is 0; the fake clock stands still, so no ID ages) does
  // drained_total move. Its
  // 120 s wait begins right after; an interrupt that comes first still ends it (the refill
  // word has moved), so either order tests the wake-up.
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return rig.producer.header().drained_total.load(std::memory_order_relaxed) > 0; },
      std::chrono::seconds(30), "the loop to turn dormant and drain its ring"));

  stop.store(true, std::memory_order_release);
  rig.sut.Interrupt();

  EXPECT_EQ(ran.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "Run was still asleep 30 s after the interrupt";
  ran.wait();
  rig.sut.StopServing();
  EXPECT_EQ(rig.producer.state(), DaemonState::kStopped);
}

TEST(FillLoop, TamperedSegmentStopsTheLoopWhenNoFreshOneCanBeMade) {
  Rig rig;  // no replace_segment
  rig.sut.Pass();

  rig.PokeHead(rig.producer.tail() + 1);
  rig.clock.Tick(1);
  rig.sut.Pass();

  ASSERT_TRUE(rig.sut.fatal().has_value());
  EXPECT_NE(rig.sut.fatal()->find("head moved"), std::string::npos) << *rig.sut.fatal();
}

// The header's last_published_id is only a record for restarts: a forged one (here far
// above anything real) neither stops the loop nor lowers what it publishes.
TEST(FillLoop, ForgedLastPublishedIdDoesNotStopServing) {
  Rig rig(Rig::Defaults(), nullptr, /*replace_tampered=*/true);
  rig.sut.Pass();

  rig.Poke(offsetof(shm::SegmentHeader, last_published_id), ~uint64_t{0} >> 1);
  for (int i = 0; i < 5; ++i) {
    rig.clock.Tick(1);
    rig.sut.Pass();
  }

  EXPECT_FALSE(rig.sut.fatal().has_value());
  EXPECT_EQ(rig.sut.published().state, DaemonState::kServing);
  EXPECT_GT(rig.producer.size(), 0u);
}

// --- The refill hint: a batch taker that found the ring empty says how many IDs it
// still needs, and the next pass publishes up to that many at once. Properties: never
// more than the free slots, never more than 4,096 IDs of one millisecond, never an ID
// above the confirmed horizon, every ID of the pass's own millisecond (fresh), and no
// hint (a client that predates it) fills to the target only.

// A client of the rig's segment that asks as Client::NextBatch does.
struct Taker {
  explicit Taker(Rig& rig) : ring(std::move(rig.Attach().value())) {}
  // Takes everything in the ring; returns how many.
  size_t TakeAll() {
    std::vector<uint64_t> out(ring.capacity());
    size_t total = 0;
    for (size_t n; (n = ring.TryTakeBatch(out.data(), out.size())) > 0;) {
      total += n;
      taken.insert(taken.end(), out.begin(), out.begin() + static_cast<ptrdiff_t>(n));
    }
    return total;
  }
  // The slow path's request with its need, without sleeping.
  void Ask(uint64_t want) {
    ring.AwaitPublish(ring.wake_seq(), std::chrono::nanoseconds(0), false, want);
  }
  shm::RingConsumer ring;
  std::vector<uint64_t> taken;
};

FillLoopOptions WithCapacity(uint64_t capacity) {
  FillLoopOptions options = Rig::Defaults();
  options.capacity = capacity;
  return options;
}

uint64_t PublishedTotal(const Rig& rig) { return rig.producer.header().published_total.load(); }

TEST(FillLoop, AHintedPassPublishesTheWholeNeedInOnePass) {
  Rig rig(WithCapacity(8192));
  rig.sut.Pass();  // the idle fill: 64 IDs of kStart
  Taker taker(rig);
  ASSERT_EQ(taker.TakeAll(), 64u);
  rig.clock.Tick(1);
  const uint64_t before = PublishedTotal(rig);

  taker.Ask(1000);
  rig.sut.Pass();

  // The hint, or the target it teaches the tracker (twice the peak demand) if more.
  EXPECT_EQ(PublishedTotal(rig) - before, 2000u);
  EXPECT_EQ(rig.producer.size(), 2000u);
  EXPECT_EQ(taker.ring.refill_hint(), 0u) << "the pass took the hint";
}

TEST(FillLoop, AHintIsBoundedByTheRingsCapacity) {
  Rig rig(WithCapacity(1024));
  rig.sut.Pass();
  Taker taker(rig);
  taker.TakeAll();
  rig.clock.Tick(1);

  taker.Ask(4096);
  rig.sut.Pass();

  EXPECT_EQ(rig.producer.size(), 1024u);
  EXPECT_EQ(taker.TakeAll(), 1024u);
}

TEST(FillLoop, AHintIsBoundedBy4096IdsPerMillisecond) {
  Rig rig(WithCapacity(16384));
  rig.sut.Pass();  // 64 IDs of kStart: 4,032 sequences of kStart are left
  Taker taker(rig);
  ASSERT_EQ(taker.TakeAll(), 64u);
  const uint64_t before = PublishedTotal(rig);

  taker.Ask(16384);
  rig.sut.Pass();  // the clock has not moved: still kStart

  EXPECT_EQ(PublishedTotal(rig) - before, IdLayout().ids_per_ms() - 64u);
  ASSERT_EQ(taker.TakeAll(), IdLayout().ids_per_ms() - 64u);
  for (const uint64_t id : taker.taken) ASSERT_EQ(rig.MsOf(id), kStart) << "a borrowed millisecond";

  // The millisecond is used up: a second request in it publishes nothing, and the next
  // millisecond brings at most 4,096 more.
  taker.Ask(16384);
  rig.sut.Pass();
  EXPECT_EQ(rig.producer.size(), 0u);
  rig.clock.Tick(1);
  taker.Ask(16384);
  rig.sut.Pass();
  EXPECT_EQ(rig.producer.size(), IdLayout().ids_per_ms());
}

// A clock that moves one millisecond forward at every reading once armed: a hinted fill
// then crosses millisecond boundaries inside one pass, as a real one may.
class RunningClock final : public Clock {
 public:
  int64_t NowUnixMs() noexcept override { return running_ ? now_ms_++ : now_ms_; }
  void Run() { running_ = true; }
  int64_t now_ms_ = kStart;

 private:
  bool running_ = false;
};

TEST(FillLoop, AHintIsBoundedByTheConfirmedHorizon) {
  RunningClock clock;
  Rig rig(WithCapacity(65536), &clock);
  rig.sut.Pass();
  Taker taker(rig);
  taker.TakeAll();
  rig.horizon.through = clock.now_ms_ + 2;  // the pass may reach 3 more milliseconds
  clock.Run();

  taker.Ask(65536);
  rig.sut.Pass();

  taker.TakeAll();
  ASSERT_FALSE(taker.taken.empty());
  for (const uint64_t id : taker.taken) {
    ASSERT_LE(rig.MsOf(id), rig.horizon.through) << "published above the confirmed horizon";
  }
  EXPECT_GT(rig.MsOf(taker.taken.back()), kStart) << "the fill did cross a millisecond";
}

TEST(FillLoop, RepeatedBigBatchesRaiseTheFillTarget) {
  Rig rig(WithCapacity(8192));
  rig.sut.Pass();
  EXPECT_EQ(rig.producer.header().fill_target.load(), 64u);
  Taker taker(rig);
  taker.TakeAll();
  rig.clock.Tick(1);

  taker.Ask(4096);
  rig.sut.Pass();
  taker.TakeAll();
  rig.clock.Tick(1);
  rig.sut.Pass();  // no hint in this pass

  EXPECT_EQ(rig.producer.header().fill_target.load(), IdLayout().ids_per_ms() / 2);
  EXPECT_EQ(rig.producer.size(), IdLayout().ids_per_ms() / 2)
      << "the learned target is filled unasked";
}

// Mixed versions: a client that predates the hint only bumps the request word. The
// daemon then fills to its target, exactly as before the hint.
TEST(FillLoop, ARequestWithoutAHintFillsToTheTargetOnly) {
  Rig rig(WithCapacity(8192));
  rig.sut.Pass();
  Taker taker(rig);
  taker.TakeAll();
  rig.clock.Tick(1);

  taker.Ask(0);  // what a client of the previous release does
  rig.sut.Pass();

  // Twice the 64 IDs taken in the last millisecond, as before the hint existed.
  EXPECT_EQ(rig.producer.header().fill_target.load(), 128u);
  EXPECT_EQ(rig.producer.size(), 128u);
}

// The word is in the consumer region, which any process that attached may write: a forged
// hint costs at most one full ring of fresh IDs, drained when they age.
TEST(FillLoop, AForgedHugeHintIsClampedToTheRing) {
  Rig rig(WithCapacity(4096));
  rig.sut.Pass();
  rig.PokeRegion(offsetof(shm::ConsumerRegion, refill_hint), uint32_t{UINT32_MAX});
  rig.clock.Tick(1);

  rig.sut.Pass();

  EXPECT_EQ(rig.producer.size(), 4096u);
  EXPECT_FALSE(rig.sut.fatal().has_value());
  rig.clock.Tick(1);
  rig.sut.Pass();  // max_age_ms 0: last millisecond's IDs are drained, the target refilled
  EXPECT_EQ(rig.producer.size(), IdLayout().ids_per_ms() / 2)
      << "the learned target, not the forged hint";
}

TEST(FillLoop, AHintWakesADormantLoopAndIsServedInThatPass) {
  Rig rig(WithCapacity(8192));
  rig.horizon.through = kStart + 5000;  // beyond the second of quiet below
  rig.sut.Pass();
  for (int i = 0; i < 1100 && !rig.sut.dormant(); ++i) {
    rig.clock.Tick(1);
    rig.sut.Pass();
  }
  ASSERT_TRUE(rig.sut.dormant());
  ASSERT_EQ(rig.producer.size(), 0u);
  Taker taker(rig);

  taker.Ask(3000);
  rig.clock.Tick(1);
  rig.sut.Pass();

  EXPECT_FALSE(rig.sut.dormant());
  EXPECT_EQ(rig.producer.size(), 3000u);
}

}  // namespace
}  // namespace snowflake::daemon
