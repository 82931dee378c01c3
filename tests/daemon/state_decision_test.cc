// DecideState() as a table: every input that matters, and what is published.
#include "daemon/core/state_decision.h"
#include "daemon/core/state_words.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace snowflake::daemon {
namespace {

using shm::DaemonState;
using shm::StateReason;

struct Row {
  std::string what;
  StateInputs in;
  StateDecision want;
};

StateInputs Serving() {
  StateInputs in;
  in.filled_once = true;
  return in;
}

// Every row's inputs decide its state, reason and detail.
void ExpectDecisions(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    const StateDecision got = DecideState(row.in);
    EXPECT_EQ(got.state, row.want.state) << row.what;
    EXPECT_EQ(got.reason, row.want.reason) << row.what;
    EXPECT_EQ(got.detail, row.want.detail) << row.what;
  }
}

TEST(StateDecision, TableOfInputsAndDecisions) {
  std::vector<Row> rows;
  rows.push_back({"first start, nothing published", StateInputs{},
                  {DaemonState::kStarting, StateReason::kStarting, 0}});
  rows.push_back({"serving", Serving(), {DaemonState::kServing, StateReason::kNone, 0}});
  {
    StateInputs in = Serving();
    in.generator = GeneratorState::kPaused;
    in.step_ms = 5;
    in.ms_behind = 1;
    rows.push_back({"small step: the step's size, not the lag behind an old mark", in,
                    {DaemonState::kPaused, StateReason::kClockBehind, 5}});
  }
  {
    StateInputs in = Serving();
    in.generator = GeneratorState::kPaused;
    in.ms_behind = 4;
    rows.push_back({"lag without a measured step", in,
                    {DaemonState::kPaused, StateReason::kClockBehind, 4}});
  }
  {
    StateInputs in = Serving();
    in.generator = GeneratorState::kOutOfService;
    in.step_ms = 150;
    in.ms_behind = 150;
    rows.push_back({"large step", in, {DaemonState::kOutOfService, StateReason::kClockStepTooLarge, 150}});
  }
  {
    StateInputs in;
    in.generator = GeneratorState::kPaused;
    in.started_behind = true;
    in.ms_behind = 700;
    rows.push_back({"restart waiting out its reservation", in,
                    {DaemonState::kPaused, StateReason::kBehindHighWater, 700}});
  }
  {
    StateInputs in;
    in.generator = GeneratorState::kOutOfService;
    in.started_behind = true;
    in.ms_behind = 5000;
    rows.push_back({"start far behind the mark", in,
                    {DaemonState::kOutOfService, StateReason::kBehindHighWater, 5000}});
  }
  {
    StateInputs in = Serving();
    in.generator = GeneratorState::kPaused;
    in.fenced = true;
    in.ms_behind = 4000;
    in.step_ms = 7;
    rows.push_back({"paused behind an operator's fence", in,
                    {DaemonState::kPaused, StateReason::kFenced, 4000}});
  }
  {
    StateInputs in = Serving();
    in.generator = GeneratorState::kOutOfService;
    in.range_exhausted = true;
    rows.push_back({"range used up", in,
                    {DaemonState::kOutOfService, StateReason::kTimeRangeExhausted, 0}});
  }
  {
    StateInputs in = Serving();
    in.horizon_reached = true;
    in.reservation_failed = true;
    in.reservation_errno = 5;
    rows.push_back({"horizon reached, state file failing", in,
                    {DaemonState::kPaused, StateReason::kPersistenceFailed, 5}});
  }
  {
    StateInputs in = Serving();
    in.horizon_reached = true;
    rows.push_back({"horizon reached, renewal lagging", in,
                    {DaemonState::kPaused, StateReason::kPersistenceFailed, 0}});
  }
  {
    StateInputs in = Serving();
    in.reservation_failed = true;
    rows.push_back({"renewal failing but horizon still ahead: keep serving", in,
                    {DaemonState::kServing, StateReason::kNone, 0}});
  }
  {
    StateInputs in;
    in.horizon_reached = true;
    rows.push_back({"first renewal not yet confirmed at start", in,
                    {DaemonState::kStarting, StateReason::kStarting, 0}});
  }
  {
    StateInputs in;
    in.horizon_reached = true;
    in.reservation_failed = true;
    in.reservation_errno = 28;
    rows.push_back({"first renewal failing at start", in,
                    {DaemonState::kPaused, StateReason::kPersistenceFailed, 28}});
  }
  {
    StateInputs in = Serving();
    in.generator = GeneratorState::kPaused;
    in.step_ms = 3;
    in.horizon_reached = true;
    in.reservation_failed = true;
    rows.push_back({"clock trouble comes before store trouble", in,
                    {DaemonState::kPaused, StateReason::kClockBehind, 3}});
  }
  {
    StateInputs in = Serving();
    in.claim_lost = true;
    rows.push_back({"claim lost", in, {DaemonState::kStopped, StateReason::kShutdown, 0}});
  }
  {
    StateInputs in = Serving();
    in.stopping = true;
    rows.push_back({"stopping", in, {DaemonState::kStopped, StateReason::kShutdown, 0}});
  }
  ExpectDecisions(rows);
}

