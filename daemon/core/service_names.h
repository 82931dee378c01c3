// Service names as the daemon reads them from the segment's counter slots. Any member of
// the clients' group can write any bytes there, so a name is untrusted input: it is
// validated before it reaches a status reply, a log line or a map that lives forever.
//
// Pure functions; safe to call from any thread.

#ifndef SNOWFLAKE_DAEMON_CORE_SERVICE_NAMES_H_
#define SNOWFLAKE_DAEMON_CORE_SERVICE_NAMES_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace snowflake::daemon {

// The client library's rule: 1 to 63 characters of [a-z0-9._-].
inline bool IsValidServiceName(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                    c == '-';
    if (!ok) return false;
  }
  return true;
}

// How many distinct names the daemon keeps totals for; counts of further names are
// added under kOtherServices, so a client cycling through names cannot grow it forever.
inline constexpr size_t kMaxServiceNames = 1024;
inline constexpr std::string_view kOtherServices = "other:too-many-names";

// The name a slot's raw bytes are reported under: the name itself when valid, otherwise
// "invalid:" and the bytes in hex (ASCII, and never a valid name: ':' is not allowed).
inline std::string ServiceNameForStatus(std::string_view raw) {
  if (IsValidServiceName(raw)) return std::string(raw);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown = "invalid:";
  for (const char c : raw.substr(0, 63)) {
    const auto byte = static_cast<unsigned char>(c);
    shown += kHex[byte >> 4];
    shown += kHex[byte & 15];
  }
  return shown;
}

// Adds `taken` to the total of the slot name `raw` (validated as above), within the
// kMaxServiceNames bound.
// AddShownServiceCount does the same for a name already made safe by
// ServiceNameForStatus() (a key of another such map): it is not encoded again.
inline void AddShownServiceCount(std::map<std::string, uint64_t>& totals, std::string name,
                                 uint64_t taken) {
  if (totals.size() >= kMaxServiceNames && totals.count(name) == 0) {
    name = std::string(kOtherServices);
  }
  totals[name] += taken;
}
inline void AddServiceCount(std::map<std::string, uint64_t>& totals, std::string_view raw,
                            uint64_t taken) {
  AddShownServiceCount(totals, ServiceNameForStatus(raw), taken);
}

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_SERVICE_NAMES_H_
