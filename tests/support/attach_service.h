// A control socket serving "attach" for a segment a test made itself with RingProducer:
// the daemon's own ControlServer and StatusBoard, on <runtime_dir>/control.sock, handing
// out the producer's consumer region, so a Client (or protocol::AttachConsumer) takes
// from a test's segment exactly as from a daemon's. Header only: its users link
// snowflake::daemon_core.

#ifndef SNOWFLAKE_TESTS_SUPPORT_ATTACH_SERVICE_H_
#define SNOWFLAKE_TESTS_SUPPORT_ATTACH_SERVICE_H_

#include <filesystem>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "daemon/control/control_server.h"
#include "daemon/control/status_board.h"
#include "snowflake/clock.h"
#include "snowflake/ring_producer.h"
#include "snowflake/unique_fd.h"

namespace snowflake::testing {

class AttachService {
 public:
  // What to hand out: a descriptor of the consumer region and its segment id. Called on
  // the server's thread.
  using Source = std::function<std::pair<UniqueFd, uint64_t>()>;

  AttachService(const std::filesystem::path& runtime_dir, Source source)
      : board_(Clock::Real()),
        server_(daemon::ControlServerOptions{.socket_path =
                                                 runtime_dir / daemon::kControlSocketFileName},
                board_) {
    board_.SetAttachSource([source = std::move(source)] {
      auto [region, segment_id] = source();
      return daemon::StatusBoard::AttachPoint{std::move(region), segment_id};
    });
    if (auto started = server_.Start(); !started) {
      throw std::runtime_error("cannot serve attach in " + runtime_dir.string() + ": " +
                               started.error());
    }
  }

  // Serves `producer`, which must outlive the service and stay where it is (a test that
  // replaces it uses Serve() under its own lock instead).
  AttachService(const std::filesystem::path& runtime_dir, const shm::RingProducer& producer)
      : AttachService(runtime_dir, [&producer] {
          return std::pair{producer.ConsumerDescriptor(), producer.segment_id()};
        }) {}

  ~AttachService() {
    server_.Stop();
    board_.SetAttachSource({});
  }
  AttachService(const AttachService&) = delete;
  AttachService& operator=(const AttachService&) = delete;

 private:
  daemon::StatusBoard board_;
  daemon::ControlServer server_;
};

// A producer a test may replace (a restart in-process) while an AttachService serves it:
// the service reads it under the lock the test takes to replace it.
class ServedProducer {
 public:
  explicit ServedProducer(shm::RingProducer producer) : producer_(std::move(producer)) {}
  AttachService::Source Source() {
    return [this] {
      std::lock_guard lock(mutex_);
      return std::pair{producer_.ConsumerDescriptor(), producer_.segment_id()};
    };
  }
  // Replaces the producer (the old one is destroyed under the lock).
  void Replace(shm::RingProducer producer) {
    std::lock_guard lock(mutex_);
    producer_ = std::move(producer);
  }
  shm::RingProducer& get() { return producer_; }

 private:
  std::mutex mutex_;
  shm::RingProducer producer_;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_ATTACH_SERVICE_H_
