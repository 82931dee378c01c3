// The consumer region's memfd (snowflake/segment_layout.h, shm/LAYOUT.md §2): how the
// daemon makes one and how every taker checks one before it maps it.

#ifndef SNOWFLAKE_CONSUMER_REGION_H_
#define SNOWFLAKE_CONSUMER_REGION_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "snowflake/segment_error.h"
#include "snowflake/unique_fd.h"

namespace snowflake::shm {

// A new consumer region: a memfd of kConsumerRegionSize zero bytes whose segment_id is
// `segment_id`, sealed with kConsumerRegionSeals. Errors: kSystemError naming the call.
tl::expected<UniqueFd, SegmentFailure> CreateConsumerRegion(uint64_t segment_id) noexcept;

// Checks a descriptor offered as a consumer region before anything maps it: a regular
// file (a memfd is one) owned by `expected_owner` (when set), of exactly
// kConsumerRegionSize bytes, sealed with exactly kConsumerRegionSeals. `where` names its
// source in messages ("the region snowflaked sent on /run/snowflaked/control.sock").
// Errors: kUnsealed (no seals, other seals, or not sealable), kWrongOwner,
// kNotRegularFile, kTruncated / kSizeMismatch (the wrong size), kSystemError.
tl::expected<void, SegmentFailure> CheckConsumerDescriptor(int fd,
                                                           std::optional<uid_t> expected_owner,
                                                           const std::string& where) noexcept;

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_CONSUMER_REGION_H_
