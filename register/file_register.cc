#include "register/file_register.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "register/machine_lock.h"
#include "snowflake/time_text.h"
#include "util/atomic_file.h"

namespace snowflake::reg {
namespace {

using json = nlohmann::json;

constexpr std::string_view kFormat = "snowflaked-register";
constexpr int kFormatVersion = 1;

struct Document {
  std::optional<int64_t> epoch_unix_ms;  // unset only in a register never written
  // The fleet's ID layout. A register written before layouts could be chosen has no
  // "layout" and holds the default's numbers: it reads as the default.
  IdBits id_bits = kDefaultIdBits;
  std::map<uint32_t, RegisterEntry> entries;
};

RegisterError Error(RegisterErrorCode code, std::string message) {
  return RegisterError{code, std::move(message)};
}

std::filesystem::path LockPathOf(const std::filesystem::path& path) {
  std::filesystem::path p = path;
  p += ".lock";
  return p;
}

std::string CorruptMessage(const std::filesystem::path& path, const std::string& why) {
  return "register " + path.string() + " is corrupt (" + why +
         "): restore it or move it away; a number's high-water mark is also kept in each "
         "daemon's state directory, so this host stays safe";
}

tl::expected<Document, RegisterError> Load(const std::filesystem::path& path) {
  bool missing = false;
  auto text = util::ReadWholeFile(path, &missing);
  if (!text) {
    if (missing) return Document{};
    return tl::unexpected(
        Error(RegisterErrorCode::kUnreadable, "cannot read register: " + text.error()));
  }
  try {
    const json doc = json::parse(*text);
    if (!doc.is_object() || doc.value("format", "") != kFormat) {
      return tl::unexpected(
          Error(RegisterErrorCode::kCorrupt, CorruptMessage(path, "not a snowflaked register")));
    }
    if (doc.at("version").get<int>() != kFormatVersion) {
      return tl::unexpected(
          Error(RegisterErrorCode::kCorrupt,
                CorruptMessage(path, "version " + doc.at("version").dump() + ", expected " +
                                         std::to_string(kFormatVersion))));
    }
    Document out;
    out.epoch_unix_ms = doc.at("epoch_unix_ms").get<int64_t>();
    if (doc.contains("layout")) {
      auto bits = ParseIdBits(doc.at("layout").get<std::string>(), *out.epoch_unix_ms);
      if (!bits) {
        return tl::unexpected(
            Error(RegisterErrorCode::kCorrupt, CorruptMessage(path, bits.error())));
      }
      out.id_bits = *bits;
    }
    for (const json& e : doc.at("machines")) {
      RegisterEntry entry;
      entry.machine = e.at("machine").get<uint32_t>();
      entry.holder_id = e.at("holder").get<std::string>();
      entry.high_water_unix_ms = e.at("high_water_unix_ms").get<int64_t>();
      entry.claimed_unix_ms = e.value("claimed_unix_ms", int64_t{0});
      entry.pid = e.value("pid", int64_t{0});
      if (entry.machine > out.id_bits.max_machine()) {
        return tl::unexpected(
            Error(RegisterErrorCode::kCorrupt,
                  CorruptMessage(path, "machine " + std::to_string(entry.machine) +
                                           " is out of range 0-" +
                                           std::to_string(out.id_bits.max_machine()) +
                                           " of layout " + FormatIdBits(out.id_bits))));
      }
      if (!out.entries.emplace(entry.machine, entry).second) {
        return tl::unexpected(Error(
            RegisterErrorCode::kCorrupt,
            CorruptMessage(path, "machine " + std::to_string(entry.machine) + " is listed twice")));
      }
    }
    return out;
  } catch (const json::exception& e) {
    return tl::unexpected(Error(RegisterErrorCode::kCorrupt, CorruptMessage(path, e.what())));
  }
}

tl::expected<void, RegisterError> Save(const std::filesystem::path& path, const Document& doc) {
  try {
    json machines = json::array();
    for (const auto& [machine, e] : doc.entries) {
      machines.push_back({{"machine", machine},
                          {"holder", e.holder_id},
                          {"high_water_unix_ms", e.high_water_unix_ms},
                          {"claimed_unix_ms", e.claimed_unix_ms},
                          {"pid", e.pid}});
    }
    const json out = {{"format", kFormat},
                      {"version", kFormatVersion},
                      {"epoch_unix_ms", doc.epoch_unix_ms.value_or(0)},
                      {"layout", IdBitsRecordName(doc.id_bits)},
                      {"machines", std::move(machines)}};
    auto written = util::WriteFileAtomically(path, out.dump(2) + "\n", 0644);
    if (!written) {
      return tl::unexpected(
          Error(RegisterErrorCode::kUnreadable, "cannot write register: " + written.error()));
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(Error(RegisterErrorCode::kUnreadable,
                                "cannot write register " + path.string() + ": " + e.what()));
  }
}

// The options' clock, or the real one.
Clock& ClockOf(const FileRegisterOptions& options) {
  return options.clock != nullptr ? *options.clock : Clock::Real();
}

// Holds the register's own lock for one read-modify-write. Bounded: any process that
// can open the lock file could hold it forever, and the daemon must never wait without a
// bound (the reservation thread retries; the fill loop never waits for it); the bound is
// measured on `clock`.
constexpr std::chrono::milliseconds kRegisterLockBound{2000};
tl::expected<util::FileLock, RegisterError> LockRegister(const std::filesystem::path& path,
                                                         Clock& clock) {
  auto lock =
      util::FileLock::AcquireWithin(LockPathOf(path), kRegisterLockBound, /*write_pid=*/false,
                                    util::FileLock::kDefaultMode, clock);
  if (!lock) {
    return tl::unexpected(Error(
        lock.error().held_by_other ? RegisterErrorCode::kTimedOut : RegisterErrorCode::kUnreadable,
        "cannot lock register: " + lock.error().message));
  }
  return std::move(*lock);
}

// The number a claim takes, with its host-wide lock: the holder's own (the lowest, should
// a hand-edited register list several; locked by another process: kInUse, naming who and
// what to do), else the lowest that nobody holds. A number the register lists as free but
// whose lock a live process holds (a daemon of this host using another register, or a
// static one) is skipped.
tl::expected<std::pair<uint32_t, util::FileLock>, RegisterError> LockNumberFor(
    const Document& doc, const ClaimRequest& request, const FileRegisterOptions& options) {
  for (const auto& [machine, entry] : doc.entries) {
    if (entry.holder_id != request.holder_id || machine < options.first_machine ||
        machine > options.last_machine) {
      continue;
    }
    auto lock = AcquireMachineLock(options.host_lock_dir, machine);
    if (lock) return std::pair<uint32_t, util::FileLock>(machine, std::move(*lock));
    if (!lock.error().held_by_other) {
      return tl::unexpected(Error(RegisterErrorCode::kUnreadable, lock.error().message));
    }
    const std::string by = lock.error().holder_pid
                               ? "pid " + std::to_string(*lock.error().holder_pid)
                               : "another process";
    return tl::unexpected(
        Error(RegisterErrorCode::kInUse,
              "machine " + std::to_string(machine) + " is in use by " + by + " on this host (" +
                  options.path.string() + " records it for holder \"" + request.holder_id +
                  "\"; its lock is in " + options.host_lock_dir.string() +
                  "): a daemon with the same holder id is still running, or a daemon with "
                  "another register took the number while this one was stopped; stop "
                  "that daemon first, or give each daemon its own daemon.instance (or "
                  "register.holder_id) and daemons with separate registers separate "
                  "register.machines ranges"));
  }
  for (uint32_t m = options.first_machine; m <= options.last_machine; ++m) {
    const auto it = doc.entries.find(m);
    if (it != doc.entries.end() && !it->second.holder_id.empty()) continue;
    auto lock = AcquireMachineLock(options.host_lock_dir, m);
    if (lock) return std::pair<uint32_t, util::FileLock>(m, std::move(*lock));
    if (!lock.error().held_by_other) {
      return tl::unexpected(Error(RegisterErrorCode::kUnreadable, lock.error().message));
    }
  }
  return tl::unexpected(
      Error(RegisterErrorCode::kNoFreeNumber,
            "no free machine number in " + std::to_string(options.first_machine) + "-" +
                std::to_string(options.last_machine) + " in register " + options.path.string() +
                ": every one is assigned to a holder or held by another daemon of this "
                "host (locks in " +
                options.host_lock_dir.string() +
                "); release unused ones with `snowflakectl register release N` or widen "
                "register.machines"));
}

}  // namespace

tl::expected<FileRegisterConfig, util::ConfigError> ParseFileRegisterConfig(
    const toml::table&, std::string_view) noexcept {
  return FileRegisterConfig{};
}

std::unique_ptr<MachineRegister> MakeFileRegister(const FileRegisterConfig&,
                                                  const RegisterCommon& common) {
  return std::make_unique<FileRegister>(FileRegisterOptions{
      .path = common.file_path,
      .first_machine = common.first_machine,
      .last_machine = common.last_machine,
      .id_bits = common.id_bits,
      .host_lock_dir = HostLockDir(),
  });
}

FileRegister::FileRegister(FileRegisterOptions options) : options_(std::move(options)) {
  if (options_.host_lock_dir.empty()) options_.host_lock_dir = HostLockDir();
}
FileRegister::~FileRegister() = default;

tl::expected<std::vector<RegisterListEntry>, RegisterError> FileRegister::ListNumbers() noexcept {
  try {
    auto entries = List();
    if (!entries) return tl::unexpected(entries.error());
    std::vector<RegisterListEntry> out;
    for (const RegisterEntry& e : *entries) {
      out.push_back(RegisterListEntry{
          .machine = e.machine,
          .holder = e.holder_id,
          .host = "",
          .pid = e.live_pid ? *e.live_pid : e.pid,
          .since_unix_ms = e.claimed_unix_ms,
          .live = e.in_use,
          .lease_left_s = std::nullopt,
          .high_water_unix_ms = e.high_water_unix_ms,
      });
    }
    return out;
  } catch (const std::exception& e) {
    return tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, e.what()});
  }
}

