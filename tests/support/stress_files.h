// The files a multi-process stress test shares between its driver (the gtest binary) and
// its helper processes: tests/shm/ring_process_test (ring_stress_producer,
// ring_stress_consumer) and tests/daemon/daemon_kill_stress_test (daemon_stress_worker).
// Each is a MAP_SHARED mapping of a regular file, so what a process wrote survives its
// SIGKILL: the pages belong to the kernel's page cache, not to the process.
//
// The write side (StressRecorder, in a helper) and the read side (ReadCommittedRecords,
// CommittedCount, in the driver) live together because they are one protocol: a record
// counts once `count` covers it.
//
// Thread-safety: a StressRecorder is used by one thread of one process; the driver reads
// the files of processes that are dead or stopped (CommittedCount also of live ones).

#ifndef SNOWFLAKE_TESTS_SUPPORT_STRESS_FILES_H_
#define SNOWFLAKE_TESTS_SUPPORT_STRESS_FILES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "id_checker.h"

namespace snowflake::testing {

// One per run: the real-time baton, the stop flag, and what the ring stress's helpers
// count for the driver's accounting.
struct StressControl {
  std::atomic<uint64_t> baton;  // largest ID whose take (and record) completed
  alignas(64) std::atomic<uint32_t> stop;  // set by the driver: helpers exit 0
  alignas(64) std::atomic<uint64_t> drained;       // IDs a producer drained (never handed out)
  // IDs producers published, summed over every segment (a restart serves a fresh one):
  // each producer adds a publish's count right after it.
  alignas(64) std::atomic<uint64_t> published;
  alignas(64) std::atomic<uint64_t> stale_fronts;  // takes refused as stale (nothing taken)
};

// One per consumer process incarnation. A record is committed by storing `count` (release)
// after writing it; the driver reads the file after the process died and ignores only the
// uncommitted tail.
struct RecordFileHeader {
  std::atomic<uint64_t> count;
  uint64_t capacity;
  uint64_t reserved[6];
};
static_assert(sizeof(RecordFileHeader) == 64,
              "one cache line: the records after it stay 8-byte aligned and off the count's line");

inline constexpr uint64_t kRecordsPerFile = uint64_t{4} << 20;
inline constexpr size_t kRecordFileSize =
    sizeof(RecordFileHeader) + kRecordsPerFile * sizeof(TakeRecord);

// Maps `size` bytes of `path` shared, creating and sizing the file if `create`. Returns
// nullptr on failure (errno set).
void* MapSharedFile(const std::string& path, size_t size, bool create);

// Consumer exit codes the driver understands.
inline constexpr int kConsumerStopped = 0;     // the driver asked it to stop
inline constexpr int kConsumerFileFull = 10;   // its record file is full: respawn it
inline constexpr int kHelperSetupFailed = 20;  // bad arguments, cannot map, cannot open ring

// A helper process's side: the run's control file and the record file it creates. The
// mappings last until the process exits.
class StressRecorder {
 public:
  // Maps the existing control file and creates the record file. nullopt on failure
  // (errno set): the helper should exit kHelperSetupFailed.
  static std::optional<StressRecorder> Open(const std::string& control_path,
                                            const std::string& record_path);

  StressControl& control() const { return *control_; }
  // True if `max_batch` more records might not fit: the helper exits kConsumerFileFull.
  bool Full(size_t max_batch) const { return count_ + max_batch > kRecordsPerFile; }
  // Records `ids` (taken in this order, each after reading `baton_before` from the baton),
  // commits them, then raises the baton: a take that sees the raised baton began after
  // these records were durable. REQUIRES: !ids.empty(), !Full(ids.size()).
  void Commit(std::span<const uint64_t> ids, uint64_t baton_before);

 private:
  StressRecorder(StressControl* control, RecordFileHeader* header)
      : control_(control), header_(header) {}

  StressControl* control_;
  RecordFileHeader* header_;
  uint64_t count_ = 0;  // committed so far; only this process writes header_->count
};

// The committed records of a file whose writer is dead or stopped; none if the writer
// died before it created the file.
std::vector<TakeRecord> ReadCommittedRecords(const std::string& path);

// How many records of `path` are committed (0 if there is no such file yet).
uint64_t CommittedCount(const std::string& path);

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_STRESS_FILES_H_
