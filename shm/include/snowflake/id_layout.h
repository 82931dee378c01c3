// The 64-bit ID layout shared bit for bit by the daemon, the clients and every tool:
//
//   bit 63      the next T bits           the next M bits      the last S bits
//   0 (sign)  | time: ms since the epoch | machine number     | sequence in that ms
//
// T + M + S = 63. A platform chooses T/M/S once, with its epoch, and keeps both for the
// life of the epoch (docs/id-layout.md): the default 41/10/12 gives 1,024 hosts, 4,096 IDs
// per millisecond each, for 69.7 years; 41/16/6 gives 65,536 hosts, 64 per millisecond
// each. Numeric order is time order in every layout. Anyone holding an ID, the epoch and
// the layout can recover the creation millisecond, the machine number and the sequence.
//
// This file is the only place that knows the default's figures; everything else asks an
// IdLayout (tests/layout/check_layout_constants.sh keeps it so).
//
// IdBits and IdLayout are immutable value types; all of this is safe to use from any thread.

#ifndef SNOWFLAKE_ID_LAYOUT_H_
#define SNOWFLAKE_ID_LAYOUT_H_

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake {

// The widths of the three fields, high to low. The unit of time is 1 ms in every layout
// (docs/id-layout.md says why there is no coarser one).
struct IdBits {
  int time = 41;
  int machine = 10;
  int sequence = 12;

  // The largest machine number: 2^machine - 1. REQUIRES: 0 <= machine <= 31.
  constexpr uint32_t max_machine() const noexcept { return (uint32_t{1} << machine) - 1; }

  friend constexpr bool operator==(const IdBits&, const IdBits&) = default;
};

// 41/10/12: the layout of every ID made before layouts could be chosen.
inline constexpr IdBits kDefaultIdBits{};

// 2026-01-01T00:00:00Z in Unix milliseconds: the platform's default epoch.
inline constexpr int64_t kDefaultEpochUnixMs = 1'767'225'600'000;

// The widths a layout may have, each with its reason:
// - time: at least 40 bits, 34.8 years: an epoch must outlive the platform that numbers
//   with it; at most 44 bits, 557 years: the last millisecond stays a four-digit year.
inline constexpr int kMinTimeBits = 40;
inline constexpr int kMaxTimeBits = 44;
// - machine: at least 1 bit; at most 16 bits, 65,536 hosts: the register walks every
//   number to fence them all (`snowflakectl register raise-all`), one record each.
inline constexpr int kMinMachineBits = 1;
inline constexpr int kMaxMachineBits = 16;
// The largest machine number of any layout: 65535.
inline constexpr uint32_t kMaxMachineOfAnyLayout = (uint32_t{1} << kMaxMachineBits) - 1;
// - sequence: at least 6 bits, 64 IDs per ms (64,000 per second) per host: fewer, and one
//   busy client outruns its host. At most what the other two leave.
inline constexpr int kMinSequenceBits = 6;
inline constexpr int kMaxSequenceBits = 63 - kMinTimeBits - kMinMachineBits;

// Whether `bits` is a layout: the three fill the 63 bits below the sign bit, each within
// its bounds above. IdBitsProblem() says why not, in words.
constexpr bool IsValidIdBits(IdBits bits) noexcept {
  return bits.time + bits.machine + bits.sequence == 63 && bits.time >= kMinTimeBits &&
         bits.time <= kMaxTimeBits && bits.machine >= kMinMachineBits &&
         bits.machine <= kMaxMachineBits && bits.sequence >= kMinSequenceBits &&
         bits.sequence <= kMaxSequenceBits;
}
static_assert(IsValidIdBits(kDefaultIdBits), "the default is a layout");

// A layout by name, for configs and tools: the name says what it gives.
struct IdLayoutPreset {
  std::string_view name;
  IdBits bits;
};
inline constexpr IdLayoutPreset kIdLayoutPresets[] = {
    {"default", kDefaultIdBits},   // 1,024 hosts, 4,096 IDs per ms each
    {"8192-hosts", {41, 13, 9}},   // 8,192 hosts, 512 IDs per ms each
    {"65536-hosts", {41, 16, 6}},  // 65,536 hosts, 64 IDs per ms each
};

// "41/10/12": time/machine/sequence bits, the form configs and tools write.
std::string FormatIdBits(IdBits bits);
// "time41-machine10-sequence12": the form the register records (etcd's config key).
std::string IdBitsRecordName(IdBits bits);
// What a layout gives, for messages: "41/10/12: 1,024 hosts, 4,096,000 IDs per second per
// host, until 2095-09-07 (69.7 years after the epoch)". The year is counted from
// `epoch_unix_ms`.
std::string DescribeIdBits(IdBits bits, int64_t epoch_unix_ms);
// Empty if IsValidIdBits(bits); otherwise a sentence saying which rule `bits` breaks and
// what each choice costs (hosts, IDs per second per host, the year the range runs out from
// `epoch_unix_ms`), ending with the presets.
std::string IdBitsProblem(IdBits bits, int64_t epoch_unix_ms);
// Parses a preset name, "T/M/S" or "timeT-machineM-sequenceS" and checks it. The error
// says what was wrong (IdBitsProblem() for widths that are no layout) and what to write.
tl::expected<IdBits, std::string> ParseIdBits(std::string_view text, int64_t epoch_unix_ms);

enum class IdError {
  kMachineOutOfRange,   // machine >= 2^machine bits
  kSequenceOutOfRange,  // sequence >= 2^sequence bits
  kTimeBeforeEpoch,     // unix_ms < epoch
  kTimeBeyondRange,     // unix_ms - epoch does not fit in the time bits
  kSignBitSet,          // decoding a value >= 2^63: not an ID of any layout
  kEpochOutOfRange,     // the epoch itself is negative or so late its range overflows
  kRangeReversed,       // a time range whose start is later than its end
  kBitsInvalid,         // Create() with widths that are no layout (IsValidIdBits)
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
  uint64_t last_id;       // the largest machine and sequence at last_unix_ms
  int64_t first_unix_ms;  // the range's start, raised to the epoch if it began earlier
  int64_t last_unix_ms;   // the range's end, lowered to max_unix_ms() if it ended later

  friend constexpr bool operator==(const IdBounds&, const IdBounds&) = default;
};

class IdLayout {
 public:
  // The default layout: epoch 2026-01-01T00:00:00Z, 41/10/12.
  constexpr IdLayout() noexcept = default;

  // Returns kBitsInvalid unless IsValidIdBits(bits), and kEpochOutOfRange unless
  // 0 <= epoch_unix_ms and epoch + 2^time bits - 1 fits in int64.
  static constexpr tl::expected<IdLayout, IdError> Create(int64_t epoch_unix_ms,
                                                          IdBits bits = kDefaultIdBits) noexcept {
    if (!IsValidIdBits(bits)) return tl::unexpected(IdError::kBitsInvalid);
    const int64_t max_offset_ms = (int64_t{1} << bits.time) - 1;
    if (epoch_unix_ms < 0 || epoch_unix_ms > INT64_MAX - max_offset_ms) {
      return tl::unexpected(IdError::kEpochOutOfRange);
    }
    return IdLayout(epoch_unix_ms, bits);
  }

  constexpr int64_t epoch_unix_ms() const noexcept { return epoch_unix_ms_; }
  constexpr IdBits bits() const noexcept { return bits_; }

  // Where the millisecond starts: an ID's offset from the epoch is id >> time_shift().
  constexpr int time_shift() const noexcept { return bits_.machine + bits_.sequence; }
  // The number of machine numbers (hosts), 0..machine_count()-1.
  constexpr uint32_t machine_count() const noexcept { return uint32_t{1} << bits_.machine; }
  constexpr uint32_t max_machine() const noexcept { return bits_.max_machine(); }
  // The cap per millisecond of one host: sequences 0..ids_per_ms()-1.
  constexpr uint32_t ids_per_ms() const noexcept { return uint32_t{1} << bits_.sequence; }
  constexpr uint32_t max_sequence() const noexcept { return ids_per_ms() - 1; }
  // The largest offset from the epoch the time bits carry.
  constexpr int64_t max_offset_ms() const noexcept { return (int64_t{1} << bits_.time) - 1; }
  // The last millisecond an ID of this layout can carry (2095-09-07 for the default).
  constexpr int64_t max_unix_ms() const noexcept { return epoch_unix_ms_ + max_offset_ms(); }

  // Builds the ID for (unix_ms, machine, sequence), checking every field's range.
  constexpr tl::expected<uint64_t, IdError> Encode(int64_t unix_ms, uint32_t machine,
                                                   uint32_t sequence) const noexcept {
    if (machine > max_machine()) return tl::unexpected(IdError::kMachineOutOfRange);
    if (sequence > max_sequence()) return tl::unexpected(IdError::kSequenceOutOfRange);
    if (unix_ms < epoch_unix_ms_) return tl::unexpected(IdError::kTimeBeforeEpoch);
    if (unix_ms > max_unix_ms()) return tl::unexpected(IdError::kTimeBeyondRange);
    return EncodeUnchecked(unix_ms - epoch_unix_ms_, machine, sequence);
  }

  // REQUIRES: 0 <= offset_ms <= max_offset_ms(), machine <= max_machine(),
  // sequence <= max_sequence().
  constexpr uint64_t EncodeUnchecked(int64_t offset_ms, uint32_t machine,
                                     uint32_t sequence) const noexcept {
    assert(offset_ms >= 0 && offset_ms <= max_offset_ms() && machine <= max_machine() &&
           sequence <= max_sequence());  // the REQUIRES above, in debug builds
    return (static_cast<uint64_t>(offset_ms) << time_shift()) |
           (static_cast<uint64_t>(machine) << bits_.sequence) | static_cast<uint64_t>(sequence);
  }

  // Splits an ID into its fields. The only invalid input is one with the sign bit set.
  constexpr tl::expected<DecodedId, IdError> Decode(uint64_t id) const noexcept {
    if (id >> 63) return tl::unexpected(IdError::kSignBitSet);
    return DecodedId{
        .unix_ms = epoch_unix_ms_ + static_cast<int64_t>(id >> time_shift()),
        .machine = static_cast<uint32_t>((id >> bits_.sequence) & max_machine()),
        .sequence = static_cast<uint32_t>(id & max_sequence()),
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
        .last_id = EncodeUnchecked(last - epoch_unix_ms_, max_machine(), max_sequence()),
        .first_unix_ms = first,
        .last_unix_ms = last,
    };
  }

  // The millisecond since the epoch carried by an ID (no sign check).
  constexpr int64_t OffsetMsOf(uint64_t id) const noexcept {
    return static_cast<int64_t>((id & ~(uint64_t{1} << 63)) >> time_shift());
  }

  friend constexpr bool operator==(const IdLayout&, const IdLayout&) = default;

 private:
  constexpr IdLayout(int64_t epoch_unix_ms, IdBits bits) noexcept
      : epoch_unix_ms_(epoch_unix_ms), bits_(bits) {}

  int64_t epoch_unix_ms_ = kDefaultEpochUnixMs;
  IdBits bits_ = kDefaultIdBits;
};

static_assert(IdLayout().Encode(kDefaultEpochUnixMs, 0, 0).value() == 0,
              "the epoch's first millisecond, machine 0, sequence 0 is ID 0");
static_assert(IdLayout().Encode(kDefaultEpochUnixMs + 1, 1, 1).value() ==
                  (1ull << 22 | 1ull << 12 | 1),
              "time above machine above sequence: 41/10/12 from bit 62 down");
static_assert(IdLayout().time_shift() == 22 && IdLayout().machine_count() == 1024 &&
                  IdLayout().ids_per_ms() == 4096 && IdLayout().max_offset_ms() == 2199023255551,
              "the default layout is the one every ID before layouts used: 41/10/12");
static_assert(
    IdLayout().Decode(IdLayout().Encode(kDefaultEpochUnixMs + 5, 1023, 4095).value()).value() ==
        DecodedId{kDefaultEpochUnixMs + 5, 1023, 4095},
    "Decode is Encode's inverse, the widest machine and sequence included");
static_assert(IdLayout().Bounds(kDefaultEpochUnixMs, kDefaultEpochUnixMs).value().last_id ==
                  (1ull << 22) - 1,
              "one millisecond spans 2^22 IDs: every machine and sequence");
static_assert(IdLayout::Create(0, {41, 16, 6}).value().Encode(1, 65535, 63).value() ==
                  (1ull << 22 | 65535ull << 6 | 63),
              "41/16/6: the same time bits, machine and sequence split at bit 6");
static_assert(IsValidIdBits({41, 16, 6}) && IsValidIdBits({41, 13, 9}) &&
                  !IsValidIdBits({41, 17, 6}) && !IsValidIdBits({41, 17, 5}) &&
                  !IsValidIdBits({39, 12, 12}) && !IsValidIdBits({45, 12, 6}),
              "63 bits in all, each width within its bounds");

}  // namespace snowflake

#endif  // SNOWFLAKE_ID_LAYOUT_H_
