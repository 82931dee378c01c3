// The real snowflaked under clock steps (docs/design.md §6, docs/daemon.md "Clock
// policy"), made with libfaketime: the daemon is preloaded with libfaketimeMT and reads its
// CLOCK_REALTIME offset from a file on every clock read, which the test rewrites
// ("-0.005" = 5 ms back). CLOCK_MONOTONIC (the heartbeat) stays real. Under ASan the
// preload needs ASAN_OPTIONS=verify_asan_link_order=0 (the harness sets it); TSan needs
// nothing.
//
// Properties: a step back of 5 ms pauses and then serves again by itself; 10 s takes the
// daemon out of service until `snowflakectl resume`, and even a resume never lets it issue
// at or below its mark; a daemon started with its clock far behind its persisted
// reservation refuses to serve. In every case the IDs one client takes are strictly
// increasing and those taken after the trouble carry a later millisecond than any before.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/client.h"
#include "taker_thread.h"
#include "wait_until.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::NotifyMessage;
using testing::RunCommand;
using testing::SetClockOffset;
using testing::WaitForState;

// One thread taking IDs from the daemon all the time (a modest, steady demand keeps the
// daemon issuing in the current millisecond, so a step back lands behind its mark). Each
// ID is tagged with the phase the test was in when the take began.
using Taker = testing::TakerThread;

struct PhaseCheck {
  bool increasing = true;
  std::string problem;
};

// Every ID strictly above the one taken before it (one thread, so: unique and ordered).
PhaseCheck CheckIncreasing(const std::vector<Taker::Taken>& taken) {
  PhaseCheck check;
  for (size_t i = 1; i < taken.size(); ++i) {
    if (taken[i].id <= taken[i - 1].id) {
      check.increasing = false;
      check.problem = "ID " + std::to_string(taken[i].id) + " (phase " +
                      std::to_string(taken[i].phase) + ") after " + std::to_string(taken[i - 1].id);
      return check;
    }
  }
  return check;
}

uint64_t LastOfPhase(const std::vector<Taker::Taken>& taken, int phase) {
  uint64_t last = 0;
  for (const Taker::Taken& t : taken) last = t.phase == phase ? t.id : last;
  return last;
}

uint64_t FirstOfPhase(const std::vector<Taker::Taken>& taken, int phase) {
  for (const Taker::Taken& t : taken) {
    if (t.phase == phase) return t.id;
  }
  return 0;
}

// "123 (ms 1796218638724, seq 17)".
std::string Describe(const Client& client, uint64_t id) {
  auto decoded = client.Decode(id);
  if (!decoded) return std::to_string(id);
  return std::to_string(id) + " (ms " + std::to_string(decoded->unix_ms) + ", seq " +
         std::to_string(decoded->sequence) + ")";
}

class DaemonClockTest : public ::testing::Test {
 protected:
  DaemonClockTest() { SetClockOffset(offset_file(), "+0"); }

  std::filesystem::path offset_file() const { return harness_.root() / "clock-offset"; }
  DaemonOptions FakedOptions() const {
    DaemonOptions options = harness_.Options();
    options.faketime_file = offset_file();
    return options;
  }
  ClientOptions Clients() const {
    ClientOptions options = harness_.Clients();
    options.wait_timeout = 100ms;  // a paused daemon is reported at once anyway
    return options;
  }
  std::unique_ptr<Taker> StartTaker() {
    auto client = Client::Open("clock-test", Clients());
    if (!client) {
      ADD_FAILURE() << client.error().message;
      return nullptr;
    }
    return std::make_unique<Taker>(std::move(*client),
                                   Taker::Options{.after_take = 50us, .after_error = 200us});
  }
  // The largest millisecond among IDs taken in `phase`.
  static int64_t MaxMs(const Client& client, const std::vector<Taker::Taken>& taken, int phase) {
    int64_t max_ms = 0;
    for (const Taker::Taken& t : taken) {
      if (t.phase == phase) max_ms = std::max(max_ms, client.Decode(t.id).value().unix_ms);
    }
    return max_ms;
  }
  // The smallest millisecond among IDs taken in `phase` (INT64_MAX if none).
  static int64_t MinMs(const Client& client, const std::vector<Taker::Taken>& taken, int phase) {
    int64_t min_ms = INT64_MAX;
    for (const Taker::Taken& t : taken) {
      if (t.phase == phase) min_ms = std::min(min_ms, client.Decode(t.id).value().unix_ms);
    }
    return min_ms;
  }
  testing::RunResult Resume() {
    return RunCommand(
        {testing::kSnowflakectlPath, "--runtime-dir", harness_.runtime_dir().string(), "resume"});
  }
  // Waits until `phase` has at least `count` IDs (or 10 s).
  static ::testing::AssertionResult WaitForTakes(const Taker& taker, int phase, size_t count) {
    return testing::WaitUntil([&] { return taker.CountInPhase(phase) >= count; }, 10s,
                              std::to_string(count) + " IDs in phase " + std::to_string(phase));
  }

  DaemonHarness harness_{"clock"};
};