// The register that does not answer (etcd without quorum) is told apart from a store that
// failed: its own reason, with the time since which the daemon waits as the detail. A
// register that answered with an error, and the state file, stay persistence_failed.
TEST(StateDecision, AnUnansweredRegisterPausesAsRegisterUnreachableSinceTheWaitBegan) {
  std::vector<Row> rows;
  const int64_t since = 1'767'225'600'000;
  {
    StateInputs in = Serving();
    in.horizon_reached = true;
    in.reservation_failed = true;
    in.register_unanswered = true;
    in.waiting_since_unix_ms = since;
    rows.push_back({"register timed out", in,
                    {DaemonState::kPaused, StateReason::kRegisterUnreachable, since}});
  }
  {
    StateInputs in = Serving();
    in.horizon_reached = true;
    in.register_unanswered = true;
    in.waiting_since_unix_ms = since;
    rows.push_back({"register call still under way", in,
                    {DaemonState::kPaused, StateReason::kRegisterUnreachable, since}});
  }
  {
    StateInputs in = Serving();
    in.horizon_reached = true;
    in.reservation_failed = true;
    in.waiting_since_unix_ms = since;
    rows.push_back({"register refused, or the state file failed", in,
                    {DaemonState::kPaused, StateReason::kPersistenceFailed, 0}});
  }
  {
    StateInputs in = Serving();
    in.register_unanswered = true;
    in.waiting_since_unix_ms = since;
    rows.push_back({"register silent but the horizon still ahead: keep serving", in,
                    {DaemonState::kServing, StateReason::kNone, 0}});
  }
  {
    StateInputs in;
    in.horizon_reached = true;
    in.register_unanswered = true;
    rows.push_back({"first renewal under way at start: still starting", in,
                    {DaemonState::kStarting, StateReason::kStarting, 0}});
  }
  ExpectDecisions(rows);
}

// A failed renewal names its errno; one still in progress (a stalled disk) has none, and
// its words must not claim "errno 0".
TEST(StateWords, PersistenceReasonNamesErrnoOnlyWhenThereIsOne) {
  const std::string failed = DescribeReason(StateReason::kPersistenceFailed, 28, "state file: x");
  EXPECT_NE(failed.find("(errno 28: "), std::string::npos) << failed;
  EXPECT_NE(failed.find("(state file: x)"), std::string::npos) << failed;
  const std::string stalled =
      DescribeReason(StateReason::kPersistenceFailed, 0, "a renewal is in progress but slow");
  EXPECT_EQ(stalled.find("errno"), std::string::npos) << stalled;
  EXPECT_NE(stalled.find("not renewed yet"), std::string::npos) << stalled;
}

}  // namespace
}  // namespace snowflake::daemon
