// A whole Daemon (daemon/daemon.h) started and stopped inside the test's process: the
// production assembly and start/stop table with an injected clock, a file register in a
// temporary directory and a recording front, and IDs taken through the real client
// library (snowflake::Client) from the daemon's real segment.
//
// Properties: the IDs are unique and increasing and carry the injected clock's
// millisecond; the stages start in the table's order and stop in exactly its reverse,
// as observed from outside (the ring's state, the control socket's file and the state
// file at each step); the clean stop is recorded, and a second start on the same
// directories serves IDs above the first run's; a second daemon on the same directories
// is refused, and so is a start while a stop is requested during the register wait, each
// undoing exactly the stages it had started.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/control/control_server.h"
#include "daemon/daemon.h"
#include "daemon/instance_lock.h"
#include "fake_register.h"
#include "fault_file_system.h"
#include "manual_clock.h"
#include "protocol/control_client.h"
#include "protocol/vocabulary.h"
#include "register/file_register.h"
#include "snowflake/client.h"
#include "snowflake/id_layout.h"
#include "snowflake/segment_layout.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace snowflake::daemon {
namespace {

using namespace std::chrono_literals;
using snowflake::testing::AttemptUntil;
using snowflake::testing::FaultFileSystem;
using snowflake::testing::ManualClock;
using snowflake::testing::TempDir;
using snowflake::testing::WaitUntil;

const std::string kServing(vocab::StateCode(shm::DaemonState::kServing));
const std::string kStopped(vocab::StateCode(shm::DaemonState::kStopped));

// What the test saw at one step of the table, read from outside the daemon.
struct Observation {
  std::string stage;
  StageStep step;
  std::string ring_state;            // Client::Inspect()'s state; "" if unreadable
  bool control_socket = false;       // <runtime_dir>/control.sock exists
  bool clean_stop_recorded = false;  // the state file has last_issued_unix_ms_at_clean_stop
};

// The directories, parts and observations of daemons run on one runtime and state
// directory, one after another.
class Host {
 public:
  Host() {
    config_.daemon.runtime_dir = root_ / "run";
    config_.daemon.state_dir = root_ / "state";
    config_.machine_register.holder_id = "in-process-test";
    // The client refuses an ID more than max_age_ms + liveness_ms behind the real clock:
    // a minute lets the injected clock stand still for as long as the test takes.
    config_.ring.max_age_ms = 60'000;
  }

  const Config& config() const { return config_; }
  ManualClock& clock() { return clock_; }
  FaultFileSystem& file_system() { return file_system_; }
  ClientOptions client_options() const {
    ClientOptions options;
    options.runtime_dir = config_.daemon.runtime_dir;
    options.wait_timeout = 10s;
    return options;
  }

  // The parts: the fake clock, the fsync-counting file system, a file register in the
  // temporary directory (its own host-wide locks), a front that notes the ring's state
  // when it stops, and an observer of every step. `make_register` replaces the register.
  DaemonParts Parts(DaemonParts::RegisterFactory make_register = {}) {
    if (!make_register) {
      make_register = [this](const Config& config) -> std::unique_ptr<reg::MachineRegister> {
        return std::make_unique<reg::FileRegister>(reg::FileRegisterOptions{
            .path = config.RegisterPath(), .host_lock_dir = root_ / "host-locks"});
      };
    }
    return DaemonParts{
        .clock = clock_,
        .file_system = file_system_,
        .make_register = std::move(make_register),
        .make_fronts = [this](const FrontContext&)
            -> tl::expected<std::vector<std::unique_ptr<Front>>, std::string> {
          std::vector<std::unique_ptr<Front>> fronts;
          fronts.push_back(std::make_unique<RecordingFront>(*this));
          return fronts;
        },
        .observer = [this](std::string_view stage, StageStep step) { Observe(stage, step); },
        .host_lock_dir = root_ / "host-locks",
    };
  }