TEST_F(DaemonClockTest, SmallStepBackPausesThenServesAgainByItself) {
  // Arrange
  Daemon daemon = harness_.Start(FakedOptions());
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  const uint64_t pauses_before = Client::Inspect(Clients())->clock_pauses;
  std::unique_ptr<Taker> taker = StartTaker();
  ASSERT_TRUE(taker);
  ASSERT_TRUE(WaitForTakes(*taker, 0, 2000)) << daemon.Describe();
  const size_t notified_before = daemon.notify().Messages().size();

  // Act: 30 ms back (below max_backward_ms, 100), while IDs flow. Not less: on a loaded
  // host the fill loop may not run at all within a few ms, and a step it never sees
  // while the clock is behind causes no pause to test.
  taker->SetPhase(1);
  SetClockOffset(offset_file(), "-0.030");
  auto paused = daemon.notify().WaitFor(
      [](const NotifyMessage& m) {
        auto status = m.Value("STATUS");
        return status && status->starts_with("paused");
      },
      10s, notified_before);
  auto serving_again = daemon.notify().WaitFor(
      [](const NotifyMessage& m) {
        auto status = m.Value("STATUS");
        return status && status->starts_with("serving");
      },
      10s, paused.value_or(notified_before) + 1);
  taker->SetPhase(2);
  const ::testing::AssertionResult took_after = WaitForTakes(*taker, 2, 2000);
  taker->Stop();
  auto status = Client::Inspect(Clients());

  // Assert
  const auto taken = taker->taken();
  ASSERT_TRUE(paused) << "no STATUS=paused after a 30 ms step back: " << daemon.Describe();
  EXPECT_NE(daemon.notify().Messages()[*paused].text.find("clock moved back"), std::string::npos)
      << daemon.notify().Messages()[*paused].text;
  ASSERT_TRUE(serving_again) << "did not serve again by itself: " << daemon.Describe();
  EXPECT_TRUE(took_after) << daemon.Describe();
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "serving");
  EXPECT_GT(status->clock_pauses, pauses_before);
  const PhaseCheck check = CheckIncreasing(taken);
  EXPECT_TRUE(check.increasing) << check.problem;
  // The issue: "no ID at or below the mark"; docs/design.md §6: paused "until the clock
  // passes the mark". An ID in the mark's own millisecond (a later sequence) would still
  // be unique; this checks the stricter, millisecond reading the issue asks for.
  EXPECT_GT(MinMs(taker->client(), taken, 2), MaxMs(taker->client(), taken, 0))
      << "an ID taken after the pause ended carries the millisecond of an ID taken before "
         "the step (the daemon served again when the clock reached the mark, not passed "
         "it): last before "
      << Describe(taker->client(), LastOfPhase(taken, 0)) << ", first after "
      << Describe(taker->client(), FirstOfPhase(taken, 2));
  std::cout << "30 ms step: " << taker->errors() << " takes refused during the pause\n";
}

TEST_F(DaemonClockTest, LargeStepBackStaysOutOfServiceUntilResume) {
  // Arrange
  Daemon daemon = harness_.Start(FakedOptions());
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  std::unique_ptr<Taker> taker = StartTaker();
  ASSERT_TRUE(taker);
  ASSERT_TRUE(WaitForTakes(*taker, 0, 2000)) << daemon.Describe();

  // Act 1: 10 s back.
  taker->SetPhase(1);
  SetClockOffset(offset_file(), "-10");
  auto out = WaitForState(harness_.runtime_dir(), "out_of_service", 10s);
  // Act 2: the clock is right again, but only an operator may bring it back.
  taker->SetPhase(2);
  SetClockOffset(offset_file(), "+0");
  // The subject: nothing but an operator may end out-of-service, so the test holds the
  // corrected clock for 1.5 s (hundreds of fill passes) and sees that nothing did; no
  // event marks "did not change".
  std::this_thread::sleep_for(1500ms);
  auto still_out = Client::Inspect(Clients());
  taker->SetPhase(3);
  auto resume = Resume();
  auto serving = WaitForState(harness_.runtime_dir(), "serving", 10s);
  taker->SetPhase(4);
  const ::testing::AssertionResult took_after = WaitForTakes(*taker, 4, 2000);
  taker->Stop();

  // Assert
  const auto taken = taker->taken();
  ASSERT_TRUE(out && out->state == "out_of_service")
      << "not out of service after a 10 s step back: " << daemon.Describe();
  EXPECT_EQ(out->reason, "clock_step_too_large");
  ASSERT_TRUE(still_out);
  EXPECT_EQ(still_out->state, "out_of_service") << "left out-of-service without a resume";
  EXPECT_EQ(taker->CountInPhase(2), 0u) << "IDs handed out while out of service";
  EXPECT_TRUE(resume.status.ExitedWith(0)) << resume.out << resume.err;
  ASSERT_TRUE(serving && serving->state == "serving") << daemon.Describe();
  EXPECT_TRUE(took_after) << daemon.Describe();
  const PhaseCheck check = CheckIncreasing(taken);
  EXPECT_TRUE(check.increasing) << check.problem;
  EXPECT_GT(MinMs(taker->client(), taken, 4), MaxMs(taker->client(), taken, 0));
}

