// The files the multi-process ring stress test shares between its driver (the gtest
// binary) and its helper processes (ring_stress_producer, ring_stress_consumer). Each is
// a MAP_SHARED mapping of a regular file, so what a process wrote survives its SIGKILL:
// the pages belong to the kernel's page cache, not to the process.

#ifndef SNOWFLAKE_TESTS_SHM_STRESS_FILES_H_
#define SNOWFLAKE_TESTS_SHM_STRESS_FILES_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "id_checker.h"

namespace snowflake::shm::testing {

// One per run: the real-time baton and the stop flag.
struct StressControl {
  std::atomic<uint64_t> baton;  // largest ID whose take (and record) completed
  alignas(64) std::atomic<uint32_t> stop;  // set by the driver: helpers exit 0
};

// One per consumer process incarnation. A record is committed by storing `count` (release)
// after writing it; the driver reads the file after the process died and ignores only the
// uncommitted tail.
struct RecordFileHeader {
  std::atomic<uint64_t> count;
  uint64_t capacity;
  uint64_t reserved[6];
};
static_assert(sizeof(RecordFileHeader) == 64);

inline constexpr uint64_t kRecordsPerFile = uint64_t{4} << 20;
inline constexpr size_t kRecordFileSize =
    sizeof(RecordFileHeader) + kRecordsPerFile * sizeof(snowflake::testing::TakeRecord);

// Maps `size` bytes of `path` shared, creating and sizing the file if `create`. Returns
// nullptr on failure (errno set).
inline void* MapSharedFile(const std::string& path, size_t size, bool create) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0600);
  if (fd < 0) return nullptr;
  if (create && ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return nullptr;
  }
  // A writer killed between creating and sizing its file leaves it short; touching a
  // mapping past the end would be SIGBUS.
  struct stat info {};
  if (!create && (fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) < size)) {
    close(fd);
    return nullptr;
  }
  void* address = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return address == MAP_FAILED ? nullptr : address;
}

// Consumer exit codes the driver understands.
inline constexpr int kConsumerStopped = 0;     // the driver asked it to stop
inline constexpr int kConsumerFileFull = 10;   // its record file is full: respawn it
inline constexpr int kHelperSetupFailed = 20;  // bad arguments, cannot map, cannot open ring

}  // namespace snowflake::shm::testing

#endif  // SNOWFLAKE_TESTS_SHM_STRESS_FILES_H_
