#include "register/etcd_records.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "snowflake/id_layout.h"
#include "snowflake/time_text.h"
#include "util/decimal.h"

namespace snowflake::reg::etcd {
namespace {

using nlohmann::ordered_json;

std::string Quoted(std::string_view text) {
  std::string shown(text.substr(0, 80));
  if (text.size() > 80) shown += "...";
  return ordered_json(shown).dump(-1, ' ', true, ordered_json::error_handler_t::replace);
}

// Parses `text` as one JSON object whose keys are exactly `keys` (order free).
tl::expected<ordered_json, std::string> ObjectWithKeys(
    std::string_view text, std::initializer_list<const char*> keys,
    std::initializer_list<const char*> optional_keys = {}) {
  ordered_json j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return tl::unexpected("not a JSON object: " + Quoted(text));
  }
  for (const char* k : keys) {
    if (!j.contains(k)) return tl::unexpected(std::string("no \"") + k + "\" in " + Quoted(text));
  }
  size_t optional_present = 0;
  for (const char* k : optional_keys) optional_present += j.contains(k) ? 1 : 0;
  if (j.size() != keys.size() + optional_present) {
    return tl::unexpected("unexpected fields in " + Quoted(text));
  }
  return j;
}

// nlohmann reads a non-negative integer as unsigned, a negative one as signed.
bool IsNonNegativeInt(const ordered_json& v) {
  return (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) ||
         (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= 0);
}
int64_t Int(const ordered_json& v) {
  return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
}

}  // namespace

std::string ConfigKey(std::string_view prefix) { return std::string(prefix) + "config"; }
std::string RestoreKey(std::string_view prefix) { return std::string(prefix) + "restored"; }
std::string MachinesPrefix(std::string_view prefix) { return std::string(prefix) + "machines/"; }
std::string HighWaterPrefix(std::string_view prefix) { return std::string(prefix) + "high-water/"; }
std::string MachineKey(std::string_view prefix, uint32_t machine) {
  return MachinesPrefix(prefix) + std::to_string(machine);
}
std::string HighWaterKey(std::string_view prefix, uint32_t machine) {
  return HighWaterPrefix(prefix) + std::to_string(machine);
}

std::optional<uint32_t> MachineOfKey(std::string_view key_prefix, std::string_view key) {
  if (!key.starts_with(key_prefix)) return std::nullopt;
  const std::string_view n = key.substr(key_prefix.size());
  if (n.empty() || n.size() > 5 || (n.size() > 1 && n[0] == '0')) return std::nullopt;
  const std::optional<uint32_t> v = util::ParseDecimal<uint32_t>(n, 5);
  if (!v || *v > kMaxMachineOfAnyLayout) return std::nullopt;
  return v;
}

