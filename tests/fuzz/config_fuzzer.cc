// libFuzzer target: the daemon's config parser (daemon/config/config.h) on arbitrary bytes.
// Property: ParseConfig never crashes or leaks; it returns either a Config that keeps the
// documented invariants or an error that names the source.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = snowflake::daemon::ParseConfig(text, "fuzz.toml");
  if (parsed) {
    const snowflake::daemon::Config& config = *parsed;
    const uint64_t capacity = config.ring.capacity;
    if (capacity == 0 || (capacity & (capacity - 1)) != 0) __builtin_trap();
    if (config.ring.min_fill > capacity) __builtin_trap();
    // The range a register may hand out, resolved in the layout, lies within it.
    const auto common = config.machine_register.Common("/", config.id.bits);
    if (common.first_machine > common.last_machine ||
        common.last_machine > config.id.bits.max_machine()) {
      __builtin_trap();
    }
    if (!snowflake::daemon::IsValidLogLevel(config.daemon.log_level)) __builtin_trap();
  } else if (parsed.error().message.rfind("fuzz.toml", 0) != 0) {
    __builtin_trap();  // every error names its source
  }
  return 0;
}
