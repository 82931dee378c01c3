// libFuzzer target: segment validation (shm/segment.cc). A fuzzed pair of files (the ring
// file and its consumer file) is written where a daemon's segment would be, then opened as
// a client does (RingConsumer::Open, then a few takes) and as the daemon does on restart
// (RingProducer::CreateOrOpen, which reopens or retires it).
// Input: byte 0 picks the files' sizes and whether the consumer file gets the header's
// segment id (see below); the next 4096 bytes are the header page, the next up to 4096 the
// start of the consumer file, the rest the start of the slots. The rest of each file is
// zeros (sparse), so a few KB describe a whole segment.
// Property: a segment that validates can be taken from without reading outside the
// mapping, and IDs taken from it are the slots' values; nothing crashes, hangs or leaks.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "snowflake/ring_consumer.h"
#include "snowflake/ring_producer.h"
#include "snowflake/segment_layout.h"

namespace {

using namespace snowflake::shm;

const std::filesystem::path& RuntimeDir() {
  static const std::filesystem::path dir = [] {
    char pattern[] = "/tmp/snowflake-segment-fuzz.XXXXXX";
    if (mkdtemp(pattern) == nullptr) __builtin_trap();
    return std::filesystem::path(pattern);
  }();
  return dir;
}

void WriteAt(int fd, const uint8_t* data, size_t size, uint64_t offset) {
  if (size != 0 && pwrite(fd, data, size, static_cast<off_t>(offset)) != static_cast<ssize_t>(size)) {
    __builtin_trap();
  }
}

uint64_t Load64(const uint8_t* data, size_t size, size_t offset) {
  uint64_t value = 0;
  if (offset + sizeof(value) <= size) std::memcpy(&value, data + offset, sizeof(value));
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t size_mode = data[0];
  ++data;
  --size;
  const std::filesystem::path path = RuntimeDir() / std::string(kSegmentFileName);
  const std::string consumer_path = ConsumerFilePath(path.string());
  unlink(path.c_str());
  unlink(consumer_path.c_str());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const int consumer_fd = open(consumer_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || consumer_fd < 0) __builtin_trap();

  // The ring file's size the header's capacity asks for (when plausible), then bent by
  // size_mode % 6; the consumer file's by (size_mode / 6) % 3.
  const uint64_t capacity = Load64(data, size, offsetof(SegmentHeader, capacity));
  const bool plausible = capacity != 0 && capacity <= kMaxCapacity && (capacity & (capacity - 1)) == 0;
  uint64_t file_size = plausible ? SegmentSizeFor(capacity) : SegmentSizeFor(1);
  switch (size_mode % 6) {
    case 0: break;                                        // exact
    case 1: file_size -= 8; break;                        // one slot short
    case 2: file_size += kPageSize; break;                // a page too long
    case 3: file_size = kSlotsOffset - 1; break;          // shorter than the header
    case 4: file_size = std::min<uint64_t>(size, 8192); break;  // inside the header
    case 5: file_size = SegmentSizeFor(2); break;         // another capacity's size
  }
  uint64_t consumer_size = kConsumerFileSize;
  switch ((size_mode / 6) % 3) {
    case 0: break;                                        // exact
    case 1: consumer_size -= kPageSize; break;            // a page short
    case 2: consumer_size += kPageSize; break;            // a page too long
  }
  if (ftruncate(fd, static_cast<off_t>(file_size)) != 0) __builtin_trap();
  if (ftruncate(consumer_fd, static_cast<off_t>(consumer_size)) != 0) __builtin_trap();
  const size_t header_bytes = std::min<size_t>(size, kPageSize);
  const size_t consumer_bytes = std::min<size_t>(size - header_bytes, kPageSize);
  const size_t slot_bytes = size - header_bytes - consumer_bytes;
  WriteAt(fd, data, std::min<uint64_t>(header_bytes, file_size), 0);
  WriteAt(consumer_fd, data + header_bytes, consumer_bytes, 0);
  if (file_size > kSlotsOffset) {
    WriteAt(fd, data + header_bytes + consumer_bytes,
            std::min<uint64_t>(slot_bytes, file_size - kSlotsOffset), kSlotsOffset);
  }
  // Mostly a matching pair (else nearly every input stops at kUnpaired): the consumer file
  // gets the header's segment id unless the top bit of byte 0 is set.
  if ((size_mode & 0x80) == 0) {
    const uint64_t segment_id = Load64(data, size, offsetof(SegmentHeader, segment_id));
    WriteAt(consumer_fd, reinterpret_cast<const uint8_t*>(&segment_id), sizeof(segment_id),
            offsetof(ConsumerRegion, segment_id));
  }
  close(fd);
  close(consumer_fd);

  // As a client: open, then take a few IDs (never waiting: TryTake only).
  {
    ConsumerOptions options;
    options.expected_owner = geteuid();
    auto consumer = RingConsumer::Open(RuntimeDir(), options);
    if (consumer) {
      uint64_t id = 0;
      for (int i = 0; i < 4 && consumer->TryTake(&id); ++i) {
      }
      uint64_t batch[8];
      (void)consumer->TryTakeBatch(batch, 8);
      (void)consumer->CheckProducer(std::chrono::milliseconds(50));
    } else if (consumer.error().message.empty()) {
      __builtin_trap();
    }
  }

  // As the daemon on restart: reopen it (same machine, epoch and capacity as the file
  // says) or retire it and create a fresh one.
  {
    ProducerOptions options;
    options.runtime_dir = RuntimeDir();
    options.capacity = plausible ? capacity : 1;
    options.epoch_unix_ms = static_cast<int64_t>(Load64(data, size, offsetof(SegmentHeader, epoch_unix_ms)));
    options.machine = static_cast<uint32_t>(Load64(data, size, offsetof(SegmentHeader, machine)));
    options.mode = 0600;
    auto producer = RingProducer::CreateOrOpen(options);
    if (producer) {
      (void)producer->CheckCounters();
      (void)producer->last_published_id();
      (void)producer->size();
      producer->ForEachService([](const ServiceCount&) {});
    } else if (producer.error().message.empty()) {
      __builtin_trap();
    }
  }
  unlink(path.c_str());
  unlink(consumer_path.c_str());
  return 0;
}
