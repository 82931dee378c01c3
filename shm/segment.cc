#include <fcntl.h>
#include <grp.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>

#include "mapped_segment.h"
#include "snowflake/account_names.h"
#include "snowflake/boot_id.h"
#include "snowflake/consumer_region.h"
#include "snowflake/id_layout.h"
#include "snowflake/segment_error.h"
#include "snowflake/segment_layout.h"

namespace snowflake::shm {

std::string_view SegmentErrorName(SegmentError error) noexcept {
  switch (error) {
    case SegmentError::kNotFound: return "not_found";
    case SegmentError::kPermissionDenied: return "permission_denied";
    case SegmentError::kNotRegularFile: return "not_regular_file";
    case SegmentError::kWrongOwner: return "wrong_owner";
    case SegmentError::kModeTooOpen: return "mode_too_open";
    case SegmentError::kTruncated: return "truncated";
    case SegmentError::kBadMagic: return "bad_magic";
    case SegmentError::kIncompatibleVersion: return "incompatible_version";
    case SegmentError::kSizeMismatch: return "size_mismatch";
    case SegmentError::kBadCapacity: return "bad_capacity";
    case SegmentError::kBadEpoch: return "bad_epoch";
    case SegmentError::kCorruptCounters: return "corrupt_counters";
    case SegmentError::kNotIncreasing: return "not_increasing";
    case SegmentError::kUnpaired: return "unpaired";
    case SegmentError::kUnsealed:
      return "unsealed";
    case SegmentError::kEarlierBoot: return "earlier_boot";
    case SegmentError::kSystemError: return "system_error";
  }
  return "unknown";
}

bool IsDamagedSegmentError(SegmentError error) noexcept {
  switch (error) {
    case SegmentError::kBadMagic:
    case SegmentError::kIncompatibleVersion:
    case SegmentError::kTruncated:
    case SegmentError::kSizeMismatch:
    case SegmentError::kBadCapacity:
    case SegmentError::kBadEpoch:
    case SegmentError::kCorruptCounters:
    case SegmentError::kUnpaired:
    case SegmentError::kEarlierBoot:
      return true;
    default:
      return false;
  }
}

std::string DescribeGroup(gid_t gid) {
  group entry{};
  group* found = nullptr;
  char buffer[4096];
  if (getgrgid_r(gid, &entry, buffer, sizeof(buffer), &found) == 0 && found != nullptr) {
    return "group '" + std::string(found->gr_name) + "' (gid " + std::to_string(gid) + ")";
  }
  return "gid " + std::to_string(gid);
}

namespace {

SegmentFailure Fail(SegmentError code, std::string message, int sys_errno = 0) {
  return SegmentFailure{code, std::move(message), sys_errno};
}

std::string ModeString(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Validates the identity line against the file's real size. Every value is read once
// (relaxed: the line is immutable once magic is visible, and magic was loaded acquire).
tl::expected<uint64_t, SegmentFailure> ValidateHeader(const SegmentHeader& header,
                                                      uint64_t file_size,
                                                      const std::string& path) {
  const uint64_t magic = header.magic.load(std::memory_order_acquire);
  if (magic != kMagic) {
    return tl::unexpected(Fail(
        SegmentError::kBadMagic,
        path + ": not a snowflake segment (magic " +
            (magic == 0 ? std::string("is zero: never initialised")
                        : "0x" + [&] {
                            char hex[17];
                            std::snprintf(hex, sizeof(hex), "%016llx",
                                          static_cast<unsigned long long>(magic));
                            return std::string(hex);
                          }()) +
            "); remove it and restart snowflaked"));
  }
  const uint32_t version = header.version.load(std::memory_order_relaxed);
  if (version != kVersion) {
    return tl::unexpected(Fail(SegmentError::kIncompatibleVersion,
                               path + ": segment format version " + std::to_string(version) +
                                   ", this build speaks version " + std::to_string(kVersion) +
                                   "; run a daemon and client library of the same release"));
  }
  if (header.header_size.load(std::memory_order_relaxed) != sizeof(SegmentHeader) ||
      header.slots_offset.load(std::memory_order_relaxed) != kSlotsOffset) {
    return tl::unexpected(Fail(SegmentError::kSizeMismatch,
                               path + ": header sizes or offsets differ from format version " +
                                   std::to_string(kVersion) + "; the file is corrupt"));
  }
  const uint64_t capacity = header.capacity.load(std::memory_order_relaxed);
  if (!IsPowerOfTwo(capacity) || capacity > kMaxCapacity) {
    return tl::unexpected(Fail(SegmentError::kBadCapacity,
                               path + ": capacity " + std::to_string(capacity) +
                                   " is not a power of two from 1 to " +
                                   std::to_string(kMaxCapacity) + "; the file is corrupt"));
  }
  // Every take shifts by the layout's bits and computes milliseconds since the epoch: bits
  // that are no layout, or an epoch whose range would overflow, are corruption.
  const uint32_t id_bits = header.id_bits.load(std::memory_order_relaxed);
  if (!IsIdBitsWord(id_bits)) {
    return tl::unexpected(Fail(
        SegmentError::kBadEpoch, path + ": id_bits 0x" +
                                     [&] {
                                       char hex[9];
                                       std::snprintf(hex, sizeof(hex), "%08x", id_bits);
                                       return std::string(hex);
                                     }() +
                                     " is no ID layout (" + FormatIdBits(UnpackIdBits(id_bits)) +
                                     "); the file is corrupt"));
  }
  const uint64_t epoch = header.epoch_unix_ms.load(std::memory_order_relaxed);
  if (epoch > static_cast<uint64_t>(INT64_MAX) ||
      !IdLayout::Create(static_cast<int64_t>(epoch), UnpackIdBits(id_bits)).has_value()) {
    return tl::unexpected(Fail(SegmentError::kBadEpoch,
                               path + ": epoch " + std::to_string(epoch) +
                                   " ms is no ID layout's (negative, or its range overflows); "
                                   "the file is corrupt"));
  }
  const uint64_t expected_size = SegmentSizeFor(capacity);
  const uint64_t declared_size = header.segment_size.load(std::memory_order_relaxed);
  if (declared_size != expected_size) {
    return tl::unexpected(Fail(SegmentError::kSizeMismatch,
                               path + ": header declares " + std::to_string(declared_size) +
                                   " bytes but capacity " + std::to_string(capacity) +
                                   " needs " + std::to_string(expected_size) +
                                   "; the file is corrupt"));
  }
  if (file_size < expected_size) {
    return tl::unexpected(Fail(SegmentError::kTruncated,
                               path + ": file is " + std::to_string(file_size) +
                                   " bytes, its header needs " + std::to_string(expected_size) +
                                   "; it was truncated"));
  }
  if (file_size > expected_size) {
    return tl::unexpected(Fail(SegmentError::kSizeMismatch,
                               path + ": file is " + std::to_string(file_size) +
                                   " bytes, its header says " + std::to_string(expected_size) +
                                   "; it was resized"));
  }
  return capacity;
}

}  // namespace

tl::expected<void, SegmentFailure> ValidateCounters(const SegmentHeader& header,
                                                    const ConsumerRegion& consumer,
                                                    uint64_t capacity,
                                                    const std::filesystem::path& path) {
  // head only grows and head <= tail always holds, so: a head read before tail is <= tail,
  // and a head read after tail is >= tail - capacity. Acquire so a later slot read by this
  // thread is not ordered before these loads.
  const uint64_t head_before = consumer.head.load(std::memory_order_acquire);
  const uint64_t tail = header.tail.load(std::memory_order_acquire);
  const uint64_t head_after = consumer.head.load(std::memory_order_acquire);
  // head_after may already be past `tail` (others took IDs published after our tail read):
  // that is consistent, so compare without the subtraction that would wrap around.
  if (head_before > tail || tail > head_after + capacity) {
    return tl::unexpected(Fail(SegmentError::kCorruptCounters,
                               path.string() + ": counters are inconsistent (head " +
                                   std::to_string(head_before) + ", tail " +
                                   std::to_string(tail) + ", capacity " +
                                   std::to_string(capacity) +
                                   "); refusing it: stop snowflaked, remove the file, restart"));
  }
  return {};
}

namespace {

struct Mapping {
  void* address = MAP_FAILED;
  size_t length = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (address != MAP_FAILED) munmap(address, length);
  }
};

// Maps [offset, offset + length) of fd; throws std::system_error (caught in Open).
void MapRegion(Mapping& mapping, int fd, bool writable, uint64_t offset,
               uint64_t length) {
  void* address = mmap(nullptr, length, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                       fd, static_cast<off_t>(offset));
  if (address == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  mapping.address = address;
  mapping.length = length;
}


}  // namespace

// The three mappings. No file descriptor is kept: the ring file is opened O_CLOEXEC and
// the region's memfd arrives O_CLOEXEC; each is closed as soon as its regions are mapped,
// so no program a client execs inherits one (docs/security.md). A segment mapped without
// a region has the stand-in instead of the consumer mapping.
struct MappedSegment::Regions {
  Mapping header;
  Mapping consumer;
  Mapping slots;
  std::unique_ptr<ConsumerRegion> stand_in;
};

MappedSegment::MappedSegment() = default;
MappedSegment::~MappedSegment() = default;

namespace {

// The ring file, opened and checked: the path is not a symlink, is a
// regular file with the expected owner and mode, and the descriptor is that same file.
struct CheckedFile {
  int fd = -1;
  struct stat info {};
  CheckedFile() = default;
  CheckedFile(const CheckedFile&) = delete;
  CheckedFile& operator=(const CheckedFile&) = delete;
  ~CheckedFile() {
    if (fd >= 0) close(fd);
  }
};

// `refuse_group_write`: the header and slots only the daemon may write (a group-writable
// ring file lets any member forge IDs, so a client refuses it). `missing` is the error for a path
// that does not exist.
tl::expected<void, SegmentFailure> OpenChecked(CheckedFile& file, const std::string& path,
                                               const std::filesystem::path& fs_path,
                                               int open_flags, const MapChecks& checks,
                                               bool refuse_group_write, SegmentError missing,
                                               const std::string& missing_message) {
  struct stat link_info {};
  if (lstat(path.c_str(), &link_info) != 0) {
    const int err = errno;
    if (err == ENOENT) return tl::unexpected(Fail(missing, missing_message, err));
    if (err == EACCES) {
      struct stat dir_info {};
      const std::string dir = fs_path.parent_path().string();
      if (stat(dir.c_str(), &dir_info) != 0) {
        return tl::unexpected(Fail(
            SegmentError::kPermissionDenied,
            "permission denied reading " + dir + ": add this user to its group and log in again",
            err));
      }
      return tl::unexpected(
          Fail(SegmentError::kPermissionDenied,
               "permission denied reading " + dir + " (" + DescribeGroup(dir_info.st_gid) + "): " +
                   GroupAccessAdvice(
                       dir_info.st_gid,
                       "add this user to " + DescribeGroup(dir_info.st_gid) + " and log in again"),
               err));
    }
    return tl::unexpected(
        Fail(SegmentError::kSystemError, "cannot stat " + path + ": " + std::strerror(err), err));
  }
  if (!S_ISREG(link_info.st_mode)) {
    return tl::unexpected(Fail(SegmentError::kNotRegularFile,
                               path + " is not a regular file (a symlink, directory or "
                                      "device); refusing to map it"));
  }
  if (checks.expected_owner && link_info.st_uid != *checks.expected_owner) {
    return tl::unexpected(Fail(SegmentError::kWrongOwner,
                               path + " is owned by " + DescribeUser(link_info.st_uid) +
                                   ", expected " + DescribeUser(*checks.expected_owner) +
                                   " (the daemon's user); refusing to trust it"));
  }
  if (checks.refuse_other_access && (link_info.st_mode & 0007) != 0) {
    return tl::unexpected(Fail(SegmentError::kModeTooOpen,
                               path + " has mode " + ModeString(link_info.st_mode) +
                                   ", open to other users; refusing to trust it (the daemon "
                                   "creates it 0640)"));
  }
  if (checks.refuse_other_access && refuse_group_write && (link_info.st_mode & 0020) != 0) {
    return tl::unexpected(Fail(SegmentError::kModeTooOpen,
                               path + " has mode " + ModeString(link_info.st_mode) +
                                   ": its group may write it, so any member could forge IDs; "
                                   "refusing to trust it (the daemon creates it 0640)"));
  }
  file.fd = open(path.c_str(), open_flags | O_CLOEXEC | O_NOFOLLOW);
  if (file.fd < 0) {
    const int err = errno;
    if (err == EACCES || err == EPERM) {
      return tl::unexpected(
          Fail(SegmentError::kPermissionDenied,
               "permission denied opening " + path + " (mode " + ModeString(link_info.st_mode) +
                   ", " + DescribeGroup(link_info.st_gid) + "): " +
                   GroupAccessAdvice(
                       link_info.st_gid,
                       "add this user to " + DescribeGroup(link_info.st_gid) + " and log in again"),
               err));
    }
    if (err == ENOENT) {
      return tl::unexpected(Fail(missing,
                                 path + " disappeared while opening it: snowflaked is "
                                        "restarting or stopped; retry",
                                 err));
    }
    return tl::unexpected(
        Fail(SegmentError::kSystemError, "cannot open " + path + ": " + std::strerror(err), err));
  }
  // The checks above were on the path; make sure the file we opened is that file.
  if (fstat(file.fd, &file.info) != 0 || file.info.st_ino != link_info.st_ino ||
      file.info.st_dev != link_info.st_dev) {
    return tl::unexpected(Fail(missing, path + " was replaced while opening it; retry"));
  }
  return {};
}

// A segment of an earlier boot is refused (kEarlierBoot) when both boot ids are known. An
// unknown recorded one (zero: an older daemon of this format) is accepted: its heartbeat
// and pid still tell whether it serves.
tl::expected<void, SegmentFailure> CheckBootId(const SegmentHeader& header, const MapChecks& checks,
                                               const std::string& path) {
  if (!checks.boot_id || !checks.boot_id->known()) return {};
  const BootId recorded{header.boot_id_high.load(std::memory_order_relaxed),
                        header.boot_id_low.load(std::memory_order_relaxed)};
  if (!recorded.known() || recorded == *checks.boot_id) return {};
  return tl::unexpected(Fail(SegmentError::kEarlierBoot,
                             path + " was left by an earlier boot of this host (boot id " +
                                 FormatBootId(recorded) + ", this boot is " +
                                 FormatBootId(*checks.boot_id) +
                                 "); snowflaked is not running (start it: it replaces "
                                 "the segment)"));
}

// The ring file and the region carry one segment id; else the daemon replaced the segment
// between the attach and the open of the ring file: kUnpaired, retry.
tl::expected<void, SegmentFailure> CheckPaired(const SegmentHeader& header,
                                               const ConsumerRegion& consumer,
                                               const std::string& path) {
  const uint64_t ring_id = header.segment_id.load(std::memory_order_relaxed);
  const uint64_t consumer_id = consumer.segment_id.load(std::memory_order_relaxed);
  if (ring_id == consumer_id) return {};
  return tl::unexpected(
      Fail(SegmentError::kUnpaired, "the consumer region belongs to another segment than " + path +
                                        " (segment id " + std::to_string(consumer_id) + ", not " +
                                        std::to_string(ring_id) +
                                        "): snowflaked replaced the segment meanwhile; retry"));
}

// F_SEAL_EXEC: a memfd made with MFD_NOEXEC_SEAL, or under vm.memfd_noexec >= 1, carries
// it. It only forbids making the region executable, so a region may have it or not.
constexpr uint32_t kExecSeal = kConsumerRegionExecSeal;

std::string SealNames(int seals) {
  std::string names;
  const auto add = [&](int bit, const char* name) {
    if ((seals & bit) == 0) return;
    if (!names.empty()) names += '|';
    names += name;
  };
  add(F_SEAL_SEAL, "seal");
  add(F_SEAL_SHRINK, "shrink");
  add(F_SEAL_GROW, "grow");
  add(F_SEAL_WRITE, "write");
  add(static_cast<int>(kExecSeal), "exec");
#ifdef F_SEAL_FUTURE_WRITE
  add(F_SEAL_FUTURE_WRITE, "future_write");
#endif
  return names.empty() ? "none" : names;
}

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

static_assert(kConsumerRegionSeals ==
                  static_cast<uint32_t>(F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW),
              "segment_layout.h states the seals by value for readers without <fcntl.h>");

}  // namespace

tl::expected<void, SegmentFailure> CheckConsumerDescriptor(int fd,
                                                           std::optional<uid_t> expected_owner,
                                                           const std::string& where) noexcept {
  try {
    struct stat info {};
    if (fstat(fd, &info) != 0) {
      const int err = errno;
      return tl::unexpected(Fail(SegmentError::kSystemError,
                                 "cannot stat " + where + ": " + std::strerror(err), err));
    }
    if (!S_ISREG(info.st_mode)) {
      return tl::unexpected(Fail(SegmentError::kNotRegularFile,
                                 where + " is not a memory file (a socket, pipe, directory or "
                                         "device); refusing to map it"));
    }
    if (expected_owner && info.st_uid != *expected_owner) {
      return tl::unexpected(
          Fail(SegmentError::kWrongOwner, where + " is owned by " + DescribeUser(info.st_uid) +
                                              ", expected " + DescribeUser(*expected_owner) +
                                              " (the daemon's user); refusing to trust it"));
    }
    // The seals before the size: an unsealed region's size is whatever its holder makes it.
    const int seals = fcntl(fd, F_GET_SEALS);
    const int seals_errno = errno;
    if (seals < 0 || !IsConsumerRegionSealed(static_cast<uint32_t>(seals))) {
      return tl::unexpected(
          Fail(SegmentError::kUnsealed,
               where + " is " +
                   (seals < 0 ? std::string("not sealable (") + std::strerror(seals_errno) + ")"
                              : "sealed with " + SealNames(seals) + " (" +
                                    Hex(static_cast<uint32_t>(seals)) + ")") +
                   ", not exactly seal|shrink|grow (" + Hex(kConsumerRegionSeals) +
                   ", with exec or not): any process holding it could resize it under every "
                   "taker; refusing to map it"));
    }
    const uint64_t size = static_cast<uint64_t>(info.st_size);
    if (size != kConsumerRegionSize) {
      return tl::unexpected(Fail(
          size < kConsumerRegionSize ? SegmentError::kTruncated : SegmentError::kSizeMismatch,
          where + " is sealed with " + std::to_string(size) + " bytes, the format's region is " +
              std::to_string(kConsumerRegionSize) + "; refusing to map it"));
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(Fail(SegmentError::kSystemError, where + ": " + e.what()));
  }
}

tl::expected<UniqueFd, SegmentFailure> CreateConsumerRegion(uint64_t segment_id) noexcept {
  // Never executable (MFD_NOEXEC_SEAL, Linux 6.3: the kernel seals exec itself); a kernel
  // that predates the flag refuses it with EINVAL, and then the region is made without.
  constexpr unsigned kNoExecSeal = 0x0008U;  // MFD_NOEXEC_SEAL, <linux/memfd.h> of 6.3
  UniqueFd fd(memfd_create("snowflake-consumer", MFD_CLOEXEC | MFD_ALLOW_SEALING | kNoExecSeal));
  if (!fd && errno == EINVAL) {
    fd.reset(memfd_create("snowflake-consumer", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  }
  const auto failed = [](const char* what) {
    const int err = errno;
    return tl::unexpected(Fail(SegmentError::kSystemError,
                               std::string("consumer region: ") + what + ": " + std::strerror(err),
                               err));
  };
  if (!fd) return failed("memfd_create");
  if (ftruncate(fd.get(), static_cast<off_t>(kConsumerRegionSize)) != 0) return failed("ftruncate");
  // Zero bytes are a valid value for every atomic of the region; only the id is written.
  void* base = mmap(nullptr, kConsumerRegionSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return failed("mmap");
  static_cast<ConsumerRegion*>(base)->segment_id.store(segment_id, std::memory_order_relaxed);
  munmap(base, kConsumerRegionSize);
  if (fcntl(fd.get(), F_ADD_SEALS, static_cast<int>(kConsumerRegionSeals)) != 0) {
    return failed("seal");
  }
  return fd;
}

tl::expected<std::unique_ptr<MappedSegment>, SegmentFailure> MappedSegment::Open(
    const std::filesystem::path& fs_path, UniqueFd region, MapAccess access,
    const MapChecks& checks) noexcept {
  const std::string path = fs_path.string();
  try {
    const bool producer = access == MapAccess::kProducer;
    CheckedFile ring;
    if (auto opened = OpenChecked(
            ring, path, fs_path, producer ? O_RDWR : O_RDONLY, checks,
            /*refuse_group_write=*/true, SegmentError::kNotFound,
            "no segment at " + path +
                ": snowflaked is not running for this runtime directory (start it, or point "
                "SNOWFLAKE_RUNTIME_DIR at the right one)");
        !opened) {
      return tl::unexpected(std::move(opened.error()));
    }

    auto segment = std::unique_ptr<MappedSegment>(new MappedSegment());
    segment->regions_ = std::make_unique<Regions>();
    Regions& regions = *segment->regions_;
    segment->device_ = ring.info.st_dev;
    segment->inode_ = ring.info.st_ino;
    segment->group_ = ring.info.st_gid;
    segment->owner_ = ring.info.st_uid;
    segment->mode_ = ring.info.st_mode & 07777;

    const uint64_t file_size = static_cast<uint64_t>(ring.info.st_size);
    if (file_size < kSlotsOffset) {
      return tl::unexpected(Fail(SegmentError::kTruncated,
                                 path + ": file is " + std::to_string(file_size) +
                                     " bytes, shorter than its header (" +
                                     std::to_string(kSlotsOffset) + "); it was truncated"));
    }
    MapRegion(regions.header, ring.fd, producer, 0, sizeof(SegmentHeader));
    auto* header = static_cast<SegmentHeader*>(regions.header.address);
    auto capacity = ValidateHeader(*header, file_size, path);
    if (!capacity) return tl::unexpected(std::move(capacity.error()));
    if (auto boot = CheckBootId(*header, checks, path); !boot) {
      return tl::unexpected(std::move(boot.error()));
    }
    MapRegion(regions.slots, ring.fd, producer, kSlotsOffset, file_size - kSlotsOffset);
    segment->header_ = header;
    segment->slots_ = static_cast<std::atomic<uint64_t>*>(regions.slots.address);
    segment->capacity_ = *capacity;

    if (!region) {
      // Ring only: a stand-in region whose head is past every tail holds no ticket.
      regions.stand_in = std::make_unique<ConsumerRegion>();
      regions.stand_in->head.store(kNoRegionHead, std::memory_order_relaxed);
      regions.stand_in->segment_id.store(header->segment_id.load(std::memory_order_relaxed),
                                         std::memory_order_relaxed);
      segment->consumer_ = regions.stand_in.get();
      return segment;
    }
    // The one region clients write, from the descriptor snowflaked sent: checked before
    // it is mapped, and mapped at exactly its sealed size, so no process can make a take
    // fault by resizing it.
    if (auto checked = CheckConsumerDescriptor(region.get(), checks.expected_owner,
                                               "the consumer region of " + path);
        !checked) {
      return tl::unexpected(std::move(checked.error()));
    }
    MapRegion(regions.consumer, region.get(), true, 0, sizeof(ConsumerRegion));
    region.reset();
    segment->consumer_ = static_cast<ConsumerRegion*>(regions.consumer.address);
    segment->has_region_ = true;
    if (auto paired = CheckPaired(*header, *segment->consumer_, path); !paired) {
      return tl::unexpected(std::move(paired.error()));
    }
    if (auto counters = ValidateCounters(*header, *segment->consumer_, *capacity, fs_path);
        !counters) {
      return tl::unexpected(std::move(counters.error()));
    }
    return segment;
  } catch (const std::system_error& e) {
    return tl::unexpected(Fail(SegmentError::kSystemError, "cannot map " + path + ": " + e.what(),
                               e.code().value()));
  } catch (const std::exception& e) {
    return tl::unexpected(Fail(SegmentError::kSystemError, "cannot map " + path + ": " + e.what()));
  }
}

}  // namespace snowflake::shm
