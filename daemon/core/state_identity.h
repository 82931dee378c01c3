// The identity of a state directory: <state_dir>/identity, 128 random bits as 32 lowercase
// hex digits and a newline, written once at the first start on the directory and kept for
// its life. It names the directory in the host marks its daemon writes
// (register/machine_lock.h), so a start can tell its own mark from another daemon's: the
// path cannot, since a pod's emptyDir and the host's daemon may both be
// /var/lib/snowflaked.
//
// Thread-safe for distinct directories; one daemon uses a state directory (its lock,
// high_water_store.h, is held when this is called).

#ifndef SNOWFLAKE_DAEMON_CORE_STATE_IDENTITY_H_
#define SNOWFLAKE_DAEMON_CORE_STATE_IDENTITY_H_

#include <filesystem>
#include <string>
#include <tl/expected.hpp>

namespace snowflake::daemon {

inline constexpr const char* kStateIdentityFileName = "identity";

// The identity of `state_dir`, creating it if the directory has none: a temporary file,
// fsync'd, then linked to its name (never replacing one: link fails if it exists, as
// O_EXCL would) and the directory fsync'd. The file is opened without following a link.
// Errors (a sentence naming the file and what to do): it cannot be created or read, or it
// is not 32 lowercase hex digits (delete it: the next start writes a new one, and the host
// marks written under the old one then count as another daemon's, which can only make a
// start wait longer).
[[nodiscard]] tl::expected<std::string, std::string> LoadOrCreateStateIdentity(
    const std::filesystem::path& state_dir) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_STATE_IDENTITY_H_
