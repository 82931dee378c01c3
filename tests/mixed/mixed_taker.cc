// mixed_taker: the C++ taker of the mixed-takers stress (bindings/go/mixed_test.go).
//
//   mixed_taker RUNTIME_DIR OUT_FILE COUNT SEED SERVICE
//
// Takes COUNT IDs with one Client of SERVICE, mixing Next() and NextBatch() of 1..1000
// (seeded), and appends them in the order taken to OUT_FILE (little-endian u64) at least
// every 1024 IDs, each time with a write(2) of its own, so a SIGKILL loses at most the
// unwritten tail (under 2024 IDs). With $SNOWFLAKE_MIXED_START_FILE set, it opens the
// Client and creates OUT_FILE, then waits (up to 60 s) for that file to exist before it
// takes: the driver starts every taker's takes at once, whatever its runtime's start-up.
// A daemon that cannot serve for a moment (two cores shared by the daemon and ten takers
// may delay its heartbeat past its liveness limit) is retried, as a service would, for
// 30000 retries of 1 ms or more. Destroys the Client (its service slot is retired with its
// final count), then exits 0; or 1 with the error, 2 on bad arguments.

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "snowflake/client.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: mixed_taker RUNTIME_DIR OUT_FILE COUNT SEED SERVICE\n");
    return 2;
  }
  snowflake::ClientOptions options;
  options.runtime_dir = argv[1];
  options.wait_timeout = std::chrono::seconds(10);
  options.remotes_from_environment = false;
  uint64_t count = 0;
  uint64_t seed = 0;
  for (auto [text, value] : {std::pair{argv[3], &count}, std::pair{argv[4], &seed}}) {
    const char* end = text + std::strlen(text);
    if (auto [ptr, ec] = std::from_chars(text, end, *value); ec != std::errc() || ptr != end) {
      std::fprintf(stderr,
                   "mixed_taker: COUNT and SEED must be unsigned decimal integers, not '%s'\n",
                   text);
      return 2;
    }
  }
  std::mt19937_64 rng(seed);
  auto client = snowflake::Client::Open(argv[5], options);
  if (!client) {
    std::fprintf(stderr, "open: %s\n", client.error().message.c_str());
    return 1;
  }
  const int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    std::perror(argv[2]);
    return 1;
  }
  if (const char* start = std::getenv("SNOWFLAKE_MIXED_START_FILE"); start != nullptr) {
    for (int waited_ms = 0; access(start, F_OK) != 0; ++waited_ms) {
      if (waited_ms == 60000) {
        std::fprintf(stderr, "no start file %s after 60 s\n", start);
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::vector<uint64_t> pending;
  std::vector<uint64_t> batch(1000);
  auto flush = [&] {
    const auto bytes = static_cast<ssize_t>(pending.size() * 8);
    if (write(out, pending.data(), static_cast<size_t>(bytes)) != bytes) std::exit(1);
    pending.clear();
  };
  int retries = 0;
  // A daemon that cannot serve now (fail over: here, wait for it) or is refilling (retry).
  auto unavailable = [&retries](const snowflake::Error& error) {
    const bool transient = snowflake::AnotherDaemonMayServe(error.code) ||
                           error.code == snowflake::ClientError::kRingEmpty;
    if (!transient || ++retries > 30000) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return true;
  };
  for (uint64_t taken = 0; taken < count;) {
    if (rng() % 2 == 0) {
      auto id = client->Next();
      if (!id && unavailable(id.error())) continue;
      if (!id) {
        std::fprintf(stderr, "next: %s\n", id.error().message.c_str());
        return 1;
      }
      pending.push_back(*id);
      taken += 1;
    } else {
      const auto want = static_cast<size_t>(std::min<uint64_t>(1 + rng() % 1000, count - taken));
      auto n = client->NextBatch(std::span<uint64_t>(batch.data(), want));
      if (!n && unavailable(n.error())) continue;
      if (!n) {
        std::fprintf(stderr, "next_batch: %s\n", n.error().message.c_str());
        return 1;
      }
      pending.insert(pending.end(), batch.begin(), batch.begin() + static_cast<ptrdiff_t>(*n));
      taken += *n;
    }
    if (pending.size() >= 1024) flush();
  }
  flush();
  return 0;
}
