#include "time_text.h"

#include <chrono>
#include <cstdio>

namespace snowflake {

std::string FormatIsoUtc(int64_t unix_ms) {
  using namespace std::chrono;
  const sys_time<milliseconds> t{milliseconds{unix_ms}};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const auto in_day = t - day;
  const auto h = duration_cast<hours>(in_day);
  const auto m = duration_cast<minutes>(in_day - h);
  const auto s = duration_cast<seconds>(in_day - h - m);
  const auto ms = duration_cast<milliseconds>(in_day - h - m - s);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", int{ymd.year()},
                unsigned{ymd.month()}, unsigned{ymd.day()}, static_cast<int>(h.count()),
                static_cast<int>(m.count()), static_cast<int>(s.count()),
                static_cast<int>(ms.count()));
  return buf;
}

}  // namespace snowflake
