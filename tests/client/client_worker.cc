// client_worker: a client process for the multi-process tests.
//
//   client_worker take RUNTIME_DIR BATON_FILE OUT_PREFIX THREADS TAKES
//     Opens one Client ("worker"); THREADS threads each take TAKES IDs (even threads with
//     Next, odd ones with NextBatch) and record them with the baton of
//     tests/support/id_checker.h, which lives in BATON_FILE (8 bytes, shared by every
//     process). Writes OUT_PREFIX.<thread> (TakeRecords). Exit 0, or 1 with the error.
//   client_worker probe RUNTIME_DIR [UID GID]
//     Drops to UID/GID if given, opens a Client and takes one ID; prints
//     "<error name or ok>\n<message>\n". Exit 0.
//   client_worker storm RUNTIME_DIR READY_FIFO GO_FILE
//     Writes one byte to READY_FIFO, waits until GO_FILE exists (every worker of a storm
//     then starts at once), opens a Client ("storm") and takes one ID (waiting out a pause
//     for the daemon's reservation); prints it. Exit 0, or 1 with the error on stderr.

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "id_checker.h"
#include "snowflake/client.h"

namespace {

using snowflake::testing::TakeRecord;

int Take(char** argv) {
  const std::filesystem::path runtime_dir = argv[2];
  const std::string baton_file = argv[3];
  const std::string out_prefix = argv[4];
  const int threads = std::atoi(argv[5]);
  const size_t takes = std::strtoull(argv[6], nullptr, 10);

  const int fd = open(baton_file.c_str(), O_RDWR);
  if (fd < 0) {
    std::perror("open baton");
    return 1;
  }
  void* mapping = mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapping == MAP_FAILED) {
    std::perror("mmap baton");
    return 1;
  }
  auto& baton = *static_cast<std::atomic<uint64_t>*>(mapping);

  snowflake::ClientOptions options;
  options.runtime_dir = runtime_dir;
  options.wait_timeout = std::chrono::seconds(10);
  options.max_heartbeat_age = std::chrono::seconds(10);
  auto client = snowflake::Client::Open("worker", options);
  if (!client) {
    std::fprintf(stderr, "open: %s\n", client.error().message.c_str());
    return 1;
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<TakeRecord> mine;
      mine.reserve(takes);
      uint64_t batch[16];
      while (mine.size() < takes) {
        const uint64_t before = baton.load(std::memory_order_seq_cst);
        if (t % 2 == 0) {
          auto id = client->Next();
          if (!id) {
            std::fprintf(stderr, "next: %s\n", id.error().message.c_str());
            failures.fetch_add(1);
            break;
          }
          mine.push_back({*id, before});
          snowflake::testing::RaiseBaton(baton, *id);
        } else {
          auto n = client->NextBatch(batch);
          if (!n) {
            std::fprintf(stderr, "next_batch: %s\n", n.error().message.c_str());
            failures.fetch_add(1);
            break;
          }
          for (size_t i = 0; i < *n; ++i) mine.push_back({batch[i], before});
          snowflake::testing::RaiseBaton(baton, batch[*n - 1]);
        }
      }
      std::ofstream out(out_prefix + "." + std::to_string(t), std::ios::binary);
      out.write(reinterpret_cast<const char*>(mine.data()),
                static_cast<std::streamsize>(mine.size() * sizeof(TakeRecord)));
    });
  }
  for (auto& worker : workers) worker.join();
  return failures.load() == 0 ? 0 : 1;
}

int Probe(int argc, char** argv) {
  if (argc >= 5) {
    const gid_t gid = static_cast<gid_t>(std::atoi(argv[4]));
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 ||
        setuid(static_cast<uid_t>(std::atoi(argv[3]))) != 0) {
      std::perror("drop privileges");
      return 1;
    }
  }
  snowflake::ClientOptions options;
  options.runtime_dir = argv[2];
  auto client = snowflake::Client::Open("probe", options);
  if (!client) {
    std::printf("%s\n%s\n", std::string(snowflake::ClientErrorName(client.error().code)).c_str(),
                client.error().message.c_str());
    return 0;
  }
  auto id = client->Next();
  if (!id) {
    std::printf("%s\n%s\n", std::string(snowflake::ClientErrorName(id.error().code)).c_str(),
                id.error().message.c_str());
    return 0;
  }
  std::printf("ok\n%llu\n", static_cast<unsigned long long>(*id));
  return 0;
}

}  // namespace

int Storm(char** argv) {
  const int ready = open(argv[3], O_WRONLY | O_CLOEXEC);
  if (ready < 0 || write(ready, "r", 1) != 1) {
    std::fprintf(stderr, "storm: cannot report ready on %s\n", argv[3]);
    return 1;
  }
  close(ready);
  while (access(argv[4], F_OK) != 0) usleep(1000);
  snowflake::ClientOptions options;
  options.runtime_dir = argv[2];
  options.remotes_from_environment = false;
  // Hundreds of processes starting on 2 cores starve the daemon's heartbeat thread for
  // tens of milliseconds: that is the load, not a hung daemon (the tests' harness trusts
  // a heartbeat for 5 s too).
  options.max_heartbeat_age = std::chrono::seconds(5);
  options.wait_timeout = std::chrono::seconds(5);
  auto client = snowflake::Client::Open("storm", options);
  if (!client) {
    std::fprintf(stderr, "open: %s: %s\n",
                 std::string(snowflake::ClientErrorName(client.error().code)).c_str(),
                 client.error().message.c_str());
    return 1;
  }
  // The storm's takes may outrun the daemon's reservation on a loaded host: it pauses
  // until the next one is persisted (a client would fail over). The attach is what is
  // tested; the take waits out such a pause, for up to 30 s.
  auto id = client->Next();
  for (int i = 0; i < 3000 && !id && id.error().code == snowflake::ClientError::kDaemonPaused;
       ++i) {
    usleep(10'000);
    id = client->Next();
  }
  if (!id) {
    std::fprintf(stderr, "next: %s\n", id.error().message.c_str());
    return 1;
  }
  std::printf("%llu\n", static_cast<unsigned long long>(*id));
  return 0;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "storm" && argc == 5) return Storm(argv);
  if (mode == "take" && argc == 7) return Take(argv);
  if (mode == "probe" && (argc == 3 || argc == 5)) return Probe(argc, argv);
  std::fprintf(stderr,
               "usage: client_worker take RUNTIME_DIR BATON OUT_PREFIX THREADS TAKES\n"
               "       client_worker probe RUNTIME_DIR [UID GID]\n"
               "       client_worker storm RUNTIME_DIR READY_FIFO GO_FILE\n");
  return 2;
}
