// The high-water state file, <state_dir>/high-water.json: how far this daemon may have
// issued IDs, durable across reboots (docs/daemon.md, "Persistence").
//
//   {"version":1,"machine":N,"epoch_unix_ms":E,"reserved_through_unix_ms":R,
//    "last_issued_unix_ms_at_clean_stop":S or null,
//    "segment":{"path":P,"incarnation":I},   (optional)
//    "register":{"claim":L,"cluster_id":"C","revision":V,"fence_revision":F},
//                                                   (optional: etcd only; F optional)
//    "floor_unix_ms":G}                             (optional)
//
// The rule that makes a reboot safe: no ID with a millisecond above R is published until a
// new R covering it has been fsync'd. After a clean stop R is lowered to the last issued
// millisecond (and S records it), so a clean restart does not wait.
//
// "segment" names the segment the reservation covered: the only segment this daemon
// published to while R was its reservation, in its incarnation I. A restart that finds
// that very segment, with no other opener since (its incarnation is still I), knows from
// the segment's last_published_id exactly what was published and need not wait out R
// (docs/design.md, "Restarting on a surviving segment"). A file without it (older
// versions) is trusted only for R.
//
// "register" (a networked register): L is the claim (etcd lease) that made reservation R; a
// restart trusts its segment only if the register's mark was last written by that claim
// (no other holder raised it, hence issued, since). C and V are the register's cluster id
// and the newest revision this daemon saw: a register found older (restored from a backup)
// is refused (docs/etcd-fencing.md). F is the revision of the operators' restore fence this
// daemon saw: only a newer fence admits it past a restore.
//
// "floor_unix_ms" G is the millisecond the writing daemon's generator stays above (its
// start's mark, or a fence it obeyed): a restart on the surviving segment starts above the
// larger of G and the segment's last ID.
//
// One state directory, one daemon: the first Load() or Save() takes an exclusive flock on
// <state_dir>/high-water.json.lock (our pid inside) and holds it for the store's life, so a
// second daemon configured with the same state directory is refused (kInUse) instead of
// overwriting the first one's reservation with an older mark.
//
// A HighWaterStore is not safe for concurrent use; one process (the instance lock) and
// one thread use it. Two stores on one path conflict even within one process.

#ifndef SNOWFLAKE_DAEMON_CORE_HIGH_WATER_STORE_H_
#define SNOWFLAKE_DAEMON_CORE_HIGH_WATER_STORE_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "register/machine_register.h"
#include "util/file_lock.h"
#include "util/file_system.h"

namespace snowflake::daemon {

struct HighWaterState {
  uint32_t machine = 0;
  int64_t epoch_unix_ms = 0;
  int64_t reserved_through_unix_ms = 0;
  std::optional<int64_t> last_issued_unix_ms_at_clean_stop;
  // The segment this reservation covered (absent: unknown).
  std::optional<std::string> segment_path;
  uint64_t segment_incarnation = 0;
  // The claim that made this reservation (etcd: its lease id); nullopt: not known or a
  // backend without claims of its own (file, static).
  std::optional<int64_t> register_claim = std::nullopt;
  // The register as this daemon last saw it (zeros: nothing recorded).
  reg::RegisterIdentity register_seen = {};
  // The millisecond the generator of the daemon that wrote this file stays above: its
  // start's high-water mark, or an operator's fence it obeyed since (0: not recorded). A
  // restart that trusts its surviving segment still starts above it: the segment records
  // only what was published, and a start above another holder's mark that crashed before
  // publishing anything leaves the segment's last ID below that mark.
  int64_t floor_unix_ms = 0;
  friend bool operator==(const HighWaterState&, const HighWaterState&) = default;
};

enum class HighWaterErrorCode {
  kCorrupt,  // the file exists but cannot be trusted: never guess a mark, refuse to start
  kIo,       // cannot read, write or fsync it
  kInUse,    // another live store (another daemon) holds the state directory
};

struct HighWaterError {
  HighWaterErrorCode code;
  std::string message;  // names the file and what to do
  int sys_errno = 0;
};

class HighWaterStore {
 public:
  // `fs` (not owned) must outlive the store.
  explicit HighWaterStore(std::filesystem::path path,
                          util::FileSystem& fs = util::FileSystem::Default())
      : path_(std::move(path)), fs_(&fs) {}

  // The saved state, or nullopt if there is no file (a first start).
  // Errors: kInUse (another daemon uses this state directory: the message names its pid),
  // kCorrupt (unparseable, wrong version, negative or missing fields), kIo.
  [[nodiscard]] tl::expected<std::optional<HighWaterState>, HighWaterError> Load()
      const noexcept;

  // Replaces the file atomically and durably (temporary file, fsync, rename, fsync dir).
  // Errors: kInUse (as Load), kIo; the previous file is then intact.
  // Safe to call from one thread at a time (the reservation thread, or the main thread
  // once that has stopped).
  [[nodiscard]] tl::expected<void, HighWaterError> Save(const HighWaterState& state) noexcept;

  const std::filesystem::path& path() const noexcept { return path_; }
  // <state_dir>/high-water.json.lock.
  std::filesystem::path lock_path() const;

 private:
  // Takes the state directory's lock unless held already.
  tl::expected<void, HighWaterError> EnsureLocked() const noexcept;

  std::filesystem::path path_;
  util::FileSystem* fs_;  // not owned
  // Held from the first Load()/Save() until destruction (mutable: Load() is const).
  mutable std::optional<util::FileLock> lock_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_HIGH_WATER_STORE_H_
