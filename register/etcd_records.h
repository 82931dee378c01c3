// The keys and values the etcd register keeps under its prefix P (default
// "/snowflaked/"), as pure functions so they can be tested and fuzzed on their own:
//
//   P config         {"format":"snowflaked-fleet","version":1,"epoch_unix_ms":E,
//                     "layout":"time41-machine10-sequence12"}
//                    created once by the first daemon; every claim compares it byte for
//                    byte in the claim's transaction.
//   P machines/N     {"holder":H,"host":S,"pid":I,"since_unix_ms":T}, bound to the
//                    holder's lease: present = N is held.
//   P high-water/N   {"unix_ms":W,"holder":H,"lease":L}: persistent (no lease of its
//                    own); W only rises, and only in a transaction that compares the
//                    holder's lease on machines/N AND this key's mod_revision, so a
//                    request applied late cannot lower it (docs/etcd-fencing.md). H is the
//                    last holder, so a returning holder prefers N; L the lease of the claim
//                    that wrote it, so a restart knows whether anyone wrote it since.
//   P restored       {"above_unix_ms":T,"cluster_id":"C","at_unix_ms":X}: written by
//                    `snowflakectl register raise-all` after a restore from a backup: every
//                    mark was raised to at least T in the cluster C.
//
// Decoders never throw and refuse anything else with a message that quotes the text.

#ifndef SNOWFLAKE_REGISTER_ETCD_RECORDS_H_
#define SNOWFLAKE_REGISTER_ETCD_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake::reg::etcd {

struct FleetRecord {
  int64_t epoch_unix_ms = 0;
  std::string layout;
  friend bool operator==(const FleetRecord&, const FleetRecord&) = default;
};

struct HolderRecord {
  std::string holder;
  std::string host;
  int64_t pid = 0;
  int64_t since_unix_ms = 0;
  friend bool operator==(const HolderRecord&, const HolderRecord&) = default;
};

struct HighWaterRecord {
  int64_t unix_ms = 0;
  std::string holder;  // "" = released: no holder prefers this number
  // The lease of the claim whose raise wrote it; 0 = released, written by an operator
  // (`register raise-all`), or by a version without this field.
  int64_t lease = 0;
  // The operator's fence the writing holder has acknowledged (it issues nothing at or
  // below it: MachineRegister::AcknowledgeFence); 0 = none. `raise-all --while-running`
  // waits for it.
  int64_t fence = 0;
  friend bool operator==(const HighWaterRecord&, const HighWaterRecord&) = default;
};

// What an operator's `snowflakectl register raise-all` left after a restore.
struct RestoreRecord {
  int64_t above_unix_ms = 0;  // every mark was raised to at least this
  uint64_t cluster_id = 0;    // in this cluster
  int64_t at_unix_ms = 0;     // when
  friend bool operator==(const RestoreRecord&, const RestoreRecord&) = default;
};

std::string ConfigKey(std::string_view prefix);
std::string RestoreKey(std::string_view prefix);
std::string MachinesPrefix(std::string_view prefix);
std::string HighWaterPrefix(std::string_view prefix);
std::string MachineKey(std::string_view prefix, uint32_t machine);
std::string HighWaterKey(std::string_view prefix, uint32_t machine);
// N of "<key_prefix>N" (a machines/ or high-water/ key): nullopt unless N is a decimal
// number within 0-kMaxMachineOfAnyLayout without leading zeros (the register's layout
// bounds the numbers it hands out, not the keys it can read).
std::optional<uint32_t> MachineOfKey(std::string_view key_prefix, std::string_view key);

// The canonical text: two encoders given equal records produce equal bytes.
std::string EncodeFleet(const FleetRecord& record);
std::string EncodeHolder(const HolderRecord& record);
std::string EncodeHighWater(const HighWaterRecord& record);
std::string EncodeRestore(const RestoreRecord& record);

// Errors: a sentence saying what is wrong with the text (quoted, cut at 80 characters).
tl::expected<FleetRecord, std::string> DecodeFleet(std::string_view text) noexcept;
tl::expected<HolderRecord, std::string> DecodeHolder(std::string_view text) noexcept;
tl::expected<HighWaterRecord, std::string> DecodeHighWater(std::string_view text) noexcept;
tl::expected<RestoreRecord, std::string> DecodeRestore(std::string_view text) noexcept;

// "epoch 1767225600000 (2026-01-01T00:00:00.000Z), layout time41-machine10-sequence12".
std::string DescribeFleet(const FleetRecord& record);

}  // namespace snowflake::reg::etcd

#endif  // SNOWFLAKE_REGISTER_ETCD_RECORDS_H_