tl::expected<RaiseAllResult, RegisterError> FileRegister::RaiseAll(int64_t, bool) noexcept {
  return tl::unexpected(RegisterError{
      RegisterErrorCode::kUnsupported,
      "raise-all is for the etcd register; a file register is this host's own and is never "
      "restored behind the daemon's back"});
}

std::filesystem::path FileRegister::MachineLockPath(uint32_t machine) const {
  return reg::MachineLockPath(options_.host_lock_dir, machine);
}

tl::expected<MachineClaim, RegisterError> FileRegister::Claim(
    const ClaimRequest& request) noexcept {
  try {
    if (machine_) {
      return tl::unexpected(Error(RegisterErrorCode::kInvalidRequest, "Claim() called twice"));
    }
    if (request.holder_id.empty()) {
      return tl::unexpected(Error(RegisterErrorCode::kInvalidRequest, "empty holder id"));
    }
    if (options_.first_machine > options_.last_machine ||
        options_.last_machine > options_.id_bits.max_machine()) {
      return tl::unexpected(Error(RegisterErrorCode::kInvalidRequest,
                                  "bad machine range " + std::to_string(options_.first_machine) +
                                      "-" + std::to_string(options_.last_machine) +
                                      ": the layout " + FormatIdBits(options_.id_bits) +
                                      " numbers machines 0-" +
                                      std::to_string(options_.id_bits.max_machine())));
    }
    auto register_lock = LockRegister(options_.path, ClockOf(options_));
    if (!register_lock) return tl::unexpected(register_lock.error());
    auto doc = Load(options_.path);
    if (!doc) return tl::unexpected(doc.error());

    const bool register_written = doc->epoch_unix_ms.has_value();
    if (!doc->epoch_unix_ms) doc->epoch_unix_ms = request.epoch_unix_ms;
    if (*doc->epoch_unix_ms != request.epoch_unix_ms) {
      return tl::unexpected(Error(
          RegisterErrorCode::kEpochMismatch,
          "register " + options_.path.string() + " belongs to a fleet with epoch " +
              FormatTimeText(*doc->epoch_unix_ms) + " (" + std::to_string(*doc->epoch_unix_ms) +
              "), but id.epoch is " + FormatTimeText(request.epoch_unix_ms) + " (" +
              std::to_string(request.epoch_unix_ms) +
              "): every daemon of a fleet must use one epoch; fix id.epoch or use another "
              "register"));
    }
    // A register never written takes this daemon's layout; one written keeps its own.
    if (doc->entries.empty() && !register_written) doc->id_bits = options_.id_bits;
    if (doc->id_bits != options_.id_bits) {
      return tl::unexpected(Error(
          RegisterErrorCode::kEpochMismatch,
          "register " + options_.path.string() + " belongs to a fleet with ID layout " +
              DescribeIdBits(doc->id_bits, *doc->epoch_unix_ms) + ", but id.layout is " +
              DescribeIdBits(options_.id_bits, *doc->epoch_unix_ms) +
              ": every daemon of a fleet must use one layout for the life of its epoch; set "
              "id.layout = \"" +
              FormatIdBits(doc->id_bits) + "\", or start a new fleet (a new epoch and register)"));
    }

    auto chosen = LockNumberFor(*doc, request, options_);
    if (!chosen) return tl::unexpected(chosen.error());
    auto& [machine, lock] = *chosen;

    RegisterEntry& entry = doc->entries[machine];
    entry.machine = machine;
    entry.holder_id = request.holder_id;
    entry.claimed_unix_ms = ClockOf(options_).NowUnixMs();
    entry.pid = getpid();
    if (auto saved = Save(options_.path, *doc); !saved) return tl::unexpected(saved.error());

    machine_ = machine;
    machine_lock_ = std::move(lock);
    holder_id_ = request.holder_id;
    return MachineClaim{.machine = machine, .high_water_unix_ms = entry.high_water_unix_ms};
  } catch (const std::exception& e) {
    return tl::unexpected(Error(RegisterErrorCode::kUnreadable,
                                "register " + options_.path.string() + ": " + e.what()));
  }
}

