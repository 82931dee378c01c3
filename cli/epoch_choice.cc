#include "epoch_choice.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "snowflake/client.h"
#ifdef SNOWFLAKE_HAVE_REGISTER_COMMAND
#include "register/register_settings.h"
#endif

namespace snowflake::cli {
namespace {

std::string Describe(int64_t epoch_unix_ms) {
  return FormatTimeText(epoch_unix_ms) + " (" + std::to_string(epoch_unix_ms) + ")";
}

}  // namespace

tl::expected<IdLayout, std::string> ParseEpoch(std::string_view text) noexcept {
  try {
    auto bad = [&](const std::string& why) {
      return tl::unexpected("bad epoch '" + std::string(text) + "': " + why + "; expected " +
                            std::string(kTimeTextForms));
    };
    auto parsed = ParseTimeText(text);
    if (!parsed) return bad(parsed.error());
    if (*parsed < 0) {
      return bad(text.front() == '-' ? "it is negative (before 1970)" : "it is before 1970");
    }
    if (*parsed > kMaxEpochUnixMs) {
      return bad(
          "too late: IDs of it would carry times after the year 9999 (the latest epoch "
          "is " +
          std::to_string(kMaxEpochUnixMs) + ")");
    }
    return IdLayout::Create(*parsed).value();  // in range: checked above
  } catch (...) {
    return tl::unexpected(std::string("out of memory"));
  }
}

tl::expected<EpochChoice, std::string> ChooseEpoch(
    const std::optional<std::string>& text, const std::optional<std::filesystem::path>& runtime_dir,
    const LayoutSources& sources) noexcept {
  try {
    // The daemon's segment, read once, for whichever of the two is not given.
    std::optional<ClientStatus> segment;
    if (runtime_dir && (!text || (!sources.layout && !sources.config))) {
      ClientOptions options;
      options.runtime_dir = *runtime_dir;
      if (auto inspected = Client::Inspect(options)) segment = std::move(*inspected);
    }
    // "(no daemon's segment readable in DIR; pass --epoch if your fleet uses another)"
    auto no_daemon = [&](std::string_view option) {
      return runtime_dir ? " (no daemon's segment readable in " + runtime_dir->string() +
                               "; pass " + std::string(option) + " if your fleet uses another)"
                         : std::string();
    };

    EpochChoice choice;
    int64_t epoch_ms = kDefaultEpochUnixMs;
    if (text) {
      auto layout = ParseEpoch(*text);
      if (!layout) return tl::unexpected(layout.error());
      epoch_ms = layout->epoch_unix_ms();
      choice.source = "option";
      choice.description = Describe(epoch_ms) + ", given by --epoch";
    } else if (segment && IdLayout::Create(segment->epoch_unix_ms, segment->id_bits)) {
      epoch_ms = segment->epoch_unix_ms;
      choice.source = "daemon";
      choice.description =
          Describe(epoch_ms) + ", the epoch of the daemon in " + runtime_dir->string();
    } else {
      choice.source = "default";
      choice.description = Describe(epoch_ms) + ", the default epoch" + no_daemon("--epoch");
    }

    IdBits bits = kDefaultIdBits;
    std::string bits_why;
    if (sources.layout) {
      auto parsed = ParseIdBits(*sources.layout, epoch_ms);
      if (!parsed) return tl::unexpected("bad --layout: " + parsed.error());
      bits = *parsed;
      choice.layout_source = "option";
      bits_why = "given by --layout";
    } else if (sources.config) {
#ifdef SNOWFLAKE_HAVE_REGISTER_COMMAND
      auto settings = reg::LoadRegisterSettings(*sources.config);
      if (!settings) return tl::unexpected(settings.error().message);
      bits = settings->id_bits;
      choice.layout_source = "config";
      bits_why = "id.layout of " + sources.config->string();
#else
      return tl::unexpected(
          "--config needs the register library, which this client-only "
          "build lacks: pass --layout");
#endif
    } else if (segment && IdLayout::Create(segment->epoch_unix_ms, segment->id_bits)) {
      bits = segment->id_bits;
      choice.layout_source = "daemon";
      bits_why = "the daemon's";
    } else {
      choice.layout_source = "default";
      bits_why = "the default" + no_daemon("--layout");
    }
    auto layout = IdLayout::Create(epoch_ms, bits);
    if (!layout) {
      return tl::unexpected("the epoch " + Describe(epoch_ms) + " with layout " +
                            FormatIdBits(bits) + ": " +
                            std::string(IdErrorMessage(layout.error())));
    }
    choice.layout = *layout;
    choice.description += "; layout " + FormatIdBits(bits) + ", " + bits_why;
    return choice;
  } catch (...) {
    return tl::unexpected(std::string("out of memory"));
  }
}

std::function<LayoutSources()> AddLayoutOptions(CLI::App& command) {
  auto layout = std::make_shared<std::string>();
  CLI::Option* layout_option =
      command
          .add_option("--layout", *layout,
                      "The fleet's bits: a preset (default, 8192-hosts, 65536-hosts) or "
                      "time/machine/sequence bits such as 41/16/6 (default: --config's "
                      "id.layout, else the local daemon's, else 41/10/12)")
          ->type_name("BITS");
  auto config = std::make_shared<std::string>();
  CLI::Option* config_option =
      command
          .add_option("--config", *config,
                      "A daemon's config file: its id.layout, the layout its register records")
          ->type_name("FILE")
          ->excludes(layout_option);
  return [layout, layout_option, config, config_option] {
    LayoutSources sources;
    if (layout_option->count() > 0) sources.layout = *layout;
    if (config_option->count() > 0) sources.config = *config;
    return sources;
  };
}

}  // namespace snowflake::cli