TEST_F(DaemonClockTest, ResumeWhileTheClockIsStillBehindNeverIssuesAtOrBelowTheMark) {
  Daemon daemon = harness_.Start(FakedOptions());
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  std::unique_ptr<Taker> taker = StartTaker();
  ASSERT_TRUE(taker);
  ASSERT_TRUE(WaitForTakes(*taker, 0, 2000)) << daemon.Describe();

  taker->SetPhase(1);
  SetClockOffset(offset_file(), "-10");
  auto out = WaitForState(harness_.runtime_dir(), "out_of_service", 10s);
  taker->SetPhase(2);
  auto resume = Resume();  // the operator did not fix the clock
  // The resume is acted on: out of service becomes paused (it must not become serving).
  auto waiting = WaitForState(harness_.runtime_dir(), "paused", 10s);
  taker->SetPhase(3);
  SetClockOffset(offset_file(), "+0");
  auto serving = WaitForState(harness_.runtime_dir(), "serving", 10s);
  taker->SetPhase(4);
  const ::testing::AssertionResult took_after = WaitForTakes(*taker, 4, 2000);
  taker->Stop();

  const auto taken = taker->taken();
  ASSERT_TRUE(out && out->state == "out_of_service") << daemon.Describe();
  EXPECT_TRUE(resume.status.ExitedWith(0)) << resume.out << resume.err;
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "paused") << "a resume with the clock 10 s behind must wait";
  EXPECT_EQ(taker->CountInPhase(2), 0u) << "IDs issued with the clock behind the mark";
  ASSERT_TRUE(serving && serving->state == "serving") << daemon.Describe();
  EXPECT_TRUE(took_after) << daemon.Describe();
  const PhaseCheck check = CheckIncreasing(taken);
  EXPECT_TRUE(check.increasing) << check.problem;
  EXPECT_GT(MinMs(taker->client(), taken, 4), MaxMs(taker->client(), taken, 0));
}

// A first daemon issues IDs with the real clock and is stopped; the next one starts with
// its clock an hour behind the persisted reservation.
class DaemonClockBehindAtStart : public DaemonClockTest,
                                 public ::testing::WithParamInterface<bool /*reboot*/> {};

TEST_P(DaemonClockBehindAtStart, RefusesToServe) {
  // Arrange
  const bool reboot = GetParam();
  {
    Daemon first = harness_.Start(FakedOptions());
    ASSERT_TRUE(first.ready()) << first.Describe();
    auto client = Client::Open("clock-test", Clients());
    ASSERT_TRUE(client) << client.error().message;
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(client->Next());
    if (reboot) {
      first.Kill();
    } else {
      ASSERT_TRUE(first.Stop());
    }
  }
  if (reboot) std::filesystem::remove_all(harness_.runtime_dir());
  SetClockOffset(offset_file(), "-3600");

  // Act
  Daemon sut = Daemon::Spawn(FakedOptions());
  auto out = WaitForState(harness_.runtime_dir(), "out_of_service", 20s);
  const uint64_t published_at_start = out ? out->published_total : 0;
  auto client = Client::Open("clock-test", Clients());
  auto refused = client ? client->Next() : tl::make_unexpected(client.error());
  // The subject: a refusing daemon publishes nothing over time; no event marks that.
  std::this_thread::sleep_for(1s);
  auto later = Client::Inspect(Clients());
  auto resume = Resume();  // the clock is still an hour behind
  // The resume is acted on: the daemon now waits for the clock (paused), still refusing.
  auto waiting = WaitForState(harness_.runtime_dir(), "paused", 10s);
  auto after_resume = client ? client->Next() : tl::make_unexpected(client.error());
  auto final_status = Client::Inspect(Clients());

  // Assert
  ASSERT_TRUE(out && out->state == "out_of_service")
      << "started an hour behind its reservation and did not refuse: " << sut.Describe();
  EXPECT_EQ(out->reason, "behind_high_water");
  EXPECT_TRUE(sut.ready()) << "docs/daemon.md: READY=1 also when out of service";
  ASSERT_FALSE(refused) << "issued " << *refused << " an hour behind its reservation";
  EXPECT_EQ(refused.error().code, ClientError::kDaemonOutOfService) << refused.error().message;
  ASSERT_TRUE(later);
  EXPECT_EQ(later->state, "out_of_service");
  EXPECT_EQ(later->published_total, published_at_start) << "published IDs while refusing";
  EXPECT_TRUE(resume.status.ExitedWith(0)) << resume.out << resume.err;
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "paused") << "the resume was not acted on: " << sut.Describe();
  ASSERT_FALSE(after_resume) << "issued " << *after_resume << " below its reservation";
  ASSERT_TRUE(final_status);
  EXPECT_EQ(final_status->published_total, published_at_start);
  EXPECT_NE(final_status->state, "serving");
}

INSTANTIATE_TEST_SUITE_P(RestartAndReboot, DaemonClockBehindAtStart, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "AfterSigkillAndReboot" : "AfterCleanStop";
                         });

}  // namespace
}  // namespace snowflake
