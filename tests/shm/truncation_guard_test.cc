// The truncation guard (snowflake/truncation_guard.h): a process that installed it
// survives the truncation of a consumer file it has mapped, and no take succeeds on the
// memory that stands in for the lost pages. Each test runs in a child process (a death
// test): the guard installs a process-wide SIGBUS handler, and a test that fails may die
// of SIGBUS.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ring_test_util.h"
#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "snowflake/segment_layout.h"
#include "snowflake/truncation_guard.h"
#include "temp_dir.h"

namespace snowflake::shm {
namespace {

using snowflake::testing::TempDir;

constexpr uint64_t kCapacity = 1024;
constexpr uint64_t kFirstId = 1'000'000;

// In the child a gtest assertion cannot report: say what failed and exit 1.
void Require(bool condition, const std::string& what) {
  if (!condition) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
}

template <typename T>
T Opened(tl::expected<T, SegmentFailure> result, const char* what) {
  if (!result) Require(false, std::string(what) + ": " + result.error().message);
  return std::move(*result);
}

void ExitSeven(int) {
  static const char kMessage[] = "fallback: SIGBUS outside every guarded region\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  _exit(7);
}

// A serving producer with a full ring of kFirstId, kFirstId + 1, ... and a consumer of it.
struct Ring {
  explicit Ring(const std::filesystem::path& dir)
      : producer(Opened(RingProducer::CreateOrOpen(testing::OptionsFor(dir, kCapacity)),
                        "create the segment")),
        consumer(Opened(RingConsumer::Open(dir), "open the segment")) {
    producer.SetState(DaemonState::kServing);
    const auto ids = testing::Range(kFirstId, kCapacity);
    auto published = producer.Publish(ids);
    Require(published && *published == kCapacity, "publish a full ring");
  }
  RingProducer producer;
  RingConsumer consumer;
};

std::string ConsumerPath(const std::filesystem::path& dir) {
  return ConsumerFilePath((dir / kSegmentFileName).string());
}

void TruncateAndKeepTaking(const std::filesystem::path& dir) {
  Require(InstallTruncationGuard(ExitSeven), "install the guard");
  Ring ring(dir);
  uint64_t id = 0;
  Require(ring.consumer.TryTake(&id) && id == kFirstId, "a take before the truncation");

  Require(truncate(ConsumerPath(dir).c_str(), 0) == 0, "truncate the consumer file");
  const bool took = ring.consumer.TryTake(&id);
  const auto checked = ring.producer.CheckCounters();

  Require(!took, "a take after the truncation found the ring empty");
  Require(ring.consumer.head() == kTruncatedHead, "the stand-in head is kTruncatedHead");
  Require(!checked, "the producer's check fails");
  Require(checked.error().code == SegmentError::kTruncated,
          "the check says truncated, not " + std::string(SegmentErrorName(checked.error().code)));
  Require(checked.error().message.find("was truncated under the daemon") != std::string::npos &&
              checked.error().message.find(ConsumerPath(dir)) != std::string::npos,
          "the message names the file and the cause: " + checked.error().message);
  Require(TruncationsSurvived() == 2, "one replacement per mapping (the producer's and the "
                                      "consumer's), not " + std::to_string(TruncationsSurvived()));
  std::exit(0);
}

TEST(TruncationGuard, ATruncatedConsumerFileIsSurvivedAndNoTakeSucceedsAfterIt) {
  TempDir dir("snowflake-guard");
  EXPECT_EXIT(TruncateAndKeepTaking(dir.path()), ::testing::ExitedWithCode(0), "");
}

// Four threads take while the producer publishes and the file is truncated under them
// at a random moment: each faults, one replaces the region and the others wait for it;
// every ID taken is distinct and published (no take on a half-written stand-in), and the
// producer's next publish finds the truncation.
void TruncateUnderTakingThreads(const std::filesystem::path& dir, uint64_t seed) {
  Require(InstallTruncationGuard(ExitSeven), "install the guard");
  Ring ring(dir);
  std::mt19937_64 random(seed);
  constexpr int kThreads = 4;
  std::atomic<bool> go{false};
  std::atomic<bool> publishing{true};
  std::vector<std::vector<uint64_t>> taken(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      int empty_after_the_end = 0;
      while (empty_after_the_end < 1000) {
        uint64_t id = 0;
        if (ring.consumer.TryTake(&id)) {
          taken[t].push_back(id);
        } else if (!publishing.load()) {
          ++empty_after_the_end;
        }
      }
    });
  }
  uint64_t next = kFirstId + kCapacity;
  SegmentError stopped_by = SegmentError::kSystemError;
  std::string stop_message;
  std::thread producer([&] {
    std::vector<uint64_t> batch(64);
    for (;;) {
      for (uint64_t& id : batch) id = next++;
      auto published = ring.producer.Publish(batch);
      if (!published) {
        stopped_by = published.error().code;
        stop_message = published.error().message;
        break;
      }
      next -= batch.size() - *published;  // the unpublished rest goes again
    }
    publishing = false;
  });
  go = true;
  std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
  Require(truncate(ConsumerPath(dir).c_str(), 0) == 0, "truncate the consumer file");
  producer.join();
  for (auto& thread : threads) thread.join();

