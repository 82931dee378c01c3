// Whole decimal numbers as the daemon reads them from outside: config values, etcd keys,
// HTTP query parameters. Digits only (no sign, space, prefix or exponent), at most
// `max_digits` of them, converted by std::from_chars.

#ifndef SNOWFLAKE_UTIL_DECIMAL_H_
#define SNOWFLAKE_UTIL_DECIMAL_H_

#include <charconv>
#include <cstddef>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace snowflake::util {

// The value of `text` if it is 1 to `max_digits` decimal digits and nothing else, else
// nullopt (also when the value does not fit in T). Thread-safe; never throws.
template <typename T>
[[nodiscard]] std::optional<T> ParseDecimal(std::string_view text, size_t max_digits) noexcept {
  static_assert(std::is_unsigned_v<T>, "digits only: no sign to parse");
  if (text.empty() || text.size() > max_digits) return std::nullopt;
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

}  // namespace snowflake::util

#endif  // SNOWFLAKE_UTIL_DECIMAL_H_