tl::expected<void, RegisterError> FileRegister::UpdateHighWater(int64_t unix_ms) noexcept {
  return WriteHighWater(unix_ms, /*may_lower=*/false);
}

tl::expected<void, RegisterError> FileRegister::RecordCleanStop(
    int64_t last_issued_unix_ms) noexcept {
  return WriteHighWater(last_issued_unix_ms, /*may_lower=*/true);
}

tl::expected<void, RegisterError> FileRegister::WriteHighWater(int64_t unix_ms,
                                                               bool may_lower) noexcept {
  try {
    if (!machine_) {
      return tl::unexpected(Error(RegisterErrorCode::kNotClaimed, "no number claimed yet"));
    }
    auto register_lock = LockRegister(options_.path, ClockOf(options_));
    if (!register_lock) return tl::unexpected(register_lock.error());
    auto doc = Load(options_.path);
    if (!doc) return tl::unexpected(doc.error());
    RegisterEntry& entry = doc->entries[*machine_];
    if (entry.holder_id.empty()) {
      // Released by an operator while we hold it (release refuses that, but a hand edit
      // might not): put ourselves back, we are still the live holder.
      entry.machine = *machine_;
      entry.holder_id = holder_id_;
      entry.pid = getpid();
    }
    if (unix_ms == entry.high_water_unix_ms || (!may_lower && unix_ms < entry.high_water_unix_ms)) {
      return {};
    }
    entry.high_water_unix_ms = unix_ms;
    return Save(options_.path, *doc);
  } catch (const std::exception& e) {
    return tl::unexpected(Error(RegisterErrorCode::kUnreadable,
                                "register " + options_.path.string() + ": " + e.what()));
  }
}

