#include "register/etcd_snapshot.h"

#include <utility>

namespace snowflake::reg {
namespace {

// The record `decode` makes of the value at `key`, or kCorrupt naming the key.
template <typename Decode>
auto DecodeAt(const std::string& key, std::string_view value, Decode decode)
    -> tl::expected<typename decltype(decode(value))::value_type, RegisterError> {
  auto record = decode(value);
  if (!record) {
    return tl::unexpected(
        RegisterError{RegisterErrorCode::kCorrupt, CorruptText(key, record.error())});
  }
  return std::move(*record);
}

// kCorrupt for a key under machines/ or high-water/ whose tail is not a machine number.
RegisterError NotAMachineNumber(const std::string& key) {
  return RegisterError{RegisterErrorCode::kCorrupt, CorruptText(key, "not a machine number")};
}

}  // namespace

std::string CorruptText(const std::string& key, const std::string& why) {
  return "etcd key " + key + " holds a value snowflaked did not write (" + why +
         "): inspect it with `etcdctl get " + key +
         "`; delete it only if no daemon ever held that number (a high-water mark is what "
         "keeps a number's IDs unique)";
}

std::string HolderText(const etcd::HolderRecord& record) {
  return "\"" + record.holder + "\" on " + record.host + ", pid " + std::to_string(record.pid);
}

tl::expected<etcd::HolderRecord, RegisterError> DecodeHolderAt(const std::string& key,
                                                               std::string_view value) {
  return DecodeAt(key, value, etcd::DecodeHolder);
}

tl::expected<etcd::HighWaterRecord, RegisterError> DecodeMarkAt(const std::string& key,
                                                                std::string_view value) {
  return DecodeAt(key, value, etcd::DecodeHighWater);
}

tl::expected<etcd::FleetRecord, RegisterError> DecodeFleetAt(const std::string& key,
                                                             std::string_view value) {
  return DecodeAt(key, value, etcd::DecodeFleet);
}

tl::expected<etcd::RestoreRecord, RegisterError> DecodeRestoreAt(const std::string& key,
                                                                 std::string_view value) {
  return DecodeAt(key, value, etcd::DecodeRestore);
}

tl::expected<EtcdSnapshot, RegisterError> DecodeSnapshot(std::string_view prefix,
                                                         const etcd::RangeResult& held,
                                                         const etcd::RangeResult& marks) {
  const std::string machines_prefix = etcd::MachinesPrefix(prefix);
  const std::string marks_prefix = etcd::HighWaterPrefix(prefix);
  EtcdSnapshot snap;
  for (const auto& kv : held.kvs) {
    const auto n = etcd::MachineOfKey(machines_prefix, kv.key);
    if (!n) return tl::unexpected(NotAMachineNumber(kv.key));
    auto record = DecodeHolderAt(kv.key, kv.value);
    if (!record) return tl::unexpected(record.error());
    snap.held[*n] = EtcdSnapshot::Held{std::move(*record), kv.mod_revision, kv.lease};
  }
  for (const auto& kv : marks.kvs) {
    const auto n = etcd::MachineOfKey(marks_prefix, kv.key);
    if (!n) return tl::unexpected(NotAMachineNumber(kv.key));
    auto record = DecodeMarkAt(kv.key, kv.value);
    if (!record) return tl::unexpected(record.error());
    snap.marks[*n] = EtcdSnapshot::Mark{std::move(*record), kv.mod_revision};
  }
  return snap;
}

}  // namespace snowflake::reg
