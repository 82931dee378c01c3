#include "register_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exit_codes.h"
#include "register/register_backends.h"
#include "register/register_settings.h"
#include "snowflake/time_text.h"

namespace snowflake::cli {
namespace {

using nlohmann::ordered_json;
using reg::LoadRegisterSettings;
using reg::MachineRegister;
using reg::RegisterError;
using reg::RegisterErrorCode;
using reg::RegisterSettings;
using Row = reg::RegisterListEntry;

struct Listing {
  std::string backend;
  std::string location;
  std::vector<Row> rows;
};

[[noreturn]] void Fail(int status, const std::string& message) {
  std::cerr << "snowflakectl: " << message << "\n";
  throw CLI::RuntimeError(status);
}

// A backend without the operation (kUnsupported) is the config's matter: a usage error
// naming the config file. Any other error is the register's: exit 1 with `what` and why.
[[noreturn]] void FailRegister(const std::string& config_path, const std::string& what,
                               const RegisterError& error) {
  if (error.code == RegisterErrorCode::kUnsupported) {
    Fail(kExitUsage, config_path + ": " + error.message);
  }
  Fail(kExitUnavailable, what + error.message);
}

// What the register needs of the daemon's config file ([register], daemon.state_dir,
// id.epoch), read with the daemon's own readers; the rest of the file is the daemon's
// (`snowflaked --check-config`).
RegisterSettings LoadOrFail(const std::string& path) {
  auto settings = LoadRegisterSettings(path);
  if (!settings) Fail(kExitUsage, settings.error().message);
  return *settings;
}

// The register the config names, not claimed: the operator's operations only.
std::unique_ptr<MachineRegister> RegisterOf(const RegisterSettings& settings) {
  return reg::MakeMachineRegister(settings.machine_register, settings.state_dir, settings.id_bits);
}

Listing List(const std::string& config_path) {
  const std::unique_ptr<MachineRegister> reg = RegisterOf(LoadOrFail(config_path));
  auto entries = reg->ListNumbers();
  if (!entries) FailRegister(config_path, "", entries.error());
  return Listing{.backend = std::string(reg->backend_name()),
                 .location = reg->location(),
                 .rows = std::move(*entries)};
}

ordered_json RowJson(const Row& row) {
  ordered_json j;
  j["machine"] = row.machine;
  j["holder"] = row.holder;
  j["host"] = row.host;
  j["pid"] = row.pid;
  j["since_unix_ms"] = row.since_unix_ms;
  j["since"] = row.since_unix_ms > 0 ? FormatTimeText(row.since_unix_ms) : "";
  j["live"] = row.live;
  j["lease_ttl_left_s"] = row.lease_left_s ? ordered_json(*row.lease_left_s) : ordered_json();
  j["high_water_unix_ms"] =
      row.high_water_unix_ms ? ordered_json(*row.high_water_unix_ms) : ordered_json();
  j["high_water"] = row.high_water_unix_ms && *row.high_water_unix_ms > 0
                        ? ordered_json(FormatTimeText(*row.high_water_unix_ms))
                        : ordered_json();
  return j;
}

std::string Or(const std::string& s, const char* dash = "-") { return s.empty() ? dash : s; }

std::string LeaseText(const Row& row) {
  if (!row.lease_left_s) return "-";
  return *row.lease_left_s >= 0 ? std::to_string(*row.lease_left_s) + " s" : "expired";
}

std::string MarkText(const Row& row) {
  return row.high_water_unix_ms && *row.high_water_unix_ms > 0
             ? FormatTimeText(*row.high_water_unix_ms)
             : "-";
}

void PrintTable(const Listing& listing) {
  std::cout << listing.backend << " register " << listing.location << "\n";
  std::printf("%-7s %-5s %-30s %-16s %-8s %-24s %-9s %s\n", "MACHINE", "LIVE", "HOLDER", "HOST",
              "PID", "SINCE", "LEASE", "HIGH-WATER");
  for (const Row& row : listing.rows) {
    std::printf("%-7u %-5s %-30s %-16s %-8s %-24s %-9s %s\n", row.machine, row.live ? "yes" : "no",
                Or(row.holder, "(free)").c_str(), Or(row.host).c_str(),
                row.pid > 0 ? std::to_string(row.pid).c_str() : "-",
                row.since_unix_ms > 0 ? FormatTimeText(row.since_unix_ms).c_str() : "-",
                LeaseText(row).c_str(), MarkText(row).c_str());
  }
  std::fflush(stdout);
}

// "0-499, 503, 700-701": the numbers of `numbers` (ascending) as ranges.
std::string RangesText(const std::vector<uint32_t>& numbers) {
  std::string out;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(numbers[i]);
    if (j > i) out += "-" + std::to_string(numbers[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

// What `register list` prints when there are too many numbers for one screen: how many
// are held (live, or their lease gone), free with a mark, never used, in which ranges, and
// the oldest and newest marks, over the config's register.machines.
ordered_json Summary(const Listing& listing, uint32_t first, uint32_t last) {
  std::vector<uint32_t> live, ended, marked_free, recorded;
  std::optional<int64_t> oldest, newest;
  for (const Row& row : listing.rows) {
    recorded.push_back(row.machine);
    if (!row.holder.empty()) {
      (row.live ? live : ended).push_back(row.machine);
    } else if (row.high_water_unix_ms) {
      marked_free.push_back(row.machine);
    }
    if (row.high_water_unix_ms && *row.high_water_unix_ms > 0) {
      const int64_t w = *row.high_water_unix_ms;
      oldest = oldest ? std::min(*oldest, w) : w;
      newest = newest ? std::max(*newest, w) : w;
    }
  }
  std::vector<uint32_t> unused;
  size_t k = 0;
  for (uint32_t n = first; n <= last; ++n) {
    while (k < recorded.size() && recorded[k] < n) ++k;
    if (k == recorded.size() || recorded[k] != n) unused.push_back(n);
  }
  const auto count_in = [&](const std::vector<uint32_t>& v) {
    return std::count_if(v.begin(), v.end(), [&](uint32_t n) { return n >= first && n <= last; });
  };
  ordered_json j;
  j["range"] = RangesText({first}) + (last > first ? "-" + std::to_string(last) : "");
  j["recorded"] = listing.rows.size();
  j["held_live"] = live.size();
  j["held_lease_gone"] = ended.size();
  j["free_with_mark"] = marked_free.size();
  j["never_used_in_range"] = unused.size();
  j["free_in_range"] = count_in(marked_free) + unused.size();
  j["held_ranges"] = RangesText(live);
  j["lease_gone_ranges"] = RangesText(ended);
  j["free_with_mark_ranges"] = RangesText(marked_free);
  j["never_used_ranges"] = RangesText(unused);
  j["oldest_mark"] = oldest ? ordered_json(FormatTimeText(*oldest)) : ordered_json();
  j["newest_mark"] = newest ? ordered_json(FormatTimeText(*newest)) : ordered_json();
  return j;
}

void PrintSummary(const Listing& listing, const ordered_json& summary) {
  std::cout << listing.backend << " register " << listing.location << "\n"
            << "numbers in register.machines " << summary["range"].get<std::string>() << ": "
            << summary["free_in_range"] << " free (" << summary["free_with_mark"]
            << " with a mark, " << summary["never_used_in_range"] << " never used)\n"
            << "held, live:            " << summary["held_live"] << "  "
            << summary["held_ranges"].get<std::string>() << "\n"
            << "held, lease gone:      " << summary["held_lease_gone"] << "  "
            << summary["lease_gone_ranges"].get<std::string>() << "\n"
            << "free with a mark:      " << summary["free_with_mark"] << "  "
            << summary["free_with_mark_ranges"].get<std::string>() << "\n"
            << "never used (in range): " << summary["never_used_in_range"] << "  "
            << summary["never_used_ranges"].get<std::string>() << "\n"
            << "marks: oldest "
            << (summary["oldest_mark"].is_null() ? "-" : summary["oldest_mark"].get<std::string>())
            << ", newest "
            << (summary["newest_mark"].is_null() ? "-" : summary["newest_mark"].get<std::string>())
            << "\n(" << listing.rows.size()
            << " numbers recorded: `--all` lists every one, `--from N --count K` a page)\n";
  std::fflush(stdout);
}

// Rows a table prints before `register list` summarises instead: one screen.
constexpr size_t kTableRows = 40;

struct ListFlags {
  bool json = false;
  bool all = false;
  bool summary = false;
  std::optional<uint32_t> from;
  std::optional<size_t> count;
};

// register list [--json] [--all | --summary | --from N [--count K]]
void AddListCommand(CLI::App& command, const std::shared_ptr<std::string>& config_path) {
  CLI::App* list = command.add_subcommand(
      "list",
      "Every recorded number: holder, host, since, lease left, high-water mark. More than " +
          std::to_string(kTableRows) +
          " print as a summary (counts and ranges) unless --all or a page (--from, --count) "
          "is asked for.");
  auto flags = std::make_shared<ListFlags>();
  list->add_flag("--json", flags->json,
                 "Print JSON: every number (or the page asked for), or with --summary the "
                 "summary");
  auto* all = list->add_flag("--all", flags->all, "List every number, however many");
  auto* summary =
      list->add_flag("--summary", flags->summary, "Print the summary, however few numbers");
  auto* from = list->add_option("--from", flags->from,
                                "A page: numbers from N on (with --count, default 100)");
  auto* count = list->add_option("--count", flags->count, "A page's size (default 100)")
                    ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  all->excludes(summary)->excludes(from)->excludes(count);
  summary->excludes(from)->excludes(count);
  list->fallthrough();  // --config after the subcommand
  list->callback([config_path, flags] {
    const RegisterSettings settings = LoadOrFail(*config_path);
    Listing listing = List(*config_path);
    const bool paged = flags->from || flags->count;
    if (paged) {
      const uint32_t start = flags->from.value_or(0);
      const size_t size = flags->count.value_or(100);
      std::vector<Row> page;
      for (Row& row : listing.rows) {
        if (row.machine >= start && page.size() < size) page.push_back(std::move(row));
      }
      listing.rows = std::move(page);
    }
    const bool summarise = flags->summary || (!flags->all && !paged && !flags->json &&
                                              listing.rows.size() > kTableRows);
    if (summarise) {
      const ordered_json s =
          Summary(listing, settings.machine_register.first_machine,
                  settings.machine_register.last_machine.value_or(settings.id_bits.max_machine()));
      if (flags->json) {
        ordered_json out;
        out["backend"] = listing.backend;
        out["location"] = listing.location;
        out["summary"] = s;
        std::cout << out.dump() << "\n";
      } else {
        PrintSummary(listing, s);
      }
    } else if (flags->json) {
      ordered_json out;
      out["backend"] = listing.backend;
      out["location"] = listing.location;
      out["machines"] = ordered_json::array();
      for (const Row& row : listing.rows) out["machines"].push_back(RowJson(row));
      std::cout << out.dump() << "\n";
    } else {
      PrintTable(listing);
    }
  });
}

// register show N [--json]
void AddShowCommand(CLI::App& command, const std::shared_ptr<std::string>& config_path) {
  CLI::App* show = command.add_subcommand("show", "One number, in detail. Exit 1 if unknown.");
  auto show_machine = std::make_shared<uint32_t>(0);
  auto show_json = std::make_shared<bool>(false);
  show->add_option("N", *show_machine, "The machine number")
      ->required()
      ->check(CLI::Range(uint32_t{0}, kMaxMachineOfAnyLayout));
  show->add_flag("--json", *show_json, "Print JSON");
  show->fallthrough();
  show->callback([config_path, show_machine, show_json] {
    const Listing listing = List(*config_path);
    for (const Row& row : listing.rows) {
      if (row.machine != *show_machine) continue;
      if (*show_json) {
        std::cout << RowJson(row).dump() << "\n";
      } else {
        std::cout << "machine:    " << row.machine << "\n"
                  << "register:   " << listing.backend << " " << listing.location << "\n"
                  << "holder:     " << Or(row.holder, "(free)") << "\n"
                  << "live:       " << (row.live ? "yes" : "no") << "\n"
                  << "host:       " << Or(row.host) << "\n"
                  << "pid:        " << (row.pid > 0 ? std::to_string(row.pid) : "-") << "\n"
                  << "since:      "
                  << (row.since_unix_ms > 0 ? FormatTimeText(row.since_unix_ms) : "-") << "\n"
                  << "lease left: " << LeaseText(row) << "\n"
                  << "high-water: " << MarkText(row)
                  << (row.high_water_unix_ms ? " (" + std::to_string(*row.high_water_unix_ms) + ")"
                                             : "")
                  << "\n";
      }
      return;
    }
    Fail(kExitUnavailable, "machine " + std::to_string(*show_machine) + " is not in the " +
                               listing.backend + " register " + listing.location);
  });
}

// register release N
void AddReleaseCommand(CLI::App& command, const std::shared_ptr<std::string>& config_path) {
  CLI::App* release = command.add_subcommand(
      "release",
      "Free number N for another holder. Refused while a live daemon holds it; the "
      "high-water mark is kept, so the next holder continues above it.");
  auto release_machine = std::make_shared<uint32_t>(0);
  release->add_option("N", *release_machine, "The machine number")
      ->required()
      ->check(CLI::Range(uint32_t{0}, kMaxMachineOfAnyLayout));
  release->fallthrough();
  release->callback([config_path, release_machine] {
    auto released = RegisterOf(LoadOrFail(*config_path))->Release(*release_machine);
    if (!released) FailRegister(*config_path, "release refused: ", released.error());
    std::cout << "released machine " << *release_machine << " (its high-water mark is kept)\n";
  });
}

// register raise-all --above TIME [--while-running] [--force-far]
void AddRaiseAllCommand(CLI::App& command, const std::shared_ptr<std::string>& config_path) {
  CLI::App* raise_all = command.add_subcommand(
      "raise-all",
      "etcd only, after the register was restored from a backup or replaced: raise the "
      "high-water mark of every number of id.layout to at least --above (never lowering one) and "
      "record the fence, so daemons that saw the store before start again. Stop every daemon "
      "of the fleet first (it is refused while a number is held); TIME must be at or past the "
      "newest ID any of them may have issued.");
  auto above_text = std::make_shared<std::string>();
  raise_all->add_option("--above", *above_text, "TIME: " + std::string(kTimeTextForms))
      ->required();
  auto while_running = std::make_shared<bool>(false);
  raise_all->add_flag(
      "--while-running", *while_running,
      "Raise the marks under running daemons too: each one pauses until its clock passes the "
      "fence and issues nothing at or below it; returns once every one has acknowledged");
  auto force_far = std::make_shared<bool>(false);
  raise_all->add_flag(
      "--force-far", *force_far,
      "Raise to a TIME more than clock.max_forward_ms (24 h by default) past this host's "
      "clock: no ID is issued until every daemon's clock reaches it, and no command can lower "
      "the marks again");
  raise_all->fallthrough();
  raise_all->callback([config_path, above_text, while_running, force_far] {
    auto above = ParseTimeText(*above_text);
    if (!above) {
      Fail(kExitUsage, "bad --above '" + *above_text + "': " + above.error() + "; expected " +
                           std::string(kTimeTextForms));
    }
    const RegisterSettings config = LoadOrFail(*config_path);
    if (*above < config.epoch_unix_ms) {
      Fail(kExitUsage, "--above " + FormatTimeText(*above) + " is before the fleet's epoch " +
                           FormatTimeText(config.epoch_unix_ms));
    }
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    if (reg::FarPast(*above, now, config.max_forward_ms) && !*force_far) {
      // The marks can only go up: a mistyped year would stop the whole fleet for years.
      Fail(kExitUsage, "--above " + FormatTimeText(*above) + " is " +
                           std::to_string((*above - now) / 1000) +
                           " s past this host's clock (" + FormatTimeText(now) +
                           "), more than clock.max_forward_ms (" +
                           std::to_string(config.max_forward_ms) + " ms in " + *config_path +
                           "): no daemon would issue an ID until its clock reached it, and no "
                           "command can lower the marks again. Check the time (and this "
                           "host's clock); add --force-far if you mean it");
    }
    // Only a backend that can be restored from a backup has it; the others say why not.
    auto raised = RegisterOf(config)->RaiseAll(*above, *while_running);
    if (!raised) FailRegister(*config_path, "raise-all failed: ", raised.error());
    std::cout << "raised " << raised->raised << " of 1024 high-water marks to "
              << FormatTimeText(*above) << " (the others were already above)"
              << (*while_running ? "; every running holder has acknowledged the fence" : "")
              << "; daemons that saw the register before may start again\n";
    const auto& ended = raised->ended_unacknowledged;
    if (!ended.empty()) {
      std::string names;
      for (const std::string& name : ended) names += (names.empty() ? "" : ", ") + name;
      std::cout << "not acknowledged: " << ended.size()
                << " holder(s) lost their number before acknowledging the fence: " << names
                << ". Each stopped, or its lease expired while it was cut off from etcd: then it "
                   "may still hand out what its ring and confirmed reservation hold, below the "
                   "fence and below every later holder's IDs (never a repeat), until it "
                   "notices. Check `snowflakectl status` on its host\n";
    }
  });
}

}  // namespace

void AddRegisterCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "register",
      "Show or release the machine numbers of the register (file or etcd) that the daemon's "
      "config names. Reads the register itself; the daemon need not run.");
  command->require_subcommand(1);
  auto config_path = std::make_shared<std::string>("/etc/snowflaked.toml");
  command->add_option("--config", *config_path, "The daemon's config file")->capture_default_str();

  AddListCommand(*command, config_path);
  AddShowCommand(*command, config_path);
  AddReleaseCommand(*command, config_path);
  AddRaiseAllCommand(*command, config_path);
}

}  // namespace snowflake::cli