  // Every observation since the last call.
  std::vector<Observation> TakeObservations() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(observations_, {});
  }
  // The ring's state each time a front stopped.
  std::vector<std::string> front_stops() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return front_stops_;
  }

  // The state file's last_issued_unix_ms_at_clean_stop (nullopt: null or no file). Read
  // without the store's lock, which the running daemon holds.
  std::optional<int64_t> CleanStopInStateFile() const {
    std::ifstream in(config_.HighWaterPath());
    if (!in) return std::nullopt;
    const auto state = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!state.is_object()) return std::nullopt;
    const auto it = state.find("last_issued_unix_ms_at_clean_stop");
    if (it == state.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  }

 private:
  class RecordingFront final : public Front {
   public:
    explicit RecordingFront(Host& host) : host_(host) {}
    tl::expected<void, std::string> Start() noexcept override { return {}; }
    FrontStatus Status() const override {
      return FrontStatus{.name = "recording",
                         .listen = {"nowhere:0"},
                         .connections = 0,
                         .requests = 7,
                         .refused = 0};
    }
    void Stop() noexcept override {
      if (stopped_) return;
      stopped_ = true;
      const std::string state = host_.RingState();
      const std::lock_guard<std::mutex> lock(host_.mutex_);
      host_.front_stops_.push_back(state);
    }

   private:
    Host& host_;
    bool stopped_ = false;
  };

  std::string RingState() const {
    auto status = Client::Inspect(client_options());
    return status ? status->state : "";
  }

  void Observe(std::string_view stage, StageStep step) {
    Observation seen{.stage = std::string(stage),
                     .step = step,
                     .ring_state = RingState(),
                     .control_socket = std::filesystem::exists(config_.daemon.runtime_dir /
                                                               kControlSocketFileName),
                     .clean_stop_recorded = CleanStopInStateFile().has_value()};
    const std::lock_guard<std::mutex> lock(mutex_);
    observations_.push_back(std::move(seen));
  }

  TempDir root_{"daemon-in-process"};
  Config config_;
  // Standing still at the real time of the test's start: every ID of a run carries it.
  ManualClock clock_{std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count()};
  FaultFileSystem file_system_;
  std::mutex mutex_;
  std::vector<Observation> observations_;  // guarded by mutex_
  std::vector<std::string> front_stops_;   // guarded by mutex_
};

std::vector<std::string> Stages(const std::vector<Observation>& seen, StageStep step) {
  std::vector<std::string> stages;
  for (const Observation& o : seen) {
    if (o.step == step) stages.push_back(o.stage);
  }
  return stages;
}

const Observation* Find(const std::vector<Observation>& seen, std::string_view stage,
                        StageStep step) {
  for (const Observation& o : seen) {
    if (o.stage == stage && o.step == step) return &o;
  }
  return nullptr;
}

int64_t MillisecondOf(uint64_t id, const Config& config) {
  return config.id.epoch_unix_ms + IdLayout().OffsetMsOf(id);
}

// Waits until the ring says it serves (the loop's first pass): a client is told
// "starting" at once, not made to wait. Fails if it never does (the deadline only ends a
// test that would hang; nothing is asserted about how long it took).
::testing::AssertionResult AwaitServing(const Host& host) {
  return WaitUntil(
      [&] {
        auto status = Client::Inspect(host.client_options());
        return status && status->state == kServing;
      },
      30s, "the segment to say serving", 1ms);
}

// Starts `daemon`, serves it on a thread, takes `count` IDs through a Client, stops it.
// Returns the IDs; `status` gets Stop()'s exit status.
std::vector<uint64_t> ServeAndTake(Daemon& daemon, const Host& host, size_t count, int& status) {
  std::vector<uint64_t> ids;
  auto started = daemon.Start();
  EXPECT_TRUE(started) << started.error().message;
  if (!started) return ids;
  std::thread serving([&daemon] { daemon.Serve(); });
  EXPECT_TRUE(AwaitServing(host)) << "the daemon never served";
  {
    auto client = Client::Open("in-process", host.client_options());
    EXPECT_TRUE(client) << client.error().message;
    while (client && ids.size() < count) {
      auto id = client->Next();
      EXPECT_TRUE(id) << id.error().message;
      if (!id) break;
      ids.push_back(*id);
    }
  }
  daemon.RequestStop("the test");
  serving.join();
  status = daemon.Stop();
  return ids;
}

