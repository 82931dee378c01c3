// Points in time as text, one grammar for everything that reads a time: the daemon's
// config ([id] epoch), snowflakectl (--epoch, bounds --from/--to) and the C API
// (sf_parse_time). A time is either
//   - Unix milliseconds: decimal digits, optionally with a leading '-' (before 1970), or
//   - an RFC 3339 date-time with a time zone, the form TOML uses for offset date-times:
//     YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|+HH:MM|-HH:MM), years 0000 to 9999.
//     A fraction finer than a millisecond is cut to the millisecond (towards the past).
// A date-time without a zone is refused: it would mean a different instant on every host.
//
// All functions are pure and safe to call from any thread.

#ifndef SNOWFLAKE_TIME_TEXT_H_
#define SNOWFLAKE_TIME_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake {

// What ParseTimeText() accepts, for help texts and error messages.
inline constexpr std::string_view kTimeTextForms =
    "Unix milliseconds (e.g. 1767225600000) or an RFC 3339 time with a zone "
    "(e.g. 2026-01-01T00:00:00Z, 2026-01-01T05:30:00.250+05:30)";

// 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the times FormatTimeText()
// writes as a date-time.
inline constexpr int64_t kMinTextUnixMs = -62'167'219'200'000;
inline constexpr int64_t kMaxTextUnixMs = 253'402'300'799'999;

// Parses `text` (see the top of this file) into Unix milliseconds. On error returns a
// sentence saying what is wrong with it (without repeating the text and without the list
// of accepted forms: the caller adds those it wants), e.g. "no such date".
tl::expected<int64_t, std::string> ParseTimeText(std::string_view text) noexcept;

// "2026-01-01T00:00:00.000Z" (UTC, always milliseconds) for kMinTextUnixMs <= unix_ms <=
// kMaxTextUnixMs; outside that, the decimal milliseconds followed by " ms".
std::string FormatTimeText(int64_t unix_ms);

}  // namespace snowflake

#endif  // SNOWFLAKE_TIME_TEXT_H_
