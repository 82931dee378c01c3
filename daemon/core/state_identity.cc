#include "daemon/core/state_identity.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "base/unique_fd.h"

namespace snowflake::daemon {
namespace {

constexpr size_t kIdentityBytes = 16;  // 128 bits: two directories never draw the same
constexpr size_t kIdentityDigits = 2 * kIdentityBytes;

std::string Failure(const std::filesystem::path& path, const std::string& step, int err) {
  return "cannot " + step + " the state directory's identity " + path.string() + ": " +
         std::strerror(err) + ". The daemon needs to write and read its state directory";
}

bool IsIdentity(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text.size() == kIdentityDigits &&
         text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Reads the identity file. nullopt: there is none.
tl::expected<std::optional<std::string>, std::string> Read(const std::filesystem::path& path) {
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return tl::unexpected(Failure(path, "open", errno));
  }
  char buffer[kIdentityDigits + 2];
  size_t size = 0;
  for (;;) {
    const ssize_t n = read(fd.get(), buffer + size, sizeof buffer - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tl::unexpected(Failure(path, "read", errno));
    size += static_cast<size_t>(n);
    if (n == 0 || size == sizeof buffer) break;
  }
  const std::string_view text(buffer, size);
  if (!IsIdentity(text)) {
    return tl::unexpected(
        "the state directory's identity " + path.string() +
        " is not 32 lowercase hex digits: something other than snowflaked wrote it. Delete it: "
        "the next start writes a new one (host marks written under the old one then count as "
        "another daemon's, which can only make a start wait longer)");
  }
  return std::optional<std::string>(std::string(text.substr(0, kIdentityDigits)));
}

tl::expected<void, std::string> Create(const std::filesystem::path& path) {
  unsigned char bits[kIdentityBytes];
  for (size_t got = 0; got < sizeof bits;) {
    const ssize_t n = getrandom(bits + got, sizeof bits - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tl::unexpected(Failure(path, "draw random bits for", errno));
    got += static_cast<size_t>(n);
  }
  std::string text;
  static constexpr char kHex[] = "0123456789abcdef";
  for (const unsigned char b : bits) {
    text += kHex[b >> 4];
    text += kHex[b & 0xf];
  }
  text += '\n';
  // A temporary file first, complete and durable, then linked to its name: a crash leaves
  // either no identity or a whole one, and an existing one is never replaced.
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    const UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.get() < 0) return tl::unexpected(Failure(tmp, "create", errno));
    if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      const int err = errno != 0 ? errno : EIO;
      unlink(tmp.c_str());
      return tl::unexpected(Failure(tmp, "write", err));
    }
    if (fsync(fd.get()) != 0) {
      const int err = errno;
      unlink(tmp.c_str());
      return tl::unexpected(Failure(tmp, "fsync", err));
    }
  }
  const int linked = link(tmp.c_str(), path.c_str());
  const int link_err = errno;
  unlink(tmp.c_str());
  if (linked != 0 && link_err != EEXIST) return tl::unexpected(Failure(path, "create", link_err));
  const UniqueFd dir(open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || fsync(dir.get()) != 0) {
    return tl::unexpected(Failure(path.parent_path(), "fsync the directory of", errno));
  }
  return {};
}

}  // namespace

tl::expected<std::string, std::string> LoadOrCreateStateIdentity(
    const std::filesystem::path& state_dir) noexcept {
  try {
    const std::filesystem::path path = state_dir / kStateIdentityFileName;
    auto existing = Read(path);
    if (!existing) return tl::unexpected(existing.error());
    if (*existing) return **existing;
    if (auto created = Create(path); !created) return tl::unexpected(created.error());
    auto made = Read(path);
    if (!made) return tl::unexpected(made.error());
    if (!*made) return tl::unexpected(Failure(path, "read back", ENOENT));
    return **made;
  } catch (const std::exception& e) {
    return tl::unexpected("cannot load the state directory's identity in " + state_dir.string() +
                          ": " + e.what());
  }
}

}  // namespace snowflake::daemon
