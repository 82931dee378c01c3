// libFuzzer target: segment validation (shm/segment.cc). A fuzzed ring file is written
// where a daemon's segment would be, beside a fuzzed consumer region (a memfd, as attach
// hands one over, with fuzzed bytes, size and seals, or something that is no memfd at
// all), then opened as a client does (RingConsumer::Open with the region, then a few
// takes; RingConsumer::Observe, the ring file alone) and as the daemon does on restart
// (RingProducer::CreateOrOpen, which maps the old ring file alone and serves a fresh
// segment above it, or refuses it and then retires it).
// Input: byte 0 picks the sizes, the region's kind and seals, and whether the region gets
// the header's segment id (see below); the next 4096 bytes are the header page, the next
// up to 4096 the start of the region, the rest the start of the slots. The rest of the
// ring file and the region is zeros (sparse), so a few KB describe a whole segment.
// Properties: a segment that validates can be taken from without reading outside the
// mapping; a region that is not a memfd sealed with exactly kConsumerRegionSeals at
// kConsumerRegionSize is never accepted; an observer takes nothing; a fresh segment the
// producer made opens with its region; nothing crashes, hangs or leaks.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
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
#include "snowflake/segment_error.h"
#include "snowflake/segment_layout.h"
#include "snowflake/unique_fd.h"

