#include "daemon/core/high_water_store.h"

#include <cerrno>
#include <charconv>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"

namespace snowflake::daemon {
namespace {

using json = nlohmann::json;
constexpr int kVersion = 1;

}  // namespace

std::filesystem::path HighWaterStore::lock_path() const {
  std::filesystem::path lock = path_;
  lock += ".lock";
  return lock;
}

tl::expected<void, HighWaterError> HighWaterStore::EnsureLocked() const noexcept {
  if (lock_) return {};
  try {
    auto lock = util::FileLock::Acquire(lock_path(), /*wait=*/false, /*write_pid=*/true, 0644);
    if (!lock) {
      if (lock.error().held_by_other) {
        const std::string who = lock.error().holder_pid
                                    ? "pid " + std::to_string(*lock.error().holder_pid)
                                    : std::string("another process");
        return tl::unexpected(HighWaterError{
            HighWaterErrorCode::kInUse,
            "the state directory " + path_.parent_path().string() + " is in use by " + who +
                " (" + lock_path().string() +
                " is locked): two daemons must never share a state directory, one would "
                "overwrite the other's high-water reservation. Give each daemon its own "
                "daemon.state_dir (--state-dir)",
            EBUSY});
      }
      return tl::unexpected(
          HighWaterError{HighWaterErrorCode::kIo,
                         "cannot lock the state directory: " + lock.error().message, errno});
    }
    lock_ = std::move(*lock);
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(
        HighWaterError{HighWaterErrorCode::kIo, lock_path().string() + ": " + e.what()});
  }
}

tl::expected<std::optional<HighWaterState>, HighWaterError> HighWaterStore::Load() const noexcept {
  if (auto locked = EnsureLocked(); !locked) return tl::unexpected(locked.error());
  try {
    bool missing = false;
    auto text = util::ReadWholeFile(path_, &missing);
    if (!text) {
      if (missing) return std::nullopt;
      return tl::unexpected(HighWaterError{HighWaterErrorCode::kIo, text.error(), errno});
    }
    auto corrupt = [&](const std::string& why) {
      return tl::unexpected(HighWaterError{
          HighWaterErrorCode::kCorrupt,
          "high-water file " + path_.string() + " is corrupt (" + why +
              "): refusing to guess how far IDs were issued. If this machine's clock is known "
              "to be past every ID it issued, move the file away and start again"});
    };
    json doc;
    try {
      doc = json::parse(*text);
    } catch (const json::exception& e) {
      return corrupt(e.what());
    }
    try {
      if (!doc.is_object()) return corrupt("not a JSON object");
      if (doc.at("version").get<int>() != kVersion) {
        return corrupt("version " + doc.at("version").dump() + ", expected " +
                       std::to_string(kVersion));
      }
      HighWaterState state;
      state.machine = doc.at("machine").get<uint32_t>();
      state.epoch_unix_ms = doc.at("epoch_unix_ms").get<int64_t>();
      state.reserved_through_unix_ms = doc.at("reserved_through_unix_ms").get<int64_t>();
      const json& stop = doc.at("last_issued_unix_ms_at_clean_stop");
      if (!stop.is_null()) state.last_issued_unix_ms_at_clean_stop = stop.get<int64_t>();
      if (const auto seg = doc.find("segment"); seg != doc.end() && !seg->is_null()) {
        state.segment_path = seg->at("path").get<std::string>();
        state.segment_incarnation = seg->at("incarnation").get<uint64_t>();
      }
      if (const auto reg = doc.find("register"); reg != doc.end() && !reg->is_null()) {
        if (const auto claim = reg->find("claim"); claim != reg->end() && !claim->is_null()) {
          state.register_claim = claim->get<int64_t>();
        }
        const std::string cluster = reg->at("cluster_id").get<std::string>();
        const auto [end, ec] = std::from_chars(cluster.data(), cluster.data() + cluster.size(),
                                               state.register_seen.cluster_id);
        if (cluster.empty() || ec != std::errc() || end != cluster.data() + cluster.size()) {
          return corrupt("register.cluster_id is not a decimal uint64");
        }
        state.register_seen.revision = reg->at("revision").get<int64_t>();
        // Absent in files written before the restore fence was tied to its revision.
        if (const auto fence = reg->find("fence_revision"); fence != reg->end()) {
          state.register_seen.fence_revision = fence->get<int64_t>();
        }
      }
      // Absent in files written before the floor was recorded: 0, the segment decides.
      if (const auto floor = doc.find("floor_unix_ms"); floor != doc.end()) {
        state.floor_unix_ms = floor->get<int64_t>();
      }
      if (state.reserved_through_unix_ms < 0 || state.epoch_unix_ms < 0 ||
          state.floor_unix_ms < 0) {
        return corrupt("negative time");
      }
      return state;
    } catch (const json::exception& e) {
      return corrupt(e.what());
    }
  } catch (const std::exception& e) {
    return tl::unexpected(
        HighWaterError{HighWaterErrorCode::kIo, path_.string() + ": " + e.what()});
  }
}

tl::expected<void, HighWaterError> HighWaterStore::Save(const HighWaterState& state) noexcept {
  if (auto locked = EnsureLocked(); !locked) return tl::unexpected(locked.error());
  try {
    json doc = {{"version", kVersion},
                {"machine", state.machine},
                {"epoch_unix_ms", state.epoch_unix_ms},
                {"reserved_through_unix_ms", state.reserved_through_unix_ms},
                {"last_issued_unix_ms_at_clean_stop", nullptr}};
    if (state.last_issued_unix_ms_at_clean_stop) {
      doc["last_issued_unix_ms_at_clean_stop"] = *state.last_issued_unix_ms_at_clean_stop;
    }
    if (state.segment_path) {
      doc["segment"] = {{"path", *state.segment_path},
                        {"incarnation", state.segment_incarnation}};
    }
    if (state.register_claim || state.register_seen != reg::RegisterIdentity{}) {
      doc["register"] = {{"claim", nullptr},
                         // A string: cluster ids use all 64 bits.
                         {"cluster_id", std::to_string(state.register_seen.cluster_id)},
                         {"revision", state.register_seen.revision}};
      if (state.register_seen.fence_revision != 0) {
        doc["register"]["fence_revision"] = state.register_seen.fence_revision;
      }
      if (state.register_claim) doc["register"]["claim"] = *state.register_claim;
    }
    if (state.floor_unix_ms != 0) doc["floor_unix_ms"] = state.floor_unix_ms;
    auto written = util::WriteFileAtomically(path_, doc.dump() + "\n", 0644, *fs_);
    if (!written) {
      const int err = errno;
      return tl::unexpected(HighWaterError{
          HighWaterErrorCode::kIo, "cannot save the high-water mark: " + written.error(), err});
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(
        HighWaterError{HighWaterErrorCode::kIo, path_.string() + ": " + e.what()});
  }
}

}  // namespace snowflake::daemon