TEST(InProcessDaemon, ServesStopsInTheTablesReverseOrderAndRestartsAboveItsIds) {
  Host host;
  std::vector<std::string> names;
  std::vector<uint64_t> first;
  int status = -1;
  {
    Daemon daemon(host.config(), host.Parts());
    names = daemon.stage_names();
    first = ServeAndTake(daemon, host, 1000, status);
  }
  ASSERT_EQ(first.size(), 1000u);
  EXPECT_EQ(status, kExitOk);
  const int64_t t0 = host.clock().NowUnixMs();
  for (size_t i = 0; i < first.size(); ++i) {
    if (i > 0) {
      ASSERT_GT(first[i], first[i - 1]) << "IDs not increasing at " << i;
    }
    // The injected clock, not the system's, numbers the IDs.
    ASSERT_EQ(MillisecondOf(first[i], host.config()), t0) << "ID " << i;
  }

  // The stages started in the table's order and stopped in exactly its reverse.
  const std::vector<Observation> seen = host.TakeObservations();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(Stages(seen, StageStep::kStarted), names);
  std::vector<std::string> reversed(names.rbegin(), names.rend());
  EXPECT_EQ(Stages(seen, StageStep::kStopped), reversed);
  EXPECT_TRUE(Stages(seen, StageStep::kFailed).empty());

  // What each stop did, seen from outside: the front stopped while the ring still served
  // (its callers fail over while this ring stands behind every answer); the ring stopped
  // before the control socket closed; the clean stop was recorded only once the
  // reservation thread had ended, after every stop above it.
  EXPECT_EQ(host.front_stops(), std::vector<std::string>{kServing});
  const Observation* front = Find(seen, "front", StageStep::kStopped);
  const Observation* serving = Find(seen, "serving", StageStep::kStopped);
  const Observation* control = Find(seen, "control socket", StageStep::kStopped);
  ASSERT_TRUE(front && serving && control);
  EXPECT_EQ(front->ring_state, kServing);
  EXPECT_EQ(serving->ring_state, kStopped);
  EXPECT_TRUE(serving->control_socket) << "the control socket closed before the ring stopped";
  EXPECT_FALSE(control->control_socket);
  bool recorded = false;
  for (const Observation& o : seen) {
    if (o.step != StageStep::kStopped) continue;
    if (o.stage == "reservations") {
      EXPECT_TRUE(o.clean_stop_recorded) << "the reservations stage did not record it";
      recorded = true;
    } else {
      EXPECT_EQ(o.clean_stop_recorded, recorded) << "the clean stop, seen after " << o.stage;
    }
  }
  // The state file went through the injected file system.
  EXPECT_GT(host.file_system().fsyncs(), 0);

  // The clean stop records the newest millisecond that may carry an ID: every taken one.
  const std::optional<int64_t> clean_stop = host.CleanStopInStateFile();
  ASSERT_TRUE(clean_stop.has_value());
  EXPECT_EQ(*clean_stop, t0);

  // A second start on the same directories, a millisecond later.
  host.clock().Tick(1);
  std::vector<uint64_t> second;
  {
    Daemon daemon(host.config(), host.Parts());
    second = ServeAndTake(daemon, host, 100, status);
  }
  ASSERT_EQ(second.size(), 100u);
  EXPECT_EQ(status, kExitOk);
  EXPECT_GT(second.front(), first.back()) << "the restart served an ID of the first run's";
  EXPECT_TRUE(std::is_sorted(second.begin(), second.end()) &&
              std::adjacent_find(second.begin(), second.end()) == second.end());
  EXPECT_EQ(MillisecondOf(second.back(), host.config()), t0 + 1);
  EXPECT_EQ(host.CleanStopInStateFile(), t0 + 1);
}

