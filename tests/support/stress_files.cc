#include "stress_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>

namespace snowflake::testing {

void* MapSharedFile(const std::string& path, size_t size, bool create) {
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

std::optional<StressRecorder> StressRecorder::Open(const std::string& control_path,
                                                   const std::string& record_path) {
  auto* control = static_cast<StressControl*>(
      MapSharedFile(control_path, sizeof(StressControl), /*create=*/false));
  auto* header =
      static_cast<RecordFileHeader*>(MapSharedFile(record_path, kRecordFileSize, /*create=*/true));
  if (control == nullptr || header == nullptr) return std::nullopt;
  header->capacity = kRecordsPerFile;
  return StressRecorder(control, header);
}

void StressRecorder::Commit(std::span<const uint64_t> ids, uint64_t baton_before) {
  assert(!ids.empty() && !Full(ids.size()));
  auto* records = reinterpret_cast<TakeRecord*>(header_ + 1);
  for (size_t i = 0; i < ids.size(); ++i) records[count_ + i] = TakeRecord{ids[i], baton_before};
  count_ += ids.size();
  // Release: the records above are in the file before the count that commits them.
  header_->count.store(count_, std::memory_order_release);
  RaiseBaton(control_->baton, ids.back());
}

std::vector<TakeRecord> ReadCommittedRecords(const std::string& path) {
  void* address = MapSharedFile(path, kRecordFileSize, /*create=*/false);
  if (address == nullptr) return {};  // the process died before creating it
  const auto* header = static_cast<const RecordFileHeader*>(address);
  const uint64_t count = std::min(header->count.load(std::memory_order_acquire), kRecordsPerFile);
  const auto* records = reinterpret_cast<const TakeRecord*>(header + 1);
  std::vector<TakeRecord> copy(records, records + count);
  munmap(address, kRecordFileSize);
  return copy;
}

uint64_t CommittedCount(const std::string& path) {
  void* address = MapSharedFile(path, sizeof(RecordFileHeader), /*create=*/false);
  if (address == nullptr) return 0;
  const uint64_t count =
      static_cast<const RecordFileHeader*>(address)->count.load(std::memory_order_acquire);
  munmap(address, sizeof(RecordFileHeader));
  return count;
}

}  // namespace snowflake::testing
