// What the etcd register reads under its prefix, decoded in one place for every reader
// (etcd_register.h): the holders and marks of the two linearizable ranges (machines/ and
// high-water/) that a claim picks from and `register list` shows, and the one record a
// read of a single key returns (a holder, a mark, the fleet record, the restore fence).
// Anything that is not ours is kCorrupt naming its key: guessing around it could reuse a
// number whose mark we cannot read.
//
// Pure functions over values: no I/O, no state, safe from any thread.

#ifndef SNOWFLAKE_REGISTER_ETCD_SNAPSHOT_H_
#define SNOWFLAKE_REGISTER_ETCD_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "register/etcd_records.h"
#include "register/etcd_types.h"
#include "register/machine_register.h"

namespace snowflake::reg {

// Everything under machines/ and high-water/, parsed, by number.
struct EtcdSnapshot {
  struct Held {
    etcd::HolderRecord record;
    int64_t mod_revision = 0;
    int64_t lease = 0;  // 0: not bound to a lease
  };
  struct Mark {
    etcd::HighWaterRecord record;
    int64_t mod_revision = 0;
  };
  std::map<uint32_t, Held> held;
  std::map<uint32_t, Mark> marks;
};

// The holders (`held`, a range of P machines/) and the marks (`marks`, a range of
// P high-water/) under `prefix` P, decoded. Errors: kCorrupt naming the first key that is
// not ours (holders first, each range in its order).
tl::expected<EtcdSnapshot, RegisterError> DecodeSnapshot(std::string_view prefix,
                                                         const etcd::RangeResult& held,
                                                         const etcd::RangeResult& marks);

// The value stored at `key`, decoded. Errors: kCorrupt naming the key (CorruptText).
tl::expected<etcd::HolderRecord, RegisterError> DecodeHolderAt(const std::string& key,
                                                               std::string_view value);
tl::expected<etcd::HighWaterRecord, RegisterError> DecodeMarkAt(const std::string& key,
                                                                std::string_view value);
tl::expected<etcd::FleetRecord, RegisterError> DecodeFleetAt(const std::string& key,
                                                             std::string_view value);
tl::expected<etcd::RestoreRecord, RegisterError> DecodeRestoreAt(const std::string& key,
                                                                 std::string_view value);

// What a kCorrupt says of `key`: why it is not ours, and what to do about it.
std::string CorruptText(const std::string& key, const std::string& why);
// "\"host-a\" on a.example, pid 812": who a holder record names, for messages.
std::string HolderText(const etcd::HolderRecord& record);

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_ETCD_SNAPSHOT_H_