// The value of one sample ("name{label=\"value\"}") in a text exposition; nullopt if the
// exposition has no such line.
std::optional<double> SampleValue(const std::string& exposition, const std::string& sample) {
  const std::string line_start = sample + " ";
  for (size_t at = 0; at < exposition.size();) {
    const size_t end = std::min(exposition.find('\n', at), exposition.size());
    if (exposition.compare(at, line_start.size(), line_start) == 0) {
      return std::stod(exposition.substr(at + line_start.size(), end - at - line_start.size()));
    }
    at = end + 1;
  }
  return std::nullopt;
}

TEST(InProcessDaemon, AnOperatorsFenceEmptiesTheRingPausesUntilTheClockPassesItAndIsAcknowledged) {
  // Arrange: a serving daemon whose register an operator fences 5 s ahead of its clock.
  Host host;
  snowflake::testing::FakeRegister* reg = nullptr;
  Daemon daemon(host.config(), host.Parts([&reg](const Config&) {
    auto made = std::make_unique<snowflake::testing::FakeRegister>();
    reg = made.get();
    return made;
  }));
  ASSERT_TRUE(daemon.Start());
  std::thread serving([&daemon] { daemon.Serve(); });
  const auto stop = [&] {
    daemon.RequestStop("the test");
    serving.join();
    return daemon.Stop();
  };
  const ::testing::AssertionResult served = AwaitServing(host);
  auto client = Client::Open("fenced", host.client_options());
  if (!served || !client || !client->Next()) {
    stop();
    FAIL() << "the daemon never served";
  }
  const int64_t t0 = host.clock().NowUnixMs();
  const int64_t fence = t0 + 5000;

  // Act
  reg->Fence(fence);
  const ::testing::AssertionResult paused = WaitUntil(
      [&] {
        auto status = Client::Inspect(host.client_options());
        return status && status->reason == "fenced";
      },
      30s, "the segment to say fenced", 1ms);
  auto while_fenced = client->Next();
  // What the control socket says the daemon waits for (snowflakectl status, /v1/status).
  // The daemon writes its record just after the segment's state (two stores, not one):
  // the fence seen in the segment may not be in the record yet, so wait for it there too.
  auto fenced_status = AttemptUntil(
      [&] { return protocol::QueryStatus(host.config().daemon.runtime_dir, 2s); },
      [](const auto& status) { return status && status->reason_code == "fenced"; }, 30s, 1ms);
  const std::string fenced_scrape = daemon.metrics().Scrape();
  const ::testing::AssertionResult acknowledged = WaitUntil(
      [&] { return reg->acknowledged() == fence; }, 30s, "the fence's acknowledgment", 1ms);
  // Time passes (wall and steady clock alike) until the clock passes the fence.
  host.clock().Tick(fence + 1 - host.clock().NowUnixMs());
  const ::testing::AssertionResult serves_again = AwaitServing(host);
  auto after = client->Next();
  const std::string after_scrape = daemon.metrics().Scrape();
  const int status = stop();

  // Assert: nothing at or below the fence was handed out once the daemon knew of it, not
  // even what its ring held; the fence was acknowledged; it serves above the fence.
  EXPECT_TRUE(paused) << "the daemon never reported the fence";
  ASSERT_FALSE(while_fenced) << "took ID of ms " << MillisecondOf(*while_fenced, host.config())
                             << " while fenced at " << fence;
  EXPECT_EQ(while_fenced.error().code, ClientError::kDaemonPaused) << while_fenced.error().message;
  EXPECT_NE(while_fenced.error().message.find("waiting for the clock to pass"), std::string::npos)
      << while_fenced.error().message;
  EXPECT_NE(while_fenced.error().message.find("an operator's fence"), std::string::npos)
      << while_fenced.error().message;
  ASSERT_TRUE(fenced_status) << fenced_status.error().message;
  ASSERT_TRUE(fenced_status->clock_wait.has_value());
  EXPECT_EQ(fenced_status->clock_wait->until_unix_ms, fence);
  EXPECT_EQ(fenced_status->clock_wait->set_by, "fence");
  EXPECT_GT(fenced_status->clock_wait->clock_passes_in_ms, 0);
  // The fence explains the pause: nothing beyond its cause; the time paused is counted
  // under its reason.
  EXPECT_EQ(SampleValue(fenced_scrape, "snowflake_pause_beyond_cause_seconds"), 0.0)
      << fenced_scrape;
  EXPECT_GT(
      SampleValue(after_scrape, "snowflake_paused_seconds_total{reason=\"fenced\"}").value_or(0),
      0.0)
      << after_scrape;
  EXPECT_TRUE(acknowledged);
  EXPECT_TRUE(serves_again);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(MillisecondOf(*after, host.config()), fence + 1);
  EXPECT_EQ(status, kExitOk);
  // The clean stop records no less than the fence (the register is gone with the daemon:
  // the state file holds the same value).
  EXPECT_GE(host.CleanStopInStateFile().value_or(0), fence);
}

