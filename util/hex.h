// Lowercase hexadecimal of bytes: two digits a byte, most significant nibble first
// ("\x0a\xff" -> "0aff"). For identities and digests in files, keys and messages.
//
// Thread-safe: a pure function.

#ifndef SNOWFLAKE_UTIL_HEX_H_
#define SNOWFLAKE_UTIL_HEX_H_

#include <cstddef>
#include <string>

namespace snowflake::util {

inline std::string HexLower(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

}  // namespace snowflake::util

#endif  // SNOWFLAKE_UTIL_HEX_H_