namespace {

using namespace snowflake::shm;
using snowflake::UniqueFd;

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

// What stands in for the region the daemon would hand over.
enum class RegionKind {
  kSealed,       // a memfd sealed with exactly kConsumerRegionSeals
  kUnsealed,     // a sealable memfd without seals
  kShrinkOnly,   // sealed against shrinking alone
  kSealsOpen,    // shrink|grow, but further seals still possible
  kWriteSealed,  // kConsumerRegionSeals and F_SEAL_WRITE
  kNotSealable,  // a memfd made without MFD_ALLOW_SEALING
  kPipe,         // not a file at all
};

RegionKind KindOf(uint8_t mode) {
  // Sealed exactly for 0 (the seed corpus's byte 0) and 7; every other kind is refused.
  constexpr RegionKind kKinds[8] = {
      RegionKind::kSealed,    RegionKind::kUnsealed,    RegionKind::kShrinkOnly,
      RegionKind::kSealsOpen, RegionKind::kWriteSealed, RegionKind::kNotSealable,
      RegionKind::kPipe,      RegionKind::kSealed,
  };
  return kKinds[(mode & 0x7f) / 18 % 8];
}

// A region of `kind`, `size` bytes, starting with `bytes` (and the segment id at its
// offset when `segment_id` is set). For kPipe, the read end of a pipe (*keep holds the
// write end).
UniqueFd MakeRegion(RegionKind kind, uint64_t size, const uint8_t* bytes, size_t byte_count,
                    const uint64_t* segment_id, UniqueFd* keep) {
  if (kind == RegionKind::kPipe) {
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) __builtin_trap();
    keep->reset(ends[1]);
    return UniqueFd(ends[0]);
  }
  const unsigned flags =
      kind == RegionKind::kNotSealable ? MFD_CLOEXEC : MFD_CLOEXEC | MFD_ALLOW_SEALING;
  UniqueFd fd(memfd_create("fuzz-region", flags));
  if (!fd || ftruncate(fd.get(), static_cast<off_t>(size)) != 0) __builtin_trap();
  WriteAt(fd.get(), bytes, std::min<uint64_t>(byte_count, size), 0);
  if (segment_id != nullptr && size >= offsetof(ConsumerRegion, segment_id) + sizeof(uint64_t)) {
    WriteAt(fd.get(), reinterpret_cast<const uint8_t*>(segment_id), sizeof(uint64_t),
            offsetof(ConsumerRegion, segment_id));
  }
  const int exact = static_cast<int>(kConsumerRegionSeals);
  int seals = 0;
  switch (kind) {
    case RegionKind::kSealed:
      seals = exact;
      break;
    case RegionKind::kShrinkOnly:
      seals = F_SEAL_SHRINK;
      break;
    case RegionKind::kSealsOpen:
      seals = F_SEAL_SHRINK | F_SEAL_GROW;
      break;
    case RegionKind::kWriteSealed:
      seals = exact | F_SEAL_WRITE;
      break;
    default:
      break;
  }
  if (seals != 0 && fcntl(fd.get(), F_ADD_SEALS, seals) != 0) __builtin_trap();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t size_mode = data[0];
  ++data;
  --size;
  const std::filesystem::path path = RuntimeDir() / std::string(kSegmentFileName);
  unlink(path.c_str());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) __builtin_trap();

  // The ring file's size the header's capacity asks for (when plausible), then bent by
  // size_mode % 6; the region's by (size_mode / 6) % 3; the region's kind by
  // (size_mode & 0x7f) / 18 (KindOf).
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
  // Exact, a page short, a page too long.
  const uint64_t region_sizes[3] = {kConsumerRegionSize, kConsumerRegionSize - kPageSize,
                                    kConsumerRegionSize + kPageSize};
  const uint64_t region_size = region_sizes[(size_mode / 6) % 3];
  const RegionKind kind = KindOf(size_mode);
  if (ftruncate(fd, static_cast<off_t>(file_size)) != 0) __builtin_trap();
  const size_t header_bytes = std::min<size_t>(size, kPageSize);
  const size_t region_bytes = std::min<size_t>(size - header_bytes, kPageSize);
  const size_t slot_bytes = size - header_bytes - region_bytes;
  WriteAt(fd, data, std::min<uint64_t>(header_bytes, file_size), 0);
  if (file_size > kSlotsOffset) {
    WriteAt(fd, data + header_bytes + region_bytes,
            std::min<uint64_t>(slot_bytes, file_size - kSlotsOffset), kSlotsOffset);
  }
  close(fd);
  // Mostly a matching pair (else nearly every input stops at kUnpaired): the region gets
  // the header's segment id unless the top bit of byte 0 is set.
  const uint64_t header_segment_id = Load64(data, size, offsetof(SegmentHeader, segment_id));
  UniqueFd pipe_write_end;
  UniqueFd region =
      MakeRegion(kind, region_size, data + header_bytes, region_bytes,
                 (size_mode & 0x80) == 0 ? &header_segment_id : nullptr, &pipe_write_end);
  const bool acceptable_region = kind == RegionKind::kSealed && region_size == kConsumerRegionSize;

  // As a client: open with the region, then take a few IDs (never waiting: TryTake only).
  ConsumerOptions options;
  options.expected_owner = geteuid();
  {
    auto consumer = RingConsumer::Open(RuntimeDir(), std::move(region), options);
    if (consumer) {
      if (!acceptable_region || !consumer->has_region()) __builtin_trap();
      uint64_t id = 0;
      for (int i = 0; i < 4 && consumer->TryTake(&id); ++i) {
      }
      uint64_t batch[8];
      (void)consumer->TryTakeBatch(batch, 8);
      (void)consumer->CheckProducer(std::chrono::milliseconds(50), snowflake::Clock::Real());
    } else if (consumer.error().message.empty()) {
      __builtin_trap();
    }
  }
  // As a client whose daemon does not answer: the ring file alone, from which no take
  // succeeds.
  {
    auto observer = RingConsumer::Observe(RuntimeDir(), options);
    if (observer) {
      uint64_t id = 0;
      uint64_t batch[8];
      TakeResult result = TakeResult::kTaken;
      if (observer->has_region() || observer->TryTake(&id) ||
          observer->TryTakeBatch(batch, 8) != 0 ||
          observer->TryTakeFresh(&id) == TakeResult::kTaken ||
          observer->TryTakeBatchFresh(batch, 8, &result) != 0) {
        __builtin_trap();
      }
      (void)observer->CheckProducer(std::chrono::milliseconds(50), snowflake::Clock::Real());
      (void)observer->status_text();
    } else if (observer.error().message.empty()) {
      __builtin_trap();
    }
  }

  // As the daemon on restart: serve a fresh segment above it (same machine, epoch and
  // capacity as the file says), or, refused, retire it and start over.
  {
    ProducerOptions producer_options;
    producer_options.runtime_dir = RuntimeDir();
    producer_options.capacity = plausible ? capacity : 1;
    producer_options.epoch_unix_ms =
        static_cast<int64_t>(Load64(data, size, offsetof(SegmentHeader, epoch_unix_ms)));
    producer_options.machine =
        static_cast<uint32_t>(Load64(data, size, offsetof(SegmentHeader, machine)));
    producer_options.mode = 0600;
    auto producer = RingProducer::CreateOrOpen(producer_options);
    if (producer) {
      (void)producer->CheckCounters();
      (void)producer->last_published_id();
      (void)producer->size();
      producer->ForEachService([](const ServiceCount&) {});
      // What it serves, a client opens with the region it hands out.
      auto consumer = RingConsumer::Open(RuntimeDir(), producer->ConsumerDescriptor(), options);
      if (!consumer) __builtin_trap();
    } else if (producer.error().message.empty()) {
      __builtin_trap();
    } else if (IsDamagedSegmentError(producer.error().code)) {
      RingProducer::Retire(RuntimeDir());
    }
  }
  unlink(path.c_str());
  return 0;
}