TEST(InProcessDaemon, MetricsAreFilledWithoutAnyNetworkFront) {
  // The host's parts have no HTTP front: the registry is the daemon's own all the same.
  Host host;
  Daemon daemon(host.config(), host.Parts());
  // Declared before anything started: the families exist, with nothing read yet.
  const std::string before = daemon.metrics().Scrape();
  EXPECT_EQ(SampleValue(before, "snowflake_reservation_renewals_total{result=\"ok\"}"), 0.0)
      << before;
  EXPECT_EQ(SampleValue(before, "snowflake_state{state=\"serving\"}"), std::nullopt) << before;

  ASSERT_TRUE(daemon.Start());
  std::thread serving([&daemon] { daemon.Serve(); });
  ASSERT_TRUE(AwaitServing(host));
  {
    auto client = Client::Open("metered", host.client_options());
    ASSERT_TRUE(client) << client.error().message;
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(client->Next());
  }
  // The first renewal runs on the reservation thread as the daemon starts; wait for it to
  // be reported (the deadline only ends a test that would hang).
  const std::string scraped =
      AttemptUntil([&] { return daemon.metrics().Scrape(); },
                   [](const std::string& text) {
                     return SampleValue(text, "snowflake_reservation_renewals_total{result=\"ok\"}")
                                .value_or(0) >= 1;
                   },
                   30s);
  EXPECT_GE(SampleValue(scraped, "snowflake_reservation_renewals_total{result=\"ok\"}").value_or(0),
            1.0)
      << scraped;
  EXPECT_GE(SampleValue(scraped, "snowflake_reservation_duration_seconds_count").value_or(0), 1.0)
      << scraped;
  EXPECT_GE(SampleValue(scraped, "snowflake_register_call_duration_seconds_count").value_or(0), 1.0)
      << scraped;
  EXPECT_EQ(SampleValue(scraped, "snowflake_register_claim{state=\"held\"}"), 1.0) << scraped;
  EXPECT_EQ(SampleValue(scraped, "snowflake_register_claim{state=\"lost\"}"), 0.0) << scraped;
  // The fill loop's figures, read at the scrape from the board and the segment.
  EXPECT_EQ(SampleValue(scraped, "snowflake_state{state=\"serving\"}"), 1.0) << scraped;
  EXPECT_EQ(SampleValue(scraped, "snowflake_state{state=\"paused\"}"), 0.0) << scraped;
  EXPECT_GE(SampleValue(scraped, "snowflake_ring_ids_total{kind=\"published\"}").value_or(0), 100.0)
      << scraped;
  EXPECT_EQ(SampleValue(scraped, "snowflake_ring_ids{kind=\"capacity\"}"),
            static_cast<double>(host.config().ring.capacity))
      << scraped;
  EXPECT_GE(SampleValue(scraped, "snowflake_heartbeats_total").value_or(0), 1.0) << scraped;
  // No front reported anything.
  EXPECT_EQ(SampleValue(scraped, "snowflake_http_connections"), 0.0) << scraped;
  daemon.RequestStop("the test");
  serving.join();
  EXPECT_EQ(daemon.Stop(), kExitOk);
  // Stopped: the board is gone, and a scrape no longer reads it (nor crashes).
  const std::string after = daemon.metrics().Scrape();
  EXPECT_GE(SampleValue(after, "snowflake_reservation_renewals_total{result=\"ok\"}").value_or(0),
            1.0);
}

