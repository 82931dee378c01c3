#include "decode_command.h"

#include <CLI/CLI.hpp>
#include <cassert>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "exit_codes.h"

namespace snowflake::cli {
namespace {

constexpr std::string_view kIdExpected =
    "expected a decimal number from 0 to 9223372036854775807 (2^63-1)";
constexpr std::string_view kEpochExpected =
    "expected Unix milliseconds (e.g. 1767225600000) or a UTC time YYYY-MM-DDTHH:MM:SS[.mmm]Z "
    "(e.g. 2026-01-01T00:00:00Z)";

bool AllDigits(std::string_view text) {
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return !text.empty();
}

std::string BadId(std::string_view text, std::string_view why) {
  return "bad ID '" + std::string(text) + "': " + std::string(why) + "; " +
         std::string(kIdExpected);
}

std::string BadEpoch(std::string_view text, std::string_view why) {
  return "bad epoch '" + std::string(text) + "': " + std::string(why) + "; " +
         std::string(kEpochExpected);
}

// Parses exactly `text.size()` digits into `value`.
bool Digits(std::string_view text, int& value) {
  if (!AllDigits(text)) return false;
  return std::from_chars(text.data(), text.data() + text.size(), value).ec == std::errc{};
}

// YYYY-MM-DDTHH:MM:SS[.mmm]Z → Unix ms, or the reason it is not one.
tl::expected<int64_t, std::string> ParseIsoUtc(std::string_view text) {
  using namespace std::chrono;
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':') {
    return tl::unexpected(std::string("not a number and not a UTC ISO-8601 time"));
  }
  std::string_view rest = text.substr(19);
  int millis = 0;
  if (!rest.empty() && rest.front() == '.') {
    if (rest.size() < 4 || !Digits(rest.substr(1, 3), millis)) {
      return tl::unexpected(std::string("the fraction of a second must be 3 digits (.mmm)"));
    }
    rest.remove_prefix(4);
  }
  if (rest != "Z") {
    return tl::unexpected(
        std::string("only UTC times ending in 'Z' are accepted, no other time zone or suffix"));
  }
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!Digits(text.substr(0, 4), y) || !Digits(text.substr(5, 2), mo) ||
      !Digits(text.substr(8, 2), d) || !Digits(text.substr(11, 2), h) ||
      !Digits(text.substr(14, 2), mi) || !Digits(text.substr(17, 2), s)) {
    return tl::unexpected(std::string("not a number and not a UTC ISO-8601 time"));
  }
  const year_month_day date{year{y}, month{static_cast<unsigned>(mo)},
                            day{static_cast<unsigned>(d)}};
  if (!date.ok()) return tl::unexpected(std::string("no such date"));
  if (h > 23 || mi > 59 || s > 59) return tl::unexpected(std::string("no such time of day"));
  const milliseconds since_1970 = sys_days(date).time_since_epoch() + hours(h) + minutes(mi) +
                                  seconds(s) + milliseconds(millis);
  return since_1970.count();
}

}  // namespace

tl::expected<uint64_t, std::string> ParseId(std::string_view text) noexcept {
  if (text.empty()) return tl::unexpected(BadId(text, "it is empty"));
  if (text.front() == '-' && AllDigits(text.substr(1))) {
    return tl::unexpected(BadId(text, "it is negative"));
  }
  if (!AllDigits(text)) return tl::unexpected(BadId(text, "not a decimal number"));
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range || value >> 63 != 0) {
    return tl::unexpected(BadId(text, "too large: IDs have the sign bit (bit 63) clear"));
  }
  return value;
}

tl::expected<IdLayout, std::string> ParseEpoch(std::string_view text) noexcept {
  if (text.empty()) return tl::unexpected(BadEpoch(text, "it is empty"));
  int64_t unix_ms = 0;
  if (text.front() == '-' && AllDigits(text.substr(1))) {
    return tl::unexpected(BadEpoch(text, "it is negative (before 1970)"));
  }
  if (AllDigits(text)) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), unix_ms);
    if (ec == std::errc::result_out_of_range) unix_ms = INT64_MAX;
  } else {
    auto parsed = ParseIsoUtc(text);
    if (!parsed) return tl::unexpected(BadEpoch(text, parsed.error()));
    unix_ms = *parsed;
  }
  if (unix_ms < 0) return tl::unexpected(BadEpoch(text, "it is before 1970"));
  if (unix_ms > kMaxEpochUnixMs) {
    return tl::unexpected(BadEpoch(
        text, "too late: IDs of it would carry times after the year 9999 (the latest epoch is " +
                  std::to_string(kMaxEpochUnixMs) + ")"));
  }
  return IdLayout::Create(unix_ms).value();  // in range: checked above
}

