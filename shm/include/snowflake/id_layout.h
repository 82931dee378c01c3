// The 64-bit ID layout shared bit for bit by the daemon, the clients and every tool:
//
//   bit 63      bits 62..22              bits 21..12        bits 11..0
//   0 (sign)  | 41 bits: ms since epoch | 10 bits: machine | 12 bits: sequence
//
// Numeric order is time order. Anyone holding an ID and the fleet's epoch can recover the
// creation millisecond, the machine number and the sequence.
//
// IdLayout is an immutable value type; all of it is safe to use from any thread.

#ifndef SNOWFLAKE_ID_LAYOUT_H_
#define SNOWFLAKE_ID_LAYOUT_H_

#include <cassert>
#include <cstdint>
#include <string_view>

#include <tl/expected.hpp>

namespace snowflake {

inline constexpr int kTimeBits = 41;
inline constexpr int kMachineBits = 10;
inline constexpr int kSequenceBits = 12;
static_assert(1 + kTimeBits + kMachineBits + kSequenceBits == 64, "the layout fills 64 bits");

inline constexpr int kSequenceShift = 0;
inline constexpr int kMachineShift = kSequenceBits;
inline constexpr int kTimeShift = kSequenceBits + kMachineBits;

inline constexpr uint32_t kMaxMachine = (1u << kMachineBits) - 1;    // 1023
inline constexpr uint32_t kMaxSequence = (1u << kSequenceBits) - 1;  // 4095
inline constexpr uint32_t kIdsPerMs = kMaxSequence + 1;              // 4096
inline constexpr int64_t kMaxTimeOffsetMs = (int64_t{1} << kTimeBits) - 1;

// 2026-01-01T00:00:00Z in Unix milliseconds: the platform's default epoch.
inline constexpr int64_t kDefaultEpochUnixMs = 1'767'225'600'000;

enum class IdError {
  kMachineOutOfRange,   // machine > 1023
  kSequenceOutOfRange,  // sequence > 4095
  kTimeBeforeEpoch,     // unix_ms < epoch
  kTimeBeyondRange,     // unix_ms - epoch does not fit in 41 bits
  kSignBitSet,          // decoding a value >= 2^63: not an ID of this layout
  kEpochOutOfRange,     // the epoch itself is negative or so late its range overflows
  kRangeReversed,       // a time range whose start is later than its end
};

// A sentence saying what went wrong, for logs and error messages. Never null.
std::string_view IdErrorMessage(IdError error) noexcept;

struct DecodedId {
  int64_t unix_ms;
  uint32_t machine;
  uint32_t sequence;

  friend constexpr bool operator==(const DecodedId&, const DecodedId&) = default;
};

// The IDs of a time range (IdLayout::Bounds): every ID any machine made at a millisecond
// in [first_unix_ms, last_unix_ms] lies in [first_id, last_id], and no ID of another
// millisecond does, so `WHERE id BETWEEN first_id AND last_id` selects exactly the range.
struct IdBounds {
  uint64_t first_id;      // machine 0, sequence 0 at first_unix_ms
  uint64_t last_id;       // machine 1023, sequence 4095 at last_unix_ms
  int64_t first_unix_ms;  // the range's start, raised to the epoch if it began earlier
  int64_t last_unix_ms;   // the range's end, lowered to max_unix_ms() if it ended later

  friend constexpr bool operator==(const IdBounds&, const IdBounds&) = default;
};

class IdLayout {
 public:
  // The default layout: epoch 2026-01-01T00:00:00Z.
  constexpr IdLayout() noexcept = default;

  // Returns kEpochOutOfRange unless 0 <= epoch_unix_ms and epoch + 2^41 - 1 fits in int64.
  static constexpr tl::expected<IdLayout, IdError> Create(int64_t epoch_unix_ms) noexcept {
    if (epoch_unix_ms < 0 || epoch_unix_ms > INT64_MAX - kMaxTimeOffsetMs) {
      return tl::unexpected(IdError::kEpochOutOfRange);
    }
    return IdLayout(epoch_unix_ms);
  }

  constexpr int64_t epoch_unix_ms() const noexcept { return epoch_unix_ms_; }
  // The last millisecond an ID of this layout can carry (2095-09-07 for the default epoch).
  constexpr int64_t max_unix_ms() const noexcept { return epoch_unix_ms_ + kMaxTimeOffsetMs; }

  // Builds the ID for (unix_ms, machine, sequence), checking every field's range.
  constexpr tl::expected<uint64_t, IdError> Encode(int64_t unix_ms, uint32_t machine,
                                                   uint32_t sequence) const noexcept {
    if (machine > kMaxMachine) return tl::unexpected(IdError::kMachineOutOfRange);
    if (sequence > kMaxSequence) return tl::unexpected(IdError::kSequenceOutOfRange);
    if (unix_ms < epoch_unix_ms_) return tl::unexpected(IdError::kTimeBeforeEpoch);
    if (unix_ms > max_unix_ms()) return tl::unexpected(IdError::kTimeBeyondRange);
    return EncodeUnchecked(unix_ms - epoch_unix_ms_, machine, sequence);
  }

