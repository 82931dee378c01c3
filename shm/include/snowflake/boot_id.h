// The kernel's boot id: a random 128-bit number Linux draws at every boot
// (/proc/sys/kernel/random/boot_id). The daemon records it in the segment header (line 4,
// shm/LAYOUT.md) so that a segment left by an earlier boot of the host (a runtime
// directory on a disk instead of tmpfs) is never taken for a live one: its counters may
// be older than the state file, and its heartbeat, a CLOCK_MONOTONIC reading of that boot,
// means nothing in this one. The file is not namespaced: a container sees its host's id.
//
// Thread-safe: CurrentBootId() reads the file once per process (a function-local static).

#ifndef SNOWFLAKE_BOOT_ID_H_
#define SNOWFLAKE_BOOT_ID_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace snowflake::shm {

struct BootId {
  uint64_t high = 0;  // the first 16 hex digits of the UUID text
  uint64_t low = 0;   // the last 16
  // {0, 0} means "not known": not recorded (an older daemon), or unreadable.
  bool known() const noexcept { return high != 0 || low != 0; }
  friend bool operator==(const BootId&, const BootId&) = default;
};

// Parses the UUID text the kernel writes ("3f2c…-…-…\n": 32 hex digits, dashes and a
// trailing newline ignored). {0, 0} for anything else.
BootId ParseBootId(std::string_view text) noexcept;

// The UUID text of `id` ("0123abcd-…"), or "unknown".
std::string FormatBootId(const BootId& id);

// This boot's id, read from /proc/sys/kernel/random/boot_id once per process; {0, 0} if
// the file cannot be read (no /proc).
BootId CurrentBootId() noexcept;

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_BOOT_ID_H_
