// Errors opening, creating or validating a shared-memory segment. Each is distinct so a
// caller can react to it; every failure also carries a message that names the path and
// says what to do.

#ifndef SNOWFLAKE_SEGMENT_ERROR_H_
#define SNOWFLAKE_SEGMENT_ERROR_H_

#include <string>
#include <string_view>

namespace snowflake::shm {

enum class SegmentError {
  kNotFound,             // no segment file (or no runtime directory): the daemon is not running
  kPermissionDenied,     // may not open it: the message names the group to join
  kNotRegularFile,       // a symlink, directory or device where the segment should be
  kWrongOwner,           // not owned by the expected user: refuse to trust it
  kModeTooOpen,          // readable or writable by others: refuse to trust it
  kTruncated,            // shorter than its header says (or than a header)
  kBadMagic,             // not a snowflake segment (or still being initialised)
  kIncompatibleVersion,  // written by a daemon speaking another version of the format
  kSizeMismatch,         // larger than its header says, or the header's sizes disagree
  kBadCapacity,          // capacity not a power of two within [1, 2^20]
  kBadEpoch,             // an epoch or id_bits no ID layout has (negative, its range
                         // overflows, or widths that are no layout)
  kCorruptCounters,      // head > tail, tail > head + capacity, or head moved backwards
  kNotIncreasing,        // a publish would not be strictly above every published ID
  kUnpaired,             // the consumer region belongs to another ring file (the daemon
                         // replaced the segment between the two: retry)
  kUnsealed,             // a consumer region descriptor that is not a memfd sealed with
                         // exactly kConsumerRegionSeals: refuse to map it
  kEarlierBoot,          // left by an earlier boot of the host (its boot id is not this
                         // boot's): no daemon serves it
  kSystemError,          // an unexpected OS error (the message has errno's text)
};

std::string_view SegmentErrorName(SegmentError error) noexcept;  // "not_found", ...

// Whether `error` says the segment's own files are damaged (a truncated, resized, foreign
// or corrupted file, or a client's write to the counters): a daemon must not serve it any
// more and replaces it with a fresh segment above every ID issued. False for what a fresh
// segment would not cure (permissions, ownership, a publish out of order, an OS error).
bool IsDamagedSegmentError(SegmentError error) noexcept;

struct SegmentFailure {
  SegmentError code;
  std::string message;
  int sys_errno = 0;
};

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_SEGMENT_ERROR_H_