TEST(InProcessDaemon, ASecondDaemonOnTheSameDirectoriesIsRefusedAndUndoesItsStart) {
  Host host;
  Daemon first(host.config(), host.Parts());
  ASSERT_TRUE(first.Start());
  std::thread serving([&first] { first.Serve(); });
  ASSERT_TRUE(AwaitServing(host)) << "the first daemon never served";
  host.TakeObservations();

  Daemon second(host.config(), host.Parts());
  auto refused = second.Start();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().exit_status, kExitUsage) << refused.error().message;
  const std::vector<Observation> seen = host.TakeObservations();
  EXPECT_EQ(Stages(seen, StageStep::kStarted), std::vector<std::string>{"directories"});
  EXPECT_EQ(Stages(seen, StageStep::kFailed), std::vector<std::string>{"instance lock"});
  EXPECT_EQ(Stages(seen, StageStep::kStopped), std::vector<std::string>{"directories"});
  EXPECT_EQ(second.Stop(), kExitOk);  // nothing is started: a no-op

  // The first one serves on, untouched.
  auto client = Client::Open("in-process", host.client_options());
  ASSERT_TRUE(client) << client.error().message;
  auto id = client->Next();
  EXPECT_TRUE(id) << id.error().message;
  first.RequestStop();
  serving.join();
  EXPECT_EQ(first.Stop(), kExitOk);
  EXPECT_TRUE(host.CleanStopInStateFile().has_value());
}

// A register whose servers never answer (an etcd cluster without quorum).
class UnreachableRegister final : public reg::MachineRegister {
 public:
  explicit UnreachableRegister(std::atomic<int>& attempts) : attempts_(attempts) {}
  tl::expected<reg::MachineClaim, reg::RegisterError> Claim(
      const reg::ClaimRequest&) noexcept override {
    attempts_.fetch_add(1);
    return tl::unexpected(
        reg::RegisterError{reg::RegisterErrorCode::kUnreachable, "nobody answers"});
  }
  tl::expected<void, reg::RegisterError> UpdateHighWater(int64_t) noexcept override {
    return tl::unexpected(reg::RegisterError{reg::RegisterErrorCode::kNotClaimed, "not claimed"});
  }
  tl::expected<void, reg::RegisterError> RecordCleanStop(int64_t) noexcept override {
    return tl::unexpected(reg::RegisterError{reg::RegisterErrorCode::kNotClaimed, "not claimed"});
  }
  std::string_view backend_name() const noexcept override { return "unreachable"; }
  std::string location() const override { return "nowhere"; }

 private:
  std::atomic<int>& attempts_;
};

TEST(InProcessDaemon, AStopRequestedWhileWaitingForTheRegisterEndsTheStartWithStatusZero) {
  Host host;
  std::atomic<int> attempts{0};
  Daemon daemon(host.config(), host.Parts([&attempts](const Config&) {
    return std::make_unique<UnreachableRegister>(attempts);
  }));
  // Asked from another thread once the start has waited through a retry.
  std::thread stopper([&] {
    EXPECT_TRUE(WaitUntil([&] { return attempts.load() >= 2; }, 30s,
                          "the start to try the register twice", 1ms));
    daemon.RequestStop("the test's request");
  });
  auto started = daemon.Start();
  stopper.join();

  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().exit_status, kExitOk);
  EXPECT_EQ(started.error().message,
            "the test's request received while waiting for the register: stopping");
  const std::vector<Observation> seen = host.TakeObservations();
  const std::vector<std::string> before{"directories", "instance lock", "state file"};
  EXPECT_EQ(Stages(seen, StageStep::kStarted), before);
  EXPECT_EQ(Stages(seen, StageStep::kFailed), std::vector<std::string>{"register"});
  EXPECT_EQ(Stages(seen, StageStep::kStopped),
            std::vector<std::string>(before.rbegin(), before.rend()));
  // Nothing is left held: another daemon may take the runtime directory at once.
  EXPECT_TRUE(AcquireInstanceLock(host.config().daemon.runtime_dir));
}

}  // namespace
}  // namespace snowflake::daemon
