// mixed_taker: the C++ taker of the mixed-takers stress (bindings/go/mixed_test.go).
//
//   mixed_taker RUNTIME_DIR OUT_FILE COUNT SEED
//
// Takes COUNT IDs with one Client ("mixed"), mixing Next() and NextBatch() of 1..1000
// (seeded), and appends them in the order taken to OUT_FILE (little-endian u64) at least
// every 1024 IDs, so a SIGKILL loses at most the unwritten tail. A daemon that cannot
// serve for a moment (two cores shared by the daemon and six takers may delay its
// heartbeat past its liveness limit) is retried, as a service would, for up to 30 s in
// all. Exit 0, or 1 with the error.

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "snowflake/client.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: mixed_taker RUNTIME_DIR OUT_FILE COUNT SEED\n");
    return 2;
  }
  snowflake::ClientOptions options;
  options.runtime_dir = argv[1];
  options.wait_timeout = std::chrono::seconds(10);
  options.remotes_from_environment = false;
  const size_t count = std::strtoull(argv[3], nullptr, 10);
  std::mt19937_64 rng(std::strtoull(argv[4], nullptr, 10));
  auto client = snowflake::Client::Open("mixed", options);
  if (!client) {
    std::fprintf(stderr, "open: %s\n", client.error().message.c_str());
    return 1;
  }
  const int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return 1;
  std::vector<uint64_t> pending;
  std::vector<uint64_t> batch(1000);
  auto flush = [&] {
    const auto bytes = static_cast<ssize_t>(pending.size() * 8);
    if (write(out, pending.data(), static_cast<size_t>(bytes)) != bytes) std::exit(1);
    pending.clear();
  };
  int retries = 0;
  auto unavailable = [&retries](const snowflake::Error& error) {
    if (!snowflake::AnotherDaemonMayServe(error.code) || ++retries > 30000) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return true;
  };
  for (size_t taken = 0; taken < count;) {
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
      const size_t want = std::min<size_t>(1 + rng() % 1000, count - taken);
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
