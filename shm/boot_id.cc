#include "snowflake/boot_id.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace snowflake::shm {

BootId ParseBootId(std::string_view text) noexcept {
  BootId id;
  int digits = 0;
  for (const char c : text) {
    if (c == '-' || c == '\n') continue;
    uint64_t value = 0;
    if (c >= '0' && c <= '9') {
      value = static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      value = static_cast<uint64_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      value = static_cast<uint64_t>(c - 'A' + 10);
    } else {
      return {};
    }
    uint64_t& half = digits < 16 ? id.high : id.low;
    half = half << 4 | value;
    if (++digits > 32) return {};
  }
  return digits == 32 ? id : BootId{};
}

std::string FormatBootId(const BootId& id) {
  if (!id.known()) return "unknown";
  char text[40];
  std::snprintf(text, sizeof text, "%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(id.high >> 32),
                static_cast<unsigned long long>(id.high >> 16 & 0xffff),
                static_cast<unsigned long long>(id.high & 0xffff),
                static_cast<unsigned long long>(id.low >> 48),
                static_cast<unsigned long long>(id.low & 0xffffffffffffull));
  return text;
}

BootId CurrentBootId() noexcept {
  static const BootId current = [] {
    const int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return BootId{};
    char text[64];
    const ssize_t n = read(fd, text, sizeof text);
    close(fd);
    return n > 0 ? ParseBootId(std::string_view(text, static_cast<size_t>(n))) : BootId{};
  }();
  return current;
}

}  // namespace snowflake::shm
