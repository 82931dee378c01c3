#include "decode_command.h"

#include <CLI/CLI.hpp>
#include <cassert>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "command_error.h"
#include "exit_codes.h"
#include "protocol/id_fields.h"
#include "runtime_dir_option.h"
#include "snowflake/time_text.h"

namespace snowflake::cli {
namespace {

constexpr std::string_view kIdExpected =
    "expected a decimal number from 0 to 9223372036854775807 (2^63-1)";
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

std::string FormatDecodedHuman(uint64_t id, const IdLayout& layout) {
  assert((id >> 63) == 0 && layout.epoch_unix_ms() <= kMaxEpochUnixMs);  // REQUIRES (.h)
  const DecodedId fields = layout.Decode(id).value();
  return std::to_string(id) + "  unix_ms=" + std::to_string(fields.unix_ms) +
         " time=" + FormatTimeText(fields.unix_ms) + " machine=" + std::to_string(fields.machine) +
         " sequence=" + std::to_string(fields.sequence);
}

std::string FormatDecodedJson(uint64_t id, const IdLayout& layout, std::string_view epoch_source,
                              std::string_view layout_source) {
  nlohmann::ordered_json object = protocol::DecodedIdJson(id, layout.Decode(id).value());
  protocol::AddLayoutJson(object, layout, epoch_source, layout_source);
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int RunDecode(const DecodeRequest& request, std::ostream& out, std::ostream& err) {
  // Everything is checked before anything is printed, so a script never gets half an
  // answer it might mistake for a whole one.
  std::vector<std::string> problems;
  auto epoch =
      ChooseEpoch(request.has_epoch ? std::optional<std::string>(request.epoch) : std::nullopt,
                  request.runtime_dir, request.layout);
  if (!epoch) problems.push_back(epoch.error());
  std::vector<uint64_t> ids;
  ids.reserve(request.ids.size());
  for (const std::string& text : request.ids) {
    auto parsed = ParseId(text);
    if (parsed) {
      ids.push_back(*parsed);
    } else {
      problems.push_back(parsed.error());
    }
  }
  if (!problems.empty()) {
    std::string all;
    for (const std::string& problem : problems) {
      err << "snowflakectl decode: " << problem << "\n";
      all += (all.empty() ? "" : "\n") + problem;
    }
    if (request.json)
      out << ErrorJson({kExitUsage, CodeName(vocab::ErrorCode::kUsage), all})
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
    out.flush();
    return kExitUsage;
  }
  if (!request.json) err << "snowflakectl decode: epoch " << epoch->description << "\n";
  for (uint64_t id : ids) {
    out << (request.json ? FormatDecodedJson(id, epoch->layout, epoch->source, epoch->layout_source)
                         : FormatDecodedHuman(id, epoch->layout))
        << "\n";
  }
  out.flush();
  return kExitOk;
}

void AddDecodeCommand(CLI::App& app) {
  auto request = std::make_shared<DecodeRequest>();
  CLI::App* command = app.add_subcommand(
      "decode", "Show the creation time, machine number and sequence inside IDs");
  command->add_option("id", request->ids, "IDs in decimal, 0 to 9223372036854775807")->required();
  CLI::Option* epoch = command->add_option(
      "--epoch", request->epoch,
      "The fleet's epoch, in any form the daemon's config accepts: Unix ms or an RFC 3339 "
      "time with a zone (default: the local daemon's epoch if one ran in the runtime "
      "directory, else 2026-01-01T00:00:00Z)");
  auto layout_sources = AddLayoutOptions(*command);
  command->add_flag("--json", request->json,
                    "One JSON object per line: id (a decimal string), unix_ms, time, machine, "
                    "sequence, epoch_unix_ms, epoch_source, layout, layout_source");
  auto runtime_dir = AddRuntimeDirOption(app, *command);
  command->footer(
      "Every argument is checked before anything is printed: if any ID or the epoch is bad,\n"
      "nothing goes to stdout (with --json: one error object) and each bad argument gets one\n"
      "line on stderr. Without --json, one line on stderr says which epoch and layout were\n"
      "used.\n"
      "Exit status: 0 decoded, 2 bad usage or input.");
  command->callback([request, epoch, runtime_dir, layout_sources] {
    request->has_epoch = epoch->count() > 0;
    request->layout = layout_sources();
    if (!request->has_epoch || (!request->layout.layout && !request->layout.config)) {
      request->runtime_dir = runtime_dir().path;
    }
    const int status = RunDecode(*request, std::cout, std::cerr);
    if (status != kExitOk) throw CLI::RuntimeError(status);
  });
}

}  // namespace snowflake::cli