tl::expected<std::vector<RegisterEntry>, RegisterError> FileRegister::List() const noexcept {
  try {
    auto doc = Load(options_.path);
    if (!doc) return tl::unexpected(doc.error());
    std::vector<RegisterEntry> out;
    for (auto& [machine, entry] : doc->entries) {
      entry.in_use = IsMachineLocked(options_.host_lock_dir, machine, &entry.live_pid);
      out.push_back(entry);
    }
    return out;
  } catch (const std::exception& e) {
    return tl::unexpected(Error(RegisterErrorCode::kUnreadable,
                                "register " + options_.path.string() + ": " + e.what()));
  }
}

tl::expected<void, RegisterError> FileRegister::Release(uint32_t machine) noexcept {
  try {
    auto register_lock = LockRegister(options_.path, ClockOf(options_));
    if (!register_lock) return tl::unexpected(register_lock.error());
    auto doc = Load(options_.path);
    if (!doc) return tl::unexpected(doc.error());
    const auto it = doc->entries.find(machine);
    if (it == doc->entries.end() || it->second.holder_id.empty()) {
      return tl::unexpected(Error(
          RegisterErrorCode::kInvalidRequest,
          "machine " + std::to_string(machine) + " is not assigned in " + options_.path.string()));
    }
    std::optional<pid_t> pid;
    if (IsMachineLocked(options_.host_lock_dir, machine, &pid)) {
      return tl::unexpected(
          Error(RegisterErrorCode::kInUse,
                "machine " + std::to_string(machine) + " is in use by " +
                    (pid ? "pid " + std::to_string(*pid) : std::string("a live process")) +
                    ": stop that daemon first"));
    }
    it->second.holder_id.clear();
    return Save(options_.path, *doc);
  } catch (const std::exception& e) {
    return tl::unexpected(Error(RegisterErrorCode::kUnreadable,
                                "register " + options_.path.string() + ": " + e.what()));
  }
}

}  // namespace snowflake::reg
