// What the host must offer a config before the daemon starts on it: the clients' group,
// a clock past the epoch, the runtime and state directories. --check-config runs the
// same checks as a start (CheckConfigAgainstHost), so it refuses what a start would.
//
// Every function is safe to call from any thread.

#ifndef SNOWFLAKE_DAEMON_HOST_CHECKS_H_
#define SNOWFLAKE_DAEMON_HOST_CHECKS_H_

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "daemon/config/config.h"
#include "snowflake/clock.h"

namespace snowflake::daemon {

// What --check-config verifies beyond the file itself, and what a start would refuse
// first: daemon.group names a group of this host; the HTTP front's TLS files load (a
// private key no other user can read, matching its certificate); the epoch is not later
// than `clock`.
// Errors: one sentence naming the key and what to do.
[[nodiscard]] tl::expected<void, std::string> CheckConfigAgainstHost(const Config& config,
                                                                     Clock& clock) noexcept;

// daemon.group as a gid: nullopt for "" (the daemon's own group), a number as given, else
// the group of that name. Errors: no such group (the sentence says what to do).
[[nodiscard]] tl::expected<std::optional<gid_t>, std::string> ResolveGroup(const std::string& name);

// Creates a missing directory (mode 0750, in `group`); leaves an existing one alone.
// Errors: a sentence naming the directory and errno's text.
[[nodiscard]] tl::expected<void, std::string> EnsureDirectory(const std::filesystem::path& dir,
                                                              std::optional<gid_t> group);

// A ring on disk outlives a power loss. The segment's boot id keeps a ring of an earlier
// boot from being trusted, but the ring belongs in memory: logs a warning naming the
// filesystem when `runtime_dir` is neither tmpfs nor ramfs.
void WarnIfNotInMemory(const std::filesystem::path& runtime_dir) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HOST_CHECKS_H_
