// test_producer RUNTIME_DIR [CAPACITY [LIVENESS_MS]]: a stand-in daemon for client tests.
// Creates a fresh segment (above one it finds), hands out its consumer region on
// RUNTIME_DIR/control.sock (the daemon's ControlServer), serves it with ServeUntil() and
// prints "serving" once it does.
// SIGTERM: drains, marks the segment stopped and exits 0, like snowflaked. SIGKILL and
// SIGSTOP give a dead or hung producer.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "attach_service.h"
#include "serve_loop.h"
#include "snowflake/ring_producer.h"

namespace {

std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void OnTerm(int) { stop_requested.store(true); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: test_producer RUNTIME_DIR [CAPACITY [LIVENESS_MS]]\n");
    return 2;
  }
  snowflake::shm::ProducerOptions options;
  options.runtime_dir = argv[1];
  options.capacity = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  options.epoch_unix_ms = snowflake::kDefaultEpochUnixMs;
  options.machine = 5;
  // A test about something else than liveness may give the heartbeat room, so a loaded
  // host's scheduler stall does not read as a hung producer (default: the daemon's 50 ms).
  if (argc > 3) options.liveness_ms = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  // It keeps its ring full and never drains old IDs (it is not the daemon): no freshness
  // bound in its header.
  options.bound_freshness = false;
  auto producer = snowflake::shm::RingProducer::CreateOrOpen(options);
  if (!producer) {
    std::fprintf(stderr, "test_producer: %s\n", producer.error().message.c_str());
    return 1;
  }
  std::signal(SIGTERM, OnTerm);
  std::optional<snowflake::testing::AttachService> attach;
  try {
    attach.emplace(options.runtime_dir, *producer);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_producer: %s\n", e.what());
    return 1;
  }
  producer->SetState(snowflake::shm::DaemonState::kServing);
  std::printf("serving\n");
  std::fflush(stdout);
  snowflake::testing::ServeUntil(*producer, stop_requested);
  producer->DrainAll();
  producer->SetState(snowflake::shm::DaemonState::kStopped, snowflake::shm::StateReason::kShutdown);
  return 0;
}
