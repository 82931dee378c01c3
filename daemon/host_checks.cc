#include "daemon/host_checks.h"

#include <grp.h>
#include <linux/magic.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "daemon/http/tls_credentials.h"
#include "snowflake/time_text.h"

namespace snowflake::daemon {

tl::expected<std::optional<gid_t>, std::string> ResolveGroup(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find_first_not_of("0123456789") == std::string::npos) {
    return static_cast<gid_t>(std::stoul(name));
  }
  std::vector<char> buf(16384);
  group entry{};
  group* found = nullptr;
  const int rc = getgrnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return tl::unexpected("daemon.group: no group named \"" + name +
                          "\" on this host; create it (systemd-sysusers) or fix daemon.group");
  }
  return found->gr_gid;
}

tl::expected<void, std::string> EnsureDirectory(const std::filesystem::path& dir,
                                                std::optional<gid_t> group) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return {};
  std::filesystem::create_directories(dir, ec);
  if (ec) return tl::unexpected("cannot create " + dir.string() + ": " + ec.message());
  if (chmod(dir.c_str(), 0750) != 0) {
    return tl::unexpected("chmod " + dir.string() + ": " + std::strerror(errno));
  }
  if (group && chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return tl::unexpected("chown " + dir.string() + ": " + std::strerror(errno));
  }
  return {};
}

void WarnIfNotInMemory(const std::filesystem::path& runtime_dir) noexcept {
  if (struct statfs fs{}; ::statfs(runtime_dir.c_str(), &fs) == 0 && fs.f_type != TMPFS_MAGIC &&
                          fs.f_type != RAMFS_MAGIC) {
    spdlog::warn(
        "runtime dir {} is not on tmpfs (filesystem type {:#x}): the ring and its "
        "heartbeat are written to disk; use a directory under /run (the unit's "
        "RuntimeDirectory=) or /dev/shm",
        runtime_dir.string(), static_cast<uint64_t>(fs.f_type));
  }
}

tl::expected<void, std::string> CheckConfigAgainstHost(const Config& config,
                                                       Clock& clock) noexcept {
  try {
    if (auto group = ResolveGroup(config.daemon.group); !group) {
      return tl::unexpected(group.error());
    }
    // The front's TLS files as the front will load them (unreadable, not PEM, a key that
    // does not match, a key every user can read).
    if (auto tls = CheckTlsFiles(config.http); !tls) return tl::unexpected(tls.error());
    const int64_t now_ms = clock.NowUnixMs();
    if (config.id.epoch_unix_ms > now_ms) {
      return tl::unexpected("id.epoch " + FormatTimeText(config.id.epoch_unix_ms) +
                            " is later than this host's clock (" + FormatTimeText(now_ms) +
                            "): no ID can be numbered before its epoch; check the clock and "
                            "id.epoch");
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("checking the config: ") + e.what());
  }
}

}  // namespace snowflake::daemon