std::string EncodeFleet(const FleetRecord& record) {
  ordered_json j;
  j["format"] = "snowflaked-fleet";
  j["version"] = 1;
  j["epoch_unix_ms"] = record.epoch_unix_ms;
  j["layout"] = record.layout;
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string EncodeHolder(const HolderRecord& record) {
  ordered_json j;
  j["holder"] = record.holder;
  j["host"] = record.host;
  j["pid"] = record.pid;
  j["since_unix_ms"] = record.since_unix_ms;
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string EncodeHighWater(const HighWaterRecord& record) {
  ordered_json j;
  j["unix_ms"] = record.unix_ms;
  j["holder"] = record.holder;
  // Absent when 0, so a released mark reads as it did before "lease" existed.
  if (record.lease != 0) j["lease"] = record.lease;
  // Absent when 0: only a holder that obeyed an operator's fence writes it.
  if (record.fence != 0) j["fence"] = record.fence;
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string EncodeRestore(const RestoreRecord& record) {
  ordered_json j;
  j["above_unix_ms"] = record.above_unix_ms;
  // A string: cluster ids use all 64 bits, beyond what JSON numbers carry safely.
  j["cluster_id"] = std::to_string(record.cluster_id);
  j["at_unix_ms"] = record.at_unix_ms;
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

tl::expected<FleetRecord, std::string> DecodeFleet(std::string_view text) noexcept {
  try {
    auto j = ObjectWithKeys(text, {"format", "version", "epoch_unix_ms", "layout"});
    if (!j) return tl::unexpected(j.error());
    if ((*j)["format"] != "snowflaked-fleet") {
      return tl::unexpected("\"format\" is not \"snowflaked-fleet\" in " + Quoted(text));
    }
    if (!IsNonNegativeInt((*j)["version"]) || Int((*j)["version"]) != 1) {
      return tl::unexpected("an unknown fleet record version in " + Quoted(text) +
                            " (this snowflaked knows version 1)");
    }
    if (!IsNonNegativeInt((*j)["epoch_unix_ms"]) || !(*j)["layout"].is_string()) {
      return tl::unexpected("a bad \"epoch_unix_ms\" or \"layout\" in " + Quoted(text));
    }
    return FleetRecord{Int((*j)["epoch_unix_ms"]), (*j)["layout"].get<std::string>()};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string(e.what()));
  }
}

tl::expected<HolderRecord, std::string> DecodeHolder(std::string_view text) noexcept {
  try {
    auto j = ObjectWithKeys(text, {"holder", "host", "pid", "since_unix_ms"});
    if (!j) return tl::unexpected(j.error());
    const auto& holder = (*j)["holder"];
    const auto& host = (*j)["host"];
    if (!holder.is_string() || holder.get<std::string>().empty() || !host.is_string() ||
        !IsNonNegativeInt((*j)["pid"]) || !IsNonNegativeInt((*j)["since_unix_ms"])) {
      return tl::unexpected("a field of the wrong type in " + Quoted(text));
    }
    return HolderRecord{holder.get<std::string>(), host.get<std::string>(), Int((*j)["pid"]),
                        Int((*j)["since_unix_ms"])};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string(e.what()));
  }
}

tl::expected<HighWaterRecord, std::string> DecodeHighWater(std::string_view text) noexcept {
  try {
    // "lease" is written by this version on every raise; a mark written before it existed,
    // or released, has none.
    auto j = ObjectWithKeys(text, {"unix_ms", "holder"}, {"lease", "fence"});
    if (!j) return tl::unexpected(j.error());
    const bool has_lease = j->contains("lease");
    const bool has_fence = j->contains("fence");
    if (!IsNonNegativeInt((*j)["unix_ms"]) || !(*j)["holder"].is_string() ||
        (has_lease && !IsNonNegativeInt((*j)["lease"])) ||
        (has_fence && !IsNonNegativeInt((*j)["fence"]))) {
      return tl::unexpected("a field of the wrong type in " + Quoted(text));
    }
    return HighWaterRecord{Int((*j)["unix_ms"]), (*j)["holder"].get<std::string>(),
                           has_lease ? Int((*j)["lease"]) : 0, has_fence ? Int((*j)["fence"]) : 0};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string(e.what()));
  }
}

tl::expected<RestoreRecord, std::string> DecodeRestore(std::string_view text) noexcept {
  try {
    auto j = ObjectWithKeys(text, {"above_unix_ms", "cluster_id", "at_unix_ms"});
    if (!j) return tl::unexpected(j.error());
    const auto& cluster = (*j)["cluster_id"];
    if (!IsNonNegativeInt((*j)["above_unix_ms"]) || !IsNonNegativeInt((*j)["at_unix_ms"]) ||
        !cluster.is_string()) {
      return tl::unexpected("a field of the wrong type in " + Quoted(text));
    }
    const std::string& digits = cluster.get_ref<const std::string&>();
    uint64_t id = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      return tl::unexpected("\"cluster_id\" is not a decimal uint64 in " + Quoted(text));
    }
    return RestoreRecord{Int((*j)["above_unix_ms"]), id, Int((*j)["at_unix_ms"])};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string(e.what()));
  }
}

std::string DescribeFleet(const FleetRecord& record) {
  return "epoch " + std::to_string(record.epoch_unix_ms) + " (" +
         FormatTimeText(record.epoch_unix_ms) + "), layout " + record.layout;
}

}  // namespace snowflake::reg::etcd