  std::set<uint64_t> distinct;
  for (const auto& ids : taken) {
    for (const uint64_t id : ids) {
      Require(id >= kFirstId && id < next, "an ID that was published");
      Require(distinct.insert(id).second, "ID " + std::to_string(id) + " taken twice");
    }
  }
  std::fprintf(stderr, "seed %llu: %zu taken before the truncation\n",
               static_cast<unsigned long long>(seed), distinct.size());
  Require(stopped_by == SegmentError::kTruncated,
          "the producer stopped on kTruncated, not " + std::string(SegmentErrorName(stopped_by)) +
              ": " + stop_message);
  Require(TruncationsSurvived() == 2, "one replacement per mapping, not " +
                                          std::to_string(TruncationsSurvived()));
  std::exit(0);
}

TEST(TruncationGuard, TakingThreadsSeeEveryIdOnceWhenTheFileIsTruncatedUnderThem) {
  const uint64_t base_seed = std::random_device{}();
  std::printf("seed %llu (rounds use seed + round)\n", static_cast<unsigned long long>(base_seed));
  for (uint64_t round = 0; round < 20; ++round) {
    TempDir dir("snowflake-guard");
    EXPECT_EXIT(TruncateUnderTakingThreads(dir.path(), base_seed + round),
                ::testing::ExitedWithCode(0), "")
        << "seed " << base_seed + round;
  }
}

// A SIGBUS outside every guarded region is not the guard's to survive: the fallback runs.
void FaultOutsideTheGuard(const std::filesystem::path& dir) {
  Require(InstallTruncationGuard(ExitSeven), "install the guard");
  Ring ring(dir);  // a guarded region exists, elsewhere
  const std::string other = (dir / "other").string();
  const int fd = open(other.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  Require(fd >= 0 && ftruncate(fd, 4096) == 0, "create another file");
  auto* page = static_cast<volatile uint64_t*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  Require(page != MAP_FAILED && ftruncate(fd, 0) == 0, "map and truncate it");
  [[maybe_unused]] const uint64_t value = *page;  // SIGBUS
  std::exit(0);
}

TEST(TruncationGuard, ASigbusOutsideEveryGuardedRegionGoesToTheFallback) {
  TempDir dir("snowflake-guard");
  EXPECT_EXIT(FaultOutsideTheGuard(dir.path()), ::testing::ExitedWithCode(7),
              "fallback: SIGBUS outside every guarded region");
}

// Without the guard (every client process: a library installs no signal handler) the
// same truncation ends the process; this is what the guard saves the daemon from.
void TruncateWithoutTheGuard(const std::filesystem::path& dir) {
  Ring ring(dir);
  Require(truncate(ConsumerPath(dir).c_str(), 0) == 0, "truncate the consumer file");
  uint64_t id = 0;
  [[maybe_unused]] const bool took = ring.consumer.TryTake(&id);
  std::exit(0);
}

TEST(TruncationGuard, WithoutTheGuardATruncationEndsTheProcess) {
  TempDir dir("snowflake-guard");
  // SIGBUS, or under AddressSanitizer its report and a non-zero exit.
  EXPECT_EXIT(TruncateWithoutTheGuard(dir.path()),
              [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }, "");
}

}  // namespace
}  // namespace snowflake::shm
