#include "snowflake/time_text.h"

#include <charconv>
#include <chrono>
#include <cstdio>

namespace snowflake {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool AllDigits(std::string_view text) {
  for (const char c : text) {
    if (!IsDigit(c)) return false;
  }
  return !text.empty();
}

// Exactly text.size() digits as a number. REQUIRES: text.size() <= 9.
bool Number(std::string_view text, int& value) {
  if (!AllDigits(text)) return false;
  return std::from_chars(text.data(), text.data() + text.size(), value).ec == std::errc{};
}

tl::expected<int64_t, std::string> Fail(std::string why) { return tl::unexpected(std::move(why)); }

tl::expected<int64_t, std::string> ParseUnixMs(std::string_view text) {
  const bool negative = text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (!AllDigits(digits)) return Fail("not a number of milliseconds");
  int64_t value = 0;
  // Parsed with the sign so that INT64_MIN fits.
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return Fail("out of range: Unix milliseconds must fit in 64 bits");
  }
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return Fail("not a number of milliseconds");
  }
  return value;
}

tl::expected<int64_t, std::string> ParseDateTime(std::string_view text) {
  using namespace std::chrono;
  // YYYY-MM-DDTHH:MM:SS is 19 characters; the zone is required after it.
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || text[13] != ':' || text[16] != ':') {
    return Fail("neither Unix milliseconds nor an RFC 3339 date-time like 2026-01-01T00:00:00Z");
  }
  if (text[10] != 'T' && text[10] != 't' && text[10] != ' ') {
    return Fail("the date and the time must be separated by 'T'");
  }
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!Number(text.substr(0, 4), y) || !Number(text.substr(5, 2), mo) ||
      !Number(text.substr(8, 2), d) || !Number(text.substr(11, 2), h) ||
      !Number(text.substr(14, 2), mi) || !Number(text.substr(17, 2), s)) {
    return Fail("neither Unix milliseconds nor an RFC 3339 date-time like 2026-01-01T00:00:00Z");
  }
  std::string_view rest = text.substr(19);
  int millis = 0;
  if (!rest.empty() && rest.front() == '.') {
    size_t digits = 1;
    while (digits < rest.size() && IsDigit(rest[digits])) ++digits;
    if (digits == 1) return Fail("a '.' must be followed by the fraction of a second");
    for (size_t i = 1; i < 4; ++i) {
      millis = millis * 10 + (i < digits ? rest[i] - '0' : 0);
    }
    rest.remove_prefix(digits);
  }
  int offset_minutes = 0;
  if (rest == "Z" || rest == "z") {
    offset_minutes = 0;
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int oh = 0, om = 0;
    if (!Number(rest.substr(1, 2), oh) || !Number(rest.substr(4, 2), om) || oh > 23 || om > 59) {
      return Fail("bad time zone offset '" + std::string(rest) + "': expected +HH:MM or -HH:MM");
    }
    offset_minutes = (rest[0] == '-' ? -1 : 1) * (oh * 60 + om);
  } else if (rest.empty()) {
    return Fail("a time zone is required: end it with Z (UTC) or an offset like +05:30");
  } else {
    return Fail("bad time zone '" + std::string(rest) +
                "': expected Z (UTC) or an offset like +05:30, nothing after it");
  }
  const year_month_day date{year{y}, month{static_cast<unsigned>(mo)},
                            day{static_cast<unsigned>(d)}};
  if (!date.ok()) return Fail("no such date");
  if (h > 23 || mi > 59 || s > 59) return Fail("no such time of day");
  const milliseconds local = sys_days(date).time_since_epoch() + hours(h) + minutes(mi) +
                             seconds(s) + milliseconds(millis);
  return (local - minutes(offset_minutes)).count();
}

}  // namespace

tl::expected<int64_t, std::string> ParseTimeText(std::string_view text) noexcept {
  try {
    if (text.empty()) return Fail("it is empty");
    if (text.size() >= 10 && text[4] == '-') return ParseDateTime(text);
    return ParseUnixMs(text);
  } catch (...) {
    return Fail("out of memory");
  }
}

std::string FormatTimeText(int64_t unix_ms) {
  using namespace std::chrono;
  if (unix_ms < kMinTextUnixMs || unix_ms > kMaxTextUnixMs) {
    return std::to_string(unix_ms) + " ms";
  }
  const sys_time<milliseconds> time{milliseconds(unix_ms)};
  const sys_days day = floor<days>(time);
  const year_month_day date(day);
  const hh_mm_ss<milliseconds> clock_time(time - day);
  char text[40];
  std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ",
                static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
                static_cast<unsigned>(date.day()), static_cast<int>(clock_time.hours().count()),
                static_cast<int>(clock_time.minutes().count()),
                static_cast<int>(clock_time.seconds().count()),
                static_cast<int>(clock_time.subseconds().count()));
  return text;
}

}  // namespace snowflake
