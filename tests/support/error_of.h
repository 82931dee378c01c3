// The message of a fallible call's error, for assertions on what its user reads:
//
//   EXPECT_THAT(ErrorOf(ParseConfig(text, "x.toml")), HasSubstr("unknown key"));
//
// A success reads "(no error)", so such an assertion fails naming it rather than
// comparing against an empty string. Header only; needs nothing but tl::expected.

#ifndef SNOWFLAKE_TESTS_SUPPORT_ERROR_OF_H_
#define SNOWFLAKE_TESTS_SUPPORT_ERROR_OF_H_

#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <type_traits>

namespace snowflake::testing {

// The error of `result`: the error itself when it is text (std::string), else its
// `message` member (ConfigError, Error, RegisterError, ...).
template <typename T, typename E>
std::string ErrorOf(const tl::expected<T, E>& result) {
  if (result) return "(no error)";
  if constexpr (std::is_convertible_v<const E&, std::string_view>) {
    return std::string(std::string_view(result.error()));
  } else {
    return result.error().message;
  }
}

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_ERROR_OF_H_