std::string FormatIsoTime(int64_t unix_ms) {
  assert(unix_ms >= 0 && unix_ms <= kMaxIsoUnixMs);  // REQUIRES (decode_command.h)
  using namespace std::chrono;
  const sys_time<milliseconds> time{milliseconds(unix_ms)};
  const sys_days day = floor<days>(time);
  const year_month_day date(day);
  const hh_mm_ss<milliseconds> clock_time(time - day);
  char text[32];
  std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ",
                static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
                static_cast<unsigned>(date.day()), static_cast<int>(clock_time.hours().count()),
                static_cast<int>(clock_time.minutes().count()),
                static_cast<int>(clock_time.seconds().count()),
                static_cast<int>(clock_time.subseconds().count()));
  return text;
}

std::string FormatDecodedHuman(uint64_t id, const IdLayout& layout) {
  assert((id >> 63) == 0 && layout.epoch_unix_ms() <= kMaxEpochUnixMs);  // REQUIRES (.h)
  const DecodedId fields = layout.Decode(id).value();
  return std::to_string(id) + "  unix_ms=" + std::to_string(fields.unix_ms) +
         " time=" + FormatIsoTime(fields.unix_ms) + " machine=" + std::to_string(fields.machine) +
         " sequence=" + std::to_string(fields.sequence);
}

std::string FormatDecodedJson(uint64_t id, const IdLayout& layout) {
  const DecodedId fields = layout.Decode(id).value();
  // ordered_json keeps the keys in the documented order, id first.
  nlohmann::ordered_json object;
  object["id"] = std::to_string(id);
  object["unix_ms"] = fields.unix_ms;
  object["time"] = FormatIsoTime(fields.unix_ms);
  object["machine"] = fields.machine;
  object["sequence"] = fields.sequence;
  return object.dump();
}

int RunDecode(const DecodeRequest& request, std::ostream& out, std::ostream& err) {
  // Everything is checked before anything is printed, so a script never gets half an
  // answer it might mistake for a whole one.
  bool ok = true;
  IdLayout layout;
  if (request.has_epoch) {
    auto parsed = ParseEpoch(request.epoch);
    if (parsed) {
      layout = *parsed;
    } else {
      err << "snowflakectl decode: " << parsed.error() << "\n";
      ok = false;
    }
  }
  std::vector<uint64_t> ids;
  ids.reserve(request.ids.size());
  for (const std::string& text : request.ids) {
    auto parsed = ParseId(text);
    if (parsed) {
      ids.push_back(*parsed);
    } else {
      err << "snowflakectl decode: " << parsed.error() << "\n";
      ok = false;
    }
  }
  if (!ok) return kExitUsage;
  for (uint64_t id : ids) {
    out << (request.json ? FormatDecodedJson(id, layout) : FormatDecodedHuman(id, layout)) << "\n";
  }
  out.flush();
  return kExitOk;
}

void AddDecodeCommand(CLI::App& app) {
  auto request = std::make_shared<DecodeRequest>();
  CLI::App* command = app.add_subcommand(
      "decode", "Show the creation time, machine number and sequence inside IDs");
  command->add_option("id", request->ids, "IDs in decimal, 0 to 9223372036854775807")->required();
  CLI::Option* epoch =
      command->add_option("--epoch", request->epoch,
                          "The fleet's epoch: Unix ms or UTC YYYY-MM-DDTHH:MM:SS[.mmm]Z "
                          "(default 2026-01-01T00:00:00Z)");
  command->add_flag("--json", request->json,
                    "One JSON object per line: id (a decimal string), unix_ms, time, machine, "
                    "sequence");
  command->footer(
      "Every argument is checked before anything is printed: if any ID or the epoch is bad,\n"
      "nothing goes to stdout and each bad argument gets one line on stderr.\n"
      "Exit status: 0 decoded, 2 bad usage or input.");
  command->callback([request, epoch] {
    request->has_epoch = epoch->count() > 0;
    const int status = RunDecode(*request, std::cout, std::cerr);
    if (status != kExitOk) throw CLI::RuntimeError(status);
  });
}

}  // namespace snowflake::cli