  // REQUIRES: offset_ms <= kMaxTimeOffsetMs, machine <= kMaxMachine, sequence <= kMaxSequence.
  static constexpr uint64_t EncodeUnchecked(int64_t offset_ms, uint32_t machine,
                                            uint32_t sequence) noexcept {
    assert(offset_ms >= 0 && offset_ms <= kMaxTimeOffsetMs && machine <= kMaxMachine &&
           sequence <= kMaxSequence);  // the REQUIRES above, in debug builds
    return (static_cast<uint64_t>(offset_ms) << kTimeShift) |
           (static_cast<uint64_t>(machine) << kMachineShift) |
           (static_cast<uint64_t>(sequence) << kSequenceShift);
  }

  // Splits an ID into its fields. The only invalid input is one with the sign bit set.
  constexpr tl::expected<DecodedId, IdError> Decode(uint64_t id) const noexcept {
    if (id >> 63) return tl::unexpected(IdError::kSignBitSet);
    return DecodedId{
        .unix_ms = epoch_unix_ms_ + static_cast<int64_t>(id >> kTimeShift),
        .machine = static_cast<uint32_t>((id >> kMachineShift) & kMaxMachine),
        .sequence = static_cast<uint32_t>((id >> kSequenceShift) & kMaxSequence),
    };
  }

  // The smallest and largest IDs any machine can make at the milliseconds from
  // `from_unix_ms` to `to_unix_ms`, both included. A range reaching outside what IDs of
  // this epoch can carry is cut to it (IdBounds says where). Returns
  //   kRangeReversed    if from_unix_ms > to_unix_ms (swap them),
  //   kTimeBeforeEpoch  if the whole range is before the epoch (no ID carries such a time),
  //   kTimeBeyondRange  if the whole range is after max_unix_ms().
  constexpr tl::expected<IdBounds, IdError> Bounds(int64_t from_unix_ms,
                                                   int64_t to_unix_ms) const noexcept {
    if (from_unix_ms > to_unix_ms) return tl::unexpected(IdError::kRangeReversed);
    if (to_unix_ms < epoch_unix_ms_) return tl::unexpected(IdError::kTimeBeforeEpoch);
    if (from_unix_ms > max_unix_ms()) return tl::unexpected(IdError::kTimeBeyondRange);
    const int64_t first = from_unix_ms < epoch_unix_ms_ ? epoch_unix_ms_ : from_unix_ms;
    const int64_t last = to_unix_ms > max_unix_ms() ? max_unix_ms() : to_unix_ms;
    return IdBounds{
        .first_id = EncodeUnchecked(first - epoch_unix_ms_, 0, 0),
        .last_id = EncodeUnchecked(last - epoch_unix_ms_, kMaxMachine, kMaxSequence),
        .first_unix_ms = first,
        .last_unix_ms = last,
    };
  }

  // The millisecond since the epoch carried by an ID (no sign check).
  static constexpr int64_t OffsetMsOf(uint64_t id) noexcept {
    return static_cast<int64_t>((id & ~(uint64_t{1} << 63)) >> kTimeShift);
  }

  friend constexpr bool operator==(const IdLayout&, const IdLayout&) = default;

 private:
  constexpr explicit IdLayout(int64_t epoch_unix_ms) noexcept : epoch_unix_ms_(epoch_unix_ms) {}

  int64_t epoch_unix_ms_ = kDefaultEpochUnixMs;
};

static_assert(IdLayout().Encode(kDefaultEpochUnixMs, 0, 0).value() == 0,
              "the epoch's first millisecond, machine 0, sequence 0 is ID 0");
static_assert(IdLayout().Encode(kDefaultEpochUnixMs + 1, 1, 1).value() ==
                  (1ull << 22 | 1ull << 12 | 1),
              "time above machine above sequence: 41/10/12 from bit 62 down");
static_assert(
    IdLayout().Decode(IdLayout().Encode(kDefaultEpochUnixMs + 5, 1023, 4095).value()).value() ==
        DecodedId{kDefaultEpochUnixMs + 5, 1023, 4095},
    "Decode is Encode's inverse, the widest machine and sequence included");
static_assert(IdLayout().Bounds(kDefaultEpochUnixMs, kDefaultEpochUnixMs).value().last_id ==
                  (1ull << 22) - 1,
              "one millisecond spans 2^22 IDs: every machine and sequence");

}  // namespace snowflake

#endif  // SNOWFLAKE_ID_LAYOUT_H_
