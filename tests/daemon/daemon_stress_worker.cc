// daemon_stress_worker: a client process for daemon_kill_stress_test and
// daemon_etcd_fleet_stress_test.
//
//   daemon_stress_worker RUNTIME_DIR CONTROL_FILE RECORD_FILE single|batch [PAUSE_US]
//
// Takes IDs from the real snowflaked through libsnowflake until the driver sets `stop` in
// CONTROL_FILE (tests/support/stress_files.h), recording each as {id, baton read before the
// take} into RECORD_FILE (a MAP_SHARED file: what it recorded survives anything) and
// committing it before raising the baton. While the daemon is being killed and restarted
// its takes fail with "dead", "stopped", "starting", ...: it waits a millisecond and
// retries, as a client that fails over and comes back would, and says on stderr why (when
// the reason changes, and every 5 s while it lasts). A runtime directory without
// a segment yet (a fleet daemon still waiting for a free number) is waited for the same
// way. PAUSE_US (default 20) is slept after each take: the pace of the run.
//
// Exit: 0 stopped by the driver; 10 the record file is full (the driver gives it a new
// one); 20 setup failed; 1 an error no restart explains (printed).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "snowflake/client.h"
#include "stress_files.h"

namespace {

namespace st = snowflake::testing;
using snowflake::ClientError;

// The daemon is between a SIGKILL and its restart, or restarting, or refilling: retry.
bool Transient(ClientError code) {
  switch (code) {
    case ClientError::kDaemonStarting:
    case ClientError::kDaemonPaused:
    case ClientError::kDaemonStopped:
    case ClientError::kDaemonNotHeartbeating:
    case ClientError::kDaemonDead:
    case ClientError::kTimedOut:
    case ClientError::kRingEmpty:
      return true;
    default:
      return false;
  }
}

constexpr uint64_t kMaxBatch = 8;

// Says on stderr why takes are failing, so a driver that finds this client stuck can show
// what it saw: when the reason changes, and every 5 s while it stays the same. Bounded: a
// run has a few hundred restarts at most.
class TransientLog {
 public:
  void Failed(const snowflake::Error& error) {
    const auto now = std::chrono::steady_clock::now();
    if (last_code_ == error.code && now - last_print_ < std::chrono::seconds(5)) return;
    const auto since_start =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count();
    std::fprintf(stderr, "%lld ms: retrying after: %s\n", static_cast<long long>(since_start),
                 error.message.c_str());
    last_code_ = error.code;
    last_print_ = now;
  }
  void Took() { last_code_.reset(); }

 private:
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_print_{};
  std::optional<ClientError> last_code_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr,
                 "usage: daemon_stress_worker RUNTIME_DIR CONTROL RECORDS single|batch "
                 "[PAUSE_US]\n");
    return st::kHelperSetupFailed;
  }
  const bool batches = std::string(argv[4]) == "batch";
  const auto pause =
      std::chrono::microseconds(argc == 6 ? std::strtoull(argv[5], nullptr, 10) : 20);
  auto recorder = st::StressRecorder::Open(argv[2], argv[3]);
  if (!recorder) {
    std::perror("map");
    return st::kHelperSetupFailed;
  }
  st::StressControl* control = &recorder->control();

  snowflake::ClientOptions options;
  options.runtime_dir = argv[1];
  options.wait_timeout = std::chrono::milliseconds(100);
  options.max_heartbeat_age = std::chrono::seconds(2);
  auto client = snowflake::Client::Open(batches ? "stress-batch" : "stress-single", options);
  // No segment yet: the daemon has not claimed a number so far. Wait for it, or the stop.
  while (!client && client.error().code == ClientError::kDaemonNotRunning &&
         control->stop.load(std::memory_order_acquire) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    client = snowflake::Client::Open(batches ? "stress-batch" : "stress-single", options);
  }
  if (!client && control->stop.load(std::memory_order_acquire) != 0) return st::kConsumerStopped;
  if (!client) {
    std::fprintf(stderr, "open: %s\n", client.error().message.c_str());
    return st::kHelperSetupFailed;
  }

  TransientLog transient;
  uint64_t batch[kMaxBatch];
  while (control->stop.load(std::memory_order_acquire) == 0) {
    if (recorder->Full(kMaxBatch)) return st::kConsumerFileFull;
    const uint64_t before = control->baton.load(std::memory_order_seq_cst);
    size_t taken = 0;
    if (batches) {
      auto n = client->NextBatch(batch);
      if (n) taken = *n;
      if (!n && !Transient(n.error().code)) {
        std::fprintf(stderr, "next_batch: %s\n", n.error().message.c_str());
        return 1;
      }
      if (!n) transient.Failed(n.error());
    } else {
      auto id = client->Next();
      if (id) {
        batch[0] = *id;
        taken = 1;
      } else if (!Transient(id.error().code)) {
        std::fprintf(stderr, "next: %s\n", id.error().message.c_str());
        return 1;
      } else {
        transient.Failed(id.error());
      }
    }
    if (taken == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    transient.Took();
    recorder->Commit(std::span<const uint64_t>(batch, taken), before);
    // A modest pace keeps the record files small; the kills, not the volume, are the test.
    std::this_thread::sleep_for(pause);
  }
  return st::kConsumerStopped;
}
