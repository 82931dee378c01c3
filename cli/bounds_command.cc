#include "bounds_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command_error.h"
#include "epoch_choice.h"
#include "exit_codes.h"
#include "protocol/id_fields.h"
#include "runtime_dir_option.h"

namespace snowflake::cli {
namespace {

std::string Shown(int64_t unix_ms) {
  return FormatTimeText(unix_ms) + " (" + std::to_string(unix_ms) + ")";
}

int Fail(const BoundsRequest& request, std::ostream& out, std::ostream& err, vocab::ErrorCode code,
         const std::string& message) {
  err << "snowflakectl bounds: " << message << "\n";
  if (request.json)
    out << ErrorJson({kExitUsage, CodeName(code), message})
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
  out.flush();
  return kExitUsage;
}

}  // namespace

int RunBounds(const BoundsRequest& request, std::ostream& out, std::ostream& err) {
  auto epoch = ChooseEpoch(request.epoch, request.runtime_dir, request.layout);
  if (!epoch) return Fail(request, out, err, vocab::ErrorCode::kUsage, epoch.error());
  auto time = [&](const char* option,
                  const std::string& text) -> tl::expected<int64_t, std::string> {
    auto parsed = ParseTimeText(text);
    if (!parsed) {
      return tl::unexpected("bad " + std::string(option) + " '" + text + "': " + parsed.error() +
                            "; expected " + std::string(kTimeTextForms));
    }
    return *parsed;
  };
  const auto from = time("--from", request.from);
  if (!from) return Fail(request, out, err, vocab::ErrorCode::kUsage, from.error());
  const auto to = request.to ? time("--to", *request.to) : from;
  if (!to) return Fail(request, out, err, vocab::ErrorCode::kUsage, to.error());

  const IdLayout& layout = epoch->layout;
  const auto bounds = layout.Bounds(*from, *to);
  if (!bounds) {
    switch (bounds.error()) {
      case IdError::kRangeReversed:
        return Fail(request, out, err, vocab::ErrorCode::kUsage,
                    "the range ends before it begins: --from " + Shown(*from) +
                        " is later than --to " + Shown(*to) + "; swap them");
      case IdError::kTimeBeforeEpoch:
        return Fail(request, out, err, vocab::ErrorCode::kTimeOutOfRange,
                    "no ID carries a time in this range: it ends at " + Shown(*to) +
                        ", before the epoch " + epoch->description +
                        " (IDs start at the epoch; is --epoch right?)");
      default:
        return Fail(request, out, err, vocab::ErrorCode::kTimeOutOfRange,
                    "no ID carries a time in this range: it starts at " + Shown(*from) +
                        ", after " + Shown(layout.max_unix_ms()) +
                        ", the last millisecond IDs of the epoch " + epoch->description +
                        " can carry (" + std::to_string(layout.bits().time) +
                        " bits of milliseconds)");
    }
  }
  if (request.json) {
    nlohmann::ordered_json object;
    object["ok"] = true;
    object.update(protocol::IdBoundsJson(*bounds, *from, *to));
    protocol::AddLayoutJson(object, layout, epoch->source, epoch->layout_source);
    out << object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    out << "epoch:     " << epoch->description << "\n";
    out << "from:      " << Shown(bounds->first_unix_ms);
    if (bounds->first_unix_ms != *from)
      out << ", raised from " << Shown(*from) << ": no ID is older";
    out << "\n";
    out << "to:        " << Shown(bounds->last_unix_ms) << ", included";
    if (bounds->last_unix_ms != *to) {
      out << "; lowered from " << Shown(*to) << ": no ID is younger";
    }
    out << "\n";
    out << "first ID:  " << bounds->first_id << "\n";
    out << "last ID:   " << bounds->last_id << "\n";
    out << "SQL:       WHERE id BETWEEN " << bounds->first_id << " AND " << bounds->last_id << "\n";
  }
  out.flush();
  return kExitOk;
}

void AddBoundsCommand(CLI::App& app) {
  auto request = std::make_shared<BoundsRequest>();
  CLI::App* command = app.add_subcommand(
      "bounds",
      "Print the smallest and largest IDs any machine can have made from --from to --to "
      "(both included, to the millisecond), for WHERE id BETWEEN first AND last. Needs no "
      "daemon.");
  const std::string forms = "Unix ms or an RFC 3339 time with a zone";
  command->add_option("--from", request->from, "Start of the range: " + forms)
      ->required()
      ->type_name("TIME");
  auto to = std::make_shared<std::string>();
  CLI::Option* to_option =
      command->add_option("--to", *to, "End of the range, included (default: --from): " + forms)
          ->type_name("TIME");
  auto epoch = std::make_shared<std::string>();
  CLI::Option* epoch_option =
      command
          ->add_option("--epoch", *epoch,
                       "The fleet's epoch, as for decode (default: the local daemon's, else "
                       "2026-01-01T00:00:00Z)")
          ->type_name("TIME");
  command->add_flag("--json", request->json,
                    "One JSON object: first_id and last_id (decimal strings), first_unix_ms, "
                    "last_unix_ms, first_time, last_time, from_unix_ms, to_unix_ms, clamped, "
                    "epoch_unix_ms, epoch_source, layout, layout_source");
  auto layout_sources = AddLayoutOptions(*command);
  auto runtime_dir = AddRuntimeDirOption(app, *command);
  command->footer(
      "A range reaching before the epoch or past its last millisecond is cut to what IDs\n"
      "can carry (and says so). Exit status: 0 printed, 2 bad time, reversed range or a\n"
      "range no ID can carry.");
  command->callback([request, to, to_option, epoch, epoch_option, runtime_dir, layout_sources] {
    if (to_option->count() > 0) request->to = *to;
    request->layout = layout_sources();
    if (epoch_option->count() > 0) request->epoch = *epoch;
    if (epoch_option->count() == 0 || (!request->layout.layout && !request->layout.config)) {
      request->runtime_dir = runtime_dir().path;
    }
    const int status = RunBounds(*request, std::cout, std::cerr);
    if (status != kExitOk) throw CLI::RuntimeError(status);
  });
}

}  // namespace snowflake::cli
