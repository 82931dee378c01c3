// The "file" register backend: a JSON file on local disk that serves the daemons of one
// host (docs/design.md §7).
//
// Files (P = the register path, default <state_dir>/register.json):
//   P           {"format":"snowflaked-register","version":1,"epoch_unix_ms":E,
//                "layout":"time41-machine10-sequence12" (absent: written before layouts
//                could be chosen, so the default),
//                "machines":[{"machine":N,"holder":H,"high_water_unix_ms":W,
//                             "claimed_unix_ms":C,"pid":I}, ...]}
//               replaced atomically (temporary file, fsync, rename, fsync directory);
//               an entry with holder "" is free but keeps its high-water mark.
//   P.lock      flock'd (exclusive, blocking) around every read-modify-write of P.
//   <host lock dir>/machine-N.lock (machine_lock.h; /run/lock/snowflaked)
//               flock'd by the daemon holding N for its whole life, with its pid inside.
//               This, not P, is what stops two live daemons sharing N: the directory is
//               one for the whole host, so daemons with separate registers, state
//               directories or a static register are checked against each other too, and a
//               SIGKILLed daemon's lock goes with it.
//
// A FileRegister is not safe for concurrent use by several threads; any number of
// processes may use one register file at the same time.

#ifndef SNOWFLAKE_REGISTER_FILE_REGISTER_H_
#define SNOWFLAKE_REGISTER_FILE_REGISTER_H_

#include <sys/types.h>
#include <toml++/toml.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "register/machine_register.h"
#include "snowflake/clock.h"
#include "snowflake/id_layout.h"
#include "util/file_lock.h"
#include "util/toml_fields.h"

namespace snowflake::reg {

struct FileRegisterOptions {
  std::filesystem::path path;
  uint32_t first_machine = 0;  // numbers this daemon may claim: first..last
  uint32_t last_machine = kDefaultIdBits.max_machine();
  // The fleet's ID layout: recorded in the register file when it is first written; a
  // claim under another layout is refused (kEpochMismatch). last_machine must be within it.
  IdBits id_bits = kDefaultIdBits;
  // Where the per-number locks live: one directory for the whole host. Empty:
  // HostLockDir() (machine_lock.h).
  std::filesystem::path host_lock_dir;
  // The clock of a claim's recorded time and of the bounded wait for the register's lock
  // (not owned; it must outlive the register). Null: the real one.
  Clock* clock = &Clock::Real();
};

// The file backend's own [register] keys: none. Its path and range are keys every backend
// shares (register.path, register.machines; RegisterCommon), since the sample config sets
// them whatever the backend.
struct FileRegisterConfig {
  friend bool operator==(const FileRegisterConfig&, const FileRegisterConfig&) = default;
};
// Never fails: the keys that are not shared were refused before (register_backends.h).
[[nodiscard]] tl::expected<FileRegisterConfig, util::ConfigError> ParseFileRegisterConfig(
    const toml::table& register_table, std::string_view source) noexcept;
// The register at common.file_path for common's range, with the host's lock directory.
std::unique_ptr<MachineRegister> MakeFileRegister(const FileRegisterConfig& own,
                                                  const RegisterCommon& common);

// One number as the register records it.
struct RegisterEntry {
  uint32_t machine = 0;
  std::string holder_id;  // "" = released (free), the mark is kept
  int64_t high_water_unix_ms = 0;
  int64_t claimed_unix_ms = 0;
  int64_t pid = 0;                // the pid of the last claim
  bool in_use = false;            // a live process holds the number's lock (at the time of List())
  std::optional<pid_t> live_pid;  // that process's pid, if it wrote one
};

class FileRegister final : public MachineRegister {
 public:
  explicit FileRegister(FileRegisterOptions options);
  ~FileRegister() override;

  // The holder's own number if the register has one in range (kInUse if a live daemon
  // holds it), else the lowest unassigned number in range whose host-wide lock is free
  // (a number another daemon of this host holds, through any register, is skipped).
  // Creates the register if missing; an empty register adopts the request's epoch and the
  // options' layout. kEpochMismatch: the register's epoch or layout is another.
  tl::expected<MachineClaim, RegisterError> Claim(const ClaimRequest& request) noexcept override;
  tl::expected<void, RegisterError> UpdateHighWater(int64_t unix_ms) noexcept override;
  tl::expected<void, RegisterError> RecordCleanStop(int64_t last_issued_unix_ms) noexcept override;
  std::string_view backend_name() const noexcept override { return "file"; }
  std::string location() const override { return options_.path.string(); }

  // For `snowflakectl register list`: every recorded number, ascending. A missing
  // register is empty. Errors: kCorrupt, kUnreadable.
  tl::expected<std::vector<RegisterEntry>, RegisterError> List() const noexcept;
  // For `snowflakectl register release N`: frees N for another holder, keeping its mark.
  // Errors: kInUse (a live daemon holds it), kInvalidRequest (N is not assigned),
  // kCorrupt, kUnreadable.
  tl::expected<void, RegisterError> Release(uint32_t machine) noexcept override;
  // List() as the operator sees it: a live holder's pid, else the last claim's.
  tl::expected<std::vector<RegisterListEntry>, RegisterError> ListNumbers() noexcept override;
  // Errors: kUnsupported (a file register is this host's own and is never restored behind
  // the daemon's back).
  tl::expected<RaiseAllResult, RegisterError> RaiseAll(int64_t above_unix_ms,
                                                       bool while_running) noexcept override;

  // The lock file that marks `machine` as held on this host.
  std::filesystem::path MachineLockPath(uint32_t machine) const;
  const std::filesystem::path& host_lock_dir() const noexcept { return options_.host_lock_dir; }

 private:
  // Writes the claimed number's mark; raises only, unless may_lower (a clean stop).
  tl::expected<void, RegisterError> WriteHighWater(int64_t unix_ms, bool may_lower) noexcept;

  FileRegisterOptions options_;
  std::optional<util::FileLock> machine_lock_;  // held from Claim() until destruction
  std::optional<uint32_t> machine_;
  std::string holder_id_;
};

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_FILE_REGISTER_H_
