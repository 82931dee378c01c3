#include "daemon/core/state_identity.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "snowflake/unique_fd.h"
#include "util/atomic_file.h"
#include "util/hex.h"

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
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP || errno == ENXIO) {
      return tl::unexpected("the state directory's identity " + path.string() +
                            " is not a regular file (a link, a FIFO or a socket): remove it; "
                            "the next start writes a new one");
    }
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

// A new identity, written durably (WriteFileAtomically). The caller holds the state
// directory's lock, so no other daemon writes one beside it.
tl::expected<std::string, std::string> Create(const std::filesystem::path& path) {
  unsigned char bits[kIdentityBytes];
  for (size_t got = 0; got < sizeof bits;) {
    const ssize_t n = getrandom(bits + got, sizeof bits - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return tl::unexpected("cannot draw random bits for the state directory's identity " +
                            path.string() + ": " + std::strerror(errno) +
                            " (getrandom; the kernel's entropy source failed)");
    }
    got += static_cast<size_t>(n);
  }
  const std::string identity = util::HexLower(bits, sizeof bits);
  if (auto written = util::WriteFileAtomically(path, identity + "\n", 0644); !written) {
    return tl::unexpected("cannot write the state directory's identity: " + written.error() +
                          ". The daemon needs to write its state directory");
  }
  return identity;
}

}  // namespace

tl::expected<std::string, std::string> LoadOrCreateStateIdentity(
    const std::filesystem::path& state_dir) noexcept {
  try {
    const std::filesystem::path path = state_dir / kStateIdentityFileName;
    auto existing = Read(path);
    if (!existing) return tl::unexpected(existing.error());
    if (*existing) return **existing;
    return Create(path);
  } catch (const std::exception& e) {
    return tl::unexpected("cannot load the state directory's identity in " + state_dir.string() +
                          ": " + e.what());
  }
}

}  // namespace snowflake::daemon
