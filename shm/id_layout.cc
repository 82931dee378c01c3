#include "snowflake/id_layout.h"

namespace snowflake {

std::string_view IdErrorMessage(IdError error) noexcept {
  switch (error) {
    case IdError::kMachineOutOfRange:
      return "machine number out of range: it must be between 0 and 1023";
    case IdError::kSequenceOutOfRange:
      return "sequence out of range: it must be between 0 and 4095";
    case IdError::kTimeBeforeEpoch:
      return "time is before the epoch: IDs cannot carry a millisecond earlier than the epoch";
    case IdError::kTimeBeyondRange:
      return "time is beyond the 41-bit range of the epoch (69.7 years after it): "
             "no more IDs can be numbered with this epoch";
    case IdError::kSignBitSet:
      return "not an ID: the sign bit (bit 63) is set, IDs are below 2^63";
    case IdError::kEpochOutOfRange:
      return "epoch out of range: it must be a non-negative Unix time in milliseconds";
    case IdError::kRangeReversed:
      return "the time range ends before it begins: its start must not be later than its end";
  }
  return "unknown ID error";
}

}  // namespace snowflake
