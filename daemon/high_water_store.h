// The high-water state file, <state_dir>/high-water.json: how far this daemon may have
// issued IDs, durable across reboots (docs/daemon.md, "Persistence").
//
//   {"version":1,"machine":N,"epoch_unix_ms":E,"reserved_through_unix_ms":R,
//    "last_issued_unix_ms_at_clean_stop":S or null}
//
// The rule that makes a reboot safe: no ID with a millisecond above R is published until a
// new R covering it has been fsync'd. After a clean stop R is lowered to the last issued
// millisecond (and S records it), so a clean restart does not wait.
//
// A HighWaterStore is not safe for concurrent use; one process (the instance lock) and
// one thread use it.

#ifndef SNOWFLAKE_DAEMON_HIGH_WATER_STORE_H_
#define SNOWFLAKE_DAEMON_HIGH_WATER_STORE_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <tl/expected.hpp>

namespace snowflake {

struct HighWaterState {
  uint32_t machine = 0;
  int64_t epoch_unix_ms = 0;
  int64_t reserved_through_unix_ms = 0;
  std::optional<int64_t> last_issued_unix_ms_at_clean_stop;
  friend bool operator==(const HighWaterState&, const HighWaterState&) = default;
};

enum class HighWaterErrorCode {
  kCorrupt,  // the file exists but cannot be trusted: never guess a mark, refuse to start
  kIo,       // cannot read, write or fsync it
};

struct HighWaterError {
  HighWaterErrorCode code;
  std::string message;  // names the file and what to do
  int sys_errno = 0;
};

class HighWaterStore {
 public:
  explicit HighWaterStore(std::filesystem::path path) : path_(std::move(path)) {}

  // The saved state, or nullopt if there is no file (a first start).
  // Errors: kCorrupt (unparseable, wrong version, negative or missing fields), kIo.
  tl::expected<std::optional<HighWaterState>, HighWaterError> Load() const noexcept;

  // Replaces the file atomically and durably (temporary file, fsync, rename, fsync dir).
  // Errors: kIo; the previous file is then intact.
  tl::expected<void, HighWaterError> Save(const HighWaterState& state) noexcept;

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace snowflake

#endif  // SNOWFLAKE_DAEMON_HIGH_WATER_STORE_H_
