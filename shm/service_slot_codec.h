// Internal to snowflake::shm: service names packed into ServiceSlot::name, eight bytes
// per atomic word (little-endian, NUL-padded), so both sides access them atomically.

#ifndef SNOWFLAKE_SHM_SERVICE_SLOT_CODEC_H_
#define SNOWFLAKE_SHM_SERVICE_SLOT_CODEC_H_

#include <cassert>
#include <string>
#include <string_view>

#include "snowflake/segment_layout.h"

namespace snowflake::shm {

// REQUIRES: name.size() <= kServiceNameMax.
inline void EncodeServiceName(ServiceSlot& slot, std::string_view name) {
  assert(name.size() <= kServiceNameMax);  // the REQUIRES above, in debug builds
  for (size_t word = 0; word < 8; ++word) {
    uint64_t value = 0;
    for (size_t byte = 0; byte < 8; ++byte) {
      const size_t at = word * 8 + byte;
      if (at < name.size()) value |= uint64_t{static_cast<unsigned char>(name[at])} << (8 * byte);
    }
    slot.name[word].store(value, std::memory_order_relaxed);
  }
}

inline std::string DecodeServiceName(const ServiceSlot& slot) {
  std::string name;
  for (size_t word = 0; word < 8; ++word) {
    const uint64_t value = slot.name[word].load(std::memory_order_relaxed);
    for (size_t byte = 0; byte < 8; ++byte) {
      const char c = static_cast<char>((value >> (8 * byte)) & 0xff);
      if (c == '\0' || name.size() == kServiceNameMax) return name;
      name.push_back(c);
    }
  }
  return name;
}

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_SHM_SERVICE_SLOT_CODEC_H_
